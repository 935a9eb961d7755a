"""Forward-mode AD through complex tensors (dual numbers of complex dtype), against
``torch.func.jvp``: the holomorphic ops give ``t * f'(z)``, abs / angle / real / imag their real
rates of change, conj the conjugate tangent."""

import ember
import ember.autograd.forward_ad as fwAD
import numpy as np
import pytest

torch = pytest.importorskip("torch")

_Z = np.array([1.0 + 2.0j, -0.5 + 0.25j, 3.0 - 1.0j, -2.0 - 0.75j])
_T = np.array([0.5 - 1.0j, 1.0 + 0.0j, -0.25 + 2.0j, 0.0 + 1.0j])
_W = np.array([0.3 + 0.1j, -1.2 + 0.4j, 0.7 - 0.9j, 2.0 + 0.5j])


def _e(a):
    return ember.tensor(a.tolist(), dtype=ember.complex128 if np.iscomplexobj(a) else ember.float64)


def _t(a):
    return torch.tensor(a, dtype=torch.complex128 if np.iscomplexobj(a) else torch.float64)


def _np(x) -> np.ndarray:
    return np.array(x.tolist())


def _ember_jvp(fn, primals, tangents):
    with fwAD.dual_level():
        duals = [fwAD.make_dual(_e(p), _e(t)) for p, t in zip(primals, tangents)]
        out = fn(ember, *duals)
        p, t = fwAD.unpack_dual(out)
        return _np(p), None if t is None else _np(t)


def _torch_jvp(fn, primals, tangents):
    p, t = torch.func.jvp(lambda *xs: fn(torch, *xs), tuple(_t(p) for p in primals),
                          tuple(_t(t) for t in tangents))
    return p.resolve_conj().numpy(), t.resolve_conj().numpy()


UNARY = {
    "exp": lambda lib, x: lib.exp(x),
    "exp2": lambda lib, x: lib.exp2(x),
    "expm1": lambda lib, x: lib.expm1(x),
    "log2": lambda lib, x: lib.log2(x),
    "log10": lambda lib, x: lib.log10(x),
    "log1p": lambda lib, x: lib.log1p(x),
    "rsqrt": lambda lib, x: lib.rsqrt(x),
    "tan": lambda lib, x: lib.tan(x),
    "asin": lambda lib, x: lib.asin(x),
    "acos": lambda lib, x: lib.acos(x),
    "atan": lambda lib, x: lib.atan(x),
    "sinh": lambda lib, x: lib.sinh(x),
    "cosh": lambda lib, x: lib.cosh(x),
    "asinh": lambda lib, x: lib.asinh(x),
    "acosh": lambda lib, x: lib.acosh(x),
    "atanh": lambda lib, x: lib.atanh(x),
    "advanced_index": lambda lib, x: x[[0, 2, 2]] * 1j,
    "where": lambda lib, x: lib.where(x.real > 0, x, x * 2),
    "log": lambda lib, x: lib.log(x),
    "sin": lambda lib, x: lib.sin(x),
    "cos": lambda lib, x: lib.cos(x),
    "tanh": lambda lib, x: lib.tanh(x),
    "sqrt": lambda lib, x: lib.sqrt(x),
    "reciprocal": lambda lib, x: lib.reciprocal(x),
    "square": lambda lib, x: lib.square(x),
    "sigmoid": lambda lib, x: lib.sigmoid(x),
    "neg": lambda lib, x: -x,
    "pow_scalar": lambda lib, x: x ** 3,
    "pow_complex_scalar": lambda lib, x: x ** (0.5 + 1j),
    "mul_self": lambda lib, x: x * x,
    "mul_const": lambda lib, x: x * (2.0 - 3.0j),
    "div_const": lambda lib, x: x / (1.0 + 1.0j),
    "rdiv": lambda lib, x: 1 / x,
    "add_alpha": lambda lib, x: lib.add(x, x, alpha=2.0),
    "sub_const": lambda lib, x: x - (1 + 2j),
    "abs": lambda lib, x: lib.abs(x),
    "angle": lambda lib, x: lib.angle(x),
    "real": lambda lib, x: lib.real(x),
    "imag": lambda lib, x: lib.imag(x),
    "conj": lambda lib, x: lib.conj(x),
    "conj_physical": lambda lib, x: lib.conj_physical(x),
    "sum": lambda lib, x: x.sum(),
    "mean": lambda lib, x: x.mean(),
    "view_as_real": lambda lib, x: lib.view_as_real(x),
    "abs_squared_chain": lambda lib, x: (x * x.conj()).real.sum(),
    "exp_abs": lambda lib, x: lib.exp(x).abs() * lib.angle(x),
    "reshape_index": lambda lib, x: x.reshape(2, 2)[1] * 2,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch_jvp(name):
    fn = UNARY[name]
    p_e, t_e = _ember_jvp(fn, [_Z], [_T])
    p_t, t_t = _torch_jvp(fn, [_Z], [_T])
    np.testing.assert_allclose(p_e, p_t, rtol=1e-12, atol=1e-12)
    assert t_e is not None
    assert t_e.shape == t_t.shape
    np.testing.assert_allclose(t_e, t_t, rtol=1e-10, atol=1e-12)


BINARY = {
    "mul": lambda lib, x, y: x * y,
    "div": lambda lib, x, y: x / y,
    "add": lambda lib, x, y: x + y,
    "sub": lambda lib, x, y: lib.sub(x, y, alpha=0.5),
    "pow": lambda lib, x, y: x ** y,
    "matmul": lambda lib, x, y: x.reshape(2, 2) @ y.reshape(2, 2),
    "mm": lambda lib, x, y: lib.mm(x.reshape(2, 2), y.reshape(2, 2)),
    "bmm": lambda lib, x, y: lib.bmm(x.reshape(1, 2, 2), y.reshape(1, 2, 2)),
    "mv": lambda lib, x, y: lib.mv(x.reshape(2, 2), y[:2]),
    "dot": lambda lib, x, y: lib.dot(x, y),
    "vdot": lambda lib, x, y: lib.vdot(x, y),
    "matmul_vec": lambda lib, x, y: x.reshape(2, 2) @ y[2:],
    "addcmul": lambda lib, x, y: lib.addcmul(x, x, y, value=0.5 - 1j),
    "addcdiv": lambda lib, x, y: lib.addcdiv(y, x, y, value=2.0),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_torch_jvp(name):
    fn = BINARY[name]
    tangents = [_T, _T[::-1].copy()]
    p_e, t_e = _ember_jvp(fn, [_Z, _W], tangents)
    p_t, t_t = _torch_jvp(fn, [_Z, _W], tangents)
    np.testing.assert_allclose(p_e, p_t, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t_e, t_t, rtol=1e-10, atol=1e-12)


def test_real_primal_complex_result_and_complex_constructor():
    x, tx = np.array([1.0, -2.0, 0.5]), np.array([0.25, 1.0, -1.0])
    for fn in (lambda lib, a: a * (1 + 2j), lambda lib, a: lib.complex(a, a * 2),
               lambda lib, a: lib.view_as_complex(lib.stack([a, -a], -1))):
        p_e, t_e = _ember_jvp(fn, [x], [tx])
        p_t, t_t = _torch_jvp(fn, [x], [tx])
        np.testing.assert_allclose(p_e, p_t)
        np.testing.assert_allclose(t_e, t_t, rtol=1e-12)


def test_complex64_and_no_tangent_input():
    with fwAD.dual_level():
        z = fwAD.make_dual(ember.tensor([1 + 1j], dtype=ember.complex64),
                           ember.tensor([1j], dtype=ember.complex64))
        t = fwAD.unpack_dual(z * ember.tensor([2 + 0j], dtype=ember.complex64)).tangent
        assert t.dtype is ember.complex64 and t.tolist() == [2j]
        plain = ember.tensor([1 + 1j])
        assert fwAD.unpack_dual(plain.exp()).tangent is None


def test_unchecked_complex_op_refuses_naming_it():
    with fwAD.dual_level():
        z = fwAD.make_dual(_e(_Z), _e(_T))
        with pytest.raises(NotImplementedError, match="prod"):
            z.prod()
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            ember.sgn(z)


def test_make_dual_checks():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="dtype"):
            fwAD.make_dual(_e(_Z), _e(_T.real))
        with pytest.raises(ValueError, match="floating point or complex"):
            fwAD.make_dual(ember.tensor([1, 2]), ember.tensor([1, 2]))


def test_reverse_over_forward_complex():
    z = _e(_Z).requires_grad_(True)
    with fwAD.dual_level():
        d = fwAD.make_dual(z, _e(_T))
        t = fwAD.unpack_dual((d * d).abs().sum()).tangent
    t.backward()
    zt = _t(_Z).requires_grad_(True)

    def f(a):
        return (a * a).abs().sum()

    _, tt = torch.func.jvp(f, (zt,), (_t(_T),))
    tt.backward()
    assert t.item() == pytest.approx(tt.item())
    np.testing.assert_allclose(_np(z.grad), zt.grad.numpy(), rtol=1e-10)


def test_setitem_into_complex_takes_the_value_tangent():
    def fn(lib, x):
        out = lib.zeros(4, dtype=x.dtype)
        out[1:3] = x[:2] * 2
        return out

    p_e, t_e = _ember_jvp(fn, [_Z], [_T])
    p_t, t_t = _torch_jvp(fn, [_Z], [_T])
    np.testing.assert_allclose(p_e, p_t)
    np.testing.assert_allclose(t_e, t_t)


def test_func_jvp_with_complex_primals_matches_torch():
    def f(lib, a, b):
        return (a * b).exp().abs() + lib.angle(a), a.conj() @ b

    prim = (_Z, _W)
    tans = (_T, _T[::-1].copy())
    out_e, jv_e = ember.func.jvp(lambda a, b: f(ember, a, b), tuple(_e(p) for p in prim),
                                 tuple(_e(t) for t in tans))
    out_t, jv_t = torch.func.jvp(lambda a, b: f(torch, a, b), tuple(_t(p) for p in prim),
                                 tuple(_t(t) for t in tans))
    for a, b in zip((*out_e, *jv_e), (*out_t, *jv_t)):
        np.testing.assert_allclose(_np(a), b.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)
    assert not jv_e[0].requires_grad
    # has_aux, and a real function of complex primals.
    _, jv, aux = ember.func.jvp(lambda a: (a.abs().sum(), "aux"), (_e(_Z),), (_e(_T),),
                                has_aux=True)
    _, ref = torch.func.jvp(lambda a: a.abs().sum(), (_t(_Z),), (_t(_T),))
    assert aux == "aux" and jv.item() == pytest.approx(ref.item())
