"""Pointwise ops, driven by the reference-checked entries of the op table (op_db.POINTWISE)."""

import math
from pathlib import Path

import ember
import numpy as np
import pytest
import yaml
from core_helpers import make, to_np, to_torch, tol, torch
from op_db import POINTWISE as OPS
from op_db import SPECIAL

YAML = Path(__file__).resolve().parents[1] / "ops" / "pointwise.yaml"


def test_every_declared_op_is_in_the_table():
    names = {e["func"].split("(")[0] for e in yaml.safe_load(YAML.read_text())}
    missing = names - {op.name for op in OPS} - SPECIAL
    assert not missing, f"pointwise ops without an OpInfo: {sorted(missing)}"


def expected_dtype(op, dtype):
    if op.result == "bool":
        return "bool"
    if op.result == "float" and dtype not in ("float16", "bfloat16", "float32", "float64"):
        return "float32"
    return dtype


def call(op, *args, **kw):
    return getattr(ember, op.name)(*args, **kw)


def check(op, dtype, result, inputs_np):
    if op.result == "float":  # NumPy would pick float16 for small ints; PyTorch computes in float32
        inputs_np = [np.asarray(a, dtype=np.float64) for a in inputs_np]
    ref = op.ref(*inputs_np)
    assert repr(result.dtype) == f"ember.{expected_dtype(op, dtype)}"
    got = to_np(result)
    assert got.shape == np.shape(ref)
    if op.result == "bool" or dtype in ("bool",) or (op.result == "same" and "int" in dtype):
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, equal_nan=True, **tol(expected_dtype(op, dtype)))


def rounded(t):
    """The values a tensor actually holds, as float64/int64 NumPy (after dtype rounding)."""
    return to_np(t)


CASES = [(op, dt) for op in OPS for dt in op.dtypes]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_values_against_numpy(op, dtype, rng):
    xs = [make(op.sample_array(dtype, (3, 5), rng, rhs=i > 0), dtype) for i in range(op.arity)]
    check(op, dtype, call(op, *xs), [rounded(x) for x in xs])


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_values_and_dtype_against_torch(op, dtype, rng):
    xs = [make(op.sample_array(dtype, (4, 3), rng, rhs=i > 0), dtype) for i in range(op.arity)]
    got = call(op, *xs)
    want = getattr(torch, op.torch_fn)(*[to_torch(x) for x in xs])
    assert repr(got.dtype).replace("ember.", "") == str(want.dtype).replace("torch.", "")
    w = want.double().numpy() if want.is_floating_point() else want.numpy()
    if got.dtype.is_floating_point:
        np.testing.assert_allclose(to_np(got), w, equal_nan=True, **tol(dtype if dtype in ("float16", "bfloat16") else "float32"))
    else:
        np.testing.assert_array_equal(to_np(got), w)


BINARY = [op for op in OPS if op.arity == 2]


@pytest.mark.parametrize("op", BINARY, ids=[o.name for o in BINARY])
@pytest.mark.parametrize("shapes", [((3, 1, 4), (5, 4)), ((1,), (2, 3)), ((), (2, 2)), ((2, 0), (1, 0))])
def test_broadcasting(op, shapes, rng):
    dtype = "float64" if "float64" in op.dtypes else op.dtypes[0]
    a = make(op.sample_array(dtype, shapes[0], rng), dtype)
    b = make(op.sample_array(dtype, shapes[1], rng, rhs=True), dtype)
    check(op, dtype, call(op, a, b), [rounded(a), rounded(b)])


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_noncontiguous_and_zero_stride(op, rng):
    dtype = "float64" if "float64" in op.dtypes else op.dtypes[0]
    base = make(op.sample_array(dtype, (6, 8), rng), dtype)
    xs = [base.transpose(0, 1) if hasattr(base, "transpose") else base, base[::2, ::3]]
    for x in xs:
        if x is base:
            continue
        assert not x.is_contiguous()
        args = [x] + [x.clone() if op.nonzero_rhs is False else x.clone() for _ in range(op.arity - 1)]
        check(op, dtype, call(op, *args), [rounded(a) for a in args])
    if hasattr(ember, "expand") or hasattr(base, "expand"):
        z = base[0:1].expand(4, 8)
        args = [z] * op.arity
        check(op, dtype, call(op, *args), [rounded(a) for a in args])


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_empty_and_zero_dim(op, rng):
    dtype = "float64" if "float64" in op.dtypes else op.dtypes[0]
    e = make(np.zeros((0, 3)), dtype)
    r = call(op, *([e] * op.arity))
    assert tuple(r.shape) == (0, 3)
    s = make(op.sample_array(dtype, (), rng, rhs=True), dtype)
    r = call(op, *([s] * op.arity))
    assert r.ndim == 0
    check(op, dtype, r, [rounded(s)] * op.arity)


@pytest.mark.parametrize("op", [o for o in OPS if o.out], ids=[o.name for o in OPS if o.out])
def test_out_and_inplace(op, rng):
    dtype = "float64" if "float64" in op.dtypes else op.dtypes[0]
    xs = [make(op.sample_array(dtype, (3, 4), rng, rhs=i > 0), dtype) for i in range(op.arity)]
    want = call(op, *xs)
    out = ember.empty(0, dtype=want.dtype)
    r = call(op, *xs, out=out)
    assert r is out and tuple(out.shape) == (3, 4)
    np.testing.assert_array_equal(to_np(out), to_np(want))
    if op.inplace:
        x0 = xs[0].clone()
        v = x0._version
        r = getattr(x0, op.name + "_")(*xs[1:])
        assert r is x0 and x0._version > v
        assert x0.dtype == xs[0].dtype  # an in-place result keeps the input's dtype
        np.testing.assert_array_equal(to_np(x0), to_np(want.to(x0.dtype)))


@pytest.mark.parametrize("op", [o for o in BINARY if o.scalar_rhs], ids=[o.name for o in BINARY if o.scalar_rhs])
def test_python_scalar_operand(op, rng):
    dtype = "float32" if "float32" in op.dtypes else op.dtypes[0]
    x = make(op.sample_array(dtype, (4,), rng), dtype)
    s = 3 if dtype != "bool" else True
    r = call(op, x, s)
    check(op, dtype, r, [rounded(x), np.array(s)])


# ---- type promotion with Python numbers and 0-d tensors -----------------------------------------

@pytest.mark.parametrize("a,b,want", [
    (ember.ones(2, dtype=ember.int32), 2.5, ember.float32),
    (ember.ones(2, dtype=ember.int32), 2, ember.int32),
    (ember.ones(2, dtype=ember.uint8), 300, ember.uint8),
    (ember.ones(2, dtype=ember.bool), 2, ember.int64),
    (ember.ones(2, dtype=ember.float16), 2.5, ember.float16),
    (ember.ones(2, dtype=ember.float16), ember.ones((), dtype=ember.float64), ember.float16),
    (ember.ones(2, dtype=ember.int64), ember.ones((), dtype=ember.float64), ember.float64),
    (ember.ones(2, dtype=ember.uint8), ember.ones(2, dtype=ember.int8), ember.int16),
    (ember.ones(2, dtype=ember.float16), ember.ones(2, dtype=ember.bfloat16), ember.float32),
])
def test_promotion(a, b, want):
    assert (a + b).dtype is want


# ---- ops with their own signatures -------------------------------------------------------------

def test_add_sub_alpha_and_rsub():
    a, b = ember.tensor([1.0, 2.0]), ember.tensor([10.0, 20.0])
    assert ember.add(a, b, alpha=2).tolist() == [21.0, 42.0]
    assert ember.sub(a, b, alpha=0.5).tolist() == [-4.0, -8.0]
    assert (5 - a).tolist() == [4.0, 3.0]
    assert (2 ** a).tolist() == [2.0, 4.0]
    assert (1 / ember.tensor([2, 4])).tolist() == [0.5, 0.25]
    with pytest.raises(RuntimeError, match="alpha"):
        ember.add(ember.ones(2, dtype=ember.int64), 1, alpha=0.5)


def test_div_rounding_modes():
    a = ember.tensor([-7, 7, -7, 7])
    b = ember.tensor([2, 2, -2, -2])
    assert ember.div(a, b, rounding_mode="floor").tolist() == [-4, 3, 3, -4]
    assert ember.div(a, b, rounding_mode="trunc").tolist() == [-3, 3, 3, -3]
    assert ember.div(a, b).tolist() == [-3.5, 3.5, 3.5, -3.5]
    assert (a // b).tolist() == [-4, 3, 3, -4]
    assert (a % b).tolist() == [1, 1, -1, -1]
    with pytest.raises(RuntimeError, match="rounding_mode"):
        ember.div(a, b, rounding_mode="round")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        ember.div(a, ember.zeros(4, dtype=ember.int64), rounding_mode="floor")


def test_clamp_variants():
    x = ember.tensor([-2.0, 0.5, 3.0, float("nan")])
    assert ember.clamp(x, -1, 1).tolist()[:3] == [-1.0, 0.5, 1.0]
    assert np.isnan(ember.clamp(x, -1, 1).tolist()[3])
    assert ember.clamp(x, min=0.0).tolist()[:3] == [0.0, 0.5, 3.0]
    assert ember.clamp(x, max=0.0).tolist()[:3] == [-2.0, 0.0, 0.0]
    lo, hi = ember.tensor([0.0, 0.0, 0.0, 0.0]), ember.tensor([1.0, 0.2, 5.0, 1.0])
    np.testing.assert_allclose(ember.clamp(x, lo, hi).tolist()[:3], [0.0, 0.2, 3.0], rtol=1e-6)
    assert ember.clip(x, -1, 1).tolist()[:3] == [-1.0, 0.5, 1.0]
    y = x.clone()
    y.clamp_(0, 1)
    assert y.tolist()[:3] == [0.0, 0.5, 1.0]
    with pytest.raises(RuntimeError, match="at least one of 'min' or 'max'"):
        ember.clamp(x)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16"])
def test_clamp_scalar_bounds_match_torch(dtype):
    # The contiguous scalar-bound loop and the general one (strided input, out=, in place, one
    # bound, NaN bounds) agree with torch, special values included.
    if torch is None:
        pytest.skip("needs torch")
    rng = np.random.default_rng(0)
    base = rng.standard_normal(1037) * 4
    if dtype.startswith("float"):
        base[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30 if dtype != "float16" else 6e4]
    a = base.astype(dtype)
    for lo, hi in ((-1, 2), (None, 0.5), (-0.5, None), (3, -3)):
        for view in (slice(None), slice(None, None, 3)):
            e, t = ember.tensor(a)[view], torch.tensor(a)[view]
            got = ember.clamp(e, lo, hi)
            want = torch.clamp(t, lo, hi)
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            if got.dtype == e.dtype:
                out = ember.empty(got.shape, dtype=got.dtype)
                ember.clamp(e, lo, hi, out=out)
                np.testing.assert_array_equal(out.numpy(), want.numpy())
                c = e.clone()
                c.clamp_(lo, hi)
                np.testing.assert_array_equal(c.numpy(), want.numpy())
    if dtype.startswith("float"):
        got = ember.clamp(ember.tensor(a), float("nan"), 1.0)
        assert np.isnan(got.numpy()).all()


def test_device_pickles_like_torch():
    import copy
    import pickle

    for d in (ember.device("cpu"), ember.device("cuda", 1), ember.device("meta")):
        assert pickle.loads(pickle.dumps(d)) == d
        assert copy.deepcopy(d) == d


def test_where_lerp_addcmul_addcdiv():
    c = ember.tensor([True, False, True])
    a, b = ember.tensor([1.0, 2.0, 3.0]), ember.tensor([10.0, 20.0, 30.0])
    assert ember.where(c, a, b).tolist() == [1.0, 20.0, 3.0]
    assert ember.where(c, a, 0.0).tolist() == [1.0, 0.0, 3.0]
    assert ember.where(c, 1, 0).dtype is ember.int64
    with pytest.raises(RuntimeError, match="bool"):
        ember.where(ember.ones(3), a, b)
    np.testing.assert_allclose(ember.lerp(a, b, 0.5).tolist(), [5.5, 11.0, 16.5])
    np.testing.assert_allclose(ember.lerp(a, b, ember.tensor([0.0, 1.0, 0.25])).tolist(), [1.0, 20.0, 9.75])
    np.testing.assert_allclose(ember.addcmul(a, a, b, value=0.5).tolist(), [6.0, 22.0, 48.0])
    np.testing.assert_allclose(ember.addcdiv(a, b, a, value=2).tolist(), [21.0, 22.0, 23.0])
    with pytest.raises(RuntimeError, match="integer division"):
        ember.addcdiv(ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64), ember.ones(2, dtype=ember.int64))


def test_allclose_equal_isclose():
    a = ember.tensor([1.0, 2.0, float("nan")])
    assert not ember.allclose(a, a)
    assert ember.allclose(a, a, equal_nan=True)
    assert ember.equal(ember.tensor([1, 2]), ember.tensor([1, 2]))
    assert not ember.equal(ember.tensor([1, 2]), ember.tensor([1, 2, 3]))
    assert ember.isclose(ember.tensor([1.0]), ember.tensor([1.0 + 1e-9])).tolist() == [True]


def test_errors_are_clear():
    with pytest.raises(RuntimeError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        ember.ones(2, 3) + ember.ones(4)
    with pytest.raises(TypeError, match="bitwise_and: not implemented for dtype float32"):
        ember.ones(2) & ember.ones(2)
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        ember.ones(2, dtype=ember.int64).add_(1.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ember.ones(3).add_(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="bool tensor is not supported"):
        ember.ones(2, dtype=ember.bool) - ember.ones(2, dtype=ember.bool)
    with pytest.raises(TypeError):
        ember.ones(2) + "a"
    with pytest.raises(RuntimeError, match="negative integer powers"):
        ember.tensor([2, 3]) ** -1


def test_operators_and_identity():
    x = ember.tensor([1.0, 2.0])
    y = x
    x += 1
    assert x is y and x.tolist() == [2.0, 3.0]
    x *= ember.tensor([2.0, 2.0])
    assert x is y and x.tolist() == [4.0, 6.0]
    assert (-x).tolist() == [-4.0, -6.0]
    assert abs(ember.tensor([-1, 2])).tolist() == [1, 2]
    assert (~ember.tensor([True, False])).tolist() == [False, True]
    assert (x == 4.0).tolist() == [True, False]
    assert (x != None) is True  # noqa: E711  (Python falls back to identity, like PyTorch)


def test_large_parallel_matches_serial():
    n = 200_003
    a = ember.tensor(np.arange(n, dtype=np.float32))
    b = a * 2 + 1
    np.testing.assert_array_equal(b.numpy(), np.arange(n, dtype=np.float32) * 2 + 1)
    ember.set_num_threads(1)
    try:
        c = a * 2 + 1
    finally:
        ember.set_num_threads(2)
    np.testing.assert_array_equal(c.numpy(), b.numpy())


def test_results_keep_the_layout_of_transposed_inputs():
    """As in PyTorch, an element-wise result of dense non-contiguous inputs (transposed,
    permuted) takes their layout, and the op walks memory in order (one flat loop)."""
    base = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    x = ember.tensor(base).permute(2, 0, 1)  # strides (1, 12, 4)
    y = ember.tensor(base * 2).permute(2, 0, 1)
    for r, expected in [(x + y, base * 3), (ember.exp(x), np.exp(base)), (x * 2, base * 2)]:
        assert r.stride() == x.stride()
        np.testing.assert_allclose(r.numpy(), expected.transpose(2, 0, 1), rtol=1e-6)
    mixed = x + ember.tensor(base.transpose(2, 0, 1).copy())  # first dense input decides
    assert mixed.stride() == x.stride()
    np.testing.assert_array_equal(mixed.numpy(), (base * 2).transpose(2, 0, 1))
    bcast = x + ember.ones(2, 1)  # a broadcast operand: still correct
    np.testing.assert_array_equal(bcast.numpy(), base.transpose(2, 0, 1) + 1)
    if torch is not None:
        tx = torch.tensor(base).permute(2, 0, 1)
        assert (tx + tx).stride() == (x + x).stride()


def test_erf_float32_vectorized_accuracy():
    # float32 erf runs on the vectorized polynomial (GELU's): within a few ulp of the exact value,
    # special values as std::erf, on the contiguous and the strided path.
    xs = np.concatenate([np.linspace(-6, 6, 200001), [0.0, -0.0, 1e-30, -1e-30, 1e-45, 0.875,
                                                      -0.875, 3.9999, 4.0, 1e30]]).astype(
        np.float32)
    exact = np.array([math.erf(float(v)) for v in xs])
    got = ember.tensor(xs).erf().numpy().astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - exact) / ulp) <= 4
    assert math.copysign(1.0, float(ember.tensor([-0.0]).erf()[0])) < 0
    special = ember.tensor([float("inf"), float("-inf"), float("nan")]).erf().tolist()
    assert special[:2] == [1.0, -1.0] and math.isnan(special[2])
    strided = ember.tensor(xs[:2000].reshape(40, 50)).t().erf()
    np.testing.assert_array_equal(strided.numpy(), got[:2000].reshape(40, 50).T.astype(np.float32))
