"""What a TorchDispatchMode sees of common ops and modules: PyTorch's aten op and overload names
(``_softmax``, ``index.Tensor``, ``view`` / ``_unsafe_view``, ``nll_loss_forward`` ...), with the
op sequences asserted against PyTorch when it is installed; values and gradients are the same with
and without a mode; FlopCounterMode's counts for an MLP, a CNN and a transformer layer.
tools/compare_dispatch_traces.py prints the whole comparison."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.utils._python_dispatch import TorchDispatchMode
from ember.utils.flop_counter import FlopCounterMode

try:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode as TorchMode
    from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounterMode
except ImportError:  # the ember-only checks still run
    torch = None


def _log_mode(base: type) -> type:
    class Log(base):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    return Log


def _req(L, *shape):
    return L.randn(*shape, requires_grad=True)


def _F(L):
    return L.nn.functional


# name -> (setup(lib) -> state, run(lib, state) -> output, the forward names a mode sees)
CASES = {
    "softmax": (lambda L: _req(L, 3, 4), lambda L, x: x.softmax(-1), ["_softmax.default"]),
    "log_softmax": (lambda L: _req(L, 3, 4), lambda L, x: _F(L).log_softmax(x, 1),
                    ["_log_softmax.default"]),
    "softmax_dtype": (lambda L: _req(L, 3, 4),
                      lambda L, x: x.softmax(1, dtype=L.float64),
                      ["_to_copy.default", "_softmax.default"]),
    "cross_entropy": (lambda L: (_req(L, 3, 4), L.tensor([0, 1, 3])),
                      lambda L, s: _F(L).cross_entropy(*s),
                      ["_log_softmax.default", "nll_loss_forward.default"]),
    "cross_entropy_weight_sum": (
        lambda L: (_req(L, 5, 4), L.tensor([0, 1, 3, 2, 1]), L.rand(4) + 0.5),
        lambda L, s: _F(L).cross_entropy(s[0], s[1], weight=s[2], reduction="sum",
                                         ignore_index=1),
        ["_log_softmax.default", "nll_loss_forward.default"]),
    "nll_loss": (lambda L: (_req(L, 3, 4), L.tensor([0, 1, 3])),
                 lambda L, s: _F(L).nll_loss(*s), ["nll_loss_forward.default"]),
    "index_tensor": (lambda L: (_req(L, 4, 3), L.tensor([0, 2])), lambda L, s: s[0][s[1]],
                     ["index.Tensor"]),
    "index_mask": (lambda L: _req(L, 3, 4), lambda L, x: x[x > 0],
                   ["gt.Scalar", "index.Tensor"]),
    "index_basic": (lambda L: _req(L, 3, 4), lambda L, x: x[1, 1:3],
                    ["select.int", "slice.Tensor"]),
    "view": (lambda L: _req(L, 3, 4), lambda L, x: x.view(12), ["view.default"]),
    "reshape_view": (lambda L: _req(L, 3, 4), lambda L, x: x.reshape(2, -1), ["view.default"]),
    "reshape_copy": (lambda L: _req(L, 3, 4), lambda L, x: x.t().reshape(12),
                     ["t.default", "clone.default", "_unsafe_view.default"]),
    "flatten": (lambda L: _req(L, 2, 3, 4), lambda L, x: x.flatten(1), ["view.default"]),
    "t_addmm": (lambda L: (_req(L, 5), _req(L, 3, 4), _req(L, 5, 4)),
                lambda L, s: L.addmm(s[0], s[1], s[2].t()), ["t.default", "addmm.default"]),
    "linear_2d": (lambda L: (L.nn.Linear(4, 3), _req(L, 2, 4)), lambda L, s: s[0](s[1]),
                  ["t.default", "addmm.default"]),
    "linear_3d": (lambda L: (L.nn.Linear(4, 3), _req(L, 5, 2, 4)), lambda L, s: s[0](s[1]),
                  ["view.default", "t.default", "addmm.default", "view.default"]),
    "linear_nobias": (lambda L: (L.nn.Linear(4, 3, bias=False), _req(L, 2, 4)),
                      lambda L, s: s[0](s[1]), ["t.default", "mm.default"]),
    "matmul_3d_2d": (lambda L: (_req(L, 2, 3, 4), _req(L, 4, 5)), lambda L, s: s[0] @ s[1],
                     ["view.default", "mm.default", "_unsafe_view.default"]),
    "matmul_4d": (lambda L: (_req(L, 2, 2, 3, 4), _req(L, 2, 2, 4, 5)), lambda L, s: s[0] @ s[1],
                  ["expand.default", "view.default", "expand.default", "view.default",
                   "bmm.default", "_unsafe_view.default"]),
    "conv2d": (lambda L: (L.nn.Conv2d(2, 3, 3, padding=1), _req(L, 1, 2, 5, 5)),
               lambda L, s: s[0](s[1]), ["convolution.default"]),
    "sdpa": (lambda L: _req(L, 1, 2, 3, 4),
             lambda L, x: _F(L).scaled_dot_product_attention(x, x, x),
             ["_scaled_dot_product_flash_attention_for_cpu.default"]),
    "sdpa_causal": (lambda L: _req(L, 1, 2, 3, 4),
                    lambda L, x: _F(L).scaled_dot_product_attention(x, x, x, is_causal=True),
                    ["_scaled_dot_product_flash_attention_for_cpu.default"]),
    "layer_norm": (lambda L: (L.nn.LayerNorm(4), _req(L, 2, 4)), lambda L, s: s[0](s[1]),
                   ["native_layer_norm.default"]),
    "embedding": (lambda L: (L.nn.Embedding(5, 3), L.tensor([1, 2, 1])), lambda L, s: s[0](s[1]),
                  ["embedding.default"]),
    "gelu": (lambda L: _req(L, 3, 4), lambda L, x: _F(L).gelu(x), ["gelu.default"]),
    "sum_dim": (lambda L: _req(L, 3, 4), lambda L, x: x.sum(1), ["sum.dim_IntList"]),
    "sum_all": (lambda L: _req(L, 3, 4), lambda L, x: x.sum(), ["sum.default"]),
    "mean_dim": (lambda L: _req(L, 3, 4), lambda L, x: x.mean((0, 1), keepdim=True),
                 ["mean.dim"]),
    "max_dim": (lambda L: _req(L, 3, 4), lambda L, x: x.max(1).values, ["max.dim"]),
    "arith": (lambda L: (_req(L, 3, 4), L.randn(3, 4)),
              lambda L, s: (s[0] + 1) * s[1] - s[0] / 2,
              ["add.Tensor", "mul.Tensor", "div.Tensor", "sub.Tensor"]),
    "mlp": (lambda L: (L.nn.Sequential(L.nn.Linear(4, 8), L.nn.ReLU(), L.nn.Linear(8, 2)),
                       _req(L, 3, 4)), lambda L, s: s[0](s[1]),
            ["t.default", "addmm.default", "relu.default", "t.default", "addmm.default"]),
}


def _trace(lib, base: type, case: str, mode: bool = True, backward: bool = False):
    """(forward names, backward names, output, input gradients) of a case (detach left out)."""
    setup, run, _ = CASES[case]
    lib.manual_seed(0)
    state = setup(lib)
    leaves = [t for t in (state if isinstance(state, tuple) else (state,))
              if isinstance(t, lib.Tensor) and t.requires_grad]
    for item in state if isinstance(state, tuple) else (state,):
        if isinstance(item, lib.nn.Module):
            leaves += list(item.parameters())
    fwd, bwd = _log_mode(base)(), _log_mode(base)()
    if mode:
        with fwd:
            out = run(lib, state)
    else:
        out = run(lib, state)
    grads = []
    if backward and out.requires_grad:
        loss = (out * lib.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum()
        if mode:
            with bwd:
                grads = lib.autograd.grad(loss, leaves)
        else:
            grads = lib.autograd.grad(loss, leaves)

    def names(log):
        return [n for n in log.names if not n.startswith("detach.")]

    return names(fwd), names(bwd), out, grads


@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_names_are_torchs(case):
    ours = _trace(ember, TorchDispatchMode, case)[0]
    assert ours == CASES[case][2]
    if torch is not None:
        assert ours == _trace(torch, TorchMode, case)[0]


# Backward ops a FLOP counter or a rewriting mode keys on (views, clones and the sums that
# reduce broadcast gradients are left out: where they show still differs, see the report of
# tools/compare_dispatch_traces.py)
_BACKWARD_KEYS = ("mm.", "addmm.", "bmm.", "_softmax_backward_data.", "_log_softmax_backward_data.",
                  "nll_loss_backward.", "threshold_backward.", "native_layer_norm_backward.",
                  "_scaled_dot_product_flash_attention_for_cpu_backward.", "gelu_backward.",
                  "embedding_dense_backward.", "index_put.", "_index_put_impl_.")


@pytest.mark.parametrize("case", ["softmax", "log_softmax", "cross_entropy",
                                  "cross_entropy_weight_sum", "nll_loss", "linear_2d",
                                  "linear_nobias", "t_addmm", "sdpa", "sdpa_causal", "layer_norm",
                                  "embedding", "gelu", "mlp", "matmul_4d"])
def test_backward_key_ops_are_torchs(case):
    ours = [n for n in _trace(ember, TorchDispatchMode, case, backward=True)[1]
            if n.startswith(_BACKWARD_KEYS)]
    assert ours
    if torch is not None:
        theirs = [n for n in _trace(torch, TorchMode, case, backward=True)[1]
                  if n.startswith(_BACKWARD_KEYS)]
        assert ours == theirs


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_do_not_change_under_a_mode(case):
    _, _, want, want_grads = _trace(ember, TorchDispatchMode, case, mode=False, backward=True)
    _, _, got, got_grads = _trace(ember, TorchDispatchMode, case, mode=True, backward=True)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert len(got_grads) == len(want_grads)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6)


def test_presented_ops_are_aten_ops_that_run():
    aten = ember.ops.aten
    x = ember.randn(3, 4)
    seen = {}

    class Grab(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen[func.overloadpacket.__name__] = (func, args, kwargs or {})
            return func(*args, **(kwargs or {}))

    with Grab():
        x.softmax(1)
        x[ember.tensor([0, 2])]
        x.reshape(12)
        x.t().reshape(12)
        _ = x[:, 1:3]
        ember.nn.functional.cross_entropy(x, ember.tensor([0, 1, 3]))
    func, args, kwargs = seen["_softmax"]
    assert func == aten._softmax.default and func.overloadpacket in {aten._softmax: 1}
    assert str(func) == "aten._softmax.default" and func.name() == "aten::_softmax"
    assert args[1:] == (1, False) and not kwargs
    assert ember.allclose(func(*args), x.softmax(1))
    assert seen["index"][0] == aten.index.Tensor and str(seen["index"][0]) == "aten.index.Tensor"
    assert seen["view"][0] == aten.view.default and seen["view"][1][1] == [12]
    assert seen["_unsafe_view"][0]._schema.startswith("aten::_unsafe_view(Tensor self")
    assert seen["slice"][1][1:] == (1, 1, 3)
    out, total = seen["nll_loss_forward"][0](*seen["nll_loss_forward"][1])
    assert total.item() == 3.0 and out.shape == ()
    assert aten._softmax.default != aten._log_softmax.default
    if torch is not None:
        assert seen["_softmax"][0]._schema.split("(")[0] == str(torch.ops.aten._softmax.default._schema).split("(")[0]


def test_rewriting_mode_changes_what_the_presented_ops_compute():
    # a handler's result is the op's result: scaling _log_softmax scales cross entropy, and
    # replacing view's result reaches reshape's caller
    class Scale(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func == ember.ops.aten._log_softmax.default:
                return out * 2
            return out

    x = ember.randn(4, 5)
    t = ember.tensor([0, 1, 2, 3])
    want = ember.nn.functional.cross_entropy(x, t)
    with Scale():
        got = ember.nn.functional.cross_entropy(x, t)
    assert ember.allclose(got, want * 2)

    class Zero(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return ember.zeros_like(out) if func.overloadpacket.__name__ == "view" else out

    with Zero():
        r = x.reshape(20)
    assert r.shape == (20,) and r.abs().sum().item() == 0.0


def test_nested_modes_both_see_torchs_names():
    x = ember.randn(3, 4)
    outer, inner = _log_mode(TorchDispatchMode)(), _log_mode(TorchDispatchMode)()
    with outer, inner:
        x.softmax(1)
        x.reshape(12)
    assert inner.names == ["_softmax.default", "view.default"]
    assert outer.names == inner.names


def test_subclass_sees_renamed_ops():
    from ember.utils._pytree import tree_map

    class Wrapper(ember.Tensor):
        calls: list = []

        @staticmethod
        def __new__(cls, elem):
            r = ember.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(),
                                                    dtype=elem.dtype, device=elem.device)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            cls.calls.append(func.__name__)

            def unwrap(e):
                return e.elem if isinstance(e, Wrapper) else e

            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(lambda e: Wrapper(e) if isinstance(e, ember.Tensor) else e, out)

    base = ember.randn(3, 4)
    w = Wrapper(base)
    s = w.softmax(1)
    r = w.reshape(12)
    n = w.sum(1)
    assert type(s) is Wrapper and ember.allclose(s.elem, base.softmax(1))
    assert type(r) is Wrapper and r.shape == (12,) and ember.equal(r.elem, base.reshape(12))
    assert type(n) is Wrapper and ember.allclose(n.elem, base.sum(1))
    assert Wrapper.calls == ["_softmax.default", "view.default", "sum.dim_IntList"]


# ---- FlopCounterMode ----------------------------------------------------------------------------
def _models(L):
    L.manual_seed(0)
    mlp = L.nn.Sequential(L.nn.Linear(16, 32), L.nn.GELU(), L.nn.Linear(32, 4))
    cnn = L.nn.Sequential(L.nn.Conv2d(3, 8, 3, padding=1), L.nn.BatchNorm2d(8), L.nn.ReLU(),
                          L.nn.MaxPool2d(2), L.nn.Conv2d(8, 4, 3, stride=2), L.nn.Flatten(),
                          L.nn.Linear(4, 10))
    layer = L.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0,
                                         batch_first=True)
    return {"mlp": (mlp, (8, 16)), "cnn": (cnn, (2, 3, 8, 8)), "transformer": (layer, (2, 5, 16))}


def _flops(L, counter: type, name: str):
    model, shape = _models(L)[name]
    x = L.randn(*shape, requires_grad=True)
    with counter(display=False) as fwd:
        out = model(x)
    with counter(display=False) as bwd:
        out.sum().backward()

    def per_op(fc):
        return {str(op): n for op, n in fc.get_flop_counts().get("Global", {}).items()}

    def per_module(fc):
        return {mod: sum(v.values()) for mod, v in fc.get_flop_counts().items()}

    return per_op(fwd), per_op(bwd), per_module(fwd)


# What PyTorch 2.13 counts (CPU): products and convolutions, forward and backward
_FLOPS = {
    "mlp": ({"aten.addmm": 10240}, {"aten.mm": 20480}),
    "cnn": ({"aten.convolution": 56448, "aten.addmm": 160},
            {"aten.convolution_backward": 112896, "aten.mm": 320}),
}


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_flop_counter_counts_mlp_and_cnn_as_torch(name):
    fwd, bwd, modules = _flops(ember, FlopCounterMode, name)
    assert (fwd, bwd) == _FLOPS[name]
    if torch is not None:
        assert (fwd, bwd, modules) == _flops(torch, TorchFlopCounterMode, name)


def test_flop_counter_counts_transformer_layer_products_as_torch():
    fwd, bwd, _ = _flops(ember, FlopCounterMode, "transformer")
    attention = "aten._scaled_dot_product_flash_attention_for_cpu"
    # ember counts attention on every device (PyTorch counts its CUDA kernels only): the two
    # products per head forward, five backward
    b, h, s, d = 2, 4, 5, 4
    assert fwd.pop(attention) == 2 * (2 * b * h * s * s * d)
    assert bwd.pop(attention + "_backward") == 5 * (2 * b * h * s * s * d)
    # q, k, v projections (ember: three products, PyTorch: one of three times the width), then
    # out_proj, linear1, linear2
    assert fwd == {"aten.mm": 15360, "aten.addmm": 25600}
    assert sum(bwd.values()) == 81920
    if torch is not None:
        tfwd, tbwd, _ = _flops(torch, TorchFlopCounterMode, "transformer")
        assert fwd == tfwd
        # the same products; an engine built before this change runs the projection weights'
        # gradients as bmm + sum where PyTorch (and the rebuilt engine) fold the batch into one mm
        assert sum(bwd.values()) == sum(tbwd.values())
        if _engine_runs_torchs_backward_ops():
            assert bwd == tbwd


@pytest.mark.parametrize("kernel", ["flash", "efficient"])
def test_cuda_attention_kernels_are_shown_by_torchs_names(monkeypatch, kernel):
    # which kernel PyTorch picks on CUDA (flash for 16-bit inputs without a mask, else
    # memory-efficient): forced here so that the CPU runs the path, values and FLOPs checked
    from ember.utils import _torch_op_names

    monkeypatch.setattr(_torch_op_names, "_sdpa_kernel", lambda q, mask: kernel)
    F = ember.nn.functional
    ember.manual_seed(0)
    q, k, v = (_req(ember, 1, 2, 3, 4) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    want_grads = ember.autograd.grad(want.sum(), (q, k, v))
    fwd, bwd = _log_mode(TorchDispatchMode)(), _log_mode(TorchDispatchMode)()
    with fwd:
        got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with bwd:
        grads = ember.autograd.grad(got.sum(), (q, k, v))
    name = f"_scaled_dot_product_{kernel}_attention"
    assert [n for n in fwd.names if n != "detach.default"] == [f"{name}.default"]
    assert f"{name}_backward.default" in bwd.names
    assert ember.equal(got, want)
    assert all(ember.equal(g, w) for g, w in zip(grads, want_grads))
    with FlopCounterMode(display=False) as fc:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.sum().backward()
    n, s, d = 2, 3, 4
    assert fc.get_total_flops() == 2 * (2 * n * s * s * d) + 5 * (2 * n * s * s * d)


def _engine_runs_torchs_backward_ops() -> bool:
    """Whether the compiled engine has this change's backward side (convolution's gradients from
    one convolution_backward call, no view before a full sum's expand, AccumulateGrad taking a
    plain gradient over under a mode): the whole-sequence backward test needs it."""
    x = ember.randn(1, 1, 3, 3, requires_grad=True)
    w = ember.randn(1, 1, 2, 2, requires_grad=True)
    y = ember.nn.functional.conv2d(x, w).sum()
    with _log_mode(TorchDispatchMode)() as log:
        y.backward()
    return log.names.count("convolution_backward.default") == 1


@pytest.mark.parametrize("case", ["softmax", "log_softmax", "cross_entropy", "nll_loss", "conv2d",
                                  "layer_norm", "embedding", "gelu"])
def test_backward_sequences_are_torchs(case):
    if torch is None:
        pytest.skip("needs torch")
    if not _engine_runs_torchs_backward_ops():
        pytest.skip("the compiled engine predates the backward changes (rebuild it)")
    ours = _trace(ember, TorchDispatchMode, case, backward=True)[1]
    theirs = _trace(torch, TorchMode, case, backward=True)[1]
    assert ours == theirs
