"""Findings of the s24 fuzzing round (tools/fuzz_ops.py --torch with seed 1456,
packages/core/tests/fuzz_api.py --torch with seeds 1456-1461 over the gamma family, the norms,
lstsq, all / any, grid_sample and embedding, and hand-written probes of the storage API), each
fixed and pinned here with explicit values, and against PyTorch where it is installed.

In Python: the hand-written functions whose torch versions take out= take it too (ember.special's
erf / gammaln / digamma / polygamma / ..., ember.lgamma / digamma / hypot / logaddexp / ...,
ember.fft's transforms and frequency factories, linalg.cross / vecdot; a TypeError before), with
torch's rules (a castable dtype or the exact one, no autograd); polygamma / multigammaln refuse
an order beyond int64 (polygamma(2**64, x) was computed); linalg.norm refuses ord= without dim=
on a 3-D input ('fro' was taken over the last two dims); matrix_norm(ord=2) of an empty matrix is
0 (amax of nothing was raised) and a complex dtype= for a real input is refused; grid_sample of an
integer or complex input is a NotImplementedError (int64 was sampled into float32); affine_grid's
batch mismatch is a RuntimeError; UntypedStorage takes a bool byte, refuses a float (it was
truncated) with RuntimeError and an int beyond int64 with OverflowError (2**64 + 5 wrote 5), and
fill_ wraps 300 to 44 as torch; embedding with max_norm takes int32 indices (index_copy()'s int64
error leaked); embedding_bag promotes indices and offsets of two dtypes; lstsq refuses a B with
more batch dims than A (it was broadcast).

Built from C++: round(decimals=) of a complex tensor names complex (it said "integer tensors")
and of an integer tensor is a NotImplementedError as torch's; norm(p='fro') over three dims is
refused (the vector norm over all of them was returned); norm(p='nuc') of float16 / bfloat16 is
a RuntimeError as torch's (the SVD's NotImplementedError leaked)."""

from __future__ import annotations

import warnings

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _same

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _get(M, name):
    obj = M
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


# ---- a. out= of the hand-written functions -----------------------------------------------------

def _x(M):
    return M.tensor([0.25, 0.75], dtype=M.float64)


# name -> (the call, with x = [0.25, 0.75] in float64; its expected values)
OUT_CASES = {
    "special.erf": (lambda M, x: M.special.erf, [0.2763263901682369, 0.7111556336535151]),
    "special.expit": (lambda M, x: M.special.expit, [0.5621765008857981, 0.679178699175393]),
    "special.gammaln": (lambda M, x: M.special.gammaln, [1.2880225246980774, 0.20328095143129535]),
    "special.digamma": (lambda M, x: M.special.digamma, [-4.2274535333762655, -1.085860879786472]),
    "special.i1e": (lambda M, x: M.special.i1e, [0.09811262869736825, 0.18988779330485503]),
    "special.ndtri": (lambda M, x: M.special.ndtri, [-0.6744897501960818, 0.6744897501960818]),
    "lgamma": (lambda M, x: M.lgamma, [1.2880225246980774, 0.20328095143129535]),
    "digamma": (lambda M, x: M.digamma, [-4.2274535333762655, -1.085860879786472]),
    "deg2rad": (lambda M, x: M.deg2rad, [0.004363323129985824, 0.013089969389957472]),
    "sinc": (lambda M, x: M.sinc, [0.9003163161571061, 0.3001054387190354]),
    "logit": (lambda M, x: M.logit, [-1.0986122886681098, 1.0986122886681098]),
    "special.polygamma": (lambda M, x: lambda t, **kw: M.special.polygamma(1, t, **kw),
                          [17.19732915341456, 2.541879648764158]),
    "special.multigammaln": (lambda M, x: lambda t, **kw: M.special.multigammaln(t + 2, 2, **kw),
                             [0.6128355367966112, 1.1724513247320338]),
    "mvlgamma": (lambda M, x: lambda t, **kw: M.mvlgamma(t + 2, 2, **kw),
                 [0.6128355367966112, 1.1724513247320338]),
    "special.xlogy": (lambda M, x: lambda t, **kw: M.special.xlogy(t, t, **kw),
                      [-0.34657359027997264, -0.21576155433883568]),
    "special.zeta": (lambda M, x: lambda t, **kw: M.special.zeta(t + 2, t, **kw),
                     [23.616546927078986, 2.553728024494421]),
    "hypot": (lambda M, x: lambda t, **kw: M.hypot(t, t, **kw),
              [0.3535533905932738, 1.0606601717798214]),
    "logaddexp": (lambda M, x: lambda t, **kw: M.logaddexp(t, t, **kw),
                  [0.9431471805599453, 1.4431471805599454]),
}


@pytest.mark.parametrize("name", sorted(OUT_CASES))
def test_out_of_the_python_functions(name):
    make, want = OUT_CASES[name]
    fn = make(ember, None)
    assert fn(_x(ember)).tolist() == pytest.approx(want, rel=1e-12)
    o = ember.zeros(2, dtype=ember.float64)
    r = fn(_x(ember), out=o)  # was: unexpected keyword argument 'out'
    assert r is o and o.tolist() == pytest.approx(want, rel=1e-12)
    o32 = ember.zeros(2)  # float64 into float32: a cast of the same kind, as torch
    fn(_x(ember), out=o32)
    assert o32.tolist() == pytest.approx(want, rel=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        fn(_x(ember), out=ember.zeros(2, dtype=ember.int64))
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not list"):
        fn(_x(ember), out=[0.0, 0.0])
    e = ember.empty(0, dtype=ember.float64)  # resized (no warning: it had no elements)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn(_x(ember), out=e).shape == (2,)


@pytest.mark.parametrize("name", sorted(OUT_CASES))
def test_out_of_the_python_functions_is_not_differentiable(name):
    fn = OUT_CASES[name][0](ember, None)
    x = _x(ember).requires_grad_()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        fn(x, out=ember.zeros(2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        fn(_x(ember), out=ember.zeros(2, dtype=ember.float64, requires_grad=True))
    with ember.no_grad():
        o = ember.zeros(2, dtype=ember.float64)
        fn(x, out=o)
        assert not o.requires_grad


def test_polygamma_out_refuses_grad_too():
    # ember.polygamma took out= already, and recorded a CopyBackward0 into it
    with pytest.raises(RuntimeError, match="polygamma\\(\\): functions with out="):
        ember.polygamma(1, ember.ones(2, requires_grad=True), out=ember.zeros(2))


def test_out_of_the_python_functions_in_place_of_the_input():
    x = _x(ember)
    assert ember.special.erf(x, out=x) is x
    assert x.tolist() == pytest.approx([0.2763263901682369, 0.7111556336535151], rel=1e-12)


EXACT_CASES = {  # out= must have the result's dtype (float32 here), as torch's composites
    "quantile": lambda M, **kw: M.quantile(M.tensor([1.0, 2.0, 4.0]), 0.5, **kw),
    "cross": lambda M, **kw: M.cross(M.tensor([1.0, 0, 0]), M.tensor([0.0, 1, 0]), dim=0, **kw),
    "linalg.cross": lambda M, **kw: M.linalg.cross(M.tensor([1.0, 0, 0]), M.tensor([0.0, 1, 0]),
                                                   **kw),
    "linalg.vecdot": lambda M, **kw: M.linalg.vecdot(M.tensor([1.0, 2.0]), M.tensor([3.0, 4.0]),
                                                     **kw),
    "matrix_power": lambda M, **kw: M.matrix_power(M.tensor([[1.0, 1.0], [0.0, 1.0]]), 2, **kw),
    "logcumsumexp": lambda M, **kw: M.logcumsumexp(M.tensor([0.0, 0.0]), 0, **kw),
    "diag": lambda M, **kw: M.diag(M.tensor([[1.0, 2.0], [3.0, 4.0]]), **kw),
}
EXACT_WANT = {"quantile": 2.0, "cross": [0.0, 0.0, 1.0], "linalg.cross": [0.0, 0.0, 1.0],
              "linalg.vecdot": 11.0, "matrix_power": [[1.0, 2.0], [0.0, 1.0]],
              "logcumsumexp": [0.0, 0.6931471824645996], "diag": [1.0, 4.0]}


@pytest.mark.parametrize("name", sorted(EXACT_CASES))
def test_out_of_the_composites_needs_the_exact_dtype(name):
    fn = EXACT_CASES[name]
    want = fn(ember)
    o = ember.empty(0)
    assert fn(ember, out=o) is o and o.tolist() == want.tolist() == EXACT_WANT[name]
    with pytest.raises(RuntimeError, match="to have dtype float32, but got float64"):
        fn(ember, out=ember.empty(0, dtype=ember.float64))


def test_out_of_the_boolean_predicates():
    x = ember.tensor([-float("inf"), -0.0, 1.0])
    for name, want in (("isneginf", [True, False, False]), ("isposinf", [False, False, False]),
                       ("signbit", [True, True, False])):
        o = ember.empty(0, dtype=ember.bool)
        assert getattr(ember, name)(x, out=o) is o and o.tolist() == want
        with pytest.raises(RuntimeError, match="to have dtype bool, but got float32"):
            getattr(ember, name)(x, out=ember.empty(0))


def test_out_of_the_fft_functions():
    x = ember.tensor([0.25, 0.75], dtype=ember.float64)
    o = ember.empty(0, dtype=ember.complex128)
    assert ember.fft.rfft(x, out=o) is o and o.tolist() == [1 + 0j, -0.5 + 0j]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type float64"):
        ember.fft.fft(x, out=ember.empty(0, dtype=ember.float64))
    # the frequency factories compute in out's dtype (float32 rounding before: 0.3333333432...)
    f = ember.empty(0, dtype=ember.float64)
    assert ember.fft.fftfreq(3, out=f) is f
    assert f.tolist() == [0.0, 1 / 3, -1 / 3]
    assert ember.fft.rfftfreq(4, out=ember.empty(0, dtype=ember.float64)).tolist() == \
        [0.0, 0.25, 0.5]


@needs_torch
@pytest.mark.parametrize("name", sorted(OUT_CASES))
@pytest.mark.parametrize("out_dt", ["float64", "float32", "int64"])
def test_out_of_the_python_functions_matches_torch(name, out_dt):
    _same(lambda M: OUT_CASES[name][0](M, None)(_x(M), out=M.zeros(2, dtype=getattr(M, out_dt))))


@needs_torch
@pytest.mark.parametrize("name", sorted(EXACT_CASES))
@pytest.mark.parametrize("out_dt", ["float32", "float64"])
def test_out_of_the_composites_matches_torch(name, out_dt):
    _same(lambda M: EXACT_CASES[name](M, out=M.empty(0, dtype=getattr(M, out_dt))))


@needs_torch
def test_out_of_fftfreq_matches_torch():
    _same(lambda M: M.fft.fftfreq(5, out=M.empty(0, dtype=M.float64)), rtol=0)


# ---- b. an order beyond int64 ------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda M: M.polygamma(2**64, M.ones(2)),
    lambda M: M.special.polygamma(-2**64, M.ones(2)),
    lambda M: M.ones(2).polygamma(2**63),
    lambda M: M.special.multigammaln(M.ones(2) * 3, 2**64),
    lambda M: M.mvlgamma(M.ones(2) * 3, 2**63),
])
def test_order_beyond_int64_is_refused(call):
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        call(ember)  # polygamma(2**64, x) was computed (-inf at 0.5)
    if torch is not None:
        with pytest.raises(ValueError):
            call(torch)


def test_order_at_int64_max_still_computes():
    # n = 2**63 - 1 is odd: (-1)^(n+1) n! zeta(n + 1, 1) overflows to +inf
    assert ember.polygamma(2**63 - 1, ember.ones(2)).tolist() == [float("inf")] * 2


# ---- c. norms ------------------------------------------------------------------------------------

@pytest.mark.parametrize("ord", ["fro", "nuc", 2])
@pytest.mark.parametrize("shape", [(2, 2, 2), (2, 0, 0)])
def test_linalg_norm_ord_without_dim_needs_1d_or_2d(ord, shape):
    with pytest.raises(RuntimeError, match="If dim is not specified but ord is, the input must "
                                           "be 1D or 2D. Got 3D."):
        ember.linalg.norm(ember.ones(*shape), ord)  # 'fro' gave [2.0, 2.0]
    assert ember.linalg.norm(ember.ones(2, 2, 2), "fro", dim=(1, 2)).tolist() == [2.0, 2.0]
    assert ember.linalg.norm(ember.ones(2, 2, 2)).item() == pytest.approx(8**0.5)


@pytest.mark.parametrize("shape", [(2, 0, 3), (2, 3, 0)])
def test_matrix_norm_2_of_empty_matrices_is_zero(shape):
    r = ember.linalg.matrix_norm(ember.ones(*shape), 2)  # was: amax() ... non-zero size
    assert r.tolist() == [0.0, 0.0] and r.dtype == ember.float32
    assert ember.linalg.matrix_norm(ember.ones(*shape), "nuc").tolist() == [0.0, 0.0]
    with pytest.raises(IndexError, match="Expected reduction dim"):
        ember.linalg.matrix_norm(ember.ones(*shape), -2)  # no identity for the minimum (torch)


def test_matrix_norm_dtype_must_keep_the_kind():
    a = ember.arange(4.0).reshape(2, 2)
    with pytest.raises(RuntimeError, match="dtype should be real for real inputs, but got "
                                           "ComplexFloat"):
        ember.linalg.matrix_norm(a, "nuc", dtype=ember.complex64)  # was a float32 norm
    with pytest.raises(RuntimeError, match="dtype should be complex for complex inputs"):
        ember.linalg.matrix_norm(a.to(ember.complex64), "fro", dtype=ember.float32)
    r = ember.linalg.matrix_norm(a, "fro", dtype=ember.float64)
    assert r.dtype == ember.float64 and r.item() == pytest.approx(14**0.5, rel=1e-12)


@needs_torch
@pytest.mark.parametrize("src", [
    "M.linalg.norm(M.ones(2, 2, 2), 'fro')", "M.linalg.norm(M.ones(2, 0, 0), 'nuc')",
    "M.linalg.matrix_norm(M.ones(2, 0, 3), 2)", "M.linalg.matrix_norm(M.ones(2, 3, 0), 2)",
    "M.linalg.matrix_norm(M.ones(2, 2), 'nuc', dtype=M.complex64)",
    "M.linalg.matrix_norm(M.ones(2, 2, dtype=M.complex64), 'fro', dtype=M.float32)",
    "M.linalg.norm(M.ones(2, 2, 2), 'fro', dim=(1, 2))",
])
def test_norms_match_torch(src):
    _same(lambda M: eval(src))  # noqa: S307 (a literal of the table above)


# ---- d. grid_sample / affine_grid ------------------------------------------------------------

@pytest.mark.parametrize("dt", ["int64", "int32", "uint8", "bool", "complex64"])
def test_grid_sample_refuses_non_floating_input(dt):
    x = ember.ones(1, 1, 3, 4).to(getattr(ember, dt))
    g = ember.zeros(1, 2, 2, 2).to(getattr(ember, dt))
    with pytest.raises(NotImplementedError, match=f"grid_sample\\(\\): not implemented for input "
                                                  f"dtype ember.{dt}"):
        F.grid_sample(x, g, align_corners=False)  # int64 gave a float32 result
    with pytest.raises(NotImplementedError):  # whatever the grid's dtype
        F.grid_sample(x, ember.zeros(1, 2, 2, 2), align_corners=False)
    if torch is not None:
        tx = torch.ones(1, 1, 3, 4).to(getattr(torch, dt))
        with pytest.raises(NotImplementedError):
            torch.nn.functional.grid_sample(tx, torch.zeros(1, 2, 2, 2).to(getattr(torch, dt)),
                                            align_corners=False)


def test_grid_sample_float_input_with_another_grid_dtype_stays_runtime_error():
    with pytest.raises(RuntimeError, match="same dtype"):
        F.grid_sample(ember.ones(1, 1, 3, 4, dtype=ember.float64), ember.zeros(1, 2, 2, 2),
                      align_corners=False)
    r = F.grid_sample(ember.arange(12.0).reshape(1, 1, 3, 4), ember.zeros(1, 1, 1, 2),
                      align_corners=True)
    assert r.tolist() == [[[[5.5]]]]


def test_affine_grid_batch_mismatch_is_a_runtime_error():
    theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    with pytest.raises(RuntimeError, match="theta holds 1 affine matrices but size"):
        F.affine_grid(theta, (2, 1, 2, 3), align_corners=False)  # was a ValueError
    with pytest.raises(ValueError, match="Nx2x3"):  # a wrong matrix shape stays a ValueError
        F.affine_grid(theta[:, :1], (1, 1, 2, 3), align_corners=False)
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.nn.functional.affine_grid(torch.eye(2, 3).unsqueeze(0), (2, 1, 2, 3),
                                            align_corners=False)


# ---- e. UntypedStorage byte values -----------------------------------------------------------

def _storage(M):
    return M.tensor([1.0, 2.0]).untyped_storage()


@pytest.mark.parametrize("value, byte", [(True, 1), (False, 0), (300, 44), (-1, 255),
                                         (-129, 127), (2**63 - 1, 255)])
def test_storage_takes_ints_and_bools_modulo_256(value, byte):
    s = _storage(ember)
    s[0] = value  # a bool was a TypeError
    assert s[0] == byte
    s.fill_(value)  # 300 was refused ("cannot be converted to type uint8")
    assert s.tolist() == [byte] * 8
    assert ember.UntypedStorage([value, 7]).tolist() == [byte, 7]
    if torch is not None:
        t = _storage(torch)
        t[0] = value
        assert t[0] == byte
        assert list(torch.UntypedStorage([value, 7])) == [byte, 7]


@pytest.mark.parametrize("value", [1.5, 2.0, "a", None, 1 + 2j])
def test_storage_refuses_non_int_bytes(value):
    s = _storage(ember)
    before = s.tolist()
    with pytest.raises(RuntimeError, match="UntypedStorage.__setitem__ expects int, but got "):
        s[0] = value  # a float was a TypeError
    with pytest.raises(RuntimeError, match="UntypedStorage.fill_ expects int, but got "):
        s.fill_(value)  # 1.5 was truncated to 1
    with pytest.raises(RuntimeError, match="UntypedStorage\\(sequence\\) expects int"):
        ember.UntypedStorage([value])  # [1.5] was [1]
    assert s.tolist() == before
    if torch is not None:
        with pytest.raises(RuntimeError):
            _storage(torch)[0] = value
        with pytest.raises(RuntimeError):
            torch.UntypedStorage([value])


def test_storage_refuses_a_tensor_byte():
    with pytest.raises(RuntimeError, match="expects int, but got Tensor"):
        _storage(ember).fill_(ember.tensor(3))
    with pytest.raises(RuntimeError, match="expects int, but got Tensor"):
        ember.UntypedStorage([ember.tensor(3)])


@pytest.mark.parametrize("value", [2**64 + 5, 2**63, -2**63 - 1])
def test_storage_refuses_ints_beyond_int64(value):
    s = _storage(ember)
    with pytest.raises(OverflowError, match="does not fit in int64"):
        s[0] = value  # 2**64 + 5 wrote 5
    with pytest.raises(OverflowError, match="does not fit in int64"):
        s[0:2] = value
    with pytest.raises(OverflowError, match="does not fit in int64"):
        ember.UntypedStorage([value])
    assert s[0] == 0  # (torch 2.13 raises OverflowError for some, SystemError for others)


# ---- f. embedding index dtypes ---------------------------------------------------------------

def _w(M):
    return M.arange(15.0).reshape(5, 3)


def test_embedding_max_norm_takes_int32_indices():
    w = _w(ember)
    r = F.embedding(ember.tensor([[0, 1], [4, 0]], dtype=ember.int32), w, max_norm=1.0)
    # was: index_copy(): expected an index tensor of dtype int64, but got int32
    want = [[[0.0, 0.4472135901451111, 0.8944271802902222],
             [0.4242640733718872, 0.5656854510307312, 0.7071067690849304]],
            [[0.5318906903266907, 0.5762149095535278, 0.6205391883850098],
             [0.0, 0.4472135901451111, 0.8944271802902222]]]
    assert r.reshape(-1).tolist() == pytest.approx(sum(sum(want, []), []), rel=1e-5)
    assert w[2].tolist() == [6.0, 7.0, 8.0]  # rows not referenced keep their norm
    if torch is not None:
        _same(lambda M: M.nn.functional.embedding(M.tensor([[0, 1], [4, 0]], dtype=M.int32),
                                                   _w(M), max_norm=1.0), rtol=1e-5)


@pytest.mark.parametrize("idx_dt, off_dt", [("int8", "int64"), ("int16", "int64"),
                                            ("uint8", "int64"), ("int32", "int16"),
                                            ("int64", "int8"), ("bool", "int64")])
def test_embedding_bag_promotes_indices_and_offsets(idx_dt, off_dt):
    idx = ember.tensor([0, 1, 4, 0]).to(getattr(ember, idx_dt))
    off = ember.tensor([0, 2]).to(getattr(ember, off_dt))
    r = F.embedding_bag(idx, _w(ember), off)  # was: expected integer (int64 or int32) indices
    want = [[1.5, 2.5, 3.5], [6.0, 7.0, 8.0]] if idx_dt != "bool" else \
        [[1.5, 2.5, 3.5], [1.5, 2.5, 3.5]]
    assert r.tolist() == want
    if torch is not None:
        _same(lambda M: M.nn.functional.embedding_bag(
            M.tensor([0, 1, 4, 0]).to(getattr(M, idx_dt)), _w(M),
            M.tensor([0, 2]).to(getattr(M, off_dt))))


@pytest.mark.parametrize("dt", ["int8", "int16", "uint8"])
def test_embedding_bag_same_small_dtype_still_refused(dt):
    with pytest.raises(RuntimeError, match="expected offsets of dtype int64 or int32"):
        F.embedding_bag(ember.tensor([0, 1]).to(getattr(ember, dt)), _w(ember),
                        ember.tensor([0]).to(getattr(ember, dt)))


# ---- g. lstsq batch dims -------------------------------------------------------------------------

@pytest.mark.parametrize("b_shape", [(2, 3, 1), (2, 2, 3, 1)])
def test_lstsq_refuses_b_with_more_dims(b_shape):
    a = ember.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=ember.float64)
    b = ember.ones(*b_shape, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="input.dim\\(\\) must be greater or equal to "
                                           "other.dim\\(\\)"):
        ember.linalg.lstsq(a, b)  # was broadcast to a (2, 2, 1) solution
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.linalg.lstsq(torch.ones(3, 2, dtype=torch.float64),
                               torch.ones(*b_shape, dtype=torch.float64))


def test_lstsq_batched_a_with_a_vector_or_matrix_b():
    a = ember.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]] * 2, dtype=ember.float64)
    x = ember.linalg.lstsq(a, ember.tensor([[1.0, 2.0, 3.0]] * 2, dtype=ember.float64)).solution
    assert x.reshape(-1).tolist() == pytest.approx([1.0, 2.0] * 2, rel=1e-12)
    x = ember.linalg.lstsq(a, ember.tensor([[[1.0], [2.0], [3.0]]], dtype=ember.float64)).solution
    assert x.shape == (2, 2, 1) and x.reshape(-1).tolist() == pytest.approx([1.0, 2.0] * 2)


# ---- h. C++: round, norm ---------------------------------------------------------------------

def test_round_decimals_of_complex_names_complex():
    z = ember.tensor([1.5 + 0.5j])
    with pytest.raises(NotImplementedError, match="round: not implemented for dtype complex64"):
        ember.round(z, decimals=2)  # was "decimals is not supported for integer tensors"
    with pytest.raises(NotImplementedError, match="not implemented for dtype complex64"):
        ember.round(z)


@pytest.mark.parametrize("dt", ["int32", "uint8", "int64"])
def test_round_decimals_of_integers_is_not_implemented(dt):
    x = ember.tensor([1, 2], dtype=getattr(ember, dt))
    with pytest.raises(NotImplementedError, match="decimals is not supported for integer "
                                                  f"tensors \\(dtype {dt}\\)"):
        ember.round(x, decimals=1)  # a plain RuntimeError before; torch's NotImplementedError
    assert ember.round(x).tolist() == [1, 2]
    if torch is not None:
        with pytest.raises(NotImplementedError):
            torch.round(torch.tensor([1, 2], dtype=getattr(torch, dt)), decimals=1)


def test_norm_fro_over_three_dims_is_refused():
    x = ember.ones(2, 2, 2)
    with pytest.raises(RuntimeError, match="p='fro' takes at most two dims"):
        ember.norm(x, p="fro", dim=(0, 1, 2))  # was 2.8284 (the vector norm over all)
    assert ember.norm(x, p="fro").item() == pytest.approx(8**0.5)
    assert ember.norm(x, p="fro", dim=(1, 2)).tolist() == [2.0, 2.0]
    assert x.norm("fro", dim=[0]).reshape(-1).tolist() == pytest.approx([2**0.5] * 4)
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.norm(torch.ones(2, 2, 2), p="fro", dim=(0, 1, 2))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_norm_nuc_of_low_precision_is_a_runtime_error(dt):
    x = ember.ones(2, 2, dtype=getattr(ember, dt))
    with pytest.raises(RuntimeError, match="p='nuc' does not support low precision dtypes") as e:
        ember.norm(x, p="nuc")
    assert not isinstance(e.value, NotImplementedError)  # the SVD's refusal leaked before
    if torch is not None:
        with pytest.raises(RuntimeError) as te:
            torch.norm(torch.ones(2, 2, dtype=getattr(torch, dt)), p="nuc")
        assert not isinstance(te.value, NotImplementedError)


# ---- i. in-place ops written as self.copy_(f(self)) under autograd ------------------------------

INPLACE_GRAD = {  # x = [0.5, 2.0] (float64); d(x * 1).op_(...) / dx
    "polygamma_": (lambda t: t.polygamma_(1), [-16.828796644234316, -0.4041138063191886]),
    "copysign_": (lambda t: t.copysign_(-1.0), [-1.0, -1.0]),
    "float_power_": (lambda t: t.float_power_(2), [1.0, 4.0]),
    "hypot_": (lambda t: t.hypot_(t.detach() + 1), [0.31622776601683794, 0.5547001962252291]),
    "logit_": (lambda t: (t / 4).logit_(), [2.2857142857142856, 1.0]),
    "i0_": (lambda t: t.i0_(), [0.2578943053908963, 1.5906368546373295]),
}


@pytest.mark.parametrize("name", sorted(INPLACE_GRAD))
def test_python_inplace_ops_backward_through_a_non_leaf(name):
    op, want = INPLACE_GRAD[name]
    x = ember.tensor([0.5, 2.0], dtype=ember.float64, requires_grad=True)
    y = op(x * 1)  # the forward saved self, which copy_ then overwrote:
    (g,) = ember.autograd.grad(y.sum(), x)  # "modified by an inplace operation" before
    assert g.tolist() == pytest.approx(want, rel=1e-9)
    if torch is not None:
        tx = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
        (tg,) = torch.autograd.grad(op(tx * 1).sum(), tx)
        assert tg.tolist() == pytest.approx(want, rel=1e-9)


def test_python_inplace_op_without_grad_still_writes_in_place():
    t = ember.tensor([0.5, 2.0], dtype=ember.float64)
    ptr = t.data_ptr()
    assert t.polygamma_(1) is t and t.data_ptr() == ptr
    # pi^2 / 2 and pi^2 / 6 - 1 to 4e-10: torch's trigamma series, bit for bit
    assert t.tolist() == [4.934802202073678, 0.6449340670881899]


# ---- j. sinc of half types, zeta at x = inf, meta inputs of the zeta family ---------------------

@pytest.mark.parametrize("fn", ["special.sinc", "sinc"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_sinc_of_half_types_is_computed_in_float32(fn, dt):
    x = ember.tensor([3.0, 1.0, 100.0, 0.0], dtype=getattr(ember, dt))
    r = _get(ember, fn)(x)
    assert r.dtype == x.dtype
    # pi * 3 rounded to bfloat16 made sinc(3) -0.0013 (float16: 0.0003)
    assert [abs(v) for v in r.tolist()[:3]] == pytest.approx([0.0, 0.0, 0.0], abs=1e-7)
    assert r.tolist()[3] == 1.0
    if torch is not None:
        _same(lambda M: _get(M, fn)(M.tensor([3.0, 1.0, 2.5, 100.0, 0.0], dtype=getattr(M, dt))),
              rtol=0)


def test_zeta_at_infinite_x():
    inf = float("inf")
    r = ember.special.zeta(ember.tensor([inf, inf, inf], dtype=ember.float64),
                           ember.tensor([1.0, 0.5, 0.25], dtype=ember.float64))
    assert r.tolist() == [1.0, inf, inf]  # NaN before: inf / inf in the sum
    if torch is not None:
        _same(lambda M: M.special.zeta(M.tensor([inf, inf, 2.0], dtype=M.float64),
                                       M.tensor([1.0, 0.5, 1.0], dtype=M.float64)))


@pytest.mark.parametrize("call", [
    lambda M: M.polygamma(3, M.ones(2, 3, device="meta")),
    lambda M: M.polygamma(200, M.ones(2, 3, device="meta")),
    lambda M: M.special.zeta(M.ones(2, 3, device="meta") * 2, 1.0),
    lambda M: M.special.zeta(2.0, M.ones(2, 3, device="meta")),
    lambda M: M.special.gammainc(M.ones(2, 1, device="meta"), M.ones(3, device="meta")),
    lambda M: M.special.gammaincc(M.ones(2, 1, device="meta"), M.ones(3, device="meta")),
])
def test_zeta_family_on_meta_tensors(call):
    r = call(ember)  # was: Tensor.item() cannot be called on meta tensors
    assert r.device.type == "meta" and r.shape == (2, 3) and r.dtype == ember.float32
    if torch is not None:
        t = call(torch)
        assert tuple(t.shape) == (2, 3) and t.dtype == torch.float32


@pytest.mark.parametrize("call", [
    lambda M, **kw: M.special.round(M.tensor([0.25, 0.75], dtype=M.float64), **kw),
    lambda M, **kw: M.heaviside(M.tensor([-1.0, 0.0, 2.0], dtype=M.float64),
                                M.tensor([0.5], dtype=M.float64), **kw),
    lambda M, **kw: M.fft.fftfreq(4, dtype=M.float64, **kw),
])
def test_out_of_dtype_keeping_functions_needs_the_exact_dtype(call):
    want = call(ember)
    o = ember.empty(0, dtype=ember.float64)
    assert call(ember, out=o) is o and o.tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="to have dtype float64, but got float32"):
        call(ember, out=ember.zeros(0))  # special.round(float64, out=float32) was taken
    if torch is not None:
        with pytest.raises(RuntimeError):
            call(torch, out=torch.zeros(0))
        _same(lambda M: call(M, out=M.empty(0, dtype=M.float64)), rtol=0)


# ---- k. chain_matmul, cross, tril/triu_indices, scalar_tensor --------------------------------

@pytest.mark.parametrize("mats", [[(2, 2, 2)], [(2,)], [(2,), (2, 2)], [(2, 2), (2,)],
                                  [(2, 2, 2), (2, 2, 2)]])
def test_chain_matmul_takes_matrices_only(mats):
    with pytest.raises(RuntimeError, match="expected 2 instead"):
        ember.chain_matmul(*[ember.ones(*s) for s in mats])  # (2, 2, 2) was returned, copied
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.chain_matmul(*[torch.ones(*s) for s in mats])


def test_chain_matmul_of_matrices_still_multiplies():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert ember.chain_matmul(a, a, a).tolist() == [[37.0, 54.0], [81.0, 118.0]]
    assert ember.chain_matmul(a).tolist() == a.tolist()
    with pytest.raises(RuntimeError, match="Expected one or more matrices"):
        ember.chain_matmul()


@pytest.mark.parametrize("fn", ["cross", "linalg.cross"])
@pytest.mark.parametrize("a_dt, b_dt", [("complex64", "int64"), ("float32", "float64"),
                                        ("int32", "int64")])
def test_cross_refuses_two_dtypes(fn, a_dt, b_dt):
    kw = {"dim": 0} if fn == "cross" else {}
    with pytest.raises(RuntimeError, match="expected input and other to have the same dtype"):
        _get(ember, fn)(ember.ones(3, dtype=getattr(ember, a_dt)),
                        ember.ones(3, dtype=getattr(ember, b_dt)), **kw)  # was promoted
    if torch is not None:
        with pytest.raises(RuntimeError):
            _get(torch, fn)(torch.ones(3, dtype=getattr(torch, a_dt)),
                            torch.ones(3, dtype=getattr(torch, b_dt)), **kw)


def test_cross_of_bool_is_not_implemented():
    with pytest.raises(NotImplementedError, match="linalg.cross: not implemented for dtype "
                                                  "bool"):
        ember.linalg.cross(ember.ones(3, dtype=ember.bool), ember.ones(3, dtype=ember.bool))
    r = ember.linalg.cross(ember.tensor([1, 0, 0]), ember.tensor([0, 1, 0]))
    assert r.tolist() == [0, 0, 1] and r.dtype == ember.int64


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("dt", ["float32", "float64", "int16", "int8", "uint8", "bool"])
def test_tri_indices_take_int32_or_int64_only(fn, dt):
    with pytest.raises(NotImplementedError, match=f"{fn}: not implemented for dtype "
                                                  f"ember.{dt}"):
        getattr(ember, fn)(3, 3, dtype=getattr(ember, dt))  # bool gave [[0, 1, 1, 1, ...]]
    if torch is not None:
        with pytest.raises(NotImplementedError):
            getattr(torch, fn)(3, 3, dtype=getattr(torch, dt))


def test_tri_indices_int32_and_overflow():
    r = ember.tril_indices(3, 3, dtype=ember.int32)
    assert r.dtype == ember.int32 and r.tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    assert ember.triu_indices(2, 3, 1).tolist() == [[0, 0, 1], [1, 2, 2]]
    for args in [(2**64, 0), (0, 2**64), (3, 3, 2**63), (3, 3, -2**63 - 1)]:
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            ember.tril_indices(*args)  # (2**64, 0) gave an empty result
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            ember.triu_indices(*args)
        if torch is not None:
            with pytest.raises(ValueError):
                torch.tril_indices(*args)


def test_scalar_tensor_takes_a_number():
    with pytest.raises(TypeError, match="argument 's' must be Number, not list"):
        ember.scalar_tensor([4, 4])  # was a (2,) tensor
    with pytest.raises(OverflowError, match="fits neither int64 nor uint64"):
        ember.scalar_tensor(2**64)  # was 1.8446744073709552e19
    assert ember.scalar_tensor(2**64 - 1).item() == 1.8446744073709552e19  # uint64's range
    assert ember.scalar_tensor(-2**63).item() == -9.223372036854775808e18
    assert ember.scalar_tensor(ember.tensor(4)).tolist() == 4.0  # a 0-dim tensor
    with pytest.raises(TypeError, match="must be Number, not Tensor"):
        ember.scalar_tensor(ember.tensor([4]))
    r = ember.scalar_tensor(3, dtype=ember.float64)
    assert r.shape == () and r.dtype == ember.float64 and r.item() == 3.0
    if torch is not None:
        with pytest.raises(TypeError):
            torch.scalar_tensor([4, 4])
        with pytest.raises(OverflowError):
            torch.scalar_tensor(2**64)
        assert torch.scalar_tensor(torch.tensor(4)).item() == 4.0
        with pytest.raises(TypeError):
            torch.scalar_tensor(torch.tensor([4]))


# ---- l. linalg's out= under autograd, vecdot dtypes ---------------------------------------------

LINALG_OUT = {  # x: a 2 x 2 float32 matrix requiring grad
    "linalg.inv": lambda M, x, **kw: M.linalg.inv(x, **kw),
    "linalg.det": lambda M, x, **kw: M.linalg.det(x, **kw),
    "linalg.vector_norm": lambda M, x, **kw: M.linalg.vector_norm(x, **kw),
    "linalg.svdvals": lambda M, x, **kw: M.linalg.svdvals(x, **kw),
    "linalg.matrix_power": lambda M, x, **kw: M.linalg.matrix_power(x, 2, **kw),
    "linalg.eigvalsh": lambda M, x, **kw: M.linalg.eigvalsh(x, **kw),
    "linalg.multi_dot": lambda M, x, **kw: M.linalg.multi_dot([x, x], **kw),
    "nextafter": lambda M, x, **kw: M.nextafter(x, x.detach() + 1, **kw),
}


@pytest.mark.parametrize("name", sorted(LINALG_OUT))
def test_linalg_out_is_not_differentiable(name):
    call = LINALG_OUT[name]
    x = ember.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    o = ember.empty(0)
    with pytest.raises(RuntimeError, match="functions with out=... arguments don't support "
                                           "automatic differentiation"):
        call(ember, x, out=o)  # was written, o recording the graph (requires_grad True)
    assert not o.requires_grad
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        call(ember, x.detach(), out=ember.empty(0, requires_grad=True))
    with ember.no_grad():
        r = call(ember, x, out=o)
    assert r is o and not o.requires_grad
    assert o.reshape(-1).tolist() == pytest.approx(
        call(ember, x.detach()).reshape(-1).tolist(), rel=1e-5)
    if torch is not None:
        tx = torch.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            call(torch, tx, out=torch.empty(0))


def test_linalg_tuple_out_is_not_differentiable_and_writes_nothing():
    x = (ember.eye(2) * 2).requires_grad_()
    s, la = ember.zeros(()), ember.zeros(())
    with pytest.raises(RuntimeError, match="linalg.slogdet\\(\\): functions with out="):
        ember.linalg.slogdet(x, out=(s, la))
    assert s.item() == 0.0 and la.item() == 0.0  # the sign was written before the refusal
    with ember.no_grad():
        ember.linalg.slogdet(x, out=(s, la))
    assert s.item() == 1.0 and la.item() == pytest.approx(1.3862943611198906)


@pytest.mark.parametrize("a_dt, b_dt", [("float16", "complex128"), ("float32", "float64"),
                                        ("int64", "float32")])
def test_vecdot_refuses_two_dtypes(a_dt, b_dt):
    a, b = ember.ones(2, 3, dtype=getattr(ember, a_dt)), ember.ones(3, dtype=getattr(ember, b_dt))
    with pytest.raises(RuntimeError, match="linalg.vecdot: Expected x and y to have the same "
                                           "dtype"):
        ember.linalg.vecdot(a, b)  # was promoted
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.linalg.vecdot(torch.ones(2, 3, dtype=getattr(torch, a_dt)),
                                torch.ones(3, dtype=getattr(torch, b_dt)))
    r = ember.linalg.vecdot(ember.tensor([1 + 1j, 2]), ember.tensor([1 + 1j, 1]))
    assert r.tolist() == 4 + 0j  # x conjugated: (1 - 1j)(1 + 1j) + 2


def test_normalize_out_is_not_differentiable():
    x = ember.tensor([[3.0, 4.0]], requires_grad=True)
    o = ember.empty(0)
    with pytest.raises(RuntimeError, match="normalize\\(\\): functions with out="):
        F.normalize(x, dim=1, out=o)  # o recorded the graph
    with ember.no_grad():
        assert F.normalize(x, dim=1, out=o) is o
    assert o.tolist() == [[0.6000000238418579, 0.800000011920929]] and not o.requires_grad
    if torch is not None:
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            torch.nn.functional.normalize(torch.tensor([[3.0, 4.0]], requires_grad=True), dim=1,
                                          out=torch.empty(0))


@pytest.mark.parametrize("call", [
    lambda M: M.nextafter(M.ones(2), M.zeros(2), out="abc"),
    lambda M: M.linalg.inv(M.eye(2), out="abc"),
    lambda M: M.linalg.slogdet(M.eye(2), out=("a", "b")),
    lambda M: M.nn.functional.normalize(M.ones(2, 2), out="abc"),
    lambda M: M.special.erf(M.ones(2), out="abc"),
    lambda M: M.fft.fftfreq(4, out=[0.0]),
])
def test_out_that_is_not_a_tensor_is_a_type_error(call):
    with pytest.raises(TypeError, match="argument 'out' must be Tensor, not "):
        call(ember)  # (nextafter: AttributeError 'str' object has no attribute 'requires_grad')
    if torch is not None:
        with pytest.raises(TypeError):
            call(torch)
