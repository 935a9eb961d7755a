"""Reductions and scans (ops/reduce.yaml) against NumPy and, when installed, PyTorch."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from core_helpers import make, needs_torch, to_np, torch

ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]


def layouts(a: np.ndarray, dtype: str | None = None):
    """(name, ember tensor, matching NumPy array) for a contiguous, a strided and a transposed view."""
    base = make(a, dtype)
    out = [("contiguous", base, a)]
    big = np.repeat(a, 2, axis=0) if a.ndim else a
    if a.ndim:
        out.append(("strided", make(big, dtype)[::2], big[::2]))
        rev = np.ascontiguousarray(np.transpose(a))
        out.append(("transposed", make(rev, dtype).permute(*range(a.ndim - 1, -1, -1)), a))
    return out


def tol(dtype: str) -> dict:
    return {
        "float16": dict(rtol=2e-2, atol=2e-2),
        "bfloat16": dict(rtol=5e-2, atol=5e-2),
        "float32": dict(rtol=1e-5, atol=1e-5),
    }.get(dtype, dict(rtol=1e-12, atol=1e-12))


def check(got, want, dtype: str | None = None) -> None:
    """got (ember) equals want (NumPy) in shape and value, within the tolerance of got's dtype."""
    dtype = dtype or str(got.dtype).split(".")[-1]
    want = np.asarray(want)
    g = to_np(got)
    assert g.shape == want.shape, (g.shape, want.shape)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(g, want)
    else:
        np.testing.assert_allclose(g, want, equal_nan=True, **tol(dtype))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- sum / mean / prod and friends over dims --------------------------------------------------------

DIMS = [None, 0, -1, (0, 2), (2, 0, 1), 1, [-2]]

NP_FUNCS = {
    "sum": lambda a, d, k: np.sum(a, axis=d, keepdims=k),
    "mean": lambda a, d, k: np.mean(a, axis=d, keepdims=k),
    "prod": lambda a, d, k: np.prod(a, axis=d, keepdims=k),
    "amax": lambda a, d, k: np.max(a, axis=d, keepdims=k),
    "amin": lambda a, d, k: np.min(a, axis=d, keepdims=k),
    "nansum": lambda a, d, k: np.nansum(a, axis=d, keepdims=k),
    "nanmean": lambda a, d, k: np.nanmean(a, axis=d, keepdims=k),
    "var": lambda a, d, k: np.var(a, axis=d, keepdims=k, ddof=1),
    "std": lambda a, d, k: np.std(a, axis=d, keepdims=k, ddof=1),
    "norm": lambda a, d, k: np.sqrt(np.sum(a * a, axis=d, keepdims=k)),
    "logsumexp": lambda a, d, k: np.log(np.sum(np.exp(a), axis=d, keepdims=k)),
    "all": lambda a, d, k: np.all(a, axis=d, keepdims=k),
    "any": lambda a, d, k: np.any(a, axis=d, keepdims=k),
}


def _axis(d):
    return tuple(d) if isinstance(d, list) else d


@pytest.mark.parametrize("op", sorted(NP_FUNCS))
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce_dims_layouts(op, dim, keepdim, rng):
    a = rng.standard_normal((4, 5, 6))
    if op in ("all", "any"):
        a = (a > 0.5) * a
    if op == "prod":
        a = 1 + 0.1 * a
    if op in ("nansum", "nanmean"):
        a[a > 1.2] = np.nan
    for name, x, ref in layouts(a):
        fn = getattr(ember, op)
        if op in ("amax", "amin", "logsumexp") and dim is None:
            got = fn(x, dim=(0, 1, 2), keepdim=keepdim)
        elif op in ("prod",) and isinstance(dim, (tuple, list)):
            continue
        else:
            got = fn(x, dim=dim, keepdim=keepdim)
        want = NP_FUNCS[op](ref, _axis(dim) if dim is not None else None, keepdim)
        check(got, want)
        # the method form agrees
        if dim is not None and op not in ("logsumexp", "norm"):  # norm: the first positional is p
            check(getattr(x, op)(dim, keepdim=keepdim), want)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_sum_prod_dtypes(dtype, rng):
    a = rng.integers(0, 3, size=(3, 7)).astype(np.float64)
    x = make(a, dtype)
    s = ember.sum(x)
    p = ember.prod(x, 1)
    if dtype in FLOAT_DTYPES:
        assert s.dtype == getattr(ember, dtype)
        assert p.dtype == getattr(ember, dtype)
    else:
        assert s.dtype == ember.int64  # integer and bool sums promote to int64 like PyTorch
        assert p.dtype == ember.int64
    ref = a.astype(bool) if dtype == "bool" else a
    check(s, np.sum(ref).astype(np.float64 if dtype in FLOAT_DTYPES else np.int64), dtype)
    check(p, np.prod(ref, axis=1).astype(np.float64 if dtype in FLOAT_DTYPES else np.int64), dtype)
    check(ember.sum(x, 0, dtype=ember.float64), np.sum(ref, axis=0).astype(np.float64))
    assert ember.sum(x, dtype=ember.int32).dtype == ember.int32


def test_sum_keyword_forms_and_out():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.sum().item() == 10.0
    check(x.sum(dim=0), [4.0, 6.0])
    check(x.sum(1, True), [[3.0], [7.0]])
    check(ember.sum(x, dim=[]), 10.0)  # an empty dim list reduces everything (PyTorch)
    out = ember.empty(2)
    r = ember.sum(x, 1, out=out)
    check(out, [3.0, 7.0])
    assert r is out or to_np(r).tolist() == [3.0, 7.0]


@pytest.mark.parametrize("shape,dim", [((1000, 300), 0), ((300, 1000), 1), ((200001,), 0), ((50000, 3), 0),
                                       ((3, 50000), 1), ((7, 40000), None), ((64, 64, 64), (0, 2)),
                                       ((5, 1, 3), 1), ((4096, 1), 1)])
def test_large_paths_float32(shape, dim, rng):
    # Exercise the engine's paths: rows, columns, split rows/columns across threads, size-1 dims.
    a = rng.standard_normal(shape).astype(np.float32)
    x = make(a)
    ax = _axis(dim)
    np.testing.assert_allclose(to_np(x.sum(dim=dim)), a.astype(np.float64).sum(axis=ax), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(to_np(x.mean(dim=dim)), a.astype(np.float64).mean(axis=ax), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(to_np(x.amax(dim=dim if dim is not None else [])), a.max(axis=ax))
    np.testing.assert_allclose(to_np(x.var(dim)), a.astype(np.float64).var(axis=ax, ddof=1), rtol=1e-4)
    if not isinstance(dim, tuple):
        np.testing.assert_array_equal(to_np(x.argmax(dim)), a.argmax(axis=dim))
        np.testing.assert_array_equal(to_np(x.argmin(dim)), a.argmin(axis=dim))


def test_sum_accuracy_float32():
    # 4M float32 values of 0.1: naive float accumulation would be off by ~1%.
    n = 1 << 22
    x = ember.full([n], 0.1, dtype=ember.float32)
    want = float(np.float32(0.1)) * n
    assert abs(x.sum().item() - want) / want < 1e-6
    assert abs(x.mean().item() - np.float32(0.1)) < 1e-7


@pytest.fixture
def threads():
    """Yields a setter for ember's thread count and restores the original one afterwards."""
    before = ember.get_num_threads()
    yield ember.set_num_threads
    ember.set_num_threads(before)


def test_long_sums_deterministic_across_threads(threads, rng):
    # Long reductions are cut into pieces fixed by their size alone and combined in order: the
    # result is bitwise the same for any thread count and from call to call, and it is accurate.
    a = rng.standard_normal((1 << 20) + 4099).astype(np.float32)
    b = rng.standard_normal((3, 300001)).astype(np.float32)
    big = np.repeat(rng.standard_normal((700, 301)).astype(np.float32), 2, axis=0)
    s = make(big)[::2]  # two reduced dims that do not merge: pieces start mid-row
    got = {}
    for n in (1, 2, 3):
        threads(n)
        res = [to_np(make(a).sum()), to_np(make(a).mean()), to_np(make(b).sum(1)), to_np(s.sum()),
               to_np(s.var()), to_np(s.argmax()), to_np(make(a).norm())]
        for r, again in zip(res, [to_np(make(a).sum()), to_np(make(a).mean())]):
            assert r.tobytes() == again.tobytes()
        got[n] = res
    for n in (2, 3):
        for r1, rn in zip(got[1], got[n]):
            assert r1.tobytes() == rn.tobytes(), n
    a64, b64, s64 = a.astype(np.float64), b.astype(np.float64), big[::2].astype(np.float64)
    np.testing.assert_allclose(got[1][0], a64.sum(), rtol=1e-6, atol=1e-3)
    np.testing.assert_allclose(got[1][1], a64.mean(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got[1][2], b64.sum(1), rtol=1e-6, atol=1e-3)
    np.testing.assert_allclose(got[1][3], s64.sum(), rtol=1e-6, atol=1e-3)
    np.testing.assert_allclose(got[1][4], s64.var(ddof=1), rtol=1e-6)
    assert got[1][5] == np.argmax(big[::2])
    np.testing.assert_allclose(got[1][6], np.sqrt((a64 * a64).sum()), rtol=1e-6)


def test_argmax_ties_across_pieces(threads, rng):
    # The first of equal extrema wins even when they fall in different pieces of a split reduction
    # (pieces of 65536 elements here) that different threads may run.
    a = rng.standard_normal(1 << 22).astype(np.float32)
    for n in (1, 2):
        threads(n)
        for first, second in ((65535, 65536), (3 * 65536 - 1, (1 << 22) - 1), (5, 4 * 65536)):
            b = a.copy()
            b[first] = b[second] = 50.0
            assert make(b).argmax().item() == first
            assert make(-b).argmin().item() == first


@needs_torch
def test_sum_accuracy_vs_torch():
    # Relative error of a long float32 sum/mean against a float64 reference: no worse than torch's.
    rng = np.random.default_rng(1)
    for a in (rng.standard_normal(1 << 22, dtype=np.float32), rng.random(1 << 22, dtype=np.float32)):
        ref = a.astype(np.float64).sum()
        t = torch.from_numpy(a)
        for got, want, r in ((make(a).sum().item(), t.sum().item(), ref),
                             (make(a).mean().item(), t.mean().item(), ref / a.size)):
            assert abs(got - r) <= abs(want - r) + 1e-7 * abs(r)


def test_integer_sum_exact():
    a = np.full(100000, 2**40, dtype=np.int64)
    assert ember.tensor(a).sum().item() == int(a.sum())
    b = np.full(1000, 200, dtype=np.uint8)
    assert ember.tensor(b).sum().item() == 200000  # no uint8 overflow


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_reductions_low_precision(dtype, rng):
    a = rng.standard_normal((6, 33)).astype(np.float32)
    x = make(a, dtype)
    ref = to_np(x).astype(np.float64)  # the values actually stored
    check(x.sum(1), ref.sum(1), dtype)
    check(x.mean(0), ref.mean(0), dtype)
    check(x.amax(1), ref.max(1), dtype)
    check(x.var(1), ref.var(1, ddof=1), dtype)
    check(x.norm(dim=1), np.sqrt((ref * ref).sum(1)), dtype)
    assert x.sum().dtype == getattr(ember, dtype)
    assert x.mean().dtype == getattr(ember, dtype)


def test_zero_dim_tensors():
    x = ember.tensor(3.5)
    for op in ("sum", "mean", "amax", "amin", "nansum", "prod"):
        r = getattr(x, op)()
        assert r.shape == () and r.item() == 3.5, op
    assert x.sum(0).item() == 3.5
    assert x.sum(-1, keepdim=True).shape == ()
    assert x.max().item() == 3.5
    v, i = x.max(0)
    assert v.item() == 3.5 and i.item() == 0
    assert x.argmax().item() == 0 and x.argmax(0, keepdim=True).shape == ()
    assert math.isnan(x.var().item())
    assert x.var(correction=0).item() == 0.0
    with pytest.raises(IndexError, match="out of range"):
        x.sum(1)


def test_empty_reductions():
    e = ember.empty(0)
    assert e.sum().item() == 0.0
    assert e.prod().item() == 1.0
    assert math.isnan(e.mean().item())
    assert e.all().item() is True and e.any().item() is False
    assert e.count_nonzero().item() == 0
    e2 = ember.empty(3, 0)
    check(e2.sum(1), np.zeros(3))
    assert e2.sum(0).shape == (0,)
    v, i = e2.max(0)
    assert v.shape == (0,) and i.shape == (0,)
    assert e2.amax(0).shape == (0,)
    assert e2.norm(dim=1).shape == (3,)


# ---- max / min / argmax ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_max_min_all_dtypes(dtype, rng):
    a = rng.integers(0, 50, size=(5, 8)).astype(np.float64)
    if dtype == "bool":
        a = a > 25
    x = make(a, dtype)
    ref = to_np(x)
    assert x.max().item() == ref.max() and x.min().item() == ref.min()
    for d in (0, 1, -1):
        v, i = ember.max(x, d)
        np.testing.assert_array_equal(to_np(v), ref.max(d))
        np.testing.assert_array_equal(to_np(i), ref.argmax(d))  # the first maximum
        v, i = x.min(dim=d, keepdim=True)
        np.testing.assert_array_equal(to_np(v), ref.min(d, keepdims=True))
        np.testing.assert_array_equal(to_np(i), ref.argmin(d, keepdims=True))
        if dtype == "bool":  # max / min take bool, argmax / argmin refuse it (as in PyTorch)
            with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
                x.argmax(d)
            continue
        np.testing.assert_array_equal(to_np(x.argmax(d)), ref.argmax(d))
    if dtype != "bool":
        assert x.argmax().item() == ref.argmax() and x.argmin().item() == ref.argmin()
    assert ember.max(x, 1).values.dtype == x.dtype and ember.max(x, 1).indices.dtype == ember.int64


def test_max_named_tuple_and_elementwise():
    x = ember.tensor([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]])
    r = x.max(1)
    assert type(r).__name__ == "max"
    assert to_np(r.values).tolist() == [5.0, 7.0] and to_np(r.indices).tolist() == [1, 0]
    r = ember.min(x, dim=0)
    assert to_np(r[0]).tolist() == [1.0, 2.0, 5.0] and to_np(r[1]).tolist() == [0, 1, 0]
    check(ember.max(x, ember.tensor([3.0, 3.0, 3.0])), [[3.0, 5.0, 5.0], [7.0, 3.0, 7.0]])
    check(ember.min(x, ember.tensor([3.0, 3.0, 3.0])), [[1.0, 3.0, 3.0], [3.0, 2.0, 3.0]])
    mm = ember.aminmax(x)
    assert mm.min.item() == 1.0 and mm.max.item() == 7.0
    mm = x.aminmax(dim=1, keepdim=True)
    check(mm.min, [[1.0], [2.0]])
    check(mm.max, [[5.0], [7.0]])


def test_nan_propagation():
    nan = float("nan")
    x = ember.tensor([[1.0, nan, 3.0, 0.0], [4.0, 2.0, nan, nan]])
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    assert math.isnan(x.amax().item())
    v, i = x.max(1)
    assert all(math.isnan(t) for t in to_np(v)) and to_np(i).tolist() == [1, 2]  # the first NaN
    assert to_np(x.argmin(1)).tolist() == [1, 2]
    assert x.argmax().item() == 1
    check(x.amin(0), [1.0, nan, nan, nan])
    assert to_np(x.nansum(1)).tolist() == [4.0, 6.0]
    check(x.nanmean(1), [4.0 / 3.0, 3.0])


def test_argmax_large_parallel(rng):
    a = rng.standard_normal(1 << 20).astype(np.float32)
    for pos in (0, 12345, (1 << 20) - 1):
        b = a.copy()
        b[pos] = 100.0
        b[pos + 1 if pos + 1 < b.size else 0] = 100.0  # a tie: the first one wins unless pos is last
        x = make(b)
        assert x.argmax().item() == int(np.argmax(b))
        b2 = -b
        assert make(b2).argmin().item() == int(np.argmin(b2))
    b = a.copy()
    b[777777] = np.nan
    b[900000] = np.nan
    assert make(b).argmax().item() == 777777
    assert math.isnan(make(b).max().item())
    assert make(b).argmin().item() == 777777


def test_argmax_keepdim_none():
    x = ember.tensor([[1.0, 9.0], [3.0, 4.0]])
    assert x.argmax(keepdim=True).shape == (1, 1)
    assert x.argmax().item() == 1
    xt = x.permute(1, 0)  # flattened index in logical (row-major) order
    assert xt.argmax().item() == 2


# ---- var / std / norm / logsumexp -----------------------------------------------------------------


def test_var_std_forms(rng):
    a = rng.standard_normal((4, 6))
    x = make(a)
    check(x.var(), a.var(ddof=1))
    check(x.var(1), a.var(1, ddof=1))
    check(x.var(1, correction=0), a.var(1))
    check(x.var(1, False), a.var(1))  # legacy unbiased positional
    check(x.var(True), a.var(ddof=1))
    check(x.var(False), a.var())
    check(x.std(0, True, True), a.std(0, ddof=1, keepdims=True))
    check(ember.std(x, dim=(0, 1), correction=2), np.sqrt(((a - a.mean()) ** 2).sum() / (a.size - 2)))
    v, m = ember.var_mean(x, 1)
    check(v, a.var(1, ddof=1))
    check(m, a.mean(1))
    s, m = ember.std_mean(x, dim=0, keepdim=True, correction=0)
    check(s, a.std(0, keepdims=True))
    check(m, a.mean(0, keepdims=True))
    assert math.isnan(ember.tensor([1.0]).var().item())  # N - correction <= 0


def test_var_large_offset_accuracy():
    a = 1e6 + np.arange(100000, dtype=np.float64) % 7
    check(ember.tensor(a.astype(np.float32)).var(), a.var(ddof=1), "float32")


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), -1, None, "fro"])
def test_norm_orders(p, rng):
    a = rng.standard_normal((3, 5))
    a[0, 0] = 0.0
    x = make(a)
    pv = 2 if p in (None, "fro") else p
    for dim in (None, 1, (0, 1)):
        flat = a if dim is None else a
        ax = None if dim is None else dim
        absa = np.abs(flat)
        if pv == float("inf"):
            want = absa.max(axis=ax)
        elif pv == float("-inf"):
            want = absa.min(axis=ax)
        elif pv == 0:
            want = (absa != 0).sum(axis=ax).astype(np.float64)
        else:
            with np.errstate(divide="ignore"):
                want = (absa**pv).sum(axis=ax) ** (1.0 / pv)
        check(ember.norm(x, p, dim), want)
    check(x.norm(), np.sqrt((a * a).sum()))
    check(x.norm(dim=1, keepdim=True), np.sqrt((a * a).sum(1, keepdims=True)))


def test_logsumexp_stable():
    x = ember.tensor([[1000.0, 1000.0], [-1000.0, -1000.0]])
    check(ember.logsumexp(x, 1), [1000.0 + math.log(2), -1000.0 + math.log(2)])
    inf = float("inf")
    check(ember.tensor([1.0, inf]).logsumexp(0), inf)
    check(ember.tensor([-inf, -inf]).logsumexp(0), -inf)
    check(ember.logsumexp(ember.tensor([1, 2, 3]), 0), math.log(sum(math.exp(i) for i in (1, 2, 3))))
    assert ember.logsumexp(ember.empty(3, 0), 1).shape == (3,)
    assert ember.logsumexp(x, [0, 1], keepdim=True).shape == (1, 1)


# ---- all / any / count_nonzero --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_all_any_count(dtype, rng):
    a = rng.integers(0, 3, size=(4, 5)).astype(np.float64)
    x = make(a, dtype)
    ref = to_np(x) != 0
    rt = ember.uint8 if dtype == "uint8" else ember.bool
    assert x.all().dtype == rt and x.any(0).dtype == rt
    assert bool(x.all().item()) == ref.all() and bool(x.any().item()) == ref.any()
    np.testing.assert_array_equal(to_np(x.all(1)).astype(bool), ref.all(1))
    np.testing.assert_array_equal(to_np(x.any(dim=0, keepdim=True)).astype(bool), ref.any(0, keepdims=True))
    np.testing.assert_array_equal(to_np(ember.count_nonzero(x, 0)), ref.sum(0))
    assert ember.count_nonzero(x).item() == ref.sum()
    assert ember.count_nonzero(x, (0, 1)).item() == ref.sum()
    assert x.all(dim=()).shape == (4, 5)  # an explicit empty dim list reduces nothing


def test_all_any_large_early_exit():
    x = ember.ones(1 << 20)
    assert x.all().item() is True
    x[1000] = 0.0
    assert x.all().item() is False
    assert ember.zeros(1 << 20).any().item() is False
    assert (ember.zeros(1 << 20) + ember.tensor(float("nan"))).any().item() is True


# ---- scans ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dim, rng):
    a = rng.standard_normal((4, 5, 3))
    for name, x, ref in layouts(a):
        check(ember.cumsum(x, dim), np.cumsum(ref, axis=dim))
        check(x.cumprod(dim), np.cumprod(ref, axis=dim))
    i = make(rng.integers(-3, 4, size=(3, 4)).astype(np.int32))
    r = i.cumsum(1)
    assert r.dtype == ember.int64
    np.testing.assert_array_equal(to_np(r), np.cumsum(to_np(i), 1))
    assert ember.tensor([True, False, True]).cumsum(0).dtype == ember.int64
    assert i.cumsum(0, dtype=ember.float32).dtype == ember.float32
    h = make(a[0], "float16")
    assert h.cumsum(0).dtype == ember.float16
    x = make(a[0].copy())
    x.cumsum_(1)
    check(x, np.cumsum(a[0], 1))


def test_cummax_cummin():
    nan = float("nan")
    x = ember.tensor([1.0, 2.0, 2.0, 1.0])
    r = x.cummax(0)
    assert type(r).__name__ == "cummax"
    assert to_np(r.values).tolist() == [1.0, 2.0, 2.0, 2.0] and to_np(r.indices).tolist() == [0, 1, 2, 2]
    r = ember.cummin(ember.tensor([2.0, 1.0, 1.0, 2.0]), 0)
    assert to_np(r.values).tolist() == [2.0, 1.0, 1.0, 1.0] and to_np(r.indices).tolist() == [0, 1, 2, 2]
    r = ember.tensor([1.0, nan, 3.0, 0.0]).cummax(0)
    assert to_np(r.indices).tolist() == [0, 1, 1, 1] and math.isnan(to_np(r.values)[3])
    m = ember.tensor([[3, 1], [2, 5], [4, 4]]).cummax(0)
    assert to_np(m.values).tolist() == [[3, 1], [3, 5], [4, 5]] and to_np(m.indices).tolist() == [[0, 0], [0, 1], [2, 1]]


# ---- errors ---------------------------------------------------------------------------------------


def test_errors():
    e = ember.empty(0)
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0"):
        e.max()
    with pytest.raises(IndexError, match=r"argmax\(\): Expected reduction dim to be specified"):
        e.argmax()
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction dim 1 to have non-zero size"):
        ember.empty(3, 0).max(1)
    with pytest.raises(IndexError, match=r"argmin\(\): Expected reduction dim 1 to have non-zero size"):
        ember.empty(3, 0).argmin(1)
    with pytest.raises(RuntimeError, match=r"amax\(\): Expected reduction dim to be specified"):
        e.amax()  # over every dim: torch's RuntimeError (fuzz s22), not the IndexError of one dim
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size"):
        e.amax(0)
    with pytest.raises(RuntimeError, match="aminmax"):
        e.aminmax()
    with pytest.raises(IndexError, match=r"dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        ember.ones(2, 3).sum(2)
    with pytest.raises(IndexError, match="out of range"):
        ember.ones(2, 3).argmax(-3)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        ember.ones(2, 3).sum((0, -2))
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype. Input dtype must be either a "
                                           r"floating point or complex dtype. Got: Long"):
        ember.tensor([1, 2]).mean()
    with pytest.raises(RuntimeError, match="Got: Int"):
        ember.tensor([1, 2]).mean(dtype=ember.int32)
    assert ember.tensor([1, 2]).mean(dtype=ember.float32).item() == 1.5
    with pytest.raises(RuntimeError, match="std and var only support floating point"):
        ember.tensor([1, 2]).var()
    with pytest.raises(RuntimeError, match="nanmean"):
        ember.tensor([1, 2]).nanmean()
    with pytest.raises(RuntimeError, match="vector_norm: Expected a floating point"):
        ember.tensor([1, 2]).norm()
    with pytest.raises(RuntimeError, match="inf norm on an empty tensor"):
        e.norm(float("inf"))
    with pytest.raises(RuntimeError, match="Order abc not supported"):
        ember.ones(2, 2).norm("abc")
    with pytest.raises(TypeError, match="unbiased and correction"):
        ember.ones(3).var(0, unbiased=True, correction=1)
    with pytest.raises(IndexError, match="out of range"):
        ember.ones(2, 3).cumsum(2)


# ---- against PyTorch ------------------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "float16", "bfloat16"])
def test_against_torch(dtype, rng):
    a = rng.standard_normal((3, 4, 5)) * 4
    x = make(a, dtype)
    t = torch.from_numpy(to_np(x)).to(getattr(torch, dtype))

    def same(e, tt, d=dtype):
        assert str(e.dtype).split(".")[-1] == str(tt.dtype).split(".")[-1], (e.dtype, tt.dtype)
        check(e, tt.to(torch.float64).numpy() if tt.is_floating_point() else tt.numpy(), d)

    same(x.sum(), t.sum())
    same(x.sum((0, 2), keepdim=True), t.sum((0, 2), keepdim=True))
    same(x.prod(1), t.prod(1))
    same(x.amax((1, 2)), t.amax((1, 2)))
    same(x.max(2).values, t.max(2).values)
    if dtype != "bool":  # torch has no argmin for bool
        same(x.argmin(1), t.argmin(1))
    same(x.cumsum(1), t.cumsum(1))
    same(x.all(2), t.all(2))
    same(x.count_nonzero(0), t.count_nonzero(0))
    if dtype in FLOAT_DTYPES:
        same(x.mean(1), t.mean(1))
        same(x.var(0, correction=0), t.var(0, correction=0))
        same(x.std(2), t.std(2))
        same(x.norm(3, dim=1), t.norm(3, dim=1))
        same(x.logsumexp((0, 1)), t.logsumexp((0, 1)))
        same(x.cummin(2).values, t.cummin(2).values)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_rows_every_length_match_numpy(dtype):
    # Rows shorter than the wide vector loops run on the short-vector and scalar tails; a NaN in
    # either part must still propagate through max/min.
    rng = np.random.default_rng(3)
    for n in list(range(1, 40)) + [49, 63, 64, 65, 97]:
        a = rng.standard_normal((37, n)).astype(dtype)
        t = ember.tensor(a)
        np.testing.assert_allclose(t.sum(-1).numpy(), a.sum(-1), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(t.mean(-1).numpy(), a.mean(-1), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(t.amax(-1).numpy(), a.max(-1))
        np.testing.assert_array_equal(t.amin(-1).numpy(), a.min(-1))
        np.testing.assert_array_equal(t.argmax(-1).numpy(), a.argmax(-1))
        for pos in {0, n // 2, n - 1}:
            b = a.copy()
            b[5, pos] = np.nan
            tb = ember.tensor(b)
            assert np.isnan(tb.amax(-1).numpy()[5]) and np.isnan(tb.amin(-1).numpy()[5])
            np.testing.assert_array_equal(np.delete(tb.amax(-1).numpy(), 5),
                                          np.delete(b.max(-1), 5))
            assert int(tb.argmax(-1)[5]) == pos


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 49, 64, 255, 256, 257])
@pytest.mark.parametrize("rows", [7, 8, 9, 300])
def test_short_rows_sum_mean(dtype, n, rows):
    # Many short contiguous rows are summed 8 at a time (row_sums): rows left over after the
    # blocks of 8, lane tails, the length limit (256) and every floating dtype.
    a = np.random.default_rng(n * 1000 + rows).standard_normal((rows, n))
    e = ember.tensor(a).to(getattr(ember, dtype))
    t = torch.tensor(a).to(getattr(torch, dtype))
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 3e-3, "bfloat16": 2e-2}[dtype]
    for fe, ft in [(e.sum(-1), t.sum(-1)), (e.mean(-1), t.mean(-1)), (e.sum(1, keepdim=True), t.sum(1, keepdim=True))]:
        np.testing.assert_allclose(fe.double().numpy(), ft.double().numpy(), rtol=tol, atol=tol * 4)


@needs_torch
def test_short_rows_nan_inf_strided_and_4d():
    a = np.random.default_rng(11).standard_normal((19, 64)).astype(np.float32)
    a[3, 5] = np.nan
    a[12, 48] = np.nan  # the scalar tail of a 49-element row
    a[5, 0] = np.inf
    a[6, 0], a[6, 1] = np.inf, -np.inf
    e, t = ember.tensor(a), torch.tensor(a)
    for fe, ft in [(e.sum(-1), t.sum(-1)), (e[:, :49].sum(-1), t[:, :49].sum(-1)),
                   (e[:, :49].mean(-1), t[:, :49].mean(-1)), (e.nansum(-1), t.nansum(-1))]:
        np.testing.assert_allclose(fe.numpy(), ft.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)
    out = e[:, :49].sum(-1).numpy()
    assert np.isnan(out[3]) and np.isnan(out[12]) and np.isnan(out[6]) and out[5] == np.inf
    x = np.random.default_rng(12).standard_normal((4, 33, 7, 7))
    np.testing.assert_allclose(ember.tensor(x).mean((2, 3)).numpy(), x.mean((2, 3)), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_nanmean_of_16_bit_floats_counts_past_65504(dtype):
    # The count (here 60000 valid elements) divides in float, as torch's: cast to float16 it
    # would be inf and the mean 0.
    if torch is None:
        pytest.skip("needs torch")
    for v in (0.5, 1.0):
        e = ember.full((70000,), v, dtype=getattr(ember, dtype))
        e[::7] = float("nan")
        t = torch.full((70000,), v, dtype=getattr(torch, dtype))
        t[::7] = float("nan")
        assert ember.nanmean(e).item() == torch.nanmean(t).item()
        # per row: within an ulp (ember rounds the row sums to the dtype first, as nansum)
        np.testing.assert_allclose(
            ember.nanmean(e.view(7, 10000), dim=1).float().numpy(),
            torch.nanmean(t.view(7, 10000), dim=1).float().numpy(), rtol=8e-3)
