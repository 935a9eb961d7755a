"""Regression tests for what the signature-driven differential fuzzer (tests/fuzz_api.py) found
on the hand-written Python surface, each compared with PyTorch where it runs."""

from __future__ import annotations

import math
import warnings

import ember
import ember.nn.functional as F
import pytest
from ember import Tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NAN, INF = float("nan"), float("inf")


def _same(e: ember.Tensor, t, atol: float = 1e-6) -> None:
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    ev, tv = e.detach().flatten().tolist(), t.detach().flatten().tolist()
    for a, b in zip(ev, tv):
        for x, y in ((a.real, b.real), (a.imag, b.imag)) if isinstance(a, complex) else ((a, b),):
            assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=atol)


# ---- gammainc / gammaincc / igamma / igammac ----------------------------------------------------
A = [-1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 2.0, INF, 1.0, NAN, -0.0, INF, 0.5, 3.0]
X = [1.0, 0.0, 1.0, -1.0, -1.0, 0.0, INF, 1.0, INF, 1.0, 1.0, INF, 2.0, 0.5]


@pytest.mark.parametrize("name", ["gammainc", "gammaincc"])
def test_gammainc_domain_edges_match_torch(name):
    # was: 0 / 1 for negative arguments and NaN for an infinite a, where torch gives NaN / 0 / 1
    e = getattr(ember.special, name)(ember.tensor(A, dtype=ember.float64),
                                     ember.tensor(X, dtype=ember.float64))
    t = getattr(torch.special, name)(torch.tensor(A, dtype=torch.float64),
                                     torch.tensor(X, dtype=torch.float64))
    _same(e, t)


@pytest.mark.parametrize("da, dx", [("bfloat16", "int64"), ("float32", "float16"),
                                    ("int32", "float32"), ("int64", "int64")])
def test_igamma_promotes_like_torch(da, dx):
    # was: the dtype of the second operand (bfloat16 with int64 gave float32)
    a_e = ember.tensor([0.5, 2.0, 3.0]).to(getattr(ember, da))
    a_t = torch.tensor([0.5, 2.0, 3.0]).to(getattr(torch, da))
    x_e = ember.tensor(1.5).to(getattr(ember, dx))
    x_t = torch.tensor(1.5).to(getattr(torch, dx))
    for fe, ft in ((ember.igamma, torch.igamma), (ember.igammac, torch.igammac)):
        if da == dx == "int64":
            with pytest.raises((RuntimeError, NotImplementedError)):
                ft(a_t, x_t)  # torch refuses integers; ember computes in the default float
            assert fe(a_e, x_e).dtype == ember.float32
            continue
        _same(fe(a_e, x_e), ft(a_t, x_t), atol=1e-2)


def test_gammainc_grad_with_constant_a():
    # was: NotImplementedError (derivative in a) although only x required grad
    xe = ember.tensor([1.0, 2.0], requires_grad=True)
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    ember.special.gammaincc(ember.tensor([1.0, 1.5]), xe).sum().backward()
    torch.special.gammaincc(torch.tensor([1.0, 1.5]), xt).sum().backward()
    _same(xe.grad, xt.grad, atol=1e-5)


# ---- promotion of the hand-written pointwise ops ------------------------------------------------
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2", "ldexp"])
@pytest.mark.parametrize("da, db", [("uint8", "float16"), ("bfloat16", "uint8"),
                                    ("float32", "float64"), ("int32", "bfloat16")])
def test_binary_float_ops_promote_like_torch(name, da, db):
    # was: float32 for an integer tensor with a float16 / bfloat16 one
    a = [1.0, 2.0, 0.0]
    b = [0.5, 3.0, 1.0]
    e = getattr(ember, name)(ember.tensor(a).to(getattr(ember, da)),
                             ember.tensor(b).to(getattr(ember, db)))
    t = getattr(torch, name)(torch.tensor(a).to(getattr(torch, da)),
                             torch.tensor(b).to(getattr(torch, db)))
    _same(e, t, atol=2e-2)


def test_ldexp_refuses_a_non_tensor_exponent():
    with pytest.raises(TypeError, match="ldexp"):
        ember.tensor([1.0]).ldexp_([2])


@pytest.mark.parametrize("base, exp", [
    ([1 + 2j, 0.5j], True), ([1.0, 2.0], 1 + 1j), ([3.0, -2.0], 2), (2, [1 + 2j, 0.5j]),
    (2.5, [1, 3])])
def test_float_power_keeps_complex(base, exp):
    # was: complex inputs cast to float64 (the imaginary part silently dropped)
    def mk(mod, v):
        return mod.tensor(v) if isinstance(v, list) else v
    _same(ember.float_power(mk(ember, base), mk(ember, exp)),
          torch.float_power(mk(torch, base), mk(torch, exp)), atol=1e-12)


# ---- shapes -------------------------------------------------------------------------------------
def test_unique_consecutive_of_empty_is_flat():
    # was: the input's shape (2, 0, 3) instead of the flattened (0,)
    e = ember.unique_consecutive(ember.zeros(2, 0, 3, dtype=ember.int16), return_inverse=True,
                                 return_counts=True)
    t = torch.unique_consecutive(torch.zeros(2, 0, 3, dtype=torch.int16), return_inverse=True,
                                 return_counts=True)
    for a, b in zip(e, t):
        _same(a, b)


# ---- fftfreq / rfftfreq -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n, d", [(2, 0.0), (3, -0.0), (0, 1.0), (5, 0.3), (6, -2.0), (7, 0.1)])
def test_fftfreq_matches_torch(name, n, d):
    # was: ZeroDivisionError for d == 0 (torch: inf / nan)
    _same(getattr(ember.fft, name)(n, d), getattr(torch.fft, name)(n, d))


def test_fftfreq_huge_n_fails_fast():
    # was: a Python loop over 2**40 values (a hang)
    with pytest.raises(RuntimeError):
        ember.fft.fftfreq(2**40)


def test_fftfreq_bad_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="fftfreq"):
        ember.fft.fftfreq(2, dtype="abc")


# ---- nn.functional ------------------------------------------------------------------------------
def test_softsign_promotes_integers():
    # was: TypeError for integer inputs (torch promotes to the default float dtype)
    x = [0, 3, -2]
    _same(F.softsign(ember.tensor(x, dtype=ember.int16)),
          TF.softsign(torch.tensor(x, dtype=torch.int16)))


@pytest.mark.parametrize("call", [
    lambda m: m.nn.functional.hardswish([1, 2], inplace=True),
    lambda m: m.nn.functional.relu6(True, True),
    lambda m: m.nn.functional.celu_(True, 1.0),
    lambda m: m.nn.functional.elu(m.float32, 0.5, inplace=True),
    lambda m: m.nn.functional.selu_("abc"),
    lambda m: m.nn.functional.prelu(m.tensor([-1.0, 2.0]), [3, 4]),
    lambda m: m.zeros(2).type_as(True),
    lambda m: m.put(m.zeros(3), (1,), m.ones(1)),
])
def test_non_tensor_arguments_are_type_errors(call):
    # was: AttributeError ('list' object has no attribute 'hardswish_', ...)
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="must be a Tensor"):
        call(ember)


@pytest.mark.parametrize("call", [
    lambda m: m.nn.functional.glu((1,), 2),
    lambda m: m.nn.functional.pdist([1, 2]),
    lambda m: m.nn.functional.group_norm([1.0], 1),
    lambda m: m.nn.functional.normalize([1.0, 2.0]),
    lambda m: m.nn.functional.scaled_dot_product_attention(True, m.ones(1, 2, 4), m.ones(1, 2, 4)),
])
def test_non_tensor_arguments_are_type_errors_ember_only(call):
    # torch fails these with an AttributeError of its own; ember names the argument
    with pytest.raises(TypeError, match="must be (a )?Tensor"):
        call(ember)


def test_inplace_activation_still_inplace():
    x = ember.tensor([-1.0, 2.0])
    assert F.hardswish(x, inplace=True) is x
    assert F.relu(x, inplace=True) is x


@pytest.mark.parametrize("da, db", [("int32", "float64"), ("int32", "float16"),
                                    ("bfloat16", "int64"), ("float32", "float32")])
def test_copysign_promotes_like_torch(da, db):
    # was: an integer input always went to the default float dtype (float32 with float64 signs)
    a, b = [4.0, -2.0, 0.0], [-1.0, 2.0, -0.0]
    _same(ember.copysign(ember.tensor(a).to(getattr(ember, da)), ember.tensor(b).to(getattr(ember, db))),
          torch.copysign(torch.tensor(a).to(getattr(torch, da)), torch.tensor(b).to(getattr(torch, db))))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_loss_mean_is_the_weighted_mean(name, reduction):
    # was: mean(weight * loss) where torch takes sum(weight * loss) / sum(weight)
    x, y, w = [1.0, 2.0, -1.5], [0.0, 0.5, 1.0], [2.0, 3.0, 0.5]
    _same(getattr(F, name)(ember.tensor(x), ember.tensor(y), reduction=reduction,
                           weight=ember.tensor(w)),
          getattr(TF, name)(torch.tensor(x), torch.tensor(y), reduction=reduction,
                            weight=torch.tensor(w)))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_weighted_loss_weight_shape_must_match(name):
    with pytest.raises(ValueError):
        getattr(TF, name)(torch.ones(2), torch.ones(2), weight=torch.tensor(2.0))
    with pytest.raises(ValueError, match="weight"):
        getattr(F, name)(ember.ones(2), ember.ones(2), weight=ember.tensor(2.0))


# ---- complex inputs no longer silently lose their imaginary part --------------------------------
REAL_ONLY = ["logit", "erf", "erfc", "erfcx", "erfinv", "gammaln", "digamma", "psi", "entr",
             "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e"]


@pytest.mark.parametrize("name", REAL_ONLY)
def test_real_only_special_functions_refuse_complex(name):
    # was: the input cast to float32 (imaginary part dropped, a wrong real result)
    with pytest.raises(NotImplementedError):
        getattr(torch.special, name)(torch.tensor([0.3 + 0.2j, 0.5]))
    with pytest.raises(NotImplementedError, match=name if name != "psi" else "digamma"):
        getattr(ember.special, name)(ember.tensor([0.3 + 0.2j, 0.5]))


@pytest.mark.parametrize("call", [
    lambda m: m.special.xlogy(m.tensor([2 + 1j, 3]), m.tensor([1.0, 2.0])),
    lambda m: m.special.xlog1py(m.tensor([2 + 1j, 3]), m.tensor([1.0, 2.0])),
    lambda m: m.special.zeta(m.tensor([2 + 1j, 3]), m.tensor([1.0, 1.0])),
    lambda m: m.special.polygamma(1, m.tensor([2 + 1j, 3])),
    lambda m: m.special.multigammaln(m.tensor([2 + 1j, 3]), 2),
    lambda m: m.tensor([1 + 1j, 2.0]).polygamma(0),
    lambda m: m.lgamma(m.tensor([1 + 1j, 2.0])),
])
def test_more_special_functions_refuse_complex(call):
    with pytest.raises(NotImplementedError):
        call(torch)
    with pytest.raises(NotImplementedError, match="complex"):
        call(ember)


@pytest.mark.parametrize("name", ["sinc", "exp2", "expm1", "log1p"])
def test_complex_capable_special_functions_stay_complex(name):
    x = [0.3 + 0.2j, 0.5, 0j]
    _same(getattr(ember.special, name)(ember.tensor(x)), getattr(torch.special, name)(torch.tensor(x)))


@pytest.mark.parametrize("name", ["deg2rad", "rad2deg"])
def test_deg2rad_refuses_complex(name):
    with pytest.raises(RuntimeError):
        getattr(torch.tensor([2 + 1j, 3]), name)()
    with pytest.raises(RuntimeError, match=name):
        getattr(ember.tensor([2 + 1j, 3]), name)()


# ---- missing errors -----------------------------------------------------------------------------
def test_renorm_checks_dim():
    # was: dim taken modulo ndim (2**32 accepted as dim 0)
    with pytest.raises(IndexError):
        torch.ones(2, 3).renorm(1, 2**32, 5)
    with pytest.raises(IndexError, match="renorm"):
        ember.ones(2, 3).renorm(1, 2**32, 5)
    with pytest.raises(IndexError, match="renorm"):
        ember.ones(2, 3).renorm_(1, -3, 5)
    _same(ember.renorm(ember.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, -2, 1.0),
          torch.renorm(torch.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, -2, 1.0))


@pytest.mark.parametrize("call", [
    lambda m: m.tensor([True, False]).polygamma_(3),
    lambda m: m.tensor([1.5, 2.0], dtype=m.bfloat16).float_power_(2),
    lambda m: m.tensor([1.5, 2.0], dtype=m.float64).float_power_(1j),
    lambda m: m.tensor([1, 2]).deg2rad_(),
    lambda m: m.tensor([1, 2]).sinc_(),
])
def test_inplace_result_that_does_not_cast_is_refused(call):
    # was: the float result written into a bool / bfloat16 tensor
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError, match="dtype|output type"):
        call(ember)


def test_inplace_results_that_cast_still_work():
    for m in (ember, torch):
        x = m.tensor([1.5, 2.0], dtype=m.float64)
        assert x.float_power_(2) is x and x.tolist() == [2.25, 4.0]
        y = m.tensor([1.0, 2.0], dtype=m.float16)
        assert y.hypot_(m.tensor([1.0, 2.0])) is y and y.dtype == m.float16


@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((0, 3), 1), ((2, 0), -1), ((), 0),
                                        ((3, 2), -2)])
def test_logcumsumexp_shapes_match_torch(shape, dim):
    # was: an IndexError naming amax for a zero-size dim
    n = math.prod(shape)
    e = ember.arange(n, dtype=ember.float32).reshape(shape) * 0.5
    t = torch.arange(n, dtype=torch.float32).reshape(shape) * 0.5
    _same(ember.logcumsumexp(e, dim), torch.logcumsumexp(t, dim))


def test_logcumsumexp_bad_dims_and_complex():
    with pytest.raises(IndexError, match="logcumsumexp"):
        ember.logcumsumexp(ember.zeros(0, 3), -3)
    with pytest.raises(TypeError, match="logcumsumexp"):
        ember.logcumsumexp(ember.zeros(2), object())
    # was: the imaginary part dropped; then refused; now computed as torch (the CPU kernel)
    got = ember.logcumsumexp(ember.tensor([1 + 1j, 2.0]), 0)
    want = torch.logcumsumexp(torch.tensor([1 + 1j, 2.0]), 0)
    assert got.dtype == ember.complex64
    assert torch.allclose(torch.tensor(got.tolist()), want, rtol=1e-6)


def test_ldexp_of_complex_keeps_the_imaginary_part():
    x = [1 + 1j, 2.0]
    _same(ember.ldexp(ember.tensor(x), ember.tensor([1, 2])),
          torch.ldexp(torch.tensor(x), torch.tensor([1, 2])))


# ---- the compat ops' float promotion kept complex inputs' imaginary part ------------------------
Z2 = [[1 + 1j, 2.0, 3.0], [0.5, 1j, 2.0], [3.0, 1.0, 2j]]


@pytest.mark.parametrize("call", [
    lambda m: m.sinc(m.tensor([0.3 + 0.2j, 0.5, 0j])),
    lambda m: m.cov(m.tensor(Z2)),
    lambda m: m.cov(m.tensor(Z2[:2]), fweights=m.tensor([1, 2, 1]),
                    aweights=m.tensor([0.5, 1.0, 2.0])),
    lambda m: m.cov(m.tensor(Z2[0])),
    lambda m: m.corrcoef(m.tensor(Z2, dtype=m.complex128)),
    lambda m: m.trapezoid(m.tensor([1 + 1j, 2.0, 3.0])),
    lambda m: m.trapezoid(m.tensor([1 + 1j, 2.0, 3.0]), m.tensor([0.0, 1.0, 3.0])),
])
def test_complex_inputs_keep_their_imaginary_part(call):
    # was: the input cast to float32 first (a real, wrong result)
    _same(call(ember), call(torch), atol=1e-5)


def test_copysign_refuses_complex():
    with pytest.raises(NotImplementedError):
        torch.copysign(torch.tensor([1 + 1j]), -1.0)
    with pytest.raises(NotImplementedError, match="copysign"):
        ember.copysign(ember.tensor([1 + 1j]), -1.0)


# ---- vdot / vecdot conjugate their first argument -----------------------------------------------
@pytest.mark.parametrize("call", [
    lambda m: m.vdot(m.tensor([1 + 2j, 3j]), m.tensor([2 + 1j, 1 + 0j])),
    lambda m: m.tensor([1 + 2j, 3j], dtype=m.complex128).vdot(
        m.tensor([2 + 1j, 1 + 0j], dtype=m.complex128)),
    lambda m: m.vdot(m.tensor([1.0, 2.0]), m.tensor([2.0, 1.0])),
    lambda m: m.linalg.vecdot(m.tensor([[1 + 2j, 3j], [1j, 1]]), m.tensor([2 + 1j, 1 + 0j])),
    lambda m: m.linalg.vecdot(m.tensor([[1.0, 2.0]]), m.tensor([2.0, 1.0]), dim=-1),
])
def test_vdot_and_vecdot_conjugate_the_first_argument(call):
    # was: a plain dot product (no conjugation) for complex inputs
    _same(call(ember), call(torch))


def test_vdot_out():
    out = ember.zeros((), dtype=ember.complex64)
    r = ember.vdot(ember.tensor([1 + 2j, 3j]), ember.tensor([2 + 1j, 1 + 0j]), out=out)
    assert r.item() == out.item() == 4 - 6j


@pytest.mark.parametrize("name", ["fmax", "fmin"])
@pytest.mark.parametrize("dt", ["float16", "int16", "float32"])
def test_fmax_fmin_match_torch(name, dt):
    a, b = [-0.75, float("nan"), 3.0, 0.36], [2.5, -0.5, float("nan"), -2.0]
    if dt == "int16":
        a, b = [-1, 4, 3, 0], [2, -5, 7, 0]
    _same(getattr(ember, name)(ember.tensor(a).to(getattr(ember, dt)),
                               ember.tensor(b).to(getattr(ember, dt))),
          getattr(torch, name)(torch.tensor(a).to(getattr(torch, dt)),
                               torch.tensor(b).to(getattr(torch, dt))))


# ---- log_ndtr / xlogy / xlog1py -----------------------------------------------------------------
def test_log_ndtr_nan_and_dtype():
    # was: log(1/2) for NaN, and a float64 result for a bool input
    x = [NAN, INF, -INF, 0.0, -0.0, -7.0, -0.5]
    _same(ember.special.log_ndtr(ember.tensor(x, dtype=ember.float64)),
          torch.special.log_ndtr(torch.tensor(x, dtype=torch.float64)))
    _same(ember.special.log_ndtr(ember.tensor(True)), torch.special.log_ndtr(torch.tensor(True)))


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
@pytest.mark.parametrize("call", [
    lambda m, f: f(m.tensor([0.5, 1.0, 0.0], dtype=m.bfloat16), m.tensor(2, dtype=m.int32)),
    lambda m, f: f(m.tensor([0.5, 1.0, 0.0], dtype=m.float16), m.tensor(1.5, dtype=m.bfloat16)),
    lambda m, f: f(m.tensor([2, 3]), 2.5),
    lambda m, f: f(2.5, m.tensor([2, 3])),
    lambda m, f: f(m.tensor([2.0, 3.0], dtype=m.bfloat16), 2.5),
    lambda m, f: f(m.tensor([0.0, 3.0]), m.tensor([2.0, NAN], dtype=m.float64)),
])
def test_xlogy_promotes_like_torch(name, call):
    # was: a float32 result for (bfloat16, 0-d int32) and a Python float truncated to an
    # integer tensor's dtype (xlogy(int tensor, 2.5) used log(2))
    _same(call(ember, getattr(ember.special, name)), call(torch, getattr(torch.special, name)),
          atol=1e-2)


def test_range_of_an_infinite_bound_is_a_runtime_error():
    # was: OverflowError / ValueError from int(inf) / int(nan)
    for end in (INF, NAN):
        with pytest.raises(RuntimeError):
            torch.range(2, end)
        with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="range"):
            ember.range(2, end)


@pytest.mark.parametrize("ratio", [INF, NAN, 0.0, -0.5, 1.5])
def test_fractional_max_pool_output_ratio_is_checked(ratio):
    # was: OverflowError (int of inf) for an infinite ratio
    with pytest.raises(ValueError, match="output_ratio"):
        F.fractional_max_pool2d(ember.ones(1, 1, 4, 4), 1, output_ratio=ratio)


# ---- non-tensor arguments of the Python-level functions (ember._argcheck) -----------------------
@pytest.mark.parametrize("call", [
    lambda m: m.nn.functional.bilinear(m.ones(2, 3), 1.5, m.ones(4, 3, 3)),
    lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), (1, 2)),
    lambda m: m.nn.functional.embedding(m.float32, m.ones(3, 2)),
    lambda m: m.diag((1, 2)),
    lambda m: m.trace([[1, 2]]),
    lambda m: m.cov(None),
    lambda m: m.unique_consecutive("abc"),
    lambda m: m.linalg.matrix_power([[1.0]], 2),
    lambda m: m.linalg.vector_norm(1.5),
])
def test_non_tensor_arguments_name_the_argument(call):
    # was: AttributeError ('tuple' object has no attribute 'ndim', ...)
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="must be (a )?Tensor"):
        call(ember)


def test_guard_keeps_signature_doc_and_speed_path():
    import inspect

    from ember import _argcheck

    f = F.normalize
    assert "input" in inspect.signature(f).parameters and "eps" in f.__doc__
    with pytest.raises(TypeError, match="normalize\\(\\): argument 'input' must be Tensor, not list"):
        F.normalize([1.0, 2.0])
    # an AttributeError that is not about a non-tensor argument propagates unchanged

    def broken(input: Tensor) -> Tensor:
        return input.no_such_attribute

    g = _argcheck.guard(broken)
    with pytest.raises(AttributeError):
        g(ember.ones(1))
    with pytest.raises(TypeError, match="broken\\(\\): argument 'input'"):
        g(3)


def test_adjoint_conjugates_complex():
    # was: only the transpose (no conjugation) for complex inputs
    z = [[1 + 2j, 3.0], [1j, 2.0]]
    _same(ember.adjoint(ember.tensor(z)), torch.adjoint(torch.tensor(z)))
    _same(ember.tensor(z).adjoint(), torch.tensor(z).adjoint())
    x = ember.tensor([[1.0, 3.0], [1.0, 2.0]])
    assert x.adjoint()._base is x  # still a view for real dtypes


def test_unravel_index_of_narrow_integer_indices():
    # was: int16 indices + the total size wrapped around (16957 for -3 in a million)
    e = ember.unravel_index(ember.tensor([1, -3], dtype=ember.int16), 1000000)
    t = torch.unravel_index(torch.tensor([1, -3], dtype=torch.int16), 1000000)
    for a, b in zip(e, t):
        _same(a, b)


@pytest.mark.parametrize("call", [
    lambda m: m.polygamma(3, m.tensor([9.0]), out=m.empty(0)),
    lambda m: m.polygamma(3, m.tensor([9.0]), out=m.empty(0, dtype=m.float64)),
    lambda m: m.igamma(m.tensor([1.0, 2.0]), m.tensor([2.0, 0.5]), out=m.empty(0)),
    lambda m: m.igammac(m.tensor([1.0, 2.0]), m.tensor([2.0, 0.5]), out=m.empty(0)),
])
def test_out_is_resized_like_torch(call):
    # was: an empty out= tensor stayed empty (copy_ into it without the resize)
    _same(call(ember), call(torch), atol=1e-6)


def test_out_of_a_narrower_kind_is_refused():
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            m.polygamma(3, m.tensor([9.0]), out=m.empty(0, dtype=m.int64))


def test_digamma_at_signed_zeros():
    # was: -inf at -0.0 (torch: the infinity on the zero's side)
    x = [0.0, -0.0, NAN, INF, -INF, -2.0, 2.0, 1e30]
    for name in ("digamma", "psi"):
        _same(getattr(ember.special, name)(ember.tensor(x, dtype=ember.float64)),
              getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64)))
    _same(ember.polygamma(0, ember.tensor(x)), torch.polygamma(0, torch.tensor(x)))


@pytest.mark.parametrize("call", [
    lambda m: m.tensor([1.0, 0.0]).heaviside_([-5]),
    lambda m: m.cdist(m.ones(2, 3), 1.5),
    lambda m: m.igammac(m.tensor([1.0]), m.tensor([2.0]), out=float("nan")),
])
def test_more_non_tensor_arguments(call):
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="must be Tensor"):
        call(ember)


@pytest.mark.parametrize("call", [
    lambda m: m.hann_window(3, False, dtype=[1]),
    lambda m: m.bartlett_window(3, dtype=object()),
    lambda m: m.nn.functional.affine_grid(None, [1, 1, 1], align_corners=False),
    lambda m: m.nn.functional.max_unpool3d("abc", m.zeros(1), [12]),
])
def test_non_tensor_arguments_of_windows_and_reexported_functions(call):
    # was: AttributeError ('list' object has no attribute 'is_floating_point', ...)
    with pytest.raises((TypeError, AttributeError)):
        call(torch)  # torch itself fails the last two with an AttributeError
    with pytest.raises(TypeError, match="must be"):
        call(ember)


@pytest.mark.parametrize("call", [
    lambda m: m.linalg.norm(m.ones(2, 3), dim=1, dtype=[1, 2]),
    lambda m: m.linalg.norm(m.ones(2, 3), dtype=True),
    lambda m: m.linalg.vector_norm(m.ones(2, 3), dtype=1.5),
    lambda m: m.linalg.matrix_norm(m.ones(2, 3), dtype="x"),
])
def test_norm_dtype_must_be_a_dtype(call):
    # was: AttributeError ('list' object has no attribute 'is_complex')
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="dtype"):
        call(ember)


# ---- nan/inf edge values left by the s11 fuzzing (s12) -------------------------------------------
EDGES = [NAN, INF, -INF, -4.0, -3.0, -0.5, 0.3, 0.5, 1.0, 3.0, 5.0]


@pytest.mark.parametrize("lambd", [0.5, 0.0, 2.0])
def test_hardshrink_keeps_nan(lambd):
    # was: hardshrink(nan) = 0 (|nan| > lambd is false); torch passes NaN through
    _same(F.hardshrink(ember.tensor(EDGES), lambd), TF.hardshrink(torch.tensor(EDGES), lambd))
    _same(ember.tensor(EDGES).hardshrink(lambd), torch.tensor(EDGES).hardshrink(lambd))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_hardswish_of_minus_inf_is_nan(dtype):
    # was: 0 for -inf (torch: -inf * 0 = NaN) and +0 below -3 (torch: -0); 40 values for the
    # vectorized float32 loop as well as its tail
    e = F.hardswish(ember.tensor(EDGES * 4, dtype=getattr(ember, dtype)))
    t = TF.hardswish(torch.tensor(EDGES * 4, dtype=getattr(torch, dtype)))
    _same(e, t)
    assert [math.copysign(1, v) for v in e.tolist() if v == 0] == \
        [math.copysign(1, v) for v in t.tolist() if v == 0]


@pytest.mark.parametrize("eps", [1.0, 0.6, 0.5, 0.2, 1.5, None])
def test_logit_with_crossed_eps_bounds(eps):
    # was: eps > 0.5 clamped everything to 1 - eps; torch takes eps below eps, 1 - eps otherwise
    p = [0.0, 0.3, 1.0, NAN, -1.0, 0.8, 0.5]
    _same(ember.logit(ember.tensor(p), eps=eps), torch.logit(torch.tensor(p), eps=eps))
    _same(ember.special.logit(ember.tensor(p), eps=eps),
          torch.special.logit(torch.tensor(p), eps=eps))


@pytest.mark.parametrize("call", [
    lambda m: m.histogramdd(m.ones(3, 2), bins=[2, 2], weight=[1.0, 2.0, 3.0]),
    lambda m: m.zeros(3).index_reduce_((1,), m.tensor([0]), m.tensor([1.0]), "prod"),
    lambda m: m.zeros(3).index_reduce_(True, m.tensor([0]), m.tensor([1.0]), "prod"),
    lambda m: m.zeros(3).index_reduce_(0, [0], m.tensor([1.0]), "prod"),
    lambda m: m.zeros(3).index_reduce_(0, m.tensor([0]), [1.0], "prod"),
    lambda m: m.zeros(3).index_reduce_(0, m.tensor([0]), m.tensor([1.0]), 3),
    lambda m: m.index_reduce([0.0], 0, m.tensor([0]), m.tensor([1.0]), "prod"),
])
def test_histogramdd_and_index_reduce_reject_non_tensors(call):
    # was: AttributeError ('list' object has no attribute 'shape' / 'dim') or a comparison error
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match="must be"):
        call(ember)


def test_index_reduce_takes_a_numpy_int_dim():
    np = pytest.importorskip("numpy")
    src = [[2.0, 3.0], [4.0, 5.0]]
    e = ember.ones(3, 2).index_reduce_(np.int64(0), ember.tensor([0, 0]), ember.tensor(src), "amax")
    t = torch.ones(3, 2).index_reduce_(np.int64(0), torch.tensor([0, 0]), torch.tensor(src), "amax")
    _same(e, t)


@pytest.mark.parametrize("lambd", [0.5, 0.0, 2.0])
def test_softshrink_keeps_nan_and_signed_zero(lambd):
    # was: softshrink(nan) = 0; torch passes NaN through (and gives -0 inside the band below 0)
    e, t = F.softshrink(ember.tensor(EDGES), lambd), TF.softshrink(torch.tensor(EDGES), lambd)
    _same(e, t)
    assert [math.copysign(1, v) for v in e.tolist() if v == 0] == \
        [math.copysign(1, v) for v in t.tolist() if v == 0]


@pytest.mark.parametrize("name, kwargs", [
    ("ifftn", {"s": 2, "dim": 0}), ("fftn", {"s": 2}), ("rfftn", {"s": 4, "dim": 0}),
    ("irfftn", {"s": 4}), ("hfftn", {"s": 4}), ("fft2", {"s": None, "dim": (0, 1)}),
])
def test_fftn_takes_one_int_size(name, kwargs):
    # was: TypeError 'int' object is not iterable for s=<int>; torch takes it as one size
    x = [[1.0, 2.0, -1.0], [0.5, 0.0, 3.0], [2.0, 1.0, 1.0], [-1.0, 0.25, 4.0]]
    _same(getattr(ember.fft, name)(ember.tensor(x), **kwargs),
          getattr(torch.fft, name)(torch.tensor(x), **kwargs), atol=1e-5)


# ---- C++ kernels: pow's tiny / huge float32 exponent, lerp's |weight|, from_numpy, empty views ---
POW_X = [0.0, -1.0, 2.0, NAN, INF, -INF, -0.0, 3.0, 0.5, -2.5]


@pytest.mark.parametrize("exponent", [1e-300, 1e-46, 1e-10, 1e300, -1e300, -1e-300, 2.0, 0.5])
def test_pow_float32_with_an_exponent_float32_cannot_hold(exponent):
    # was: 1e-300 rounded to 0 in float32 (every power 1) and 1e300 rejected as an overflow;
    # torch raises float32 to a Python float exponent in double
    e, t = ember.tensor(POW_X), torch.tensor(POW_X)
    _same(ember.pow(e, exponent), torch.pow(t, exponent))
    _same(e ** exponent, t ** exponent)
    _same(e.clone().pow_(exponent), t.clone().pow_(exponent))


LERP_V = [0.0, 1.0, -2.0, INF, -INF, NAN, 0.5, -0.5, 0.25]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_lerp_chooses_its_form_by_the_weights_magnitude(dtype):
    # was: the start-based form for every weight below 0.5, negative ones included (torch: |w| <
    # 0.5), so lerp(0, inf, -2) was -inf where torch gives NaN
    import itertools
    s, e, w = zip(*itertools.product(LERP_V, repeat=3))
    me, te = getattr(ember, dtype), getattr(torch, dtype)
    _same(ember.lerp(ember.tensor(s, dtype=me), ember.tensor(e, dtype=me), ember.tensor(w, dtype=me)),
          torch.lerp(torch.tensor(s, dtype=te), torch.tensor(e, dtype=te), torch.tensor(w, dtype=te)),
          atol=1e-2)
    for weight in (-2.0, -0.5, -0.25, 0.25, 0.5, 2.0, INF, -INF):
        _same(ember.lerp(ember.tensor(s, dtype=me), ember.tensor(e, dtype=me), weight),
              torch.lerp(torch.tensor(s, dtype=te), torch.tensor(e, dtype=te), weight), atol=1e-2)


@pytest.mark.parametrize("value", [lambda m: m.ones(2), lambda m: bytearray(b"ab"), lambda m: [1, 2]])
def test_from_numpy_takes_only_numpy_arrays(value):
    # was: a Tensor (any buffer) was shared, and a BufferError for a bfloat16 one
    with pytest.raises(TypeError, match="expected np.ndarray"):
        torch.from_numpy(value(torch))
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ember.from_numpy(value(ember))
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ember.from_numpy(ember.ones(2, dtype=ember.bfloat16))


def test_from_numpy_still_shares_arrays_and_subclasses():
    np = pytest.importorskip("numpy")
    a = np.arange(4.0)
    t = ember.from_numpy(a)
    a[0] = 7.0
    assert t.tolist() == [7.0, 1.0, 2.0, 3.0]
    assert ember.from_numpy(np.ma.masked_array([1.0, 2.0])).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("op", [
    lambda m, x: x.acos_(), lambda m, x: x.eq_(0.0), lambda m, x: x.cumsum_(2),
    lambda m, x: m.nn.functional.celu(x, inplace=True), lambda m, x: x.add_(1.0),
])
def test_inplace_on_an_empty_expanded_view(op):
    # was: "more than one element of the written-to tensor refers to a single memory location"
    # for a (2, 0, 3) view with stride 0: it has no element at all
    e = op(ember, ember.zeros(1, 0, 3).expand(2, 0, 3))
    t = op(torch, torch.zeros(1, 0, 3).expand(2, 0, 3))
    _same(e, t)
    with pytest.raises(RuntimeError, match="single memory location"):
        ember.zeros(1, 3).expand(2, 3).add_(1.0)


@pytest.mark.parametrize("out_dtype", ["float32", "float64", "int64"])
def test_chain_matmul_of_one_matrix_writes_out(out_dtype):
    # was: out= ignored for a single matrix (a float64 clone returned where torch fills out)
    a = [[1.5, 2.0], [3.0, 4.0]]
    eo = ember.empty(0, dtype=getattr(ember, out_dtype))
    to = torch.empty(0, dtype=getattr(torch, out_dtype))
    e = ember.chain_matmul(ember.tensor(a, dtype=ember.float64), out=eo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation warning
        t = torch.chain_matmul(torch.tensor(a, dtype=torch.float64), out=to)
    assert e is eo and t is to
    _same(e, t)


def test_combinations_too_large_or_empty_without_allocating():
    # was: MemoryError (itertools allocating r = 2**32 slots, or listing 4e10 tuples)
    with pytest.raises(RuntimeError, match="combinations: the result would hold"):
        ember.combinations(ember.arange(5), r=2**32, with_replacement=True)
    with pytest.raises(RuntimeError, match="too many"):
        ember.combinations(ember.arange(5), r=1000, with_replacement=True)
    assert tuple(ember.combinations(ember.arange(5), r=2**32).shape) == (0, 2**32)
    for r, w in ((7, False), (3, True), (2, False), (0, False)):
        _same(ember.combinations(ember.arange(5), r=r, with_replacement=w),
              torch.combinations(torch.arange(5), r=r, with_replacement=w))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_lerp_scalar_weight_must_fit_float32_arithmetic(dtype):
    # was: lerp(x, y, 1e308) on float32 gave -inf where torch reports the overflow
    me, te = getattr(ember, dtype), getattr(torch, dtype)
    for weight in (1e308, 1e5, INF, -INF, 0.25):
        try:
            t = torch.lerp(torch.ones(3, dtype=te), torch.zeros(3, dtype=te), weight)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="lerp: value .* cannot be converted"):
                ember.lerp(ember.ones(3, dtype=me), ember.zeros(3, dtype=me), weight)
            continue
        _same(ember.lerp(ember.ones(3, dtype=me), ember.zeros(3, dtype=me), weight), t)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_kl_div_negative_target_is_nan(dtype, reduction):
    # was: a negative target counted as 0 * log (finite); torch's xlogy(target, target) is NaN
    inp = [0.0, 1.0, -2.0, 0.5, -1.0, 0.0]
    tgt = [-2.0, -0.5, 0.0, 0.3, NAN, 2.0]
    me, te = getattr(ember, dtype), getattr(torch, dtype)
    _same(F.kl_div(ember.tensor(inp, dtype=me), ember.tensor(tgt, dtype=me), reduction=reduction),
          TF.kl_div(torch.tensor(inp, dtype=te), torch.tensor(tgt, dtype=te), reduction=reduction),
          atol=1e-3)
