"""Sorting and order statistics (ops/sort.yaml) against NumPy and, when installed, PyTorch."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from core_helpers import make, needs_torch, to_np, torch

ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
NAN = float("nan")


def layouts(a: np.ndarray):
    out = [("contiguous", make(a), a)]
    big = np.repeat(a, 2, axis=0)
    out.append(("strided", make(big)[::2], big[::2]))
    rev = np.ascontiguousarray(np.transpose(a))
    out.append(("transposed", make(rev).permute(*range(a.ndim - 1, -1, -1)), a))
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- sort / argsort / msort -----------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_layouts(dim, rng):
    a = rng.integers(0, 6, size=(5, 7, 4)).astype(np.float64)  # many ties: checks stability
    for name, x, ref in layouts(a):
        v, i = ember.sort(x, dim)
        np.testing.assert_array_equal(to_np(v), np.sort(ref, axis=dim, kind="stable"))
        np.testing.assert_array_equal(to_np(i), np.argsort(ref, axis=dim, kind="stable"))
        np.testing.assert_array_equal(to_np(x.argsort(dim=dim)), np.argsort(ref, axis=dim, kind="stable"))
        v, i = x.sort(dim, descending=True)
        # descending and stable: equal values keep their original order
        want_i = np.argsort(-ref, axis=dim, kind="stable")
        np.testing.assert_array_equal(to_np(i), want_i)
        np.testing.assert_array_equal(to_np(v), np.take_along_axis(ref, want_i, axis=dim))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_sort_dtypes(dtype, rng):
    a = rng.integers(0, 100, size=(3, 9)).astype(np.float64)
    if dtype == "bool":
        a = a > 50
    x = make(a, dtype)
    ref = to_np(x)
    r = x.sort()
    assert type(r).__name__ == "sort"
    assert r.values.dtype == x.dtype and r.indices.dtype == ember.int64
    np.testing.assert_array_equal(to_np(r.values), np.sort(ref, kind="stable"))
    np.testing.assert_array_equal(to_np(r.indices), np.argsort(ref, kind="stable"))


def test_sort_nan_and_edge_cases():
    x = ember.tensor([1.0, NAN, 3.0, 0.0, NAN])
    v, i = x.sort()
    assert to_np(i).tolist() == [3, 0, 2, 1, 4]
    v, i = x.sort(descending=True)
    assert to_np(i).tolist() == [1, 4, 2, 0, 3]  # NaN is the largest value, like PyTorch
    v, i = ember.sort(ember.tensor(3.0))
    assert v.item() == 3.0 and i.item() == 0 and v.shape == ()
    v, i = ember.sort(ember.empty(3, 0), 0)
    assert v.shape == (3, 0) and i.shape == (3, 0)
    assert ember.argsort(ember.empty(0)).shape == (0,)
    v, _ = ember.sort(ember.tensor([2, 1]), stable=True)
    assert to_np(v).tolist() == [1, 2]
    np.testing.assert_array_equal(to_np(ember.msort(ember.tensor([[3, 1], [1, 2]]))), [[1, 1], [3, 2]])
    with pytest.raises(IndexError, match="out of range"):
        ember.ones(2, 3).sort(2)


def test_sort_large_rows(rng):
    a = rng.standard_normal((64, 5000)).astype(np.float32)
    v, i = make(a).sort(1)
    np.testing.assert_array_equal(to_np(v), np.sort(a, 1))
    np.testing.assert_array_equal(to_np(i), np.argsort(a, 1, kind="stable"))


# ---- topk / kthvalue ------------------------------------------------------------------------------


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, -1])
def test_topk(largest, dim, rng):
    a = rng.permutation(60).reshape(6, 10).astype(np.float64)  # distinct values
    for name, x, ref in layouts(a):
        for k in (0, 1, 3, ref.shape[dim]):
            v, i = ember.topk(x, k, dim, largest=largest)
            order = np.argsort(-ref if largest else ref, axis=dim, kind="stable")
            want_i = np.take(order, range(k), axis=dim)
            np.testing.assert_array_equal(to_np(i), want_i)
            np.testing.assert_array_equal(to_np(v), np.take_along_axis(ref, want_i, axis=dim))
    r = ember.tensor([1.0, NAN, 3.0, 0.0]).topk(2)
    assert type(r).__name__ == "topk"
    assert to_np(r.indices).tolist() == [1, 2]
    r = ember.tensor([1.0, NAN, 3.0, 0.0]).topk(2, largest=False)
    assert to_np(r.values).tolist() == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.ones(3).topk(4)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.ones(3).topk(-1)


def test_topk_of_a_zero_dim_tensor():
    # The result of a 0-d input is 0-d (one element) whatever k in {0, 1}: the value and index 0,
    # as torch; k = 0 once returned uninitialised memory.
    for k in (0, 1):
        v, i = ember.topk(ember.tensor(3.5), k)
        assert v.shape == () and i.shape == ()
        assert v.item() == 3.5 and i.item() == 0
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ember.tensor(3.5).topk(2)


def test_kthvalue(rng):
    a = rng.permutation(40).reshape(5, 8).astype(np.float32)
    x = make(a)
    for k in (1, 3, 8):
        r = x.kthvalue(k)
        assert type(r).__name__ == "kthvalue"
        np.testing.assert_array_equal(to_np(r.values), np.sort(a, 1)[:, k - 1])
        np.testing.assert_array_equal(to_np(r.indices), np.argsort(a, 1)[:, k - 1])
    r = ember.kthvalue(x, 2, 0, keepdim=True)
    assert r.values.shape == (1, 8)
    np.testing.assert_array_equal(to_np(r.values)[0], np.sort(a, 0)[1])
    r = ember.tensor([1.0, NAN, 3.0, 0.0]).kthvalue(4)
    assert math.isnan(r.values.item()) and r.indices.item() == 1
    with pytest.raises(RuntimeError, match=r"kthvalue\(\): selected number k out of range for dimension 0"):
        ember.ones(3).kthvalue(4)
    with pytest.raises(RuntimeError, match="out of range"):
        ember.ones(3).kthvalue(0)
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        ember.empty(0).kthvalue(1)


# ---- median / nanmedian / mode --------------------------------------------------------------------


def test_median(rng):
    a = rng.permutation(48).reshape(4, 12).astype(np.float64)
    for name, x, ref in layouts(a):
        assert x.median().item() == np.sort(ref.ravel())[(ref.size - 1) // 2]  # the lower median
        for d in (0, 1):
            r = x.median(d)
            srt = np.sort(ref, axis=d)
            want = np.take(srt, (ref.shape[d] - 1) // 2, axis=d)
            np.testing.assert_array_equal(to_np(r.values), want)
            picked = np.take_along_axis(ref, np.expand_dims(to_np(r.indices), d), d).squeeze(d)
            np.testing.assert_array_equal(picked, want)  # the index points at the median
    r = ember.median(make(a), 1, keepdim=True)
    assert r.values.shape == (4, 1) and type(r).__name__ == "median"
    x = ember.tensor([[1.0, NAN, 3.0], [2.0, 5.0, 4.0]])
    assert math.isnan(x.median().item())
    r = x.median(1)
    assert math.isnan(to_np(r.values)[0]) and to_np(r.indices).tolist() == [1, 2]
    r = x.nanmedian(1)
    assert to_np(r.values).tolist() == [1.0, 4.0] and to_np(r.indices).tolist() == [0, 2]
    assert x.nanmedian().item() == 3.0
    assert math.isnan(ember.tensor([NAN, NAN]).nanmedian().item())
    assert math.isnan(ember.empty(0).median().item())
    assert ember.tensor([3, 1, 2, 4]).median().item() == 2
    with pytest.raises(IndexError, match=r"median\(\): Expected reduction dim 1 to have non-zero size"):
        ember.empty(3, 0).median(1)


def test_median_of_empty_stays_on_its_device():
    # The NaN of an empty median is made on the input's device, whatever the default device.
    x = ember.empty(0)
    ember.set_default_device("meta")
    try:
        r, n = x.median(), x.nanmedian()
    finally:
        ember.set_default_device(None)
    assert r.device.type == "cpu" and n.device.type == "cpu"
    assert math.isnan(r.item()) and math.isnan(n.item())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int32", "uint8", "bool"])
def test_median_dtypes(dtype, rng):
    a = rng.integers(0, 10, size=(3, 7)).astype(np.float64)
    if dtype == "bool":  # no ordering kernel for bool, as PyTorch
        x = make(a > 5, dtype)
        with pytest.raises(NotImplementedError, match="bool"):
            x.median(1)
        with pytest.raises(NotImplementedError, match="bool"):
            x.median()
        return
    x = make(a, dtype)
    ref = to_np(x)
    np.testing.assert_array_equal(to_np(x.median(1).values), np.sort(ref, 1)[:, 3])
    assert x.median().dtype == x.dtype


def test_mode():
    r = ember.tensor([1.0, 2.0, 2.0, 1.0]).mode()
    assert type(r).__name__ == "mode"
    assert r.values.item() == 1.0 and r.indices.item() == 3  # smallest of the most frequent, last index
    r = ember.tensor([5, 5, 1, 1, 1, 5]).mode()
    assert r.values.item() == 1 and r.indices.item() == 4
    x = ember.tensor([[3, 3, 1], [2, 7, 7], [4, 0, 9]])
    r = ember.mode(x, 1)
    assert to_np(r.values).tolist() == [3, 7, 0] and to_np(r.indices).tolist() == [1, 2, 1]
    r = x.mode(0, keepdim=True)
    assert r.values.shape == (1, 3)
    with pytest.raises(IndexError, match=r"mode\(\): Expected reduction dim 1 to have non-zero size"):
        ember.empty(3, 0).mode(1)


# ---- unique -------------------------------------------------------------------------------------


def _unique(x, **kw):
    return ember._C._unique(x, **kw)


def test_unique_flat(rng):
    a = rng.integers(0, 7, size=(4, 6))
    x = make(a)
    out, inv, cnt = _unique(x, return_inverse=True, return_counts=True)
    u, i, c = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(to_np(out), u)
    np.testing.assert_array_equal(to_np(inv), i.reshape(a.shape))
    np.testing.assert_array_equal(to_np(cnt), c)
    out, inv, cnt = _unique(make(a)[:, ::2])
    np.testing.assert_array_equal(to_np(out), np.unique(a[:, ::2]))
    out, _, cnt = _unique(ember.tensor([1.0, NAN, 1.0, NAN]), return_counts=True)
    assert to_np(cnt).tolist() == [2, 1, 1]  # NaNs are all distinct
    out, inv, _ = _unique(ember.tensor(5.0), return_inverse=True)
    assert to_np(out).tolist() == [5.0] and inv.shape == () and inv.item() == 0
    out, inv, cnt = _unique(ember.empty(0), return_inverse=True, return_counts=True)
    assert out.shape == (0,) and inv.shape == (0,) and cnt.shape == (0,)
    for dt in ALL_DTYPES:
        y = make(np.array([3, 1, 3, 0]) > 1, dt) if dt == "bool" else make(np.array([3, 1, 3, 0]), dt)
        assert to_np(_unique(y)[0]).tolist() == sorted(set(to_np(y).tolist()))


def test_unique_dim():
    a = np.array([[1, 2], [3, 4], [1, 2], [0, 9]])
    out, inv, cnt = _unique(make(a), dim=0, return_inverse=True, return_counts=True)
    u, i, c = np.unique(a, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(to_np(out), u)
    np.testing.assert_array_equal(to_np(inv), i.ravel())
    np.testing.assert_array_equal(to_np(cnt), c)
    out, inv, _ = _unique(make(a), dim=1, return_inverse=True)
    np.testing.assert_array_equal(to_np(out), np.unique(a, axis=1))


def test_unique_public_wrapper():
    if not hasattr(ember, "unique"):
        pytest.skip("ember.unique (the Python wrapper over _unique) is not installed")
    x = ember.tensor([3, 1, 3])
    assert to_np(ember.unique(x)).tolist() == [1, 3]
    out, cnt = ember.unique(x, return_counts=True)
    assert to_np(cnt).tolist() == [1, 2]


# ---- against PyTorch ------------------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_against_torch(dtype, rng):
    a = rng.permutation(120).reshape(4, 5, 6).astype(np.float64)
    x = make(a, dtype)
    t = torch.from_numpy(to_np(x)).to(getattr(torch, dtype))
    for d in (0, 1, 2):
        for desc in (False, True):
            v, i = x.sort(d, descending=desc)
            tv, ti = t.sort(dim=d, descending=desc, stable=True)
            np.testing.assert_array_equal(to_np(v), tv.to(torch.float64).numpy())
            np.testing.assert_array_equal(to_np(i), ti.numpy())
        v, i = x.topk(3, d)
        tv, ti = t.topk(3, d)
        np.testing.assert_array_equal(to_np(v), tv.to(torch.float64).numpy())
        np.testing.assert_array_equal(to_np(i), ti.numpy())
        for op in ("median", "kthvalue", "mode"):
            args = (2, d) if op == "kthvalue" else (d,)
            r, tr = getattr(x, op)(*args), getattr(t, op)(*args)
            np.testing.assert_array_equal(to_np(r.values), tr.values.to(torch.float64).numpy())
            np.testing.assert_array_equal(to_np(r.indices), tr.indices.numpy())
    assert x.median().item() == t.median().item()
    out, inv, cnt = _unique(x, return_inverse=True, return_counts=True)
    tu, ti, tc = torch.unique(t, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(to_np(out), tu.to(torch.float64).numpy())
    np.testing.assert_array_equal(to_np(inv), ti.numpy())
    np.testing.assert_array_equal(to_np(cnt), tc.numpy())


def test_mode_indices_match_torch_on_long_rows_with_ties():
    # PyTorch's CPU mode sorts (value, index) pairs by value with an unstable std::sort and
    # names the index at the end of the mode's run: the last occurrence for short rows, another
    # one for rows longer than 16. ember's CPU kernel makes the same choice.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for n, dtype in [(8, "int64"), (17, "int64"), (40, "int64"), (101, "float32"),
                     (64, "float16"), (300, "int32")]:
        a = rng.integers(0, 5, (6, n))
        for dim in (0, 1):
            e = ember.mode(ember.tensor(a).to(getattr(ember, dtype)), dim)
            t = torch.mode(torch.tensor(a).to(getattr(torch, dtype)), dim)
            assert to_np(e.values).tolist() == t.values.tolist()
            assert to_np(e.indices).tolist() == t.indices.tolist(), (n, dtype, dim)
    z = np.zeros(40, dtype=np.int64)
    z[5] = 3
    assert ember.mode(ember.tensor(z)).indices.item() == torch.mode(torch.tensor(z)).indices.item()
