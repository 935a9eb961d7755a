"""Gradient and value edge cases matched to PyTorch (session 21): binary_cross_entropy's
log1p form and derivatives, pow / xlogy / hypot / digamma / atan2 at zeros, grid_sample's
signed zeros. Each case has explicit expected values (signed zeros and inf / NaN included)
and, where torch is installed, a comparison against it."""

from __future__ import annotations

import math

import ember
import ember.autograd.forward_ad as efa
import pytest

try:
    import torch
    import torch.autograd.forward_ad as tfa
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
DTYPES = ["float32", "float64"]


def _same(a: list, b: list) -> bool:
    """Equal as IEEE values: NaN matches NaN, zeros must have the same sign."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = float(x), float(y)
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return False
            continue
        if x == 0 and y == 0:
            if math.copysign(1, x) != math.copysign(1, y):
                return False
            continue
        if x != y and abs(x - y) > 1e-6 * max(abs(x), abs(y)):
            return False
    return True


def _bwd(lib, fn, vals, dt):
    xs = [lib.tensor(v, dtype=getattr(lib, dt), requires_grad=True) for v in vals]
    out = fn(lib, *xs)
    gs = lib.autograd.grad(out.sum(), xs)
    return [out.detach().tolist()] + [g.tolist() for g in gs]


def _jvp(lib, fn, vals, dt, i):
    fa = tfa if lib is torch else efa
    with fa.dual_level():
        ins = [lib.tensor(v, dtype=getattr(lib, dt)) for v in vals]
        ins[i] = fa.make_dual(ins[i], lib.ones_like(ins[i]))
        return fa.unpack_dual(fn(lib, *ins)).tangent.tolist()


def _check(expected, got):
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        e, g = (e if isinstance(e, list) else [e]), (g if isinstance(g, list) else [g])
        assert _same(e, g), (expected, got)


# ---- binary_cross_entropy ------------------------------------------------------------------

def _bce(lib, p, t):
    F = (torch.nn.functional if lib is torch else ember.nn.functional)
    return F.binary_cross_entropy(p, t, reduction="none")


BCE_P = [0.0, 1.0, 1.0 - 1e-7, 0.0, 1.0, 0.5]
BCE_T = [0.0, 1.0, 1.0, 1.0, 0.0, 0.5]


def test_bce_values_and_grads_float64():
    out, gp, gt = _bwd(ember, _bce, [BCE_P, BCE_T], "float64")
    # +0.0 for p = t = 0 and -0.0 for p = t = 1, as torch; log1p keeps the confident loss
    _check([[0.0, -0.0, 1.0000000494736474e-07, 100.0, 100.0, math.log(2)]], [out])
    assert math.copysign(1, out[0]) == 1 and math.copysign(1, out[1]) == -1
    # d/dp = (p - t) / max(p (1 - p), 1e-12): finite at p = 0, 1 (NaN before)
    assert gp[0] == 0 and gp[1] == 0 and gp[5] == 0
    assert gp[3] == pytest.approx(-1e12) and gp[4] == pytest.approx(1e12)
    # d/dt = -logit(p)
    assert gt[0] == math.inf and gt[1] == -math.inf and gt[5] == 0
    assert math.copysign(1, gt[5]) == -1


def test_bce_confident_is_not_zero_float32():
    p = ember.tensor([1.0 - 2 ** -24] * 4)
    loss = ember.nn.functional.binary_cross_entropy(p, ember.ones(4))
    assert loss.item() == pytest.approx(5.960464477539063e-08, rel=1e-6)


def test_bce_weight_requires_grad_raises():
    w = ember.tensor([0.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        ember.nn.functional.binary_cross_entropy(ember.tensor([0.3]), ember.tensor([0.2]), weight=w)
    with pytest.raises(RuntimeError, match="weight"):
        ember.nn.BCELoss(weight=w)(ember.tensor([0.3], requires_grad=True), ember.tensor([0.2]))
    with ember.no_grad():  # as torch: no error without grad mode
        v = ember.nn.functional.binary_cross_entropy(ember.tensor([0.3]), ember.tensor([0.2]), weight=w)
    assert v.item() == pytest.approx(0.26306727, rel=1e-6)


def test_bce_gradcheck_and_reductions():
    p = ember.tensor([0.2, 0.7, 0.9], dtype=ember.float64, requires_grad=True)
    t = ember.tensor([0.1, 0.5, 0.8], dtype=ember.float64, requires_grad=True)
    w = ember.tensor([1.0, 2.0, 0.5], dtype=ember.float64)
    for red in ("none", "mean", "sum"):
        assert ember.autograd.gradcheck(
            lambda a, b: ember.nn.functional.binary_cross_entropy(a, b, weight=w, reduction=red),
            (p, t))


@needs_torch
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("red", ["none", "mean", "sum"])
def test_bce_matches_torch(dt, red):
    def f(lib, p, t):
        F = torch.nn.functional if lib is torch else ember.nn.functional
        w = lib.tensor([1.0, 2.0, 0.5, 1.0, 3.0, 1.0], dtype=p.dtype)
        return F.binary_cross_entropy(p, t, weight=w, reduction=red)
    _check(_bwd(torch, f, [BCE_P, BCE_T], dt), _bwd(ember, f, [BCE_P, BCE_T], dt))
    for i in range(2):
        _check([_jvp(torch, f, [BCE_P, BCE_T], dt, i)], [_jvp(ember, f, [BCE_P, BCE_T], dt, i)])


# ---- pointwise ops at zeros ------------------------------------------------------------------

Z = [0.0, -0.0, 1.0, 2.0, 0.5]
CASES = {
    "x**x": (lambda L, x: x ** x, [Z]),
    "pow": (lambda L, x, y: L.pow(x, y), [[0.0, 0.0, 0.0, -0.0, 2.0, 0.0], [0.0, 1.0, -1.0, 2.0, 0.5, 0.5]]),
    "xlogy_xx": (lambda L, x: L.xlogy(x, x), [Z]),
    "xlogy": (lambda L, x, y: L.xlogy(x, y), [[0.0, 0.0, 1.0, 0.0, 2.0], [0.0, 1.0, 0.0, -1.0, math.nan]]),
    "special_xlogy": (lambda L, x, y: L.special.xlogy(x, y), [[0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, -1.0]]),
    "hypot": (lambda L, x, y: L.hypot(x, y), [[0.0, -0.0, 3.0, 0.0, 1e-30], [0.0, 0.0, 4.0, -0.0, 0.0]]),
    "digamma": (lambda L, x: L.digamma(x), [[0.0, -0.0, 1.0, 0.5]]),
    "atan2": (lambda L, x, y: L.atan2(x, y), [[0.0, -0.0, 0.0, -0.0, 1.0, 0.0], [0.0, 0.0, -0.0, -0.0, 0.0, 1.0]]),
}
N, INF = math.nan, math.inf
EXPECTED_BWD = {  # float64: [value, grad of each input]
    "x**x": [[1.0, 1.0, 1.0, 4.0, 0.7071067811865476], [0.0, 0.0, 1.0, 6.772588722239782, 0.21697770945227396]],
    "pow": [[1.0, 0.0, INF, 0.0, 1.4142135623730951, 0.0], [0.0, 1.0, -INF, -0.0, 0.3535533905932738, INF],
            [0.0, 0.0, -INF, 0.0, 0.9802581434685472, 0.0]],
    "xlogy_xx": [[0.0, 0.0, 0.0, 1.3862943611198906, -0.34657359027997264],
                 [N, N, 1.0, 1.6931471805599454, 0.3068528194400547]],
    "xlogy": [[0.0, 0.0, -INF, 0.0, N], [0.0, 0.0, -INF, 0.0, N], [N, 0.0, INF, -0.0, N]],
    "hypot": [[0.0, 0.0, 5.0, 0.0, 1e-30], [N, N, 0.6, N, 1.0], [N, N, 0.8, N, 0.0]],
    "digamma": [[-INF, INF, -0.5772156649015328, -1.9635100260214229], [INF, INF, 1.6449340668482264, 4.934802200544679]],
    "atan2": [[0.0, -0.0, math.pi, -math.pi, math.pi / 2, 0.0], [0.0, 0.0, -0.0, -0.0, 0.0, 1.0],
              [-0.0, 0.0, -0.0, 0.0, -1.0, -0.0]],
}
EXPECTED_JVP = {  # float64: tangent along each input
    "x**x": [[0.0, 0.0, 1.0, 6.772588722239782, 0.21697770945227396]],
    "xlogy_xx": [[N, N, 1.0, 1.6931471805599454, 0.3068528194400547]],
    "xlogy": [[0.0, 0.0, -INF, 0.0, N], [N, 0.0, INF, 0.0, N]],
    "hypot": [[N, N, 0.6, N, 1.0], [N, N, 0.8, N, 0.0]],
    "digamma": [[INF, INF, 1.6449340668482264, 4.934802200544679]],
    "atan2": [[N, N, N, N, 0.0, 1.0], [N, N, N, N, -1.0, -0.0]],
}


def _approx_check(expected, got):
    for e, g in zip(expected, got):
        assert len(e) == len(g)
        for x, y in zip(e, g):
            if math.isnan(x) or math.isinf(x) or x == 0:
                assert _same([x], [y]), (expected, got)
            else:
                assert y == pytest.approx(x, rel=1e-9), (expected, got)


@pytest.mark.parametrize("name", sorted(EXPECTED_BWD))
def test_backward_expected(name):
    fn, vals = CASES[name]
    _approx_check(EXPECTED_BWD[name], _bwd(ember, fn, vals, "float64"))


@pytest.mark.parametrize("name", sorted(EXPECTED_JVP))
def test_jvp_expected(name):
    fn, vals = CASES[name]
    _approx_check(EXPECTED_JVP[name], [_jvp(ember, fn, vals, "float64", i) for i in range(len(vals))])


@needs_torch
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name, dt):
    fn, vals = CASES[name]
    if name == "digamma" and dt == "float32":
        pytest.skip("torch's float32 digamma is less accurate than 1e-6; float64 is checked")
    _check(_bwd(torch, fn, vals, dt), _bwd(ember, fn, vals, dt))
    for i in range(len(vals)):
        _check([_jvp(torch, fn, vals, dt, i)], [_jvp(ember, fn, vals, dt, i)])


def test_inplace_and_out_variants():
    x = ember.tensor([0.0, 2.0], dtype=ember.float64, requires_grad=True)
    y = ember.tensor([0.0, 3.0], dtype=ember.float64, requires_grad=True)
    z = x.clone().pow_(y)
    gx, gy = ember.autograd.grad(z.sum(), [x, y])
    assert _same(gx.tolist(), [0.0, 3 * 4.0])
    assert gy.tolist()[0] == 0.0 and gy.tolist()[1] == pytest.approx(8 * math.log(2))
    z = x.clone().atan2_(y)
    gx, gy = ember.autograd.grad(z.sum(), [x, y])
    assert _same(gx.tolist(), [0.0, 3 / 13]) and _same(gy.tolist(), [-0.0, -2 / 13])
    z = x.clone().xlogy_(y)
    gx, gy = ember.autograd.grad(z.sum(), [x, y])
    assert _same(gx.tolist(), [0.0, math.log(3)]) and _same(gy.tolist(), [N, 2 / 3])
    out = ember.empty(2, dtype=ember.float64)
    ember.atan2(x.detach(), y.detach(), out=out)
    assert _same(out.tolist(), [0.0, math.atan2(2, 3)])


def test_gradchecks_still_hold():
    a = ember.tensor([0.7, 1.3, 2.1], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([0.4, -1.2, 0.9], dtype=ember.float64, requires_grad=True)
    for f in (ember.pow, ember.atan2, ember.hypot, ember.xlogy):
        y = b.abs().detach().requires_grad_() if f is ember.xlogy else b  # log of y > 0
        assert ember.autograd.gradcheck(f, (a, y))
        assert ember.autograd.gradgradcheck(f, (a, y))
    assert ember.autograd.gradcheck(ember.digamma, (a,))


# ---- grid_sample -----------------------------------------------------------------------------

GRID = [[[[-1.5, 0.2], [1.7, -0.3], [0.0, 1.2], [-1.0, -1.0], [1.0, 1.0], [0.3, -2.5]]]]
INP = [[[[0.5, -1.0, 2.0], [-0.3, 0.8, -2.2], [1.1, -0.6, 0.4]]]]


def _gs(lib, dt, pm, ac, mode="bilinear"):
    F = torch.nn.functional if lib is torch else ember.nn.functional
    i = lib.tensor(INP, dtype=getattr(lib, dt), requires_grad=True)
    g = lib.tensor(GRID, dtype=getattr(lib, dt), requires_grad=True)
    out = F.grid_sample(i, g, mode=mode, padding_mode=pm, align_corners=ac)
    gi, gg = lib.autograd.grad(out.sum(), [i, g])
    return out.flatten().tolist(), gi.flatten().tolist(), gg.flatten().tolist()


def test_grid_sample_border_grad_zero_sign():
    _, _, gg = _gs(ember, "float64", "border", False)
    # clipped locations: the incoming gradient times 0, which keeps its sign (torch's values)
    expected = [0.0, 2.1, 0.0, -6.300000000000001, 1.5, 0.0, -0.0, -0.0, -0.0, -0.0, 4.5, -0.0]
    assert _same(expected, gg), gg


def test_grid_sample_zeros_padding_reads_positive_zero():
    out, _, _ = _gs(ember, "float64", "zeros", False)
    assert out[1] == 0 and math.copysign(1, out[1]) == 1


@needs_torch
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("pm", ["border", "zeros"])
@pytest.mark.parametrize("ac", [False, True])
def test_grid_sample_matches_torch(dt, pm, ac):
    for a, b in zip(_gs(torch, dt, pm, ac), _gs(ember, dt, pm, ac)):
        for x, y in zip(a, b):
            if x == 0 or y == 0:
                assert _same([x], [y]), (a, b)
            else:
                assert y == pytest.approx(x, rel=1e-5, abs=1e-6), (a, b)
