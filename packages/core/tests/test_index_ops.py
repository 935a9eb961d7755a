"""The indexing ops of ops/indexing.yaml against NumPy references and PyTorch: every dtype,
contiguous and strided inputs, 0-d and empty tensors, in-place and out= forms, and the errors
(out-of-range indices name the op, the index value and the dimension size)."""

from __future__ import annotations

from typing import Any

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, to_np, torch

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
NUMERIC = DTYPES[1:]
FLOATS = ("float16", "bfloat16", "float32", "float64")


def make(a: Any, dtype: str | None = None, strided: bool = False) -> ember.Tensor:
    """An ember tensor with a's values; strided=True gives a non-contiguous one (every other row
    of a tensor twice as tall)."""
    a = np.asarray(a)
    if strided and a.ndim > 0:
        t = ember.tensor(np.repeat(a, 2, axis=0))[::2]
        assert not t.is_contiguous() or a.shape[0] <= 1
    else:
        t = ember.tensor(a)
    return t.to(getattr(ember, dtype)) if dtype else t


def idx(a: Any, dtype: str = "int64") -> ember.Tensor:
    return ember.tensor(np.asarray(a, dtype=np.int64)).to(getattr(ember, dtype))


def same(t: ember.Tensor, expected: Any, dtype: str | None = None) -> None:
    if dtype is not None:
        assert t.dtype == getattr(ember, dtype)
    got = to_np(t)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))


def tt(a: Any, dtype: str | None = None) -> Any:
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(getattr(torch, dtype)) if dtype else t


def same_torch(t: ember.Tensor, ref: Any) -> None:
    assert str(t.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    got = to_np(t)
    exp = ref.float().numpy() if ref.dtype == torch.bfloat16 else ref.numpy()
    assert got.shape == exp.shape, (got.shape, exp.shape)
    np.testing.assert_array_equal(got.astype(np.float64), exp.astype(np.float64))


def data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Small integer values (exact in every dtype; bool gets a mix of True and False)."""
    return np.random.default_rng(seed).integers(0, 7, size=shape).astype(np.float64)


def cast_np(a: np.ndarray, dtype: str) -> np.ndarray:
    return a.astype(bool) if dtype == "bool" else a


# ---- index_select ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dtype: str, strided: bool, dim: int) -> None:
    a = cast_np(data((4, 3, 5)), dtype)
    ix = np.array([2, 0, 2, 3]) % a.shape[dim]
    same(make(a, dtype, strided).index_select(dim, idx(ix)), np.take(a, ix, axis=dim), dtype)
    same(ember.index_select(make(a, dtype, strided), dim, idx(ix, "int32")), np.take(a, ix, axis=dim), dtype)


def test_index_select_shapes_and_out() -> None:
    a = data((3, 4))
    same(make(a).index_select(0, idx([], "int64")), a[[]])
    same(make(a).index_select(1, idx(2)), a[:, [2]])  # a 0-d index is a 1-element vector
    same(make(np.float64(5.0)).index_select(0, idx(0)), np.float64(5.0))
    assert make(np.float64(5.0)).index_select(0, idx([0])).shape == ()  # 0-d stays 0-d (torch)
    with pytest.raises(RuntimeError, match="only 1 value, got 2"):
        make(np.float64(5.0)).index_select(0, idx([0, 0]))
    out = ember.empty(0, dtype=ember.float64)
    r = ember.index_select(make(a), 0, idx([1, 1]), out=out)
    assert r is out
    same(out, a[[1, 1]])
    big = data((3, 70000))  # the threaded path
    ix = np.array([2, 0, 1, 1])
    same(make(big).index_select(0, idx(ix)), big[ix])
    same(make(big.T.copy()).index_select(1, idx(ix)), big.T[:, ix])
    ixb = np.random.default_rng(1).integers(0, 3, 70000)
    same(make(a[:, :1].copy()).index_select(0, idx(ixb)), a[ixb, :1])


def test_index_select_errors() -> None:
    x = make(data((3, 4)))
    with pytest.raises(IndexError, match=r"index_select\(\): index 5 is out of bounds for dimension 0 with size 3"):
        x.index_select(0, idx([0, 5]))
    with pytest.raises(IndexError, match=r"index -1 is out of bounds for dimension 1 with size 4"):
        x.index_select(1, idx([-1]))
    with pytest.raises(RuntimeError, match=r"index_select\(\): expected an index tensor of dtype int64 or int32, but got float32"):
        x.index_select(0, ember.tensor([0.0]))
    with pytest.raises(RuntimeError, match="int16"):
        x.index_select(0, idx([0], "int16"))
    with pytest.raises(IndexError, match="vector"):
        x.index_select(0, idx([[0]]))
    with pytest.raises(IndexError, match="dimension out of range"):
        x.index_select(2, idx([0]))
    with pytest.raises(RuntimeError, match="out= tensor to have dtype float64"):
        ember.index_select(x, 0, idx([0]), out=ember.empty(1, dtype=ember.int64))


# ---- gather / scatter family ----------------------------------------------------------------


def gather_ref(a: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    sl = tuple(slice(0, s) if d != dim % a.ndim else slice(None) for d, s in enumerate(index.shape))
    return np.take_along_axis(a[sl], index, axis=dim)


def scatter_ref(a: np.ndarray, dim: int, index: np.ndarray, src: Any, reduce: str | None = None) -> np.ndarray:
    out = a.copy()
    for pos in np.ndindex(*index.shape):
        tgt = list(pos)
        tgt[dim] = index[pos]
        v = src[pos] if isinstance(src, np.ndarray) else src
        if reduce is None:
            out[tuple(tgt)] = v
        elif reduce in ("add", "sum"):
            out[tuple(tgt)] += v
        else:
            out[tuple(tgt)] *= v
    return out


def scatter_reduce_ref(a: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray, reduce: str,
                       include_self: bool) -> np.ndarray:
    groups: dict[tuple[int, ...], list[float]] = {}
    for pos in np.ndindex(*index.shape):
        tgt = list(pos)
        tgt[dim] = index[pos]
        groups.setdefault(tuple(tgt), []).append(src[pos])
    out = a.copy()
    fn = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    for tgt, vals in groups.items():
        out[tgt] = fn(vals + ([a[tgt]] if include_self else []))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strided", [False, True])
def test_gather(dtype: str, strided: bool) -> None:
    a = cast_np(data((4, 5, 3)), dtype)
    rng = np.random.default_rng(2)
    for dim in (0, 1, 2, -1):
        shape = [3, 4, 2]
        shape[dim] = 6
        index = rng.integers(0, a.shape[dim], size=shape)
        same(make(a, dtype, strided).gather(dim, make(index, strided=strided)), gather_ref(a, dim, index), dtype)


def test_gather_special() -> None:
    a = data((3, 4))
    same(make(np.float64(5)).gather(0, idx(0)), np.float64(5))
    same(make(np.float64(5)).gather(0, idx([0, 0])), np.array([5.0, 5.0]))
    same(make(a).gather(1, idx(np.zeros((0, 2)))), np.zeros((0, 2)))
    out = ember.empty(3, dtype=ember.float64)
    assert ember.gather(make(a), 1, idx([[0], [1], [3]]), out=out) is out
    same(out, a[[0, 1, 2], [0, 1, 3]][:, None])
    big = data((2, 40000))
    index = np.random.default_rng(0).integers(0, 2, size=(2, 40000))
    same(make(big).gather(0, idx(index)), gather_ref(big, 0, index))
    x = make(a)
    with pytest.raises(RuntimeError, match=r"gather\(\): index 5 is out of bounds for dimension 0 with size 3"):
        x.gather(0, idx([[5]]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds"):
        x.gather(1, idx([[-1]]))
    with pytest.raises(RuntimeError, match=r"gather\(\): expected an index tensor of dtype int64 or int32, but got int16"):
        x.gather(0, idx([[0]], "int16"))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(0, idx([0]))
    with pytest.raises(RuntimeError, match="no larger than self"):
        x.gather(1, idx(np.zeros((4, 1))))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strided", [False, True])
def test_scatter(dtype: str, strided: bool) -> None:
    a = cast_np(data((4, 5)), dtype)
    src = cast_np(data((3, 5), seed=3), dtype)
    # a permutation per column/row, so no position is written twice
    index0 = np.stack([np.random.default_rng(c).permutation(4)[:3] for c in range(4)], axis=1)
    index1 = np.stack([np.random.default_rng(r).permutation(5)[:4] for r in range(3)], axis=0)
    same(make(a, dtype, strided).scatter(0, make(index0, strided=strided), make(src, dtype, strided)),
         scatter_ref(a, 0, index0, src), dtype)
    same(make(a, dtype).scatter(1, idx(index1), make(src, dtype)), scatter_ref(a, 1, index1, src), dtype)
    same(make(a, dtype).scatter(-1, idx(index1), 1), scatter_ref(a, 1, index1, 1), dtype)
    x = make(a, dtype, strided)
    assert x.scatter_(0, idx(index0), make(src, dtype)) is x
    same(x, scatter_ref(a, 0, index0, src), dtype)
    x = make(a, dtype)
    x.scatter_(1, idx(index1), value=0)
    same(x, scatter_ref(a, 1, index1, 0), dtype)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_scatter_add_and_reduce_arg(dtype: str) -> None:
    a = data((3, 4))
    src = data((5, 4), seed=1)
    index = np.random.default_rng(0).integers(0, 3, size=(5, 4))  # repeats accumulate
    same(make(a, dtype).scatter_add(0, idx(index), make(src, dtype)), scatter_ref(a, 0, index, src, "add"), dtype)
    same(ember.scatter_add(make(a, dtype), 0, idx(index), make(src, dtype)), scatter_ref(a, 0, index, src, "add"))
    x = make(a, dtype, strided=True)
    x.scatter_add_(0, idx(index), make(src, dtype, strided=True))
    same(x, scatter_ref(a, 0, index, src, "add"), dtype)
    small = data((3, 4)) % 3
    same(make(a, dtype).scatter(0, idx(index[:2]), make(small, dtype), reduce="multiply"),
         scatter_ref(a, 0, index[:2], small, "multiply"), dtype)
    same(make(a, dtype).scatter(0, idx(index), 2, reduce="add"), scatter_ref(a, 0, index, 2, "add"), dtype)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce: str, include_self: bool) -> None:
    a = data((3, 4)) - 3
    src = data((6, 4), seed=5) - 2
    index = np.random.default_rng(4).integers(0, 3, size=(6, 4))
    ref = scatter_reduce_ref(a, 0, index, src, reduce, include_self)
    r = make(a).scatter_reduce(0, idx(index), make(src), reduce, include_self=include_self)
    np.testing.assert_allclose(to_np(r), ref)
    x = make(a, strided=True)
    x.scatter_reduce_(0, idx(index), make(src), reduce, include_self=include_self)
    np.testing.assert_allclose(to_np(x), ref)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_torch(dtype: str, reduce: str) -> None:
    if reduce == "mean" and dtype == "bool":
        pytest.skip("mean of bools")
    a = cast_np(data((3, 5)) - (0 if dtype in ("bool", "uint8") else 3), dtype)
    src = cast_np(data((4, 5), seed=2), dtype)
    index = np.random.default_rng(3).integers(0, 3, size=(4, 5))
    for include_self in (True, False):
        r = make(a, dtype).scatter_reduce(0, idx(index), make(src, dtype), reduce, include_self=include_self)
        ref = tt(a, dtype).scatter_reduce(0, tt(index), tt(src, dtype), reduce, include_self=include_self)
        same_torch(r, ref)


def test_scatter_nan_and_errors() -> None:
    r = make([0.0, 0.0]).scatter_reduce(0, idx([0, 0, 1]), make([np.nan, 1.0, 2.0]), "amax")
    assert np.isnan(to_np(r)[0]) and to_np(r)[1] == 2.0
    x = make(data((3, 4)))
    with pytest.raises(RuntimeError, match=r"scatter\(\): index 5 is out of bounds for dimension 0 with size 3"):
        x.scatter(0, idx([[5]]), 1.0)
    with pytest.raises(RuntimeError, match=r"scatter_add\(\): index -1 is out of bounds"):
        x.scatter_add(0, idx([[-1]]), make([[1.0]]))
    with pytest.raises(RuntimeError, match="self.dtype to be equal to src.dtype"):
        x.scatter(0, idx([[1]]), make([[1.0]], "float32"))
    with pytest.raises(RuntimeError, match="dtype int64 or int32, but got int16"):
        x.scatter(0, idx([[1]], "int16"), 1.0)
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin, got foo"):
        x.scatter_reduce(0, idx([[1]]), make([[1.0]]), "foo")
    with pytest.raises(RuntimeError, match="add or multiply"):
        x.scatter(0, idx([[1]]), make([[1.0]]), reduce="max")
    with pytest.raises(RuntimeError, match="no larger than src"):
        x.scatter(0, idx([[1, 1]]), make([[1.0]]))
    same(x.scatter(1, idx(np.zeros((0, 0))), make(np.zeros((0, 0)))), to_np(x))  # empty index: a copy
    same(make(np.float64(5)).scatter(0, idx(0), 7.0), np.float64(7.0))


# ---- index_add / index_copy / index_fill ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strided", [False, True])
def test_index_add_copy_fill(dtype: str, strided: bool) -> None:
    a = cast_np(data((4, 3)), dtype)
    src = cast_np(data((3, 3), seed=1), dtype)
    ix = np.array([2, 0, 2])  # a repeat: index_add accumulates it
    ref = a.astype(np.float64).copy()
    np.add.at(ref, ix, src)
    if dtype == "bool":
        ref = ref.astype(bool)
    same(make(a, dtype, strided).index_add(0, idx(ix), make(src, dtype, strided)), ref, dtype)
    same(make(a, dtype).index_add(0, idx(ix, "int32"), make(src, dtype)), ref, dtype)
    if dtype not in ("bool", "uint8"):
        ref2 = a.T.astype(np.float64).copy()
        np.add.at(ref2, (slice(None), ix), 2 * src.T)
        same(make(a.T.copy(), dtype).index_add(1, idx(ix), make(src.T.copy(), dtype), alpha=2), ref2, dtype)

    ixu = np.array([3, 0, 1])
    ref = a.copy()
    ref[ixu] = src
    x = make(a, dtype, strided)
    assert x.index_copy_(0, idx(ixu), make(src, dtype)) is x
    same(x, ref, dtype)
    same(ember.index_copy(make(a, dtype), 0, idx(ixu), make(src, dtype)), ref, dtype)

    ref = a.copy()
    ref[:, [0, 2]] = 1
    same(make(a, dtype, strided).index_fill(1, idx([0, -1]), 1), ref, dtype)
    x = make(a, dtype)
    x.index_fill_(1, idx([0, 2]), ember.tensor(1))
    same(x, ref, dtype)


def test_index_add_out_and_errors() -> None:
    a, src = data((3, 4)), data((2, 4), seed=1)
    out = ember.empty(0, dtype=ember.float64)
    assert ember.index_add(make(a), 0, idx([0, 2]), make(src), out=out) is out
    same(out, a + np.array([[1], [0], [1]]) * src[[0, 0, 1]])
    same(make(np.float64(5)).index_add(0, idx(0), make(np.float64(2))), np.float64(7))
    big = data((200, 400))
    ix = np.random.default_rng(0).integers(0, 200, 300)
    ref = big.copy()
    np.add.at(ref, ix, data((300, 400)))
    same(make(big).index_add(0, idx(ix), make(data((300, 400)))), ref)
    x = make(a)
    with pytest.raises(RuntimeError, match=r"index_add\(\): index 7 is out of bounds for dimension 0 with size 3"):
        x.index_add(0, idx([7, 0]), make(src))
    with pytest.raises(RuntimeError, match="same dtype"):
        x.index_add(0, idx([0, 1]), make(src, "float32"))
    with pytest.raises(RuntimeError, match=r"number of indices \(3\) should be equal to source.size\(dim\) \(2\)"):
        x.index_add(0, idx([0, 1, 2]), make(src))  # RuntimeError in torch (index_copy: IndexError)
    with pytest.raises(RuntimeError, match="must match self"):
        x.index_add(0, idx([0, 1]), make(data((2, 5))))
    with pytest.raises(RuntimeError, match=r"index_copy\(\): expected an index tensor of dtype int64, but got int32"):
        x.index_copy(0, idx([0, 1], "int32"), make(src))
    with pytest.raises(IndexError, match=r"index_copy\(\): index 3 is out of bounds"):
        x.index_copy(0, idx([3, 1]), make(src))
    with pytest.raises(IndexError, match=r"index_fill_\(\): index -5 is out of bounds for dimension 1 with size 4"):
        x.index_fill(1, idx([-5]), 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.index_fill(0, idx([0]), make([1.0]))


# ---- index_put ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_put(dtype: str) -> None:
    a = cast_np(data((3, 4, 2)), dtype)
    i0, i2 = np.array([0, 2]), np.array([1, 0])
    vals = cast_np(data((2, 4), seed=2), dtype)
    ref = a.copy()
    ref[i0, :, i2] = vals
    same(make(a, dtype).index_put((idx(i0), None, idx(i2)), make(vals, dtype)), ref, dtype)
    x = make(a, dtype, strided=True)
    assert x.index_put_([idx(i0), None, idx(i2)], make(vals, dtype)) is x
    same(x, ref, dtype)
    # accumulate with repeated indices
    if dtype != "bool":
        ref = a.astype(np.float64).copy()
        np.add.at(ref, (np.array([1, 1, 0]),), np.ones((4, 2)))
        same(ember.index_put(make(a, dtype), [idx([1, 1, 0])], make(np.ones((4, 2)), dtype), accumulate=True), ref)


def test_index_put_errors() -> None:
    x = make(data((3, 4)))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put_([idx([0])], make([1.0], "float32"))
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \(3,\) cannot be broadcast"):
        x.index_put_([idx([0, 1])], make([1.0, 2.0, 3.0]))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_put_([idx([3])], make(1.0))
    with pytest.raises(IndexError, match="too many indices"):
        x.index_put_([idx([0]), idx([0]), idx([0])], make(1.0))
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool"):
        x.index_put_([make([0.0])], make(1.0))


# ---- masked ops -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strided", [False, True])
def test_masked_fill_select_scatter(dtype: str, strided: bool) -> None:
    a = cast_np(data((4, 3)), dtype)
    mask = data((4, 3), seed=9) > 3
    val = True if dtype == "bool" else 5
    same(make(a, dtype, strided).masked_fill(make(mask, strided=strided), val), np.where(mask, val, a), dtype)
    same(make(a, dtype).masked_fill(make(mask[0]), ember.tensor(val)), np.where(mask[0], val, a), dtype)
    x = make(a, dtype, strided)
    assert x.masked_fill_(make(mask), val) is x
    same(x, np.where(mask, val, a), dtype)

    same(make(a, dtype, strided).masked_select(make(mask, strided=strided)), a[mask], dtype)
    same(ember.masked_select(make(a, dtype), make(mask[:1])), a[np.broadcast_to(mask[:1], a.shape)], dtype)

    src = cast_np(data((20,), seed=4), dtype)
    ref = a.copy()
    ref[mask] = src[: mask.sum()]
    same(make(a, dtype, strided).masked_scatter(make(mask), make(src, dtype)), ref, dtype)
    x = make(a, dtype)
    x.masked_scatter_(make(mask), make(src, dtype, strided=True))
    same(x, ref, dtype)


def test_masked_broadcast_and_errors() -> None:
    a = data((3,))
    m = np.array([[True, False, True], [False, False, True]])
    same(make(a).masked_fill(make(m), -1.0), np.where(m, -1.0, a))  # out-of-place broadcasts self
    same(make(np.zeros(4)).masked_scatter(make(np.ones((3, 4), bool)), make(np.arange(12.0))),
         np.arange(12.0).reshape(3, 4))
    same(make(np.float64(3)).masked_select(make(True)), np.array([3.0]))
    same(make(np.zeros((0, 3))).masked_select(make(np.zeros((0, 3), bool))), np.zeros(0))
    x = make(data((3, 4)))
    with pytest.raises(RuntimeError, match="boolean masks, but got mask with dtype uint8"):
        x.masked_fill(make(np.ones(4), "uint8"), 1.0)
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_select(make(np.ones(4), "float32"))
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(make(np.ones(4, bool)), make([1.0]))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.masked_fill_(make(np.ones((2, 3, 4), bool)), 1.0)
    with pytest.raises(RuntimeError, match=r"number of elements of source \(11\) is smaller"):
        x.masked_scatter(make(np.ones(4, bool)), make(np.ones(11)))
    with pytest.raises(RuntimeError, match="same dtype"):
        x.masked_scatter(make(np.ones(4, bool)), make(np.ones(12), "float32"))
    y = make(np.zeros(3, dtype=np.int64))
    same(y.masked_fill(make(np.ones(3, bool)), 1.5), np.ones(3))  # truncated like PyTorch


# ---- nonzero / argwhere / take / take_along_dim ----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero(dtype: str) -> None:
    a = cast_np(data((3, 4, 2)) % 2, dtype)
    for strided in (False, True):
        same(make(a, dtype, strided).nonzero(), np.argwhere(a), "int64")
        same(ember.argwhere(make(a, dtype, strided)), np.argwhere(a), "int64")
        cols = ember.nonzero(make(a, dtype, strided), as_tuple=True)
        assert isinstance(cols, tuple) and len(cols) == 3
        for c, r in zip(cols, np.nonzero(a)):
            same(c, r)
    same(make(a, dtype).nonzero(as_tuple=False), np.argwhere(a))
    same(make(np.float64(0)).nonzero(), np.zeros((0, 0)))
    same(make(np.float64(2)).nonzero(), np.zeros((1, 0)))
    (c,) = make(np.float64(2)).nonzero(as_tuple=True)
    same(c, np.array([0]))
    same(make(np.array([np.nan, 0.0, -0.0, 1.0])).nonzero(), np.array([[0], [3]]))
    out = ember.empty(0, dtype=ember.int64)
    assert ember.nonzero(make(a, dtype), out=out) is out
    same(out, np.argwhere(a))


@pytest.mark.parametrize("dtype", DTYPES)
def test_take(dtype: str) -> None:
    a = cast_np(data((3, 4)), dtype)
    ix = np.array([[0, -1], [5, 11]])
    same(make(a, dtype).take(idx(ix)), a.ravel()[ix], dtype)
    same(ember.take(make(a, dtype, strided=True), idx(ix)), a.ravel()[ix], dtype)
    same(make(a, dtype).take(idx(np.zeros((0,)))), np.zeros(0), dtype)
    big = np.random.default_rng(0).integers(-12, 12, 100000)
    same(make(a, dtype).take(idx(big)), a.ravel()[big], dtype)


def test_take_errors_and_along_dim() -> None:
    x = make(data((3, 4)))
    with pytest.raises(IndexError, match=r"take\(\): index 12 is out of bounds for dimension 0 with size 12"):
        x.take(idx([12]))
    with pytest.raises(IndexError, match="index -13 is out of bounds"):
        x.take(idx([-13]))
    with pytest.raises(RuntimeError, match=r"take\(\): expected an index tensor of dtype int64"):
        x.take(idx([0], "int32"))
    a = data((3, 4))
    ind = np.argsort(a, axis=1)
    same(ember.take_along_dim(make(a), idx(ind), dim=1), np.take_along_axis(a, ind, axis=1))
    same(make(a, strided=True).take_along_dim(idx(ind[:, :1]), 1), np.take_along_axis(a, ind[:, :1], axis=1))
    same(ember.take_along_dim(make(a), idx([[0], [1], [2]]), 1), a[[0, 1, 2], [0, 1, 2]][:, None])
    same(ember.take_along_dim(make(a), idx([[-1]]), 0), a[-1:])  # broadcast over dim 1, negatives wrap
    same(ember.take_along_dim(make(a), idx([0, 5, 11])), a.ravel()[[0, 5, 11]])
    with pytest.raises(RuntimeError, match="int64"):  # int32 only without a dim, as torch
        ember.take_along_dim(make(a), idx([[0]], "int32"), 0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.take_along_dim(make(a), idx([0]), 0)


# ---- searchsorted / bucketize ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC)
def test_searchsorted(dtype: str) -> None:
    seq = np.array([0, 1, 1, 3, 5, 6])
    vals = np.array([[0, 1, 2], [5, 7, 6]])
    for right in (False, True):
        side = "right" if right else "left"
        r = ember.searchsorted(make(seq, dtype), make(vals, dtype), right=right)
        same(r, np.searchsorted(seq, vals, side=side), "int64")
        r = ember.searchsorted(make(seq, dtype), make(vals, "float64", strided=True), side=side, out_int32=True)
        same(r, np.searchsorted(seq, vals, side=side), "int32")
        same(ember.bucketize(make(vals, dtype), make(seq, dtype), right=right), np.searchsorted(seq, vals, side=side))
    seq2 = np.sort(data((2, 5)), axis=1)
    v2 = data((2, 3), seed=1)
    ref = np.stack([np.searchsorted(seq2[i], v2[i]) for i in range(2)])
    same(ember.searchsorted(make(seq2, dtype), make(v2, dtype)), ref)


def test_searchsorted_special() -> None:
    r = ember.searchsorted(make([1, 2, 3]), 2)
    assert r.shape == () and r.item() == 1
    assert ember.searchsorted(make([1.0, 2, 3]), 2, side="right").item() == 2
    assert ember.bucketize(3, make([1, 2, 5])).item() == 2
    same(ember.searchsorted(make([1.0, 2, 3]), make([1.5, 2.0])), np.array([1, 1]))  # int vs float promote
    unsorted = np.array([3, 1, 2])
    sorter = np.argsort(unsorted)
    same(ember.searchsorted(make(unsorted), make([2, 0, 4]), sorter=idx(sorter)), np.searchsorted(unsorted, [2, 0, 4], sorter=sorter))
    same(ember.searchsorted(make(np.zeros(0)), make([1.0])), np.array([0]))
    big_seq = np.sort(data((1000,)))
    big_v = data((50000,), seed=1)
    same(ember.searchsorted(make(big_seq), make(big_v)), np.searchsorted(big_seq, big_v))
    out = ember.empty(0, dtype=ember.int64)
    assert ember.searchsorted(make([1, 2]), make([1, 2, 3]), out=out) is out
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right' but got foo"):
        ember.searchsorted(make([1, 2]), 2, side="foo")
    with pytest.raises(RuntimeError, match="opposites"):
        ember.searchsorted(make([1, 2]), 2, side="left", right=True)
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        ember.searchsorted(make([[1, 2, 3]]), make([1, 2]))
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        ember.searchsorted(make([[1, 2, 3]]), 2)
    with pytest.raises(RuntimeError, match="boundaries tensor must be 1 dimension"):
        ember.bucketize(make([1, 5]), make([[1, 2]]))
    with pytest.raises(TypeError, match="bool"):
        ember.searchsorted(make([True, False]), make([True]))
    with pytest.raises(RuntimeError, match="sorter must be a tensor of dtype int64"):  # as torch
        ember.searchsorted(make([1, 2]), 2, sorter=idx([0, 1], "int32"))
    with pytest.raises(RuntimeError, match="sorter index 2 is out of bounds"):  # as torch
        ember.searchsorted(make([1, 2]), 2, sorter=idx([0, 2]))


@needs_torch
def test_searchsorted_torch() -> None:
    seq = np.array([0.0, 1, 1, np.nan])
    vals = np.array([np.nan, 1.0, -1.0, 2.0])
    for right in (False, True):
        same_torch(ember.searchsorted(make(seq), make(vals), right=right),
                   torch.searchsorted(tt(seq), tt(vals), right=right))
    same_torch(ember.searchsorted(make([1, 2, 3]), make([1.5, 2.5], "float32")),
               torch.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([1.5, 2.5])))


# ---- bincount / histc -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_bincount(dtype: str) -> None:
    a = np.array([0, 1, 1, 3, 6, 1])
    same(make(a, dtype).bincount(), np.bincount(a), "int64")
    same(ember.bincount(make(a, dtype, strided=True), minlength=10), np.bincount(a, minlength=10))
    w = np.linspace(0, 1, 6)
    same(ember.bincount(make(a, dtype), weights=make(w, "float32")), np.bincount(a, w).astype(np.float32), "float32")
    np.testing.assert_allclose(to_np(ember.bincount(make(a, dtype), make(w))), np.bincount(a, w))
    assert ember.bincount(make(a, dtype), make(w, "float16")).dtype == ember.float64
    assert ember.bincount(make(a, dtype), make(a, "int64")).dtype == ember.float64
    same(ember.bincount(make(np.zeros(0), "int64")), np.zeros(0))


def test_bincount_errors() -> None:
    with pytest.raises(TypeError, match="integer tensor"):
        ember.bincount(make([0.0, 1.0]))
    with pytest.raises(TypeError, match="integer tensor"):
        ember.bincount(make([True]))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.bincount(make([-1, 1]))
    with pytest.raises(RuntimeError, match="1-d"):
        ember.bincount(make([[1]]))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        ember.bincount(make([1]), minlength=-1)
    with pytest.raises(RuntimeError, match="same length"):
        ember.bincount(make([1, 2]), weights=make([1.0]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_histc(dtype: str) -> None:
    a = np.array([1.0, 2.0, 1.0, 2.5, 4.0, -1.0, 3.99, 0.0])
    same(make(a, dtype).histc(bins=4, min=0, max=4), np.histogram(a, bins=4, range=(0, 4))[0], dtype)
    same(ember.histc(make(a, dtype, strided=True), bins=5), np.histogram(a, bins=5)[0], dtype)
    same(ember.histc(make(np.ones(3), dtype), bins=4), np.array([0, 0, 3, 0]), dtype)  # range -> [0, 2]
    same(ember.histc(make(np.zeros(0), dtype), bins=3), np.zeros(3), dtype)
    out = ember.empty(0, dtype=getattr(ember, dtype))
    assert ember.histc(make(a, dtype), bins=2, out=out) is out


def test_histc_errors() -> None:
    with pytest.raises(TypeError, match="histc"):
        ember.histc(make([1, 2]), bins=4)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        ember.histc(make([1.0, 2.0]), bins=4, min=3, max=1)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        ember.histc(make([1.0]), bins=0)
    with pytest.raises(RuntimeError, match=r"range of \[1, inf\] is not finite"):
        ember.histc(make([1.0, np.inf]), bins=4)


@needs_torch
@pytest.mark.parametrize("dtype", FLOATS)
def test_histc_torch(dtype: str) -> None:
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.normal(size=300), [0.1, 0.2, 0.3, 1 / 3, 2 / 3, 0.7]])
    for bins, lo, hi in [(10, 0, 0), (7, -1, 1), (3, 0.1, 0.7), (100, -2, 2)]:
        same_torch(ember.histc(make(a, dtype), bins=bins, min=lo, max=hi),
                   torch.histc(tt(a, dtype), bins=bins, min=lo, max=hi))


# ---- against torch: the whole family on one set of inputs ------------------------------------


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_against_torch(dtype: str) -> None:
    a = cast_np(data((4, 5)), dtype)
    src = cast_np(data((4, 5), seed=1), dtype)
    index = np.random.default_rng(0).integers(0, 4, size=(3, 5))
    vec = np.array([3, 0, 3])
    mask = data((4, 5), seed=2) > 3
    e, t = make(a, dtype, strided=True), tt(a, dtype)
    es, ts = make(src, dtype), tt(src, dtype)
    same_torch(e.index_select(1, idx(vec)), t.index_select(1, tt(vec)))
    same_torch(e.gather(0, idx(index)), t.gather(0, tt(index)))
    same_torch(e.scatter(0, idx(index[:1]), es), t.scatter(0, tt(index[:1]), ts))
    same_torch(e.scatter(1, idx(index[:, :1]), 1), t.scatter(1, tt(index[:, :1]), 1))
    same_torch(e.scatter_add(0, idx(index), es), t.scatter_add(0, tt(index), ts))
    same_torch(e.index_add(0, idx(vec), es[:3]), t.index_add(0, tt(vec), ts[:3]))
    same_torch(e.index_copy(0, idx([3, 0, 1]), es[:3]), t.index_copy(0, tt(np.array([3, 0, 1])), ts[:3]))
    same_torch(e.index_fill(1, idx([-1, 0]), 1), t.index_fill(1, tt(np.array([-1, 0])), 1))
    same_torch(e.index_put((idx(vec), idx([1, 2, 3])), es[0, :3]), t.index_put((tt(vec), tt(np.array([1, 2, 3]))), ts[0, :3]))
    same_torch(e.index_put((idx(vec),), es[:3], accumulate=True), t.index_put((tt(vec),), ts[:3], accumulate=True))
    same_torch(e.masked_fill(make(mask), 1), t.masked_fill(tt(mask), 1))
    same_torch(e.masked_select(make(mask)), t.masked_select(tt(mask)))
    same_torch(e.masked_scatter(make(mask), es), t.masked_scatter(tt(mask), ts))
    same_torch(e.nonzero(), t.nonzero())
    same_torch(e.take(idx([[0, -1], [7, 3]])), t.take(tt(np.array([[0, -1], [7, 3]]))))
    same_torch(ember.take_along_dim(e, idx(index), 0), torch.take_along_dim(t, tt(index), 0))
