"""Fixes from the thirteenth drop-in compatibility round: ``torch.export`` (export / Dim /
ExportedProgram.module / save / load) was missing; deployment scripts call it after a plain
``import torch``. ``F.linear_cross_entropy`` / ``nn.LinearCrossEntropyLoss`` /
``nn.LinearCrossEntropyOptions`` (torch 2.13's fused classifier-head loss, used by LM training
scripts) were missing too. Each behaviour is pinned explicitly and, where torch is installed,
against it."""

from __future__ import annotations

import io

import ember
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _model(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).eval()


def test_export_is_reachable_from_the_top_level():
    assert ember.export.export is __import__("ember.export").export.export
    assert repr(ember.export.Dim("b", min=2, max=8)) == "Dim('b', min=2, max=8)"
    assert repr(ember.export.Dim("b")) == "Dim('b', min=0)"
    assert [d.__name__ for d in ember.export.dims("h", "w")] == ["h", "w"]
    with pytest.raises(ValueError, match="inconsistent"):
        ember.export.Dim("b", min=4, max=2)


def test_exported_module_runs_dynamic_batches_and_guards_static_dims():
    m = _model(ember)
    x = ember.randn(5, 3)
    ep = ember.export.export(m, (x,), dynamic_shapes={"input": {0: ember.export.Dim("batch", max=64)}})
    mod = ep.module()
    for b in (1, 5, 9):
        y = ember.randn(b, 3)
        assert ember.allclose(mod(y), m(y))
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[1\] == 3"):
        mod(ember.randn(5, 4))
    static = ember.export.export(m, (x,)).module()
    with pytest.raises(AssertionError, match=r"Guard failed: input.size\(\)\[0\] == 5"):
        static(ember.randn(6, 3))
    assert ember.equal(static(x), m(x))


def test_exported_program_surface():
    m = _model(ember)
    ep = ember.export.export(m, (ember.randn(5, 3),))
    sig = ep.graph_signature
    assert sig.user_inputs == ("input",)
    assert sig.parameters == ("0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias")
    assert sig.buffers == ("1.running_mean", "1.running_var", "1.num_batches_tracked")
    assert set(ep.state_dict) == set(m.state_dict())
    with pytest.raises(RuntimeError, match="exported_program.module"):
        ep(ember.randn(5, 3))
    with pytest.raises(NotImplementedError, match=r"Calling eval\(\) is not supported yet."):
        ep.module().eval()
    with pytest.raises(NotImplementedError, match=r"Calling train\(\) is not supported yet."):
        ep.module().train()
    assert isinstance(ep.run_decompositions(), ember.export.ExportedProgram)
    with pytest.raises(ValueError, match="tuple of example positional inputs"):
        ember.export.export(m, ember.randn(5, 3))
    with pytest.raises(ValueError, match="instance of `torch.nn.Module`"):
        ember.export.export(lambda t: t, (ember.randn(2),))
    with pytest.raises(ValueError, match="not arguments"):
        ember.export.export(m, (ember.randn(5, 3),), dynamic_shapes={"x": {0: ember.export.Dim.AUTO}})


def test_save_load_round_trip_with_extra_files():
    m = _model(ember)
    x = ember.randn(5, 3)
    ep = ember.export.export(m, (x,))
    buf = io.BytesIO()
    ember.export.save(ep, buf, extra_files={"note.txt": "v1"})
    buf.seek(0)
    extra = {"note.txt": ""}
    loaded = ember.export.load(buf, extra_files=extra)
    assert extra == {"note.txt": "v1"}
    assert ember.equal(loaded.module()(x), m(x))
    with pytest.raises(TypeError, match="ExportedProgram"):
        ember.export.save(m, io.BytesIO())


@needs_torch
def test_export_matches_torch():
    results = []
    for lib in (torch, ember):
        m = _model(lib)
        with lib.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(lib.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1) / 3)
        x = lib.linspace(-2, 2, 21).reshape(7, 3)
        ep = lib.export.export(m, (x[:4],), dynamic_shapes={"input": {0: lib.export.Dim("batch")}})
        sig = ep.graph_signature
        results.append((ep.module()(x).tolist(), list(sig.user_inputs), list(sig.parameters), list(sig.buffers),
                        sorted(ep.state_dict)))
    (t_out, *t_rest), (e_out, *e_rest) = results
    assert t_rest == e_rest
    assert ember.allclose(ember.tensor(e_out), ember.tensor(t_out), atol=1e-6)


def test_linear_cross_entropy_is_the_reference_definition():
    F = ember.nn.functional
    x = ember.linspace(-1, 1, 15).reshape(3, 5)
    w = ember.linspace(-2, 2, 50).reshape(10, 5)
    b = ember.linspace(0, 1, 10)
    t = ember.tensor([1, 2, -100])
    cw = ember.linspace(0.5, 1.5, 10)
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"}, {"label_smoothing": 0.2}, {"weight": cw}):
        got = F.linear_cross_entropy(x, w, t, linear_bias=b, **kw)
        ref = F.cross_entropy(x @ w.T + b, t, **kw)
        assert ember.allclose(got, ref), kw
    assert F.linear_cross_entropy(x, w, ember.tensor([1, 2, 0]), ignore_index=2).item() == pytest.approx(
        F.cross_entropy(x @ w.T, ember.tensor([1, -100, 0])).item(), rel=1e-6)
    assert F.linear_cross_entropy(x, w, t).item() == pytest.approx(  # ignore_index=None means -100
        F.cross_entropy(x @ w.T, t).item(), rel=1e-6)
    assert F.linear_cross_entropy(x[0], w, t[0]).dim() == 0  # unbatched
    w3 = ember.linspace(-1, 1, 200).reshape(10, 4, 5)
    t3 = ember.tensor([[0, 1, 2, 3], [9, 8, 7, 6], [5, 5, 5, 5]])
    ref3 = F.cross_entropy(ember.einsum("ni,cdi->ncd", x, w3), t3)
    assert ember.allclose(F.linear_cross_entropy(x, w3, t3), ref3)
    opts = ember.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    assert ember.allclose(F.linear_cross_entropy(x, w, t, options=opts), F.linear_cross_entropy(x, w, t))
    with pytest.raises(ValueError, match="reduction"):
        F.linear_cross_entropy(x, w, t, reduction="bad")
    with pytest.raises(ValueError, match="invalid acc_policy: 'x'"):
        ember.nn.LinearCrossEntropyOptions(acc_policy="x")
    with pytest.raises(TypeError, match="LinearCrossEntropyOptions"):
        F.linear_cross_entropy(x, w, t, options={"batch_chunk_size": 2})
    with pytest.raises(RuntimeError, match="batched input"):
        F.linear_cross_entropy(x[0], w3, t3[0])


def test_linear_cross_entropy_loss_module():
    m = ember.nn.LinearCrossEntropyLoss(5, 10, out_features=(4, 3), bias=True, weight=ember.ones(10),
                                        label_smoothing=0.1)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {
        "weight": (10,), "linear.weight": (120, 5), "linear.bias": (120,)}
    assert repr(m).splitlines()[1].strip() == (
        "in_features=5, num_classes=10, out_features=(4, 3), bias=True, reduction=mean, "
        "ignore_index=None, label_smoothing=0.1, options=None")
    x = ember.linspace(-1, 1, 10).reshape(2, 5).requires_grad_()
    t = ember.zeros(2, 4, 3, dtype=ember.int64)
    loss = m(x, t)
    logits = (x @ m.linear.weight.T + m.linear.bias).reshape(2, 10, 4, 3)
    assert ember.allclose(loss, ember.nn.functional.cross_entropy(logits, t, weight=m.weight, label_smoothing=0.1))
    loss.backward()
    assert m.linear.weight.grad.shape == (120, 5) and x.grad.shape == (2, 5)
    plain = ember.nn.LinearCrossEntropyLoss(5, 10)
    assert plain.linear.bias is None and plain.ignore_index is None and plain.options is None


@needs_torch
def test_linear_cross_entropy_matches_torch():
    out = []
    for lib in (torch, ember):
        x = lib.linspace(-1, 1, 10).reshape(2, 5)
        m = lib.nn.LinearCrossEntropyLoss(5, 6, out_features=(3,), bias=True, label_smoothing=0.05,
                                          options=lib.nn.LinearCrossEntropyOptions())
        with lib.no_grad():
            m.linear.weight.copy_(lib.linspace(-1, 1, 90).reshape(18, 5))
            m.linear.bias.copy_(lib.linspace(0, 0.5, 18))
        t = lib.tensor([[0, 5, 2], [1, -100, 3]])
        loss = m(x, t)
        loss.backward()
        out.append((loss.item(), m.linear.weight.grad.tolist(), repr(m).replace("torch.", "ember.")))
    assert out[1][0] == pytest.approx(out[0][0], rel=1e-6)
    assert ember.allclose(ember.tensor(out[1][1]), ember.tensor(out[0][1]), atol=1e-6)
    assert out[1][2] == out[0][2]


class _SizeUnpacking(ember.nn.Module):
    """nanoGPT-style code torch.fx cannot trace (unpacking x.size(), a branch on a size) but
    torch's non-strict export specializes."""

    def __init__(self):
        super().__init__()
        self.lin = ember.nn.Linear(4, 4)

    def forward(self, x):
        B, T, C = x.size()
        y = self.lin(x).view(B * T, C)
        if T > 1:
            y = y * 2
        return y.view(B, T, C)


def test_export_falls_back_to_an_eager_copy_for_untraceable_code():
    m = _SizeUnpacking()
    x = ember.linspace(-1, 1, 24).reshape(2, 3, 4)
    ep = ember.export.export(m, (x,), dynamic_shapes={"x": {0: ember.export.Dim("b")}})
    mod = ep.module()
    assert ember.equal(mod(x), m(x))
    assert tuple(mod(ember.ones(5, 3, 4)).shape) == (5, 3, 4)
    with pytest.raises(AssertionError, match=r"Guard failed: x.size\(\)\[1\] == 3"):
        mod(ember.ones(2, 4, 4))
    assert ep.graph is None and ep.graph_signature.user_inputs == ("x",)
    assert sorted(ep.state_dict) == ["lin.bias", "lin.weight"]
    assert len(m._forward_pre_hooks) == 0  # the guard sits on the copy only
    with pytest.raises(NotImplementedError, match="eval"):
        mod.eval()
    m.eval()  # the original module is untouched
    assert not m.training
    buf = io.BytesIO()
    ember.export.save(ep, buf)
    buf.seek(0)
    assert ember.equal(ember.export.load(buf).module()(x), m(x))


@needs_torch
def test_export_of_size_unpacking_code_matches_torch():
    class TorchSizeUnpacking(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        forward = _SizeUnpacking.forward

    outs = []
    for lib, m in ((torch, TorchSizeUnpacking()), (ember, _SizeUnpacking())):
        with lib.no_grad():
            m.lin.weight.copy_(lib.linspace(-1, 1, 16).reshape(4, 4))
            m.lin.bias.copy_(lib.linspace(0, 1, 4))
        x = lib.linspace(-1, 1, 24).reshape(2, 3, 4)
        ep = lib.export.export(m, (x,), dynamic_shapes={"x": {0: lib.export.Dim("b")}})
        outs.append((ep.module()(lib.linspace(-2, 2, 60).reshape(5, 3, 4)).tolist(), sorted(ep.state_dict),
                     list(ep.graph_signature.user_inputs)))
    assert outs[0][1:] == outs[1][1:]
    assert ember.allclose(ember.tensor(outs[1][0]), ember.tensor(outs[0][0]), atol=1e-6)
