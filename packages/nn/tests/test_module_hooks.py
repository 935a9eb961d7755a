"""Module backward hooks (full, pre, old-style), global module hooks and registration hooks,
against PyTorch: the same model in both libraries, hooks recording what they see."""

from __future__ import annotations

import warnings

import ember
import numpy as np
import pytest
from ember import nn
from ember.nn.modules import module as module_mod
from nn_helpers import assert_close, copy_weights, to_ember, to_np, to_torch, torch

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _lib(name: str):
    return ember if name == "ember" else torch


def _np_tuple(grads) -> tuple:
    return tuple(None if g is None else to_np(g) for g in grads)


def _assert_same_record(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ka, ga), (kb, gb) in zip(a, b):
        assert ka == kb
        assert len(ga) == len(gb)
        for x, y in zip(ga, gb):
            assert (x is None) == (y is None), (ka, ga, gb)
            if x is not None:
                np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def _two_in_two_out(lib):
    class TwoInTwoOut(lib.nn.Module):
        def forward(self, a, b, k):
            return (a * b * k).tanh(), (a + b).sum()

    return TwoInTwoOut()


def _record(rec: list, tag: str):
    def full(mod, gi, go):
        rec.append((tag + ".in", _np_tuple(gi)))
        rec.append((tag + ".out", _np_tuple(go)))

    def pre(mod, go):
        rec.append((tag + ".pre", _np_tuple(go)))

    return full, pre


def _run_two_in(name: str, b_requires_grad: bool, use_second: bool, replace: bool):
    lib = _lib(name)
    conv = to_ember if name == "ember" else to_torch
    rng = np.random.default_rng(0)
    a = conv(rng.standard_normal((3, 4)), requires_grad=True)
    b = conv(rng.standard_normal((3, 4)), requires_grad=b_requires_grad)
    m = _two_in_two_out(lib)
    rec: list = []
    full, pre = _record(rec, "m")
    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(full)
    if replace:
        m.register_full_backward_pre_hook(lambda mod, go: tuple(None if g is None else g * 2 for g in go))
        m.register_full_backward_hook(lambda mod, gi, go: tuple(None if g is None else g + 1 for g in gi))
    y, s = m(a, b, 0.5)
    loss = (y * y).sum() + (s * 3 if use_second else 0)
    loss.backward()
    grads = (to_np(a.grad), None if b.grad is None else to_np(b.grad))
    return rec, grads


@pytest.mark.parametrize("b_requires_grad", [True, False])
@pytest.mark.parametrize("use_second", [True, False])
@pytest.mark.parametrize("replace", [False, True])
def test_full_backward_hooks_match_torch(b_requires_grad, use_second, replace):
    pytest.importorskip("torch")
    ours, g_ours = _run_two_in("ember", b_requires_grad, use_second, replace)
    theirs, g_theirs = _run_two_in("torch", b_requires_grad, use_second, replace)
    _assert_same_record(ours, theirs)
    # non-tensor input k gets None; an unused output gets None; replacements reach the leaves
    assert ours[-2][1][2] is None
    for x, y in zip(g_ours, g_theirs):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def _seq_run(name: str):
    lib = _lib(name)
    seq = lib.nn.Sequential(
        lib.nn.Linear(4, 5, dtype=lib.float64),
        lib.nn.Tanh(),
        lib.nn.Linear(5, 2, dtype=lib.float64),
    )
    return seq


@pytest.mark.filterwarnings("ignore:.*(no inputs require|none of its inputs)")
def test_full_backward_hook_on_layers_and_reuse_matches_torch():
    pytest.importorskip("torch")
    ours_seq, theirs_seq = _seq_run("ember"), _seq_run("torch")
    copy_weights(ours_seq, theirs_seq)
    x = np.random.default_rng(1).standard_normal((3, 4))
    records = []
    for seq, conv in ((ours_seq, to_ember), (theirs_seq, to_torch)):
        rec: list = []
        for i, layer in enumerate(seq):
            full, pre = _record(rec, str(i))
            layer.register_full_backward_hook(full)
            layer.register_full_backward_pre_hook(pre)
        xin = conv(x, requires_grad=False)  # the first layer's input does not require grad
        shared = seq[1]
        # the Tanh module runs twice: each call reports its own gradients
        out = seq[2](shared(seq[0](xin))) + shared(seq[2](shared(seq[0](xin)))).sum()
        out.sum().backward()
        records.append(rec)
    _assert_same_record(records[0], records[1])
    tp = dict(theirs_seq.named_parameters())
    for k, p in ours_seq.named_parameters():
        assert_close(p.grad, tp[k].grad)


def test_backward_hook_with_no_input_requiring_grad_warns_and_rejects_grads():
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, tuple(go[0].shape))))
    with pytest.warns(UserWarning, match="none of its inputs requires grad"):
        lin(ember.ones(4, 3)).sum().backward()
    assert seen == [((None,), (4, 2))]
    assert lin.weight.grad is not None
    lin2 = nn.Linear(3, 2)
    lin2.register_full_backward_hook(lambda m, gi, go: (ember.ones(4, 3),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="must return None"):
            lin2(ember.ones(4, 3)).sum().backward()


def test_backward_hook_wrong_number_of_grads_raises():
    lin = nn.Linear(3, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match=r"tuple of 1 grad_input"):
        lin(ember.ones(4, 3, requires_grad=True)).sum().backward()
    lin = nn.Linear(3, 2)
    lin.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
    with pytest.raises(RuntimeError, match=r"tuple of 1 grad_output"):
        lin(ember.ones(4, 3, requires_grad=True)).sum().backward()


def test_inplace_forward_or_output_with_backward_hooks_raises():
    pytest.importorskip("torch")
    for lib in (ember, torch):
        relu = lib.nn.ReLU(inplace=True)
        relu.register_full_backward_hook(lambda m, gi, go: None)
        x = lib.ones(3, requires_grad=True)
        # both raise at the in-place op (the hooks' identity Function's outputs are views)
        with pytest.raises(RuntimeError, match="modified in ?place"):
            relu(x * 1)
        lin = lib.nn.Linear(3, 3)
        lin.register_full_backward_hook(lambda m, gi, go: None)
        with pytest.raises(RuntimeError, match="modified in ?place"):
            y = lin(x)
            y.mul_(2)
    # without backward hooks in-place is fine
    relu = nn.ReLU(inplace=True)
    x = ember.ones(3, requires_grad=True)
    relu(x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_full_and_old_backward_hooks_cannot_mix():
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="cannot use both"):
        lin.register_backward_hook(lambda *a: None)
    lin = nn.Linear(2, 2)
    lin.register_backward_hook(lambda *a: None)
    with pytest.raises(RuntimeError, match="cannot use both"):
        lin.register_full_backward_hook(lambda *a: None)


def test_old_backward_hook_matches_torch_on_single_node_module():
    pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((2, 3))
    recs = []
    for lib, conv in ((ember, to_ember), (torch, to_torch)):
        m = lib.nn.Sigmoid()
        rec: list = []
        m.register_backward_hook(lambda mod, gi, go, rec=rec: rec.append((_np_tuple(gi), _np_tuple(go))))
        xx = conv(x, requires_grad=True)
        y = m(xx * 2)
        (y * y).sum().backward()
        recs.append((rec, to_np(xx.grad)))
    (ours, g_ours), (theirs, g_theirs) = recs
    assert len(ours) == len(theirs) == 1
    for a, b in zip(ours[0], theirs[0]):
        for x1, y1 in zip(a, b):
            np.testing.assert_allclose(x1, y1, rtol=1e-6)
    np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-6)


def test_old_backward_hook_warns_when_forward_has_several_nodes():
    class Two(nn.Module):
        def forward(self, x):
            return x.exp() * 2

    m = Two()
    m.register_backward_hook(lambda *a: None)
    with pytest.warns(FutureWarning, match="non-full backward hook"):
        m(ember.ones(2, requires_grad=True).exp())


def test_prepend_orders_backward_hooks():
    order = []
    m = nn.Identity()
    m.register_full_backward_hook(lambda *a: order.append("a"))
    m.register_full_backward_hook(lambda *a: order.append("b"), prepend=True)
    m.register_full_backward_pre_hook(lambda *a: order.append("pa"))
    m.register_full_backward_pre_hook(lambda *a: order.append("pb"), prepend=True)
    m(ember.ones(2, requires_grad=True)).sum().backward()
    assert order == ["pb", "pa", "b", "a"]


def test_removed_backward_hook_does_not_fire_and_handle_context():
    calls = []
    m = nn.Tanh()
    with m.register_full_backward_hook(lambda *a: calls.append(1)):
        m(ember.ones(2, requires_grad=True)).sum().backward()
    m(ember.ones(2, requires_grad=True)).sum().backward()
    assert calls == [1]


def test_backward_hooks_not_set_up_under_no_grad():
    m = nn.Tanh()
    m.register_full_backward_hook(lambda *a: None)
    with ember.no_grad():
        y = m(ember.ones(2, requires_grad=True))
    assert y.grad_fn is None


def test_global_hooks_match_torch_order_and_values():
    pytest.importorskip("torch")
    records = []
    x = np.random.default_rng(3).standard_normal((2, 4))
    ours_seq, theirs_seq = _seq_run("ember"), _seq_run("torch")
    copy_weights(ours_seq, theirs_seq)
    for lib, seq, mm, conv in (
        (ember, ours_seq, module_mod, to_ember),
        (torch, theirs_seq, torch.nn.modules.module, to_torch),
    ):
        rec: list = []
        handles = [
            mm.register_module_forward_pre_hook(lambda m, a, rec=rec: rec.append(("fpre", type(m).__name__))),
            mm.register_module_forward_hook(lambda m, a, o, rec=rec: rec.append(("fwd", type(m).__name__))),
            mm.register_module_full_backward_pre_hook(
                lambda m, go, rec=rec: rec.append(("bpre", type(m).__name__, _np_tuple(go)))
            ),
            mm.register_module_full_backward_hook(
                lambda m, gi, go, rec=rec: rec.append(("bwd", type(m).__name__, _np_tuple(gi)))
            ),
            seq[0].register_forward_hook(lambda m, a, o, rec=rec: rec.append(("local", "Linear"))),
        ]
        try:
            seq(conv(x, requires_grad=True)).sum().backward()
        finally:
            for h in handles:
                h.remove()
        records.append(rec)
        # removed: no more calls
        n = len(rec)
        seq(conv(x, requires_grad=True)).sum().backward()
        assert len(rec) == n
    ours, theirs = records
    assert [r[:2] for r in ours] == [r[:2] for r in theirs]
    for a, b in zip(ours, theirs):
        if len(a) == 3:
            for u, v in zip(a[2], b[2]):
                assert (u is None) == (v is None)
                if u is not None:
                    np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12)


def test_global_forward_hook_with_kwargs_and_always_call():
    class Boom(nn.Module):
        def forward(self, x, *, fail=False):
            if fail:
                raise ValueError("boom")
            return x

    seen = []
    h1 = module_mod.register_module_forward_hook(
        lambda m, a, kw, out: seen.append(("kw", dict(kw))), with_kwargs=True
    )
    h2 = module_mod.register_module_forward_hook(
        lambda m, a, out: seen.append(("always", out)), always_call=True
    )
    try:
        Boom()(ember.ones(1), fail=False)
        with pytest.raises(ValueError, match="boom"):
            Boom()(ember.ones(1), fail=True)
    finally:
        h1.remove()
        h2.remove()
    assert seen[0] == ("kw", {"fail": False})
    assert seen[1][0] == "always" and seen[1][1] is not None
    assert seen[2] == ("always", None)


def test_global_full_and_old_backward_hooks_cannot_mix():
    h = module_mod.register_module_full_backward_hook(lambda *a: None)
    try:
        with pytest.raises(RuntimeError, match="Cannot use both"):
            module_mod.register_module_backward_hook(lambda *a: None)
    finally:
        h.remove()


def test_registration_hooks():
    names = []
    hooks = [
        module_mod.register_module_parameter_registration_hook(
            lambda m, n, p: names.append(("param", n))
        ),
        module_mod.register_module_buffer_registration_hook(
            lambda m, n, b: names.append(("buffer", n)) or b * 2
        ),
        module_mod.register_module_module_registration_hook(
            lambda m, n, sub: names.append(("module", n))
        ),
    ]
    try:
        m = nn.Module()
        m.w = nn.Parameter(ember.zeros(1))
        m.register_buffer("b", ember.ones(1))
        m.sub = nn.Identity()
    finally:
        for h in hooks:
            h.remove()
    assert names == [("param", "w"), ("buffer", "b"), ("module", "sub")]
    assert m.b.tolist() == [2.0]
    if torch is not None:  # same API in torch
        assert callable(torch.nn.modules.module.register_module_buffer_registration_hook)


def test_backward_hooks_pass_forward_mode_tangents_through():
    import ember.autograd.forward_ad as fwAD

    m = nn.Tanh()
    m.register_full_backward_hook(lambda *a: None)
    x = ember.ones(3, requires_grad=True)
    with fwAD.dual_level():
        y = m(fwAD.make_dual(x, ember.full((3,), 2.0)))
        tangent = fwAD.unpack_dual(y).tangent
    np.testing.assert_allclose(to_np(tangent), 2 * (1 - np.tanh(1.0) ** 2), rtol=1e-6)


def test_backward_hook_on_non_tensor_output_warns_like_torch():
    class DictOut(nn.Module):
        def forward(self, x):
            return {"y": x * 2}

    m = DictOut()
    calls = []
    m.register_full_backward_hook(lambda *a: calls.append(1))
    x = ember.ones(2, requires_grad=True)
    with pytest.warns(UserWarning, match="should be a Tensor or a tuple of Tensors"):
        out = m(x)
    out["y"].sum().backward()
    assert calls == [] and x.grad.tolist() == [2.0, 2.0]  # torch does not call it either


def test_global_old_style_backward_hook(monkeypatch):
    monkeypatch.setattr(module_mod, "_global_is_full_backward_hook", None)
    seen = []
    h = module_mod.register_module_backward_hook(
        lambda m, gi, go: seen.append((type(m).__name__, tuple(go[0].shape)))
    )
    try:
        x = ember.ones(2, requires_grad=True)
        sig = nn.Sigmoid()
        sig(x * 1).sum().backward()
        y = nn.Sigmoid()(x * 1)  # the module is gone before backward: torch raises as well
        with pytest.raises(RuntimeError, match="no longer exists"):
            y.sum().backward()
    finally:
        h.remove()
    assert seen == [("Sigmoid", (2,))]
