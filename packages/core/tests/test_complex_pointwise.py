"""Complex64 / complex128 pointwise kernels (sin ... atanh, sigmoid, reciprocal, rsqrt, log2,
log10, log1p, expm1, exp2, square, sgn, isnan / isinf / isfinite, nan_to_num, where) against
torch on grids of finite values and of special values (signed zeros, inf, NaN, the branch cuts),
their conjugate-Wirtinger gradients against torch (complex128) and through gradcheck on the real
view, and the ops torch refuses for complex input refusing with torch's message."""

import itertools
import math

import ember
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


HOLOMORPHIC = ["sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh",
               "acosh", "atanh", "sigmoid", "reciprocal", "rsqrt", "log2", "log10", "log1p",
               "expm1", "exp2", "square"]
ALL_OPS = HOLOMORPHIC + ["sgn", "exp", "log", "sqrt"]
DTYPES = ["complex64", "complex128"]

SPECIAL = [0.0, -0.0, 1e-30, -1e-8, 0.5, 1.0, -1.0, 2.5, -3.0, 40.0, 1e30, -1e300, math.inf,
           -math.inf, math.nan]


def finite_grid():
    """Random values of several magnitudes and both signs, and points on the axes."""
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(64) * s for s in (1e-6, 0.1, 1.0, 3.0, 20.0)]
    re = np.concatenate(parts)
    im = np.concatenate([rng.permutation(p) for p in parts])
    axes = np.array([0.0, 0.7, -0.7, 1.0, -1.0, 1.5, -1.5, 4.0, -4.0])
    z = np.concatenate([re + 1j * im, axes + 0j, 1j * axes, axes - 0j * 1j, -0.0 + 1j * axes])
    return z


def special_grid():
    return np.array([complex(a, b) for a, b in itertools.product(SPECIAL, SPECIAL)])


def _pair(torch, values, dtype):
    e = ember.tensor(values.astype(np.complex128)).to(getattr(ember, dtype))
    t = torch.tensor(values.astype(np.complex128)).to(getattr(torch, dtype))
    return e, t


def _parts(x):
    """(real, imag) float64 numpy arrays of an ember or torch complex tensor."""
    a = np.asarray(x.numpy() if not hasattr(x, "resolve_conj") else x.resolve_conj().numpy())
    a = a.astype(np.complex128)
    return a.real, a.imag


RTOL = {"complex64": 4e-6, "complex128": 1e-13}


def _agree(a, b, scale, rtol):
    """Per element of two float arrays: both NaN, or equal (with the same sign of zero), or
    finite and within rtol * scale (scale: the modulus of the complex result, so that a part
    tiny next to the other may differ by a few ulp of the modulus)."""
    with np.errstate(invalid="ignore"):
        nan = np.isnan(a) & np.isnan(b)
        eq = (a == b) & (np.signbit(a) == np.signbit(b))
        fin = np.isfinite(a) & np.isfinite(b) & ((a != 0) | (b != 0))
        close = fin & (np.abs(a - b) <= rtol * scale)
    return nan | eq | close


def _mismatches(op, dtype, z, e, t):
    er, ei = _parts(e)
    tr, ti = _parts(t)
    scale = np.hypot(tr, ti)
    scale = np.where(np.isfinite(scale), scale, 0.0)
    rtol = RTOL[dtype]
    if op == "acos" and dtype == "complex128":
        # torch's complex128 acos is pi/2 - asin(z): +0 where C's cacos gives -0 (x + 0i,
        # |x| <= 1), and the real part near z = 1 loses digits to the cancellation (ember keeps
        # cacos's)
        rtol, er, ei = 1e-11, er + 0.0, ei + 0.0
        tr, ti, scale = tr + 0.0, ti + 0.0, np.maximum(scale, 1.0)
    ok = _agree(er, tr, scale, rtol) & _agree(ei, ti, scale, rtol)
    return [(z[i], complex(er[i], ei[i]), complex(tr[i], ti[i])) for i in np.flatnonzero(~ok)]


def _known_difference(op, zc):
    """Inputs where ember deliberately differs from torch 2.13 (CPU): log1p(x +- inf i) for a
    small nonzero finite x is NaN in torch (Kahan's log(u) z / (u - 1) with u - 1 != z gives
    inf / inf), inf +- i pi/2 in ember (the limit, and torch's own value for x = 0 or 0.5)."""
    if op == "log1p":
        return np.isinf(zc.imag) & np.isfinite(zc.real) & (zc.real != 0) & (np.abs(zc.real) < 0.5)
    return np.zeros(zc.shape, dtype=bool)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ALL_OPS)
def test_values_match_torch_on_a_finite_grid(torch, op, dtype):
    z = finite_grid()
    e, t = _pair(torch, z, dtype)
    re, rt = getattr(ember, op)(e), getattr(torch, op)(t)
    assert str(re.dtype) == "ember." + dtype
    bad = _mismatches(op, dtype, z, re, rt)
    assert not bad, f"{op} {dtype}: {bad[:4]}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ALL_OPS)
def test_special_values_match_torch(torch, op, dtype):
    # signed zeros, tiny, huge (overflowing complex64), inf and NaN parts: the branch cuts and
    # the C99 special cases
    z = special_grid()
    e, t = _pair(torch, z, dtype)
    zc = e.to(ember.complex128).numpy()
    known = _known_difference(op, zc)
    re, rt = getattr(ember, op)(e), getattr(torch, op)(t)
    keep = np.flatnonzero(~known)
    bad = _mismatches(op, dtype, z[keep], re[ember.tensor(keep)], rt[torch.tensor(keep)])
    assert not bad, f"{op} {dtype}: {bad[:6]}"
    if known.any():  # log1p: the limit inf +- i pi/2
        got = re[ember.tensor(np.flatnonzero(known))].to(ember.complex128).numpy()
        assert np.all(np.isposinf(got.real))
        np.testing.assert_allclose(got.imag, np.sign(zc[known].imag) * np.pi / 2, rtol=1e-6)


@pytest.mark.parametrize("op", ["sin", "log1p", "expm1", "sgn", "square", "reciprocal", "atanh"])
def test_strided_and_inplace_and_out(op):
    z = finite_grid()[:60].reshape(6, 10)
    x = ember.tensor(z)
    ref = getattr(ember, op)(x).numpy()
    np.testing.assert_array_equal(getattr(ember, op)(x.t()).numpy(), ref.T)  # strided input
    y = x.clone()
    getattr(y, op + "_")()
    np.testing.assert_array_equal(y.numpy(), ref)
    out = ember.empty(6, 10, dtype=ember.complex128)
    getattr(ember, op)(x, out=out)
    np.testing.assert_array_equal(out.numpy(), ref)


# ---- predicates, nan_to_num, where ------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite"])
def test_predicates_match_torch(torch, op, dtype):
    e, t = _pair(torch, special_grid(), dtype)
    r = getattr(ember, op)(e)
    assert r.dtype == ember.bool
    np.testing.assert_array_equal(r.numpy(), getattr(torch, op)(t).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"nan": -2.0, "posinf": 7.0, "neginf": -9.0}])
def test_nan_to_num_matches_torch(torch, dtype, kwargs):
    e, t = _pair(torch, special_grid(), dtype)
    r = ember.nan_to_num(e, **kwargs)
    assert r.dtype == e.dtype
    np.testing.assert_array_equal(r.numpy(), torch.nan_to_num(t, **kwargs).numpy())
    y = e.clone()
    y.nan_to_num_(**kwargs)
    np.testing.assert_array_equal(y.numpy(), r.numpy())


def test_where_and_masked_fill_match_torch(torch):
    z = finite_grid()[:12]
    c = np.arange(12) % 3 == 0
    ez, tz = ember.tensor(z), torch.tensor(z)
    ec, tc = ember.tensor(c), torch.tensor(c)
    er, tr = ember.tensor(z.real), torch.tensor(z.real)
    cases = [
        (ember.where(ec, ez, ez * 2j), torch.where(tc, tz, tz * 2j)),
        (ember.where(ec, ez, 0), torch.where(tc, tz, 0)),
        (ember.where(ec, 1 - 1j, ez), torch.where(tc, 1 - 1j, tz)),
        (ember.where(ec, ez.to(ember.complex64), er), torch.where(tc, tz.to(torch.complex64), tr)),
        (ember.where(ec, er.float(), 2j), torch.where(tc, tr.float(), 2j)),
        (ez.masked_fill(ec, 3 + 4j), tz.masked_fill(tc, 3 + 4j)),
        (ez.masked_fill(ec, ember.tensor(-1j)), tz.masked_fill(tc, torch.tensor(-1j))),
    ]
    for e, t in cases:
        assert str(e.dtype)[6:] == str(t.dtype)[6:]
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_ternary_logical_and_isclose_match_torch(torch):
    nan = math.nan
    a = np.array([1 + 2j, 0j, nan + 1j, 3 - 1j, -0.0 + 0j, 2j])
    b = np.array([1 + 2.00001j, 0j, nan + 1j, 3.1 - 1j, 1e-9 + 0j, -2j])
    c = crandn(6, seed=4)
    for dt in DTYPES:
        (ea, ta), (eb, tb), (ec, tc) = (_pair(torch, v, dt) for v in (a, b, c))
        cases = [
            (ember.isclose(ea, eb), torch.isclose(ta, tb)),
            (ember.isclose(ea, eb, equal_nan=True), torch.isclose(ta, tb, equal_nan=True)),
            (ember.isclose(ea, eb, rtol=0.1, atol=1e-8), torch.isclose(ta, tb, rtol=0.1, atol=1e-8)),
            (ember.logical_not(ea), torch.logical_not(ta)),
            (ember.logical_and(ea, eb), torch.logical_and(ta, tb)),
            (ember.logical_or(ea, eb), torch.logical_or(ta, tb)),
            (ember.logical_xor(ea, ec), torch.logical_xor(ta, tc)),
            (ember.lerp(ea, ec, 0.7), torch.lerp(ta, tc, 0.7)),
            (ember.lerp(ea, ec, 0.3), torch.lerp(ta, tc, 0.3)),
            (ember.lerp(ea, ec, eb), torch.lerp(ta, tc, tb)),
            (ember.addcmul(ea, ec, eb, value=1j), torch.addcmul(ta, tc, tb, value=1j)),
            (ember.addcdiv(ea, ec, eb, value=2), torch.addcdiv(ta, tc, tb, value=2)),
        ]
        for k, (e, t) in enumerate(cases):
            assert str(e.dtype)[6:] == str(t.dtype)[6:], k
            if e.dtype == ember.bool:
                np.testing.assert_array_equal(e.numpy(), t.numpy(), err_msg=str(k))
            else:
                bad = _mismatches("lerp", dt, a, e, t)
                assert not bad, (k, bad)
    assert ember.allclose(ember.tensor(a[3:4]), ember.tensor(b[3:4]), rtol=0.1)


# ---- gradients -------------------------------------------------------------------------------

def crandn(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


Z = crandn(3, 4)
W = crandn(3, 4, seed=7)


def _grads(m, op, a):
    """The gradients of two real losses of op(a): |y|^2 summed, and Re(y * w) summed."""
    grads = []
    w = crandn(*a.shape, seed=7)
    for k in range(2):
        x = m.tensor(a, requires_grad=True)
        y = getattr(m, op)(x)
        loss = (y.abs() ** 2).sum() if k == 0 else (y * m.tensor(w)).real.sum()
        loss.backward()
        g = x.grad
        grads.append(np.asarray(g.resolve_conj().numpy() if hasattr(g, "resolve_conj") else g.numpy()))
    return grads


@pytest.mark.parametrize("op", HOLOMORPHIC + ["sgn"])
def test_gradients_match_torch(torch, op):
    z = Z * 0.6 if op in ("asin", "acos") else Z
    for ge, gt in zip(_grads(ember, op, z), _grads(torch, op, z)):
        assert ge.dtype == np.complex128
        np.testing.assert_allclose(ge, gt, rtol=1e-10, atol=1e-12)


def test_gradient_of_sgn_at_zero(torch):
    z = np.array([0j, 1 + 1j, -0.0 - 0j, 2.5 - 1e-3j, -3j])
    for ge, gt in zip(_grads(ember, "sgn", z), _grads(torch, "sgn", z)):
        np.testing.assert_allclose(ge, gt, rtol=1e-12, atol=1e-15)


def test_where_gradient_matches_torch(torch):
    c = np.array([[True, False, True, False]] * 3)
    res = []
    for m in (ember, torch):
        a = m.tensor(Z, requires_grad=True)
        b = m.tensor(Z.real, requires_grad=True)
        y = m.where(m.tensor(c), a.sin(), b * (1 + 2j))
        (y * m.tensor(W)).real.sum().backward()
        res.append([a.grad.numpy() if m is ember else a.grad.resolve_conj().numpy(), b.grad.numpy()])
    for ge, gt in zip(*res):
        np.testing.assert_allclose(ge, gt, rtol=1e-12, atol=1e-14)


TERNARY = {
    "lerp_scalar": lambda m, a, b, c: m.lerp(a, b, 0.3),
    "lerp_complex_scalar": lambda m, a, b, c: m.lerp(a, b, 0.3 - 0.6j),
    "lerp_tensor": lambda m, a, b, c: m.lerp(a, b, c),
    "addcmul": lambda m, a, b, c: m.addcmul(a, b, c, value=0.5 + 2j),
    "addcdiv": lambda m, a, b, c: m.addcdiv(a, b, c, value=-1.5),
    "addcdiv_complex_value": lambda m, a, b, c: m.addcdiv(a, b, c, value=1j),
}


@pytest.mark.parametrize("name", list(TERNARY))
def test_ternary_gradients_match_torch(torch, name):
    arrays = [crandn(3, 4, seed=s) for s in (1, 2, 3)]
    arrays[2] = arrays[2] * 0.3 if name.startswith("lerp") else arrays[2] + 2.0
    w = crandn(3, 4, seed=7)
    res = []
    for m in (ember, torch):
        ins = [m.tensor(a, requires_grad=True) for a in arrays]
        (TERNARY[name](m, *ins) * m.tensor(w)).real.sum().backward()
        res.append([None if x.grad is None else
                    np.asarray(x.grad.resolve_conj().numpy() if m is torch else x.grad.numpy())
                    for x in ins])
    for ge, gt in zip(*res):
        assert (ge is None) == (gt is None)  # lerp's scalar weight leaves the third unused
        if gt is not None:
            np.testing.assert_allclose(ge, gt, rtol=1e-10, atol=1e-12)


def test_real_inputs_keep_their_gradients(torch):
    # the conjugates in the formulas cost nothing and change nothing for real inputs
    x = np.random.default_rng(5).uniform(0.2, 0.8, (3, 4))
    for op in HOLOMORPHIC:
        ge = ember.tensor(x, requires_grad=True)
        gt = torch.tensor(x, requires_grad=True)
        getattr(ember, op)(ge).sum().backward()
        getattr(torch, op)(gt).sum().backward()
        np.testing.assert_allclose(ge.grad.numpy(), gt.grad.numpy(), rtol=1e-12, err_msg=op)


@pytest.mark.parametrize("op", HOLOMORPHIC + ["sgn"])
def test_gradcheck_through_the_real_view(op):
    scale = 0.6 if op in ("asin", "acos") else 1.0
    a = ember.tensor(np.random.default_rng(3).standard_normal((3, 2, 2)) * scale,
                     requires_grad=True)

    def f(x):
        return ember.view_as_real(getattr(ember, op)(ember.view_as_complex(x)))
    assert ember.autograd.gradcheck(f, (a,), atol=1e-6, rtol=1e-5)


def test_double_backward_of_a_complex_op(torch):
    res = []
    for m in (ember, torch):
        x = m.tensor(Z, requires_grad=True)
        y = (x.sin() * m.tensor(W)).real.sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (g.abs() ** 2).sum().backward()
        res.append(x.grad.numpy() if m is ember else x.grad.resolve_conj().numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10)


# ---- what torch refuses -----------------------------------------------------------------------

def test_refusals_match_torch(torch):
    z = ember.tensor([1 + 1j, -2j])
    with pytest.raises(NotImplementedError, match="torch.sign is not intended to support complex"):
        z.sign()
    with pytest.raises(NotImplementedError, match="torch.sign is not intended"):
        z.clone().sign_()
    for name in ("isposinf", "isneginf"):
        with pytest.raises(RuntimeError, match=f"{name} does not support complex inputs"):
            getattr(ember, name)(z)
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        z.clamp(0, 1)
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        ember.clamp(z, min=ember.tensor(0.0))
    # no complex gradient for nan_to_num, as torch ("does not support automatic
    # differentiation for outputs with complex dtype")
    with pytest.raises(NotImplementedError, match="nan_to_num: autograd through complex"):
        ember.tensor([1j], requires_grad=True).nan_to_num()
    # ops without a complex kernel keep naming the op and the dtype
    with pytest.raises(TypeError, match="erf: not implemented for dtype complex64"):
        z.erf()


def test_forward_ad_refuses_complex_tangents_of_unchecked_ops():
    import ember.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        z = fwAD.make_dual(ember.tensor([1 + 1j, -2j]), ember.ones(2, dtype=ember.complex64))
        with pytest.raises(NotImplementedError, match="complex tensors in op sgn"):
            z.sgn()  # its tangent formula is not checked for complex tensors
        x = fwAD.make_dual(ember.tensor([0.5, 0.25], dtype=ember.float64),
                           ember.ones(2, dtype=ember.float64))
        t = fwAD.unpack_dual((x * 1j).sin()).tangent  # mul and sin are checked
        np.testing.assert_allclose(np.array(t.tolist()), 1j * np.cosh([0.5, 0.25]))
        # real duals through the new kernels' real paths keep their tangents
        t = fwAD.unpack_dual(x.asinh()).tangent
        np.testing.assert_allclose(t.numpy(), 1 / np.sqrt(np.array([0.5, 0.25]) ** 2 + 1))
