"""CUDA reductions, scans and sorts (csrc/cuda/reduce_ops.cu, sort_ops.cu) against the CPU kernels:
every op over dtypes, dims (None, 0, -1, middle, lists), keepdim, non-contiguous inputs, empty
reductions, NaNs, ties, and sizes large enough for the multi-block paths. Skipped without a GPU."""

from __future__ import annotations

import ember
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

FLOATS = ["float32", "float64", "float16", "bfloat16"]
ALL = FLOATS + ["int64", "int32", "uint8", "int8", "bool"]


def make(shape, dtype, seed=0, kind="randn"):
    """A CPU tensor of `dtype`; integer kinds hold small values so that there are ties."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if len(shape) else 1
    if dtype == "bool":
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif dtype in ("int64", "int32", "int8"):
        a = rng.integers(-5, 6, n).astype(dtype)
    elif dtype == "uint8":
        a = rng.integers(0, 9, n).astype(np.uint8)
    elif kind == "ints":  # floats with many ties
        a = rng.integers(-4, 5, n).astype(np.float32)
    else:
        a = rng.standard_normal(n).astype(np.float32)
    t = ember.from_numpy(a.reshape(shape).copy())
    if dtype in FLOATS:
        t = t.to(getattr(ember, dtype))
    return t


def cuda(t):
    return t.to("cuda")


def flat_tensors(r):
    if isinstance(r, ember.Tensor):
        return [r]
    if isinstance(r, (list, tuple)):
        return [t for v in r for t in flat_tensors(v)]
    return []


def host(t):
    t = t.cpu()
    if t.dtype in (ember.float16, ember.bfloat16):
        t = t.float()
    return t.numpy()


def tol(dtype):
    return {
        ember.float16: (2e-3, 2e-3),
        ember.bfloat16: (1.6e-2, 1.6e-2),
        ember.float32: (2e-5, 1e-5),
    }.get(dtype, (1e-10, 1e-10))


def compare(fn, x, rtol=None, atol=None, exact_indices=True, view=None):
    """Runs fn on the CPU tensor x and on its CUDA copy (both through `view`, to test
    non-contiguous layouts) and compares every result."""
    xc = cuda(x)
    if view is not None:
        x, xc = view(x), view(xc)
    want = flat_tensors(fn(x))
    got = flat_tensors(fn(xc))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.device.type == "cuda", g.device
        assert tuple(g.shape) == tuple(w.shape), (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        wn, gn = host(w), host(g)
        if w.dtype in (ember.int64, ember.int32, ember.int8, ember.uint8, ember.bool):
            if exact_indices:
                np.testing.assert_array_equal(gn, wn)
            continue
        r, a = tol(w.dtype)
        np.testing.assert_allclose(
            gn, wn, rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
            equal_nan=True,
        )
    return got


DIMS = [None, 0, -1, 1, [0, 2], [-1, 0, 1]]


# ---- sums, means, products -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(dtype, dim, keepdim):
    x = make((4, 5, 6), dtype)
    compare(lambda t: ember.sum(t, dim=dim, keepdim=keepdim), x)
    compare(lambda t: ember.nansum(t, dim=dim, keepdim=keepdim), x)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_mean_nanmean(dtype, dim):
    x = make((4, 5, 6), dtype)
    compare(lambda t: ember.mean(t, dim=dim), x)
    compare(lambda t: ember.mean(t, dim=dim, keepdim=True), x)
    y = make((4, 5, 6), "float32")
    y[0, 1, :] = float("nan")
    y[2, :, 3] = float("nan")
    y = y.to(getattr(ember, dtype))
    compare(lambda t: ember.nanmean(t, dim=dim), y)
    compare(lambda t: ember.nansum(t, dim=dim), y)
    compare(lambda t: ember.sum(t, dim=dim), y)


def test_sum_dtype_argument_and_int_promotion():
    x = make((3, 7), "int32")
    compare(lambda t: ember.sum(t), x)
    compare(lambda t: ember.sum(t, dim=1, dtype=ember.float64), x)
    compare(lambda t: ember.sum(t, dim=0, dtype=ember.int32), x)
    compare(lambda t: ember.mean(t, dim=0, dtype=ember.float32), x)
    compare(lambda t: ember.prod(t, dim=1, dtype=ember.float32), x)
    b = make((3, 7), "bool")
    compare(lambda t: ember.sum(t, dim=1), b)
    assert ember.sum(cuda(b)).dtype == ember.int64


def test_mean_of_integers_is_an_error_on_both_devices():
    x = make((3, 4), "int64")
    for t in (x, cuda(x)):
        with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
            ember.mean(t)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "bool"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod(dtype, dim):
    x = make((3, 4, 5), dtype)
    if dtype in FLOATS:
        x = (x * 0.5 + 1.0) if dtype != "float16" else x
    compare(lambda t: ember.prod(t, dim=dim), x, rtol=1e-2 if dtype == "float16" else None)
    if dim is not None:
        compare(lambda t: ember.prod(t, dim=dim, keepdim=True), x,
                rtol=1e-2 if dtype == "float16" else None)


# ---- layouts and sizes -------------------------------------------------------------------------

VIEWS = {
    "transpose": lambda t: t.transpose(0, 2),
    "slice": lambda t: t[:, 1:, ::2],
    "permute": lambda t: t.permute(1, 2, 0),
    "expand": lambda t: t[:, :1, :].expand(4, 5, 6),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("dim", [None, 0, 1, -1, [0, 2]])
def test_non_contiguous_inputs(view, dim):
    x = make((4, 5, 6), "float32")
    v = VIEWS[view]
    compare(lambda t: ember.sum(t, dim=dim), x, view=v)
    compare(lambda t: ember.amax(t, dim=[] if dim is None else dim), x, view=v)
    compare(lambda t: ember.var(t, dim=dim), x, view=v)
    compare(lambda t: ember.norm(t, dim=dim), x, view=v)
    if dim is None or isinstance(dim, int):
        compare(lambda t: ember.argmax(t, dim=dim), x, view=v)
        compare(lambda t: ember.argmin(t, dim=dim, keepdim=True), x, view=v)
    if isinstance(dim, int):
        compare(lambda t: ember.max(t, dim=dim), x, view=v)
        compare(lambda t: ember.sort(t, dim=dim), x, view=v)
        compare(lambda t: ember.cumsum(t, dim=dim), x, view=v, rtol=1e-5, atol=1e-5)
        compare(lambda t: ember.cummax(t, dim=dim), x, view=v)
        compare(lambda t: ember.median(t, dim=dim), x, view=v)


@pytest.mark.parametrize(
    "shape,dim",
    [
        ((1_000_000,), None),
        ((1_000_000,), 0),
        ((7, 1_000_003), 1),
        ((7, 1_000_003), 0),
        ((7, 1_000_003), None),
        ((3, 100_000), -1),
        ((100_000, 3), 0),
        ((100_000, 3), 1),
        ((2000, 700), 0),
        ((700, 2000), 1),
        ((64, 33, 129), [0, 2]),
    ],
)
def test_large(shape, dim):
    x = make(shape, "float32", seed=1)
    compare(lambda t: ember.sum(t, dim=dim), x, rtol=1e-4, atol=1e-3)
    compare(lambda t: ember.mean(t, dim=dim), x, rtol=1e-4, atol=1e-6)
    compare(lambda t: ember.amax(t, dim=[] if dim is None else dim), x)
    compare(lambda t: ember.var(t, dim=dim), x, rtol=1e-4)
    compare(lambda t: ember.norm(t, dim=dim), x, rtol=1e-4)
    compare(lambda t: ember.all(t, dim=dim), x)
    compare(lambda t: ember.count_nonzero(t, dim=dim), x)
    if dim is None or isinstance(dim, int):
        compare(lambda t: ember.argmax(t, dim=dim), x)
        compare(lambda t: ember.argmin(t, dim=dim), x)
    h = make(shape, "float16", seed=2)
    compare(lambda t: ember.sum(t, dim=dim), h, rtol=5e-3, atol=0.5)
    d = make(shape, "float64", seed=3)
    compare(lambda t: ember.sum(t, dim=dim), d, rtol=1e-9, atol=1e-9)
    i = make(shape, "int64", seed=4)
    compare(lambda t: ember.sum(t, dim=dim), i)


def test_large_ties_argmax_first_occurrence():
    x = ember.zeros(1_000_000)
    x[123_457] = 5.0
    x[654_321] = 5.0
    x[999_999] = 5.0
    compare(lambda t: ember.argmax(t), x)
    compare(lambda t: ember.max(t, dim=0), x)
    y = ember.ones(7, 100_003)
    y[:, 50_000] = 0.0
    y[:, 70_000] = 0.0
    compare(lambda t: ember.argmin(t, dim=1), y)
    compare(lambda t: ember.argmin(t, dim=0), y)
    compare(lambda t: ember.argmax(t), y)


# ---- max / min / arg ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
def test_max_min_arg(dtype):
    x = make((5, 6, 7), dtype, kind="ints")
    compare(lambda t: ember.max(t), x)
    compare(lambda t: ember.min(t), x)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            compare(lambda t: ember.max(t, dim, keepdim), x)
            compare(lambda t: ember.min(t, dim, keepdim), x)
            compare(lambda t: ember.argmax(t, dim, keepdim), x)
            compare(lambda t: ember.argmin(t, dim, keepdim), x)
            compare(lambda t: ember.aminmax(t, dim=dim, keepdim=keepdim), x)
    compare(lambda t: ember.argmax(t), x)
    compare(lambda t: ember.argmin(t), x)
    compare(lambda t: ember.aminmax(t), x)
    for dims in ([], [0], [0, 2], [-1, 1]):
        compare(lambda t: ember.amax(t, dims), x)
        compare(lambda t: ember.amin(t, dims, True), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_propagates(dtype):
    x = make((4, 9), "float32", kind="ints")
    x[1, 3] = float("nan")
    x[1, 7] = float("nan")
    x[3, 0] = float("nan")
    x = x.to(getattr(ember, dtype))
    compare(lambda t: ember.max(t), x)
    compare(lambda t: ember.min(t), x)
    compare(lambda t: ember.argmax(t), x)
    for dim in (0, 1):
        compare(lambda t: ember.max(t, dim), x)
        compare(lambda t: ember.min(t, dim), x)
        compare(lambda t: ember.argmin(t, dim), x)
        compare(lambda t: ember.amax(t, [dim]), x)
        compare(lambda t: ember.cummax(t, dim), x)
        compare(lambda t: ember.cummin(t, dim), x)
        compare(lambda t: ember.sort(t, dim), x)
        compare(lambda t: ember.sort(t, dim, descending=True), x)
        compare(lambda t: ember.median(t, dim), x)
        compare(lambda t: ember.nanmedian(t, dim), x)
    compare(lambda t: ember.median(t), x)
    compare(lambda t: ember.nanmedian(t), x)
    compare(lambda t: ember.norm(t, p=float("inf")), x)


def test_empty_reductions():
    x = ember.zeros(3, 0, 4)
    for fn in (
        lambda t: ember.sum(t),
        lambda t: ember.sum(t, dim=1),
        lambda t: ember.sum(t, dim=[0, 2]),
        lambda t: ember.prod(t, dim=1),
        lambda t: ember.mean(t, dim=1),
        lambda t: ember.nansum(t, dim=1, keepdim=True),
        lambda t: ember.var(t, dim=1),
        lambda t: ember.norm(t, dim=1),
        lambda t: ember.all(t, dim=1),
        lambda t: ember.any(t, dim=1),
        lambda t: ember.count_nonzero(t, dim=[1]),
        lambda t: ember.amax(t, [0]),
        lambda t: ember.max(t, 0),
        lambda t: ember.argmax(t, 2),
        lambda t: ember.cumsum(t, 1),
        lambda t: ember.cummax(t, 1),
        lambda t: ember.sort(t, 1),
        lambda t: ember.median(t),
        lambda t: ember.topk(t, 0, dim=1),
    ):
        compare(fn, x)
    for fn, exc in (
        (lambda t: ember.max(t), RuntimeError),
        (lambda t: ember.amax(t, [1]), IndexError),
        (lambda t: ember.argmax(t), IndexError),
        (lambda t: ember.max(t, 1), IndexError),
        (lambda t: ember.median(t, 1), IndexError),
        (lambda t: ember.norm(t, p=float("inf"), dim=1), RuntimeError),
    ):
        for t in (x, cuda(x)):
            with pytest.raises(exc):
                fn(t)


def test_zero_dim():
    x = ember.tensor(3.5)
    for fn in (
        lambda t: ember.sum(t),
        lambda t: ember.sum(t, dim=0),
        lambda t: ember.max(t),
        lambda t: ember.max(t, 0),
        lambda t: ember.argmax(t),
        lambda t: ember.var(t),
        lambda t: ember.cumsum(t, 0),
        lambda t: ember.sort(t),
        lambda t: ember.median(t),
        lambda t: ember.topk(t, 1),
    ):
        compare(fn, x)


# ---- var / std / norm --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
def test_var_std(dtype, dim):
    x = make((4, 5, 6), dtype) * 3 + 10
    compare(lambda t: ember.var(t, dim=dim), x)
    compare(lambda t: ember.std(t, dim=dim, keepdim=True), x)
    compare(lambda t: ember.var(t, dim=dim, correction=0), x)
    compare(lambda t: ember.std(t, dim=dim, unbiased=False), x)
    compare(lambda t: ember.var_mean(t, dim=dim, correction=2), x)
    compare(lambda t: ember.std_mean(t, dim=dim), x)


def test_var_single_element_and_errors():
    x = ember.tensor([[1.0], [2.0]])
    compare(lambda t: ember.var(t, dim=1), x)  # n - correction = 0: inf/nan as on the CPU
    i = make((3, 3), "int64")
    for t in (i, cuda(i)):
        with pytest.raises(RuntimeError, match="std and var only support floating point"):
            ember.var(t)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [2, 1, 0, 3, 0.5, float("inf"), float("-inf")])
@pytest.mark.parametrize("dim", [None, 1, [0, 2]])
def test_norm(dtype, p, dim):
    x = make((4, 5, 6), dtype)
    x[0, 0, 0] = 0.0
    compare(lambda t: ember.norm(t, p=p, dim=dim), x, rtol=None if dtype != "float32" else 1e-5)
    compare(lambda t: ember.norm(t, p=p, dim=dim, keepdim=True), x,
            rtol=None if dtype != "float32" else 1e-5)


def test_norm_fro_and_dtype():
    x = make((4, 5, 6), "float32") * 10
    compare(lambda t: ember.norm(t, "fro", dim=[0, 1]), x)
    compare(lambda t: ember.norm(t, dim=1, dtype=ember.float64), x)


def test_logsumexp():
    # A composite: also needs the CUDA elementwise kernels (sub, exp, log, ...).
    x = make((4, 5, 6), "float32") * 10
    compare(lambda t: ember.logsumexp(t, [1]), x)
    big = x * 100
    compare(lambda t: ember.logsumexp(t, [0, 2], keepdim=True), big)


# ---- all / any / count_nonzero -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [None, 0, -1, [0, 2], []])
def test_all_any_count(dtype, dim):
    x = make((4, 5, 6), dtype, kind="ints")
    compare(lambda t: ember.all(t, dim=dim), x)
    compare(lambda t: ember.any(t, dim=dim, keepdim=True), x)
    if dim != []:
        compare(lambda t: ember.count_nonzero(t, dim=dim), x)
    ones = ember.ones(4, 5, 6).to(x.dtype)
    compare(lambda t: ember.all(t, dim=dim), ones)
    zeros = ember.zeros(4, 5, 6).to(x.dtype)
    compare(lambda t: ember.any(t, dim=dim), zeros)


# ---- scans -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dtype, dim):
    x = make((4, 5, 6), dtype, kind="ints")
    compare(lambda t: ember.cumsum(t, dim), x)
    if dtype in FLOATS:
        y = make((4, 5, 6), dtype) * 0.25 + 1
        compare(lambda t: ember.cumprod(t, dim), y, rtol=1e-2 if dtype != "float32" else 1e-5)
    else:
        compare(lambda t: ember.cumprod(t, dim), x)
    compare(lambda t: ember.cumsum(t, dim, dtype=ember.float64), x)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(dtype, dim):
    x = make((4, 5, 6), dtype, kind="ints")
    compare(lambda t: ember.cummax(t, dim), x)
    compare(lambda t: ember.cummin(t, dim), x)


def test_scans_large():
    x = make((3, 100_000), "float32", seed=5)
    compare(lambda t: ember.cumsum(t, 1), x, rtol=1e-4, atol=1e-3)
    compare(lambda t: ember.cumsum(t, 0), x, rtol=1e-5, atol=1e-5)
    compare(lambda t: ember.cummax(t, 1), x)
    y = make((100_000, 3), "int64", seed=6)
    compare(lambda t: ember.cumsum(t, 0), y)
    compare(lambda t: ember.cummin(t, 0), y)


# ---- sort and friends --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort(dtype, dim, descending):
    x = make((5, 6, 7), dtype, kind="ints")  # ties: stable order by index
    compare(lambda t: ember.sort(t, dim=dim, descending=descending), x)
    compare(lambda t: ember.sort(t, dim=dim, descending=descending, stable=True), x)
    compare(lambda t: ember.argsort(t, dim=dim, descending=descending), x)
    if dim == 0:
        compare(lambda t: ember.msort(t), x)


def test_sort_signed_zero_inf_nan():
    x = ember.tensor([0.0, -0.0, float("nan"), -1.0, float("inf"), float("-inf"), 0.0, -0.0,
                      float("nan"), 2.0])
    for dt in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        y = x.to(dt)
        compare(lambda t: ember.sort(t), y)
        compare(lambda t: ember.sort(t, descending=True), y)
        compare(lambda t: ember.topk(t, 4), y)
        compare(lambda t: ember.topk(t, 4, largest=False), y)
        compare(lambda t: ember.unique(t, return_inverse=True, return_counts=True), y)
        compare(lambda t: ember.mode(t), y)


def test_sort_int_extremes():
    x = ember.tensor([2**63 - 1, -(2**63), 0, -1, 1, 2**63 - 1, -(2**63)])
    compare(lambda t: ember.sort(t), x)
    compare(lambda t: ember.sort(t, descending=True), x)
    y = ember.tensor([127, -128, 0, -1, 1], dtype=ember.int8)
    compare(lambda t: ember.sort(t), y)
    z = ember.tensor([255, 0, 7, 255], dtype=ember.uint8)
    compare(lambda t: ember.sort(t, descending=True), z)


@pytest.mark.parametrize("shape,dim", [((1_000_000,), 0), ((7, 100_003), 1), ((100_003, 3), 0),
                                       ((300, 1000), 0)])
def test_sort_large(shape, dim):
    x = make(shape, "float32", seed=7)
    compare(lambda t: ember.sort(t, dim=dim), x)
    compare(lambda t: ember.topk(t, 10, dim=dim), x)
    compare(lambda t: ember.kthvalue(t, 5, dim=dim), x)
    compare(lambda t: ember.median(t, dim=dim), x)
    i = make(shape, "int64", seed=8)
    compare(lambda t: ember.sort(t, dim=dim, descending=True), i)
    # mode: the same values; which occurrence the index names differs for rows longer than 16
    # (the CPU kernel follows PyTorch's unstable std::sort, CUDA sorts stably), so the indices
    # are checked to point at the mode
    (values, indices), (cvalues, cindices) = ember.mode(i, dim=dim), ember.mode(cuda(i), dim=dim)
    np.testing.assert_array_equal(host(cvalues), host(values))
    for idx in (indices, cindices.cpu()):
        picked = ember.gather(i, dim, idx.unsqueeze(dim)).squeeze(dim)
        np.testing.assert_array_equal(host(picked), host(values))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", [0, -1])
def test_topk_kthvalue(dtype, dim):
    x = make((6, 9), dtype, kind="ints")
    n = x.shape[dim]
    for k in (1, 3, n):
        compare(lambda t: ember.topk(t, k, dim=dim), x)
        compare(lambda t: ember.topk(t, k, dim=dim, largest=False), x)
        compare(lambda t: ember.kthvalue(t, k, dim=dim), x)
        compare(lambda t: ember.kthvalue(t, k, dim=dim, keepdim=True), x)
    for t in (x, cuda(x)):
        with pytest.raises(RuntimeError, match="topk\\(\\): selected index k out of range"):
            ember.topk(t, n + 1, dim=dim)
        with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range"):
            ember.kthvalue(t, 0, dim=dim)


@pytest.mark.parametrize("dtype", ALL)
def test_median_mode(dtype):
    for shape in ((5, 8), (5, 7)):
        x = make(shape, dtype, kind="ints")
        compare(lambda t: ember.median(t), x)
        compare(lambda t: ember.nanmedian(t), x)
        for dim in (0, 1):
            compare(lambda t: ember.median(t, dim), x)
            compare(lambda t: ember.median(t, dim, keepdim=True), x)
            compare(lambda t: ember.nanmedian(t, dim), x)
            compare(lambda t: ember.mode(t, dim), x)
            compare(lambda t: ember.mode(t, dim, keepdim=True), x)


def test_median_all_nan_rows_and_empty():
    x = ember.tensor([[float("nan")] * 4, [1.0, float("nan"), 3.0, 2.0], [4.0, 3.0, 2.0, 1.0]])
    compare(lambda t: ember.nanmedian(t, 1), x)
    compare(lambda t: ember.median(t, 1), x)
    compare(lambda t: ember.nanmedian(t), x)
    compare(lambda t: ember.median(ember.tensor([float("nan"), float("nan")]).to(t.device)), x)
    e = ember.zeros(0)
    compare(lambda t: ember.median(t), e)
    compare(lambda t: ember.nanmedian(t), e)
    ei = ember.zeros(0, dtype=ember.int64)
    compare(lambda t: ember.median(t), ei)


@pytest.mark.parametrize("dtype", ALL)
def test_unique(dtype):
    x = make((6, 7), dtype, kind="ints")
    for inv in (False, True):
        for cnt in (False, True):
            compare(lambda t: ember.unique(t, return_inverse=inv, return_counts=cnt), x)
    compare(lambda t: ember.unique(t, sorted=False), x)
    compare(lambda t: ember.unique(t, dim=0, return_inverse=True, return_counts=True), x)
    compare(lambda t: ember.unique(t, dim=1, return_inverse=True, return_counts=True), x)
    compare(lambda t: ember.unique(t), x, view=lambda t: t.transpose(0, 1))
    compare(lambda t: ember.unique(t), ember.zeros(0).to(x.dtype))


def test_unique_large():
    x = make((1_000_000,), "int64", seed=9)
    compare(lambda t: ember.unique(t, return_inverse=True, return_counts=True), x)
    y = make((1_000_000,), "float32", seed=10).to(ember.float16)
    compare(lambda t: ember.unique(t, return_inverse=True, return_counts=True), y)


def test_bool_bytes_other_than_one():
    # A bool tensor viewed from uint8 bytes 2 and 255: every nonzero byte is True.
    b = ember.tensor([0, 2, 255, 1, 0], dtype=ember.uint8)
    try:
        x = b.view(ember.bool)
    except Exception:  # noqa: BLE001 - dtype views may be unsupported; nothing to test then
        pytest.skip("no dtype view")
    compare(lambda t: ember.sum(t), x)
    compare(lambda t: ember.all(t), x)
    compare(lambda t: ember.sort(t), x)
    compare(lambda t: ember.unique(t, return_counts=True), x)


def test_topk_of_a_zero_dim_tensor():
    # A 0-d self has one position: k = 0 and k = 1 both give the value and index 0 (PyTorch's rule;
    # the CPU kernel leaves k = 0's outputs unwritten, so no comparison). k = 0 used to fill that
    # element from an empty index buffer on the device.
    x = cuda(ember.tensor(3.5))
    for k in (0, 1):
        v, i = ember.topk(x, k)
        assert tuple(v.shape) == () and tuple(i.shape) == ()
        assert float(host(v)) == 3.5 and int(host(i)) == 0
    compare(lambda t: ember.sum(t), make((5,), "float32"))  # the device is still fine


@pytest.mark.parametrize("shape,dim", [
    ((40, 1100), 0), ((3000, 5), 0), ((33, 2, 1030), [0, 1]), ((700, 33), 0), ((8192, 40), 0),
    ((4, 500, 20), [0, 1]), ((2, 3000, 48), 1), ((257, 16), 0)])
def test_column_reductions(shape, dim):
    # Reducing a non-innermost dim with a contiguous kept dim (reduce_columns_kernel: 32 adjacent
    # outputs per block, 8 row slices; few outputs split the rows into chunks over blocks:
    # (8192, 40), (4, 500, 20)); tiles that end past the last output ((700, 33)) or cross a kept
    # dim ((2, 3000, 48)); under 16 outputs blocks read strided columns ((3000, 5)).
    # Integer-valued floats make ties for the first-index rule.
    x = make(shape, "float32", kind="ints")
    compare(lambda t: ember.sum(t, dim=dim), x, rtol=1e-5, atol=1e-5)
    compare(lambda t: ember.var(t, dim=dim, correction=2.5), x, rtol=1e-5, atol=1e-6)
    compare(lambda t: ember.amin(t, dim=dim), x)
    if isinstance(dim, int):
        compare(lambda t: ember.argmax(t, dim=dim), x)
        compare(lambda t: ember.max(t, dim=dim), x)
        compare(lambda t: ember.argmin(t, dim=dim, keepdim=True), x)
    for dt in ("bfloat16", "float16", "float64"):  # float accumulators for the 16-bit floats
        y = make(shape, dt, kind="ints")
        tol = 1e-2 if dt != "float64" else 1e-12
        compare(lambda t: ember.sum(t, dim=dim), y, rtol=tol, atol=tol)


# Column reductions by 16-byte packs (reduce_column_packs_kernel: kN = 16 / itemsize adjacent
# outputs per thread, 32 packs x 8 row slices per block, rows split over blocks with a second
# column-wise pass) and the layouts that fall back to reduce_columns_kernel.
PACK_LAYOUTS = {
    "contiguous": lambda t, r, c: t[: r * c].view(r, c),
    "base +1": lambda t, r, c: t[1: 1 + r * c].view(r, c),  # unaligned: element-wise
    "row stride +16": lambda t, r, c: t[: r * (c + 16)].view(r, c + 16)[:, :c],
    "row stride +1": lambda t, r, c: t[: r * (c + 1)].view(r, c + 1)[:, :c],  # element-wise
}


@pytest.mark.parametrize("shape", [(8192, 3072), (40, 256), (1, 64), (300, 68), (100, 36),
                                   (33, 1000), (20000, 32), (130, 4096)])
@pytest.mark.parametrize("layout", list(PACK_LAYOUTS))
def test_column_reductions_by_packs(shape, layout):
    rows, cols = shape
    view = PACK_LAYOUTS[layout]
    n = rows * (cols + 16) + 1
    small = rows * cols <= 300_000
    for dt in ("bfloat16", "float16", "float32", "float64") if small else ("bfloat16", "float32"):
        x = make((n,), dt, kind="ints")
        r, a = {"bfloat16": (1e-2, 1e-2), "float16": (1e-2, 1e-2)}.get(dt, (1e-5, 1e-5))
        big = rows * cols > 1_000_000
        v = lambda t: view(t, rows, cols)  # noqa: E731
        compare(lambda t: ember.sum(t, dim=0), x, rtol=r, atol=r * (50 if big else 1), view=v)
        compare(lambda t: ember.amax(t, dim=0), x, view=v)
        compare(lambda t: ember.argmin(t, dim=0), x, view=v)
        if small:
            compare(lambda t: ember.mean(t, dim=0), x, rtol=r, atol=r, view=v)
            compare(lambda t: ember.var(t, dim=0, correction=0), x, rtol=r, atol=r, view=v)
            compare(lambda t: ember.linalg.vector_norm(t, ord=2, dim=0), x, rtol=r, atol=r,
                    view=v)
            compare(lambda t: ember.max(t, dim=0), x, view=v)
            compare(lambda t: ember.nansum(t, dim=0), x, rtol=r, atol=r, view=v)
    if small:
        for dt in ("int64", "int32", "int8", "uint8", "bool"):
            x = make((n,), dt)
            v = lambda t: view(t, rows, cols)  # noqa: E731
            compare(lambda t: ember.sum(t, dim=0), x, view=v)
            compare(lambda t: ember.argmax(t, dim=0), x, view=v)
            compare(lambda t: ember.count_nonzero(t, dim=0), x, view=v)
            compare(lambda t: ember.any(t, dim=0), x, view=v)
            if rows <= 40:
                compare(lambda t: ember.prod(t, dim=0), x, view=v)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "int8"])
def test_column_reductions_by_packs_3d(dtype):
    # (2, 500, 64): dims (0, 1) coalesce into one reduced dim; dim 1 alone keeps 2 x 64 outputs.
    x = make((2, 500, 64), dtype, kind="ints")
    r = 1e-2 if dtype == "bfloat16" else 1e-5
    compare(lambda t: ember.sum(t, dim=[0, 1]), x, rtol=r, atol=r)
    compare(lambda t: ember.sum(t, dim=1), x, rtol=r, atol=r)
    compare(lambda t: ember.argmax(t, dim=1), x)
    compare(lambda t: ember.amin(t, dim=[0, 1]), x)
    # the transpose of a (64, 700) reduced over its dim 1 reads columns of the (700, 64) storage
    y = make((700, 64), dtype, kind="ints")
    compare(lambda t: ember.sum(t, dim=1), y, rtol=r, atol=r, view=lambda t: t.t())


# ---- the contiguous path (reduce_contig_kernel: 16-byte packs, 4 accumulators per thread) -------

# Run lengths: 1..9 and around 16-byte packs (2 to 16 elements), the thread path's limit (32), a
# block's iteration of 4 x 256 packs, the chunk split (multiples of 64 elements, at least 8192).
CONTIG_LENGTHS = list(range(1, 10)) + [15, 16, 17, 31, 32, 33, 34, 63, 64, 65, 127, 129, 255,
                                       257, 1023, 1024, 1025, 4095, 4097, 8191, 8193, 16387,
                                       3 * 8192 + 5, 131_075]


def rows_at(off, rows, n):
    """A view of `rows` contiguous rows of n elements starting `off` elements into a 1-d tensor
    (off > 0: the data does not start at a 16-byte boundary)."""
    return lambda t: t[off:off + rows * n].view(rows, n)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("n", CONTIG_LENGTHS)
def test_contig_lengths_and_offsets(dtype, n):
    rows = 3
    flat = make((rows * n + 16,), dtype, seed=n, kind="ints")  # integer values: exact sums, ties
    for off in (0, 1, 3, 7):
        v = rows_at(off, rows, n)
        compare(lambda t: ember.sum(t, dim=-1), flat, view=v)
        compare(lambda t: ember.sum(t), flat, view=v)
        compare(lambda t: ember.argmax(t, dim=1), flat, view=v)
        compare(lambda t: ember.argmin(t), flat, view=v)
        compare(lambda t: ember.max(t, dim=1), flat, view=v)
        compare(lambda t: ember.amin(t, dim=[0, 1]), flat, view=v)
        compare(lambda t: ember.count_nonzero(t, dim=1), flat, view=v)
        compare(lambda t: ember.any(t, dim=1), flat, view=v)
        if dtype in FLOATS:
            compare(lambda t: ember.mean(t, dim=1), flat, view=v)
            compare(lambda t: ember.var(t, dim=1), flat, view=v, rtol=1e-2 if "16" in dtype
                    else None)
            compare(lambda t: ember.norm(t, dim=1), flat, view=v)
        if dtype in ("float32", "int64", "bool"):
            # x[1:] of a 1-d tensor: one contiguous run, misaligned by one element.
            compare(lambda t: ember.sum(t), flat, view=lambda t: t[1:n + 1])
            compare(lambda t: ember.argmax(t), flat, view=lambda t: t[1:n + 1])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int8",
                                   "uint8", "bool"])
@pytest.mark.parametrize("n", [9, 33, 100, 1029, 40_003])
def test_contig_arg_repeated_extrema(dtype, n):
    # Equal maxima (minima) at the first elements, the middle, the last ones and around 16-byte and
    # chunk boundaries: the smallest index wins, as on the CPU; rows are contiguous runs of a
    # wider tensor (kept stride n + 8), starting at different alignments.
    pos = sorted({p for p in (1, 2, 15, 16, 17, n // 3, n // 2, 8192, 8193, n - 2, n - 1)
                  if 0 < p < n})
    hi = ember.zeros(4, n + 8)
    lo = ember.ones(4, n + 8)
    for p in pos:
        hi[:, p] = 1.0
        lo[:, p] = 0.0
    hi[1, 0] = 1.0  # row 1: the first element is also a maximum
    lo[2, pos[-1]] = 1.0  # row 2: one fewer minimum
    same = ember.ones(4, n + 8)  # every element equal: index 0
    for off in (0, 1, 5):
        def v(t, off=off):
            return t[:, off:off + n]
        for x in (hi, lo, same):
            x = x.to(getattr(ember, dtype))
            compare(lambda t: ember.argmax(t, dim=1), x, view=v)
            compare(lambda t: ember.argmin(t, dim=1, keepdim=True), x, view=v)
            compare(lambda t: ember.max(t, dim=-1), x, view=v)
            compare(lambda t: ember.min(t, dim=-1), x, view=v)
            compare(lambda t: ember.argmax(t), x, view=lambda t: t.reshape(-1)[off:])
            compare(lambda t: ember.argmin(t), x, view=lambda t: t.reshape(-1)[off:])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [7, 40, 1029, 40_003])
def test_contig_nan(dtype, n):
    # NaNs in the head, the packs and the tail of contiguous rows: max / min / argmax take the
    # first NaN, sums and norms propagate it, nansum / nanmean skip it.
    x = make((4, n + 4), "float32", seed=n, kind="ints")
    x[0, 1] = float("nan")
    x[1, n // 2] = float("nan")
    x[1, n - 1] = float("nan")
    x[2, n - 1] = float("nan")
    x = x.to(getattr(ember, dtype))
    for off in (0, 1, 3):
        def v(t, off=off):
            return t[:, off:off + n]
        compare(lambda t: ember.max(t, dim=1), x, view=v)
        compare(lambda t: ember.min(t, dim=1), x, view=v)
        compare(lambda t: ember.argmax(t, dim=1), x, view=v)
        compare(lambda t: ember.argmin(t, dim=1), x, view=v)
        compare(lambda t: ember.amax(t, dim=[1]), x, view=v)
        compare(lambda t: ember.sum(t, dim=1), x, view=v)
        compare(lambda t: ember.nansum(t, dim=1), x, view=v)
        compare(lambda t: ember.nanmean(t, dim=1), x, view=v)
        compare(lambda t: ember.norm(t, p=float("inf"), dim=1), x, view=v)
        compare(lambda t: ember.norm(t, p=float("-inf"), dim=1), x, view=v)
        compare(lambda t: ember.var(t, dim=1), x, view=v, rtol=1e-2)
        compare(lambda t: ember.max(t), x, view=lambda t: t.reshape(-1)[off:])
        compare(lambda t: ember.argmax(t), x, view=lambda t: t.reshape(-1)[off:])
        compare(lambda t: ember.sum(t), x, view=lambda t: t.reshape(-1)[off:])


def test_contig_integer_and_bool_sums_are_exact():
    rng = np.random.default_rng(11)
    for n in (33, 1000, 65_541, 300_007):
        a = rng.integers(-(2 ** 40), 2 ** 40, n + 3).astype(np.int64)
        x = ember.from_numpy(a.copy())
        rows = n // 37
        for off in (0, 1, 3):
            compare(lambda t: ember.sum(t), x, view=lambda t, off=off: t[off:off + n])
            # rows of 37 (past the thread path's 32): a head, packs and a tail per row
            compare(lambda t: ember.sum(t, dim=-1), x,
                    view=lambda t, off=off: t[off:off + rows * 37].view(rows, 37))
        i32 = ember.from_numpy(rng.integers(-(2 ** 31), 2 ** 31 - 1, n).astype(np.int32))
        compare(lambda t: ember.sum(t), i32)  # int64 accumulation: no wrap-around at 2^31
        b = make((n + 16,), "bool", seed=n)
        for off in (0, 1, 15):
            compare(lambda t: ember.sum(t), b, view=lambda t, off=off: t[off:off + n])
            compare(lambda t: ember.all(t), b, view=lambda t, off=off: t[off:off + n])
            compare(lambda t: ember.count_nonzero(t), b, view=lambda t, off=off: t[off:off + n])
    # Bytes other than 0 / 1 read as True in the vector loads too.
    raw = ember.from_numpy(rng.choice(np.array([0, 1, 2, 255], np.uint8), 5000))
    try:
        xb = raw.view(ember.bool)
    except Exception:  # noqa: BLE001 - dtype views may be unsupported; nothing more to test
        return
    for off in (0, 1, 7):
        compare(lambda t: ember.sum(t), xb, view=lambda t, off=off: t[off:])
        compare(lambda t: ember.all(t.view(10, -1)[:, :100], dim=1), xb)
        compare(lambda t: ember.any(t), xb, view=lambda t, off=off: t[off:])


@pytest.mark.parametrize("dtype", FLOATS)
def test_contig_var_std(dtype):
    # Welford per accumulator, Chan's merge across accumulators, threads and chunks: a large mean
    # with a small spread (cancellation) over rows long enough to split into chunks.
    rng = np.random.default_rng(12)
    for shape in ((3, 100_003), (2, 1025), (1, 300_001)):
        a = (1000.0 + rng.standard_normal(int(np.prod(shape)) + 2)).astype(np.float32)
        x = ember.from_numpy(a).to(getattr(ember, dtype))
        n = int(np.prod(shape))
        r = {"float16": 2e-2, "bfloat16": 2e-1}.get(dtype, 1e-4)
        for off in (0, 1):
            def v(t, off=off):
                return t[off:off + n].view(*shape)
            compare(lambda t: ember.var(t, dim=1), x, view=v, rtol=r, atol=r)
            compare(lambda t: ember.std(t, dim=-1, correction=0), x, view=v, rtol=r, atol=r)
            compare(lambda t: ember.var(t), x, view=v, rtol=r, atol=r)
            compare(lambda t: ember.var_mean(t, dim=1), x, view=v, rtol=r, atol=r)
            compare(lambda t: ember.std_mean(t, dim=None, correction=2), x, view=v, rtol=r,
                    atol=r)


@pytest.mark.parametrize("view", ["contiguous", "permuted", "sliced"])
@pytest.mark.parametrize("dim", [-1, 1, 0, None, [1, 2], [0, 1], [0, 2]])
def test_reduced_dim_layouts(view, dim):
    # Last dim (contiguous runs), middle and first dims (strided), all dims (one run when the
    # tensor is dense), and pairs that coalesce ([1, 2]) or not; through permuted and sliced
    # inputs the runs are strided or offset.
    x = make((6, 130, 70), "float32", seed=13, kind="ints")
    v = {"contiguous": None, "permuted": lambda t: t.permute(2, 0, 1),
         "sliced": lambda t: t[1:, 3:, 1:]}[view]
    compare(lambda t: ember.sum(t, dim=dim), x, view=v)
    compare(lambda t: ember.amax(t, dim=[] if dim is None else dim), x, view=v)
    compare(lambda t: ember.var(t, dim=dim), x, view=v, rtol=1e-5, atol=1e-5)
    compare(lambda t: ember.count_nonzero(t, dim=dim), x, view=v)
    compare(lambda t: ember.nansum(t, dim=dim), x, view=v)
    if dim is None or isinstance(dim, int):
        compare(lambda t: ember.argmax(t, dim=dim), x, view=v)
        compare(lambda t: ember.argmin(t, dim=dim), x, view=v)
    h = make((6, 130, 70), "float16", seed=14, kind="ints")
    compare(lambda t: ember.sum(t, dim=dim), h, view=v)
    i = make((6, 130, 70), "int8", seed=15)
    compare(lambda t: ember.sum(t, dim=dim), i, view=v)


def test_full_reduction_past_2_31_bytes():
    # More than 2^31 bytes (and, for int8, more than 2^31 elements): 64-bit offsets and indices
    # in the contiguous path; known results, no CPU copy.
    n8 = 2 ** 31 + 1003
    n32 = 5 * 2 ** 27  # 2.5 GiB of float32; every partial sum is exact
    free, _total = ember.cuda.mem_get_info()
    if free < 8 * 2 ** 30:
        pytest.skip(f"needs 8 GiB free on the device (has {free / 2 ** 30:.1f} GiB)")
    x = ember.ones(n8, dtype=ember.int8, device="cuda")
    x[n8 - 3] = 3
    x[5] = -1
    assert int(ember.sum(x).item()) == n8 + 2 - 2
    assert int(ember.argmax(x).item()) == n8 - 3
    assert int(ember.argmin(x).item()) == 5
    assert int(ember.count_nonzero(x).item()) == n8
    del x
    y = ember.ones(n32, dtype=ember.float32, device="cuda")
    y[n32 - 1] = 64.0
    y[n32 - 2] = -64.0
    # exact in the double accumulator, then rounded to float32 once (as numpy rounds it)
    assert float(ember.sum(y).item()) == float(np.float32(n32 - 2))
    assert int(ember.argmax(y).item()) == n32 - 1
    assert int(ember.argmin(y).item()) == n32 - 2
    m = ember.amax(y.view(5, -1), dim=1)
    np.testing.assert_array_equal(host(m), np.array([1, 1, 1, 1, 64], np.float32))
    s = ember.sum(y.view(5, -1), dim=1)
    np.testing.assert_array_equal(host(s), np.array([2 ** 27] * 4 + [2 ** 27 - 2], np.float32))


# ---- softmax over long contiguous rows (nn_softmax.cu: softmax_rows_kernel) ----------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1025, 1031, 4099, 32768])
def test_softmax_long_rows_alignments(dtype, n):
    # Rows longer than 1024 (a block per row): x starting at several alignments (the write pass
    # goes by packs when the output row is aligned as the input's, else element by element),
    # special values in the head, the packs and the tail of rows.
    import ember.nn.functional as F

    rows = 4
    x = make((rows * n + 8,), "float32", seed=n) * 3.0
    x[1] = float("-inf")  # row 0's head (offset 0: first pack)
    x[n + n // 2] = float("nan")  # row 1: a pack
    x[2 * n + n - 2] = float("inf")  # row 2: the tail (NaN row, as on the CPU)
    x[3 * n:4 * n + 8] = float("-inf")  # row 3 all -inf (offset 0) then one finite at its end
    x[4 * n - 1] = 0.5
    x = x.to(getattr(ember, dtype))
    for off in (0, 1, 3):
        def v(t, off=off):
            return t[off:off + rows * n].view(rows, n)
        compare(lambda t: F.softmax(t, dim=-1), x, view=v)
        compare(lambda t: F.log_softmax(t, dim=1), x, view=v)
