"""Second derivatives and forward-mode AD through the normalization ops (layer, group, batch,
instance and RMS norm): double backward equal to PyTorch's, gradgradcheck in float64, tangents
against PyTorch and finite differences, and gradients through the mean / rstd outputs of the
native ops."""

import itertools
from dataclasses import dataclass
from typing import Callable

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from ember.autograd import gradcheck, gradgradcheck


def _bn(m, x, w, b, rm, rv, training):
    extra = () if m is ember else (False,)  # torch.batch_norm's trailing cudnn_enabled
    return m.batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5, *extra)


def _inorm(m, x, w, b, rm, rv, use_input_stats):
    extra = () if m is ember else (False,)
    return m.instance_norm(x, w, b, rm, rv, use_input_stats, 0.1, 1e-5, *extra)


def _stats(m, c, seed, like=None):
    """Running statistics (fresh tensors of module m, like's dtype): mean around 0, variance
    around 1."""
    rng = np.random.default_rng(seed)
    dtype = m.float64 if like is None else like.dtype
    return (m.tensor(rng.uniform(-0.5, 0.5, c), dtype=dtype),
            m.tensor(rng.uniform(0.5, 1.5, c), dtype=dtype))


@dataclass
class Case:
    name: str
    fn: Callable  # fn(m, *inputs), m being ember or torch
    shapes: list  # of the inputs; the first is the normalized input


CASES = [
    Case("layer_norm: affine", lambda m, x, w, b: m.layer_norm(x, (5,), w, b, 1e-5),
         [(3, 5), (5,), (5,)]),
    Case("layer_norm: 2 dims, no affine", lambda m, x: m.layer_norm(x, (3, 4), None, None, 1e-5),
         [(2, 3, 4)]),
    Case("layer_norm: weight only", lambda m, x, w: m.layer_norm(x, (3,), w, None, 1e-5),
         [(2, 2, 3), (3,)]),
    Case("group_norm: affine", lambda m, x, w, b: m.group_norm(x, 3, w, b, 1e-5),
         [(2, 6, 3), (6,), (6,)]),
    Case("group_norm: 4-d, no affine", lambda m, x: m.group_norm(x, 2, None, None, 1e-5),
         [(2, 4, 2, 2)]),
    Case("batch_norm: train, affine", lambda m, x, w, b: _bn(m, x, w, b, None, None, True),
         [(4, 3), (3,), (3,)]),
    Case("batch_norm: train 3-d, running stats, weight only",
         lambda m, x, w: _bn(m, x, w, None, *_stats(m, 2, 1, x), True), [(3, 2, 4), (2,)]),
    Case("batch_norm: eval", lambda m, x, w, b: _bn(m, x, w, b, *_stats(m, 2, 2, x), False),
         [(3, 2, 4), (2,), (2,)]),
    Case("batch_norm: eval, no affine",
         lambda m, x: _bn(m, x, None, None, *_stats(m, 3, 3, x), False), [(2, 3, 2)]),
    Case("instance_norm: affine", lambda m, x, w, b: _inorm(m, x, w, b, None, None, True),
         [(2, 3, 4), (3,), (3,)]),
    Case("instance_norm: running stats",
         lambda m, x: _inorm(m, x, None, None, *_stats(m, 2, 4, x), True), [(2, 2, 3, 2)]),
    Case("instance_norm: eval",
         lambda m, x, w: _inorm(m, x, w, None, *_stats(m, 3, 5, x), False), [(2, 3, 4), (3,)]),
    Case("rms_norm: weight", lambda m, x, w: m.rms_norm(x, (5,), w, 1e-6), [(3, 5), (5,)]),
    Case("rms_norm: 2 dims, no weight", lambda m, x: m.rms_norm(x, (3, 4), None, 1e-6),
         [(2, 3, 4)]),
]
IDS = [c.name for c in CASES]


def _arrays(case, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in case.shapes]


def _ember(arrays, requires_grad=True, dtype=ember.float64):
    return [ember.tensor(a, dtype=dtype).requires_grad_(requires_grad) for a in arrays]


def _torch(arrays, requires_grad=True, dtype=None):
    dtype = dtype or torch.float64
    return [torch.tensor(a, dtype=dtype).requires_grad_(requires_grad) for a in arrays]


def _np(t, like):
    """float64 values of an ember/torch tensor; zeros shaped like `like` for None."""
    if t is None:
        return np.zeros(like)
    return np.asarray(t.detach().double().tolist(), dtype=np.float64).reshape(like)


def _double_backward(m, ins, case, c, vs):
    """First gradients of a loss nonlinear in the output, then the gradient of their dot
    product with vs (second derivatives)."""
    y = case.fn(m, *ins)
    cc = m.tensor(c, dtype=y.dtype)
    loss = (y * cc).sum() + (y * y * y).sum() / 3
    gs = m.autograd.grad(loss, ins, create_graph=True)
    s = sum((g * m.tensor(v, dtype=g.dtype)).sum() for g, v in zip(gs, vs))
    ggs = m.autograd.grad(s, ins, allow_unused=True)
    return gs, ggs


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_double_backward_matches_torch(case):
    arrays = _arrays(case)
    rng = np.random.default_rng(7)
    c = rng.standard_normal(case.shapes[0])
    vs = [rng.standard_normal(s) for s in case.shapes]
    eg, egg = _double_backward(ember, _ember(arrays), case, c, vs)
    tg, tgg = _double_backward(torch, _torch(arrays), case, c, vs)
    for shape, a, b in zip(case.shapes, eg, tg):
        np.testing.assert_allclose(_np(a, shape), _np(b, shape), rtol=1e-9, atol=1e-9)
    for shape, a, b in zip(case.shapes, egg, tgg):
        np.testing.assert_allclose(_np(a, shape), _np(b, shape), rtol=1e-8, atol=1e-8)


@needs_torch
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5], CASES[7], CASES[12]],
                         ids=[IDS[0], IDS[3], IDS[5], IDS[7], IDS[12]])
def test_double_backward_float32_matches_torch(case):
    arrays = _arrays(case, seed=3)
    rng = np.random.default_rng(8)
    c = rng.standard_normal(case.shapes[0])
    vs = [rng.standard_normal(s) for s in case.shapes]
    eg, egg = _double_backward(ember, _ember(arrays, dtype=ember.float32), case, c, vs)
    tg, tgg = _double_backward(torch, _torch(arrays, dtype=torch.float32), case, c, vs)
    for shape, a, b in zip(case.shapes, list(eg) + list(egg), list(tg) + list(tgg)):
        assert a is None or a.dtype is ember.float32
        np.testing.assert_allclose(_np(a, shape), _np(b, shape), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradgradcheck(case):
    ins = _ember(_arrays(case, seed=1))
    assert gradgradcheck(lambda *a: case.fn(ember, *a), ins)


def test_double_backward_leaves_running_stats_alone():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((4, 3, 2)), requires_grad=True)
    w = ember.tensor(rng.uniform(0.5, 1.5, 3), requires_grad=True)
    rm, rv = _stats(ember, 3, 0)
    y = ember.batch_norm(x, w, None, rm, rv, True, 0.1, 1e-5)
    after_forward = (rm.tolist(), rv.tolist(), rm._version, rv._version)
    (g,) = ember.autograd.grad((y ** 3).sum(), [x], create_graph=True)
    gx, gw = ember.autograd.grad((g * g).sum(), [x, w])
    assert gx.shape == x.shape and gw.shape == w.shape
    assert (rm.tolist(), rv.tolist(), rm._version, rv._version) == after_forward


def test_plain_backward_keeps_using_the_fused_kernel():
    # Without create_graph the first gradient is the fused kernel's and records nothing.
    x = ember.randn(3, 4, dtype=ember.float64, requires_grad=True)
    w = ember.randn(4, dtype=ember.float64, requires_grad=True)
    y = ember.layer_norm(x, (4,), w, None, 1e-5)
    gx, gw = ember.autograd.grad((y * y).sum(), [x, w])
    assert gx.grad_fn is None and gw.grad_fn is None and not gx.requires_grad
    y = ember.layer_norm(x, (4,), w, None, 1e-5)
    gx2, gw2 = ember.autograd.grad((y * y).sum(), [x, w], create_graph=True)
    assert gx2.grad_fn is not None
    np.testing.assert_allclose(gx2.detach().numpy(), gx.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gw2.detach().numpy(), gw.numpy(), rtol=1e-12, atol=1e-12)


def test_fused_backward_ops_are_not_differentiable_themselves():
    # They are only ever called without create_graph; a direct differentiable call says so.
    x = ember.randn(2, 3, dtype=ember.float64, requires_grad=True)
    _, mean, rstd = ember.native_layer_norm(x.detach(), (3,), None, None, 1e-5)
    gi, gw, gb = ember.native_layer_norm_backward(x * 1.0, x, (3,), mean, rstd, None, True,
                                                  False, False)
    assert gw is None and gb is None
    with pytest.raises(RuntimeError, match="native_layer_norm_backward"):
        gi.sum().backward()


# ---- the statistic outputs of the native ops ----------------------------------------------------

# (name, ember fn(x, w, b) -> outputs, torch fn or None, x shape, C): each op's outputs with
# their statistics; torch's mean / rstd of layer and batch norm are not differentiable.
NATIVE = [
    ("native_layer_norm", lambda x, w, b: ember.native_layer_norm(x, (4,), w, b, 1e-5),
     None, (3, 4), 4),
    ("native_group_norm", lambda x, w, b: ember.native_group_norm(x, 2, w, b, 1e-5),
     lambda x, w, b: torch.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5), (2, 4, 3), 4),
    ("native_batch_norm", lambda x, w, b: ember.native_batch_norm(x, w, b, None, None, True, 0.1,
                                                                   1e-5),
     None, (3, 4, 2), 4),
    ("native_batch_norm: eval", lambda x, w, b: ember.native_batch_norm(
        x, w, b, *_stats(ember, 4, 0), False, 0.1, 1e-5), None, (3, 4, 2), 4),
    ("_fused_rms_norm", lambda x, w, b: ember._C._fused_rms_norm(x, (4,), w, 1e-5),
     lambda x, w, b: torch._fused_rms_norm(x, [4], w, 1e-5), (3, 4), 4),
]
NATIVE_IDS = [n[0] for n in NATIVE]


def _native_inputs(shape, c, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape), rng.uniform(0.5, 1.5, c), rng.standard_normal(c)]


@pytest.mark.parametrize("name, fn, tfn, shape, c", NATIVE, ids=NATIVE_IDS)
def test_gradients_through_statistic_outputs(name, fn, tfn, shape, c):
    x, w, b = _ember(_native_inputs(shape, c))
    n_out = len(fn(x, w, b))
    for k in range(1, n_out):
        assert gradcheck(lambda x, w, b: fn(x, w, b)[k], [x, w, b])
        assert gradgradcheck(lambda x, w, b: fn(x, w, b)[k], [x, w, b])
    # All outputs at once: the output's and the statistics' contributions add up.
    assert gradcheck(lambda x, w, b: fn(x, w, b), [x, w, b])
    assert gradgradcheck(lambda x, w, b: fn(x, w, b), [x, w, b])


def _fd_tangents(fn, arrays, tangents, eps=1e-6):
    """Central differences of every output of fn along the tangents (float64)."""
    def at(s):
        ins = [ember.tensor(a + s * t) for a, t in zip(arrays, tangents)]
        return [o.numpy() for o in fn(*ins)]
    return [(p - m) / (2 * eps) for p, m in zip(at(eps), at(-eps))]


@pytest.mark.parametrize("name, fn, tfn, shape, c", NATIVE, ids=NATIVE_IDS)
def test_forward_ad_tangents_of_every_output(name, fn, tfn, shape, c):
    arrays = _native_inputs(shape, c)
    tangents = _native_inputs(shape, c, seed=1)
    if name == "_fused_rms_norm":
        tangents[2] = np.zeros(c)  # no bias
    with fwAD.dual_level():
        duals = [fwAD.make_dual(ember.tensor(a), ember.tensor(t))
                 for a, t in zip(arrays, tangents)]
        if name == "_fused_rms_norm":
            duals[2] = None
        outs = fn(*duals)
        got = [fwAD.unpack_dual(o).tangent for o in outs]
    expected = _fd_tangents(lambda x, w, b: fn(x, w, None if name == "_fused_rms_norm" else b),
                            arrays, tangents)
    for i, (g, e) in enumerate(zip(got, expected)):
        if g is None:  # batch norm eval: the running statistics carry no tangent
            assert name.endswith("eval") and i > 0
        np.testing.assert_allclose(_np(g, e.shape), e, rtol=1e-6, atol=1e-6, err_msg=f"out {i}")
    if tfn is not None and torch is not None:
        tfw = torch.autograd.forward_ad
        with tfw.dual_level():
            tduals = [tfw.make_dual(torch.tensor(a), torch.tensor(t))
                      for a, t in zip(arrays, tangents)]
            touts = tfn(*tduals)
            for i, (g, o) in enumerate(zip(got, touts)):
                tt = tfw.unpack_dual(o).tangent
                np.testing.assert_allclose(_np(g, tuple(o.shape)), _np(tt, tuple(o.shape)),
                                           rtol=1e-10, atol=1e-10, err_msg=f"out {i}")


@pytest.mark.parametrize("name, fn, tfn, shape, c", NATIVE, ids=NATIVE_IDS)
def test_forward_tangents_agree_with_reverse_mode(name, fn, tfn, shape, c):
    # <J t, u> == <t, J^T u> for every output: forward and reverse formulas describe one map.
    arrays = _native_inputs(shape, c, seed=2)
    tangents = _native_inputs(shape, c, seed=3)
    ins = _ember(arrays)
    outs = fn(*ins)
    rng = np.random.default_rng(4)
    us = [rng.standard_normal(tuple(o.shape)) for o in outs]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(ember.tensor(a), ember.tensor(t))
                 for a, t in zip(arrays, tangents)]
        jt = [fwAD.unpack_dual(o).tangent for o in fn(*duals)]
    for k, (o, u) in enumerate(zip(outs, us)):
        if jt[k] is None:
            continue
        vjp = ember.autograd.grad(o, ins, ember.tensor(u), retain_graph=True, allow_unused=True)
        lhs = float((_np(jt[k], u.shape) * u).sum())
        rhs = sum(float((_np(g, t.shape) * t).sum()) for g, t in zip(vjp, tangents))
        assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-10), f"output {k}"


# ---- forward-mode AD of the public ops ----------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_ad_matches_torch(case):
    arrays = _arrays(case, seed=2)
    tangents = _arrays(case, seed=5)
    with fwAD.dual_level():
        d = [fwAD.make_dual(ember.tensor(a), ember.tensor(t)) for a, t in zip(arrays, tangents)]
        got = fwAD.unpack_dual(case.fn(ember, *d)).tangent
    out, expected = torch.func.jvp(lambda *a: case.fn(torch, *a),
                                   tuple(torch.tensor(a) for a in arrays),
                                   tuple(torch.tensor(t) for t in tangents))
    np.testing.assert_allclose(_np(got, tuple(out.shape)), _np(expected, tuple(out.shape)),
                               rtol=1e-10, atol=1e-10)
    # ember.func.jvp (built on double backward) agrees.
    _, jv = ember.func.jvp(lambda *a: case.fn(ember, *a),
                           tuple(ember.tensor(a) for a in arrays),
                           tuple(ember.tensor(t) for t in tangents))
    np.testing.assert_allclose(_np(jv, tuple(out.shape)), _np(expected, tuple(out.shape)),
                               rtol=1e-10, atol=1e-10)


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reverse_over_forward_and_forward_over_reverse(case):
    # Hessian-vector products both ways equal torch's double-backward ones.
    arrays = _arrays(case, seed=6)
    tangents = _arrays(case, seed=9)
    rng = np.random.default_rng(10)
    c = rng.standard_normal(case.shapes[0])

    def loss(m, y):
        return (y * m.tensor(c)).sum() + (y * y * y).sum() / 3

    tins = _torch(arrays)
    tg = torch.autograd.grad(loss(torch, case.fn(torch, *tins)), tins, create_graph=True)
    dot = sum((g * torch.tensor(t)).sum() for g, t in zip(tg, tangents))
    hvp = [_np(h, s) for h, s in zip(torch.autograd.grad(dot, tins, allow_unused=True),
                                     case.shapes)]

    # Forward over reverse: the gradient computed on dual inputs carries H t as its tangent.
    with fwAD.dual_level():
        d = [fwAD.make_dual(ember.tensor(a), ember.tensor(t)) for a, t in zip(arrays, tangents)]
        for t in d:
            t.requires_grad_()
        gs = ember.autograd.grad(loss(ember, case.fn(ember, *d)), d)
        got = [fwAD.unpack_dual(g).tangent for g in gs]
    for s, g, h in zip(case.shapes, got, hvp):
        np.testing.assert_allclose(_np(g, s), h, rtol=1e-8, atol=1e-8)

    # Reverse over forward: d/dinputs <tangent of y, c> ... through the loss's tangent.
    ins = _ember(arrays)
    with fwAD.dual_level():
        d = [fwAD.make_dual(x, ember.tensor(t)) for x, t in zip(ins, tangents)]
        lt = fwAD.unpack_dual(loss(ember, case.fn(ember, *d))).tangent
    got = ember.autograd.grad(lt, ins, allow_unused=True)
    for s, g, h in zip(case.shapes, got, hvp):
        np.testing.assert_allclose(_np(g, s), h, rtol=1e-8, atol=1e-8)


@needs_torch
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5], CASES[7], CASES[9], CASES[12]],
                         ids=[IDS[0], IDS[3], IDS[5], IDS[7], IDS[9], IDS[12]])
def test_func_hessian_matches_torch(case):
    arrays = _arrays(case, seed=11)
    rest = arrays[1:]

    def f(m):
        params = [m.tensor(a) for a in rest]
        return lambda x: (case.fn(m, x, *params) ** 3).sum()

    got = ember.func.hessian(f(ember))(ember.tensor(arrays[0]))
    expected = torch.autograd.functional.hessian(f(torch), torch.tensor(arrays[0]))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-8, atol=1e-8)
    # Forward over reverse gives the same matrix.
    fwd = ember.func.jacfwd(ember.func.grad(f(ember)))(ember.tensor(arrays[0]))
    np.testing.assert_allclose(fwd.numpy(), expected.numpy(), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("name, fn, tfn, shape, c", NATIVE, ids=NATIVE_IDS)
def test_each_subset_of_inputs_gets_the_same_gradients(name, fn, tfn, shape, c):
    # One backward call serves every input that requires grad (grad_input_mask): each subset
    # of (input, weight, bias) gets the gradients the full set gets.
    arrays = _native_inputs(shape, c)
    up = np.random.default_rng(3).standard_normal(shape)

    def grads(mask):
        ins = [ember.tensor(a).requires_grad_(m) for a, m in zip(arrays, mask)]
        (fn(*ins)[0] * ember.tensor(up)).sum().backward()
        return [t.grad for t in ins]

    full = grads((True, True, True))
    for mask in itertools.product((False, True), repeat=3):
        if not any(mask) or (name == "_fused_rms_norm" and mask == (False, False, True)):
            continue
        for k, g in enumerate(grads(mask)):
            if not mask[k] or (name == "_fused_rms_norm" and k == 2):
                assert g is None
            else:
                np.testing.assert_allclose(g.numpy(), full[k].numpy(), rtol=1e-12, atol=1e-12,
                                           err_msg=f"{name} mask {mask} input {k}")


@pytest.mark.parametrize("name", ["batch_norm", "layer_norm", "group_norm"])
def test_plain_backward_runs_one_fused_kernel_and_no_zero_fill(name):
    # A plain backward computes the input, weight and bias gradients in one call of the fused
    # backward op, and the unused statistic outputs cost nothing: no zeros filled in for them and
    # no comparison against zeros (on a GPU, a read back to the host that stalls the stream).
    x = ember.randn(4, 6, 5, requires_grad=True)
    w, b = ember.ones(6, requires_grad=True), ember.zeros(6, requires_grad=True)
    fn = {"batch_norm": lambda: ember.nn.functional.batch_norm(x, None, None, w, b, True),
          "layer_norm": lambda: ember.nn.functional.layer_norm(
              x.transpose(1, 2), (6,), w, b).transpose(1, 2),
          "group_norm": lambda: ember.nn.functional.group_norm(x, 3, w, b)}[name]
    out = fn()
    with ember.profiler.profile() as prof:
        out.sum().backward()
    counts = {e.key: e.count for e in prof.key_averages()}
    fused = f"aten::native_{name}_backward"
    assert counts.get(fused) == 1, counts
    for k in ("aten::zeros", "aten::zeros_like", "aten::equal"):
        assert k not in counts, counts
    assert x.grad is not None and w.grad is not None and b.grad is not None
