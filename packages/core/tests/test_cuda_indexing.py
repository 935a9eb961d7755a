"""The CUDA kernels of the indexing and shape ops against the CPU's: every op runs on CPU tensors
and on their CUDA copies (contiguous and strided, several dtypes), and the results must agree.
Index errors must raise the CPU's IndexError on the GPU too. Skipped without a CUDA device."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import to_np

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")

DTYPES = ["float32", "float64", "float16", "int64", "bool"]
RNG = np.random.default_rng(1234)


def make(shape, dtype="float32", low=-5, high=5):
    """A CPU tensor of `dtype` with varied values (distinct floats, some zeros for bool)."""
    if dtype == "bool":
        a = RNG.integers(0, 2, size=shape).astype(bool)
    elif dtype in ("int64", "int32"):
        a = RNG.integers(low, high, size=shape).astype(dtype)
    else:
        a = RNG.standard_normal(size=shape).astype("float64" if dtype != "float32" else "float32")
    return ember.tensor(a).to(getattr(ember, dtype))


def idx(values, dtype="int64"):
    return ember.tensor(np.asarray(values, dtype=dtype))


def cu(t):
    return t.to("cuda")


def check(gpu, cpu, tol=0.0):
    """gpu (a CUDA tensor) equals cpu (a CPU tensor): device, shape, dtype and values."""
    assert gpu.device.type == "cuda", gpu.device
    assert tuple(gpu.shape) == tuple(cpu.shape), (tuple(gpu.shape), tuple(cpu.shape))
    assert gpu.dtype == cpu.dtype, (gpu.dtype, cpu.dtype)
    g, c = to_np(gpu.cpu()), to_np(cpu)
    if tol == 0.0:
        np.testing.assert_array_equal(g, c)
    else:
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol)


def both(fn, *tensors, tol=0.0):
    """fn on the CPU tensors and on their CUDA copies; compares the results."""
    c = fn(*tensors)
    g = fn(*[cu(t) if isinstance(t, ember.Tensor) else t for t in tensors])
    check(g, c, tol)
    return g


def tol_for(dtype):
    # sums in another order (atomics) differ by a rounding or two
    return {"float16": 1e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0.0)


# ---- gather-like ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    x = make((5, 6, 3), dtype)
    i = idx([4, 0, 0, 2])
    for dim in (0, 1, -1):
        both(lambda x, i: ember.index_select(x, dim, i), x, idx([2, 0, 2]))
    both(lambda x, i: x.index_select(0, i), x, i)
    both(lambda x, i: x.index_select(0, i), x, idx([1, 3], "int32"))
    both(lambda x, i: x.index_select(0, i), x, idx([], "int64"))
    # strided self
    g = cu(x).transpose(0, 1).index_select(1, cu(i))
    check(g, x.transpose(0, 1).index_select(1, i))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather(dtype):
    x = make((4, 5), dtype)
    i0 = idx(RNG.integers(0, 4, size=(3, 5)))
    i1 = idx(RNG.integers(0, 5, size=(4, 2)))
    both(lambda x, i: ember.gather(x, 0, i), x, i0)
    both(lambda x, i: x.gather(1, i), x, i1)
    both(lambda x, i: x.gather(-1, i), x, i1)
    g = cu(x).t().gather(0, cu(i1).t())
    check(g, x.t().gather(0, i1.t()))


def test_take_and_take_along_dim():
    x = make((3, 4), "float32")
    i = idx([[0, -1], [11, 5]])
    both(lambda x, i: ember.take(x, i), x, i)
    both(lambda x, i: ember.take(x.t(), i), x, i)
    j = idx(RNG.integers(-4, 4, size=(3, 2)))
    both(lambda x, j: ember.take_along_dim(x, j, dim=1), x, j)
    both(lambda x, j: ember.take_along_dim(x, j), x, idx([0, 11, -2]))


# ---- scatter-like -----------------------------------------------------------------------------


def unique_rows(n_rows, shape):
    """An index of `shape` along dim 0 with no repeats within a column (deterministic scatter)."""
    cols = [RNG.permutation(n_rows)[: shape[0]] for _ in range(shape[1])]
    return idx(np.stack(cols, axis=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_src_and_value(dtype):
    x = make((5, 4), dtype)
    src = make((3, 4), dtype)
    i = unique_rows(5, (3, 4))
    both(lambda x, i, s: ember.scatter(x, 0, i, s), x, i, src)
    both(lambda x, i: x.scatter(0, i, 1), x, i)
    # in place on a strided tensor
    xc = cu(x).t()
    xc.scatter_(1, cu(i).t(), cu(src).t())
    xr = x.t().clone()
    xr.scatter_(1, i.t(), src.t())
    check(xc, xr)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_scatter_reduce_forms_with_duplicates(dtype):
    x = make((4, 3), dtype, low=1, high=4)
    src = make((6, 3), dtype, low=1, high=4)
    i = idx(RNG.integers(0, 4, size=(6, 3)))
    t = tol_for(dtype)
    both(lambda x, i, s: ember.scatter_add(x, 0, i, s), x, i, src, tol=t)
    both(lambda x, i, s: ember.scatter(x, 0, i, s, reduce="add"), x, i, src, tol=t)
    both(lambda x, i, s: ember.scatter(x, 0, i, s, reduce="multiply"), x, i, src,
         tol=t * 10)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            both(lambda x, i, s: ember.scatter_reduce(x, 0, i, s, red, include_self=include_self),
                 x, i, src, tol=t * 10)


def test_scatter_reduce_amax_propagates_nan():
    x = ember.tensor([0.0, 0.0, 0.0])
    src = ember.tensor([1.0, float("nan"), 2.0, 5.0])
    i = idx([0, 0, 1, 1])
    g = ember.scatter_reduce(cu(x), 0, cu(i), cu(src), "amax").cpu()
    assert np.isnan(to_np(g)[0]) and to_np(g)[1] == 5.0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "bool"])
def test_index_add_copy_fill(dtype):
    x = make((5, 3), dtype)
    src = make((4, 3), dtype)
    dup = idx([0, 4, 0, 2])
    t = tol_for(dtype)
    both(lambda x, i, s: ember.index_add(x, 0, i, s), x, dup, src, tol=t)
    if dtype != "bool":
        both(lambda x, i, s: x.index_add(0, i, s, alpha=2), x, dup, src, tol=t)
    both(lambda x, i, s: x.index_copy(0, i, s), x, idx([3, 1, 0, 4]), src)
    both(lambda x, i: x.index_fill(0, i, 1), x, idx([-1, 2]))
    both(lambda x, i: x.index_fill(1, i, ember.tensor(0).to(x.dtype)), x, idx([0, 2]))
    both(lambda x, i, s: x.t().index_add(1, i, s.t()), x, dup, src, tol=t)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_index_put_accumulate_duplicates(dtype):
    x = make((6, 3), dtype)
    i = idx([0, 5, 0, 0, 2])
    v = make((5, 3), dtype)

    def put(x, i, v):
        y = x.clone() if x.device.type == "cpu" else x
        return y.index_put_((i,), v, accumulate=True)

    both(lambda x, i, v: put(x, i, v), x, i, v, tol=tol_for(dtype) * 4)
    # x[idx] += 1 written as index_put_ with accumulate, the ones broadcast
    ones = ember.tensor(1).to(x.dtype)
    both(lambda x, i, o: put(x, i, o), x, i, ones, tol=tol_for(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put_assign(dtype):
    x = make((4, 5), dtype)
    v = make((3,), dtype)

    def put(x, a, b, v):
        y = x.clone() if x.device.type == "cpu" else x
        return y.index_put_((a, b), v)

    both(put, x, idx([0, 3, -1]), idx([4, 0, 2]), v)
    # repeated positions without accumulate: the last value wins, as on the CPU
    both(put, x, idx([1, 2, 1, 1]), idx([3, 0, 3, 3]), make((4,), dtype))
    both(lambda x, i, v: (x.clone() if x.device.type == "cpu" else x).index_put_((i,), v), x,
         idx([2, 0, 2, -2]), make((4, 5), dtype))
    mask = ember.tensor(RNG.integers(0, 2, size=(4, 5)).astype(bool))
    n = int(to_np(mask).sum())
    both(lambda x, m, v: (x.clone() if x.device.type == "cpu" else x).index_put_((m,), v), x, mask,
         make((n,), dtype))


# ---- advanced indexing (__getitem__ / __setitem__) --------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_getitem_patterns(dtype):
    x = make((4, 5, 6), dtype)
    i = idx([3, 0, -1, 3])
    j = idx([[1, 2], [0, 3]])
    m2 = ember.tensor(RNG.integers(0, 2, size=(4, 5)).astype(bool))
    m3 = ember.tensor(RNG.integers(0, 2, size=(4, 5, 6)).astype(bool))
    both(lambda x, i: x[i], x, i)
    both(lambda x, j: x[j], x, j)
    both(lambda x, i: x[:, i], x, idx([4, 0]))
    both(lambda x, i, j: x[i, :, j], x, idx([0, 3]), idx([5, 1]))  # non-adjacent: dims go first
    both(lambda x, i, j: x[i, j], x, idx([0, 3]), idx([4, 1]))
    both(lambda x, m: x[m], x, m2)
    both(lambda x, m: x[m], x, m3)
    both(lambda x, i: x[i], x, idx([], "int64"))
    both(lambda x, i: x.transpose(0, 2)[i], x, idx([5, 0]))


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_setitem_patterns(dtype):
    x = make((5, 4), dtype)
    i = idx([4, 0, 2])
    v = make((3, 4), dtype)
    m = ember.tensor(RNG.integers(0, 2, size=(5, 4)).astype(bool))
    for key, val in ((i, v), (m, 0)):
        c = x.clone()
        c[key] = val
        g = cu(x)
        g[cu(key)] = cu(val) if isinstance(val, ember.Tensor) else val
        check(g, c)


# ---- masked ops, nonzero ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_ops(dtype):
    x = make((4, 6), dtype)
    m = ember.tensor(RNG.integers(0, 2, size=(4, 6)).astype(bool))
    row = ember.tensor(RNG.integers(0, 2, size=(6,)).astype(bool))
    both(lambda x, m: x.masked_fill(m, 1), x, m)
    both(lambda x, m: x.masked_fill(m, ember.tensor(0).to(x.dtype)), x, row)
    both(lambda x, m: ember.masked_select(x, m), x, m)
    both(lambda x, m: ember.masked_select(x, m), x, row)
    both(lambda x, m: ember.masked_select(x.t(), m.t()), x, m)
    src = make((30,), dtype)
    both(lambda x, m, s: x.masked_scatter(m, s), x, m, src)
    both(lambda x, m, s: x.masked_scatter(m, s), x, row, src)
    xc = cu(x).t()
    xc.masked_fill_(cu(m).t(), 0)
    check(xc, x.t().masked_fill(m.t(), 0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_argwhere(dtype):
    x = make((3, 4, 5), dtype, low=-1, high=2)
    both(lambda x: ember.nonzero(x), x)
    both(lambda x: ember.argwhere(x), x)
    both(lambda x: x.transpose(0, 2).nonzero(), x)
    both(lambda x: ember.nonzero(x[0:0]), x)
    both(lambda x: ember.nonzero(x[0, 0, 0]), x)  # 0-d


# ---- searchsorted / bucketize / bincount / histc ----------------------------------------------


def test_searchsorted_bucketize():
    seq = ember.tensor([1.0, 2.0, 2.0, 4.0, 8.0])
    v = ember.tensor([[0.0, 2.0, 3.0], [8.0, 9.0, 2.0]])
    for right in (False, True):
        both(lambda s, v: ember.searchsorted(s, v, right=right), seq, v)
        both(lambda s, v: ember.bucketize(v, s, right=right), seq, v)
    both(lambda s, v: ember.searchsorted(s, v, out_int32=True, side="right"), seq, v)
    both(lambda s: ember.searchsorted(s, 2.0), seq)
    seq2 = ember.tensor([[1, 3, 5], [2, 4, 6]])
    v2 = ember.tensor([[3, 0], [7, 4]])
    both(lambda s, v: ember.searchsorted(s, v), seq2, v2)
    unsorted = ember.tensor([5.0, 1.0, 3.0])
    sorter = idx([1, 2, 0])
    both(lambda s, v, so: ember.searchsorted(s, v, sorter=so), unsorted, ember.tensor([2.0, 6.0]),
         sorter)


def test_bincount_histc():
    x = idx(RNG.integers(0, 7, size=100))
    w32 = make((100,), "float32")
    w64 = make((100,), "float64")
    both(lambda x: ember.bincount(x), x)
    both(lambda x: ember.bincount(x, minlength=10), x)
    both(lambda x, w: ember.bincount(x, w), x, w32, tol=1e-5)
    both(lambda x, w: ember.bincount(x, w), x, w64, tol=1e-12)
    both(lambda x: ember.bincount(x), idx([], "int64"))
    y = make((1000,), "float32")
    both(lambda y: ember.histc(y, bins=10), y)
    both(lambda y: ember.histc(y, bins=7, min=-1, max=1), y)
    both(lambda y: ember.histc(y, bins=7, min=-1, max=1), make((500,), "float64"))


# ---- shape ops --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_tril_triu(dtype):
    x = make((2, 4, 5), dtype)
    for d in (0, 1, -2, 10, -10):
        both(lambda x: ember.tril(x, d), x)
        both(lambda x: ember.triu(x, d), x)
    both(lambda x: x.transpose(1, 2).tril(), x)
    g = cu(x).transpose(1, 2)
    g.triu_(1)
    check(g, x.transpose(1, 2).triu(1))
    g = cu(x)
    g.tril_()
    check(g, x.tril())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_pad(dtype):
    x = make((2, 3, 4), dtype)
    both(lambda x: ember.constant_pad_nd(x, [1, 2]), x)
    both(lambda x: ember.constant_pad_nd(x, [1, -1, 2, 0], 3), x)
    both(lambda x: ember.constant_pad_nd(x.transpose(1, 2), [0, 1, 1, 1, 1, 0]), x)
    for mode in ("reflect", "replicate", "circular"):
        both(lambda x: ember.pad(x, [2, 1], mode=mode), x)
        both(lambda x: ember.pad(x, [1, 1, 2, 0], mode=mode), x)


# ---- errors -----------------------------------------------------------------------------------


def test_out_of_bounds_indices_raise():
    x = cu(make((5, 3)))
    bad = cu(idx([1, 7]))
    msg = "index 7 is out of bounds for dimension 0 with size 5"
    # index_add / gather / scatter: RuntimeError, as PyTorch (indexing, index_select,
    # index_put_ and take: IndexError)
    with pytest.raises(IndexError, match=msg):
        x.index_select(0, bad)
    with pytest.raises(IndexError, match=msg):
        x[bad]
    with pytest.raises(IndexError, match=msg):
        x.index_put_((bad,), cu(ember.tensor(1.0)))
    with pytest.raises(RuntimeError, match=msg):
        x.index_add(0, bad, cu(make((2, 3))))
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.gather(0, cu(idx([[7, 0, 0]])))
    before = to_np(x.cpu())
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_(0, cu(idx([[0, 9, 0]])), 1.0)
    np.testing.assert_array_equal(to_np(x.cpu()), before)  # nothing written
    with pytest.raises(IndexError, match="out of bounds"):
        ember.take(x, cu(idx([15])))
    with pytest.raises(IndexError, match="out of bounds"):
        ember.take(x, cu(idx([-16])))
    # the device is still usable after the errors
    check(x.index_select(0, cu(idx([4]))), x.cpu().index_select(0, idx([4])))


def test_bad_arguments_raise_like_cpu():
    x = cu(make((5, 3)))
    with pytest.raises(TypeError, match="int64"):
        x.gather(0, cu(idx([[0, 1, 0]], "int32")))
    with pytest.raises(ValueError, match="reduce argument"):
        x.scatter(0, cu(idx([[0, 1, 0]])), 1.0, reduce="bogus")
    with pytest.raises(TypeError, match="boolean"):
        x.masked_fill(cu(idx([[0, 1, 0]])), 1)
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.bincount(cu(idx([1, -1])))
    with pytest.raises(RuntimeError, match="smaller than the number of True"):
        x.masked_scatter(cu(ember.ones(5, 3, dtype=ember.bool)), cu(make((4,))))
