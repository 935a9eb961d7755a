"""Arithmetic on uint16, uint32 and uint64: exactly what PyTorch 2.13 computes on them on the CPU.

Working: mul (tensor, number, in place), sum / nansum / prod (into int64, wrapping as int64 does:
a uint64 past 2**63 adds as its two's-complement value), cumsum / cumprod (int64), sort, argsort,
msort, unique, unique_consecutive, true division, bitwise and / or / xor, any, all, isnan, isinf,
isfinite, nan_to_num, isclose, allclose, equal, indexing with a bool mask. Refused with
ember.DtypeNotImplementedError (PyTorch has no kernel): add, sub, max / min, comparisons other than
eq / ne, abs, neg, argmax, topk, floor division, pow, clamp, shifts, bitwise_not, nonzero,
count_nonzero, masked_select, isin, searchsorted, gather, scatter, matmul, dot, logical ops, trace,
and sum / prod with dtype= one of these types. Values come from NumPy and Python integers
(exact), and from PyTorch where it is installed."""

from __future__ import annotations

from functools import reduce

import ember
import numpy as np
import pytest

UINTS = ["uint16", "uint32", "uint64"]
BITS = {"uint16": 16, "uint32": 32, "uint64": 64}


def _torch():
    return pytest.importorskip("torch")


def _top(name: str) -> int:
    return 2 ** BITS[name] - 1


def _values(name: str) -> list[int]:
    """Small values, the largest ones, and (uint64) values past int64's maximum."""
    top = _top(name)
    vals = [0, 1, 2, 3, 7, top, top - 1, top // 2, top // 2 + 1, 12345, 65535, 256]
    return [v & top for v in vals]


def _u(vals, name: str):
    """An ember tensor of these exact values (through NumPy: past 2**63 too)."""
    return ember.from_numpy(np.array(vals, dtype=name))


def _as_int64(v: int) -> int:
    """v wrapped into int64, as PyTorch's int64 accumulators wrap."""
    v %= 2 ** 64
    return v - 2 ** 64 if v >= 2 ** 63 else v


# ---- mul --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", UINTS)
def test_mul_wraps_like_numpy(name):
    vals = _values(name)
    a = np.array(vals, dtype=name)
    b = np.roll(a, 3)
    x, y = _u(a, name), _u(b, name)
    want = (a * b).tolist()  # NumPy's unsigned multiply wraps modulo 2**bits
    assert (x * y).dtype is getattr(ember, name)
    assert (x * y).tolist() == want
    assert ember.mul(x, y).tolist() == want
    z = x.clone()
    z *= y
    assert z.tolist() == want
    z = x.clone()
    assert z.mul_(y) is z and z.tolist() == want
    # the largest value squared: (2**b - 1)**2 = 1 modulo 2**b (uint16 would overflow a C int)
    top = _u([_top(name)] * 3, name)
    assert (top * top).tolist() == [1, 1, 1]


@pytest.mark.parametrize("name", UINTS)
@pytest.mark.parametrize("k", [3, -1, 70000, 2 ** 62, True])
def test_mul_by_a_number_wraps(name, k):
    vals = _values(name)
    x = _u(vals, name)
    want = [(v * int(k)) % 2 ** BITS[name] for v in vals]
    assert (x * k).dtype is getattr(ember, name) and (x * k).tolist() == want
    assert (k * x).tolist() == want
    assert x.clone().mul_(k).tolist() == want


@pytest.mark.parametrize("name", UINTS)
def test_mul_broadcast_noncontiguous_and_0d(name):
    vals = _values(name)[:6]
    a = np.array(vals, dtype=name)
    x = _u(a, name)
    got = x.reshape(2, 3).t() * x.reshape(3, 2)
    assert got.tolist() == (a.reshape(2, 3).T * a.reshape(3, 2)).tolist()
    got = x.reshape(6, 1) * x.reshape(1, 6)
    assert got.tolist() == np.multiply.outer(a, a).tolist()
    assert (x * x[3]).tolist() == (a * a[3]).tolist()
    assert (x * ember.tensor(3)).dtype is getattr(ember, name)  # a 0-d int64 takes no part
    assert ember.outer(x, x).tolist() == np.multiply.outer(a, a).tolist()


@pytest.mark.parametrize("name", UINTS)
def test_mul_by_a_float_gives_float(name):
    x = _u([1, 2, _top(name)], name)
    assert (x * 0.5).dtype is ember.float32
    assert (x * 0.5).tolist() == [float(np.float32(v) * np.float32(0.5)) for v in [1, 2, _top(name)]]
    with pytest.raises(RuntimeError, match="can't be cast"):
        x.clone().mul_(0.5)


# ---- sum / nansum / prod: into int64 ----------------------------------------------------------
@pytest.mark.parametrize("name", UINTS)
def test_sum_is_int64_and_wraps(name):
    vals = _values(name)
    x = _u(vals, name)
    for op in (ember.sum, ember.nansum):
        s = op(x)
        assert s.dtype is ember.int64 and s.item() == _as_int64(sum(vals))
    m = _u(vals, name).reshape(3, 4)
    rows = [vals[i * 4:(i + 1) * 4] for i in range(3)]
    assert m.sum(1).tolist() == [_as_int64(sum(r)) for r in rows]
    assert m.sum(0, keepdim=True).tolist() == [[_as_int64(sum(c)) for c in zip(*rows)]]
    assert m.t().sum(0).tolist() == [_as_int64(sum(r)) for r in rows]  # non-contiguous
    assert m.sum((0, 1)).item() == _as_int64(sum(vals))
    assert m.nansum(0).tolist() == [_as_int64(sum(c)) for c in zip(*rows)]
    assert x[:0].sum().item() == 0 and x[:0].sum().dtype is ember.int64


def test_uint64_sum_past_int64_wraps():
    big = 2 ** 63
    assert _u([big, big], "uint64").sum().item() == 0
    assert _u([big, big, 1], "uint64").sum().item() == 1
    assert _u([2 ** 64 - 1] * 3, "uint64").sum().item() == -3
    assert _u([big], "uint64").sum().item() == -(2 ** 63)


@pytest.mark.parametrize("name", UINTS)
def test_long_sums_and_products_match_python_integers(name):
    # long enough for the blocked and threaded reduction paths
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2 ** BITS[name], size=(50, 2000), dtype=name, endpoint=False)
    x = ember.from_numpy(a)
    py = a.tolist()
    assert x.sum().item() == _as_int64(sum(map(sum, py)))
    assert x.sum(1).tolist() == [_as_int64(sum(r)) for r in py]
    assert x.sum(0).tolist() == [_as_int64(sum(c)) for c in zip(*py)]

    def prod(vs):
        return _as_int64(reduce(lambda p, v: p * v % 2 ** 64, vs, 1))

    odd = a | np.array(1, dtype=name)  # odd factors keep the product from becoming 0
    y = ember.from_numpy(odd)
    assert y.prod(1).tolist() == [prod(r) for r in odd.tolist()]
    assert y[:, :7].prod().item() == prod(odd[:, :7].ravel().tolist())


@pytest.mark.parametrize("name", UINTS)
def test_prod(name):
    vals = _values(name)
    x = _u(vals, name)
    assert x.prod().dtype is ember.int64 and x.prod().item() == 0  # there is a 0
    nz = vals[1:]
    want = _as_int64(reduce(lambda p, v: p * v, nz, 1))
    assert _u(nz, name).prod().item() == want
    m = _u(nz[:10], name).reshape(2, 5)
    assert m.prod(1).tolist() == [_as_int64(reduce(lambda p, v: p * v, r, 1))
                                  for r in (nz[:5], nz[5:10])]
    assert m.prod(0, keepdim=True).shape == (1, 5)
    assert x[:0].prod().item() == 1


@pytest.mark.parametrize("name", UINTS)
def test_sum_prod_with_dtype(name):
    vals = _values(name)
    x = _u(vals, name)
    assert x.sum(dtype=ember.float64).item() == sum(float(v) for v in vals)
    assert x.sum(dtype=ember.int64).item() == _as_int64(sum(vals))
    assert x.sum(dtype=ember.int32).dtype is ember.int32
    assert x[1:4].prod(dtype=ember.float64).item() == 6.0
    for op in ("sum", "nansum", "prod"):
        with pytest.raises(ember.DtypeNotImplementedError, match=f"{op}: not implemented for dtype"):
            getattr(x, op)(dtype=getattr(ember, name))
    with pytest.raises(ember.DtypeNotImplementedError):
        ember.ones(3).sum(dtype=getattr(ember, name))


@pytest.mark.parametrize("name", UINTS)
def test_cumsum_cumprod_are_int64(name):
    vals = _values(name)[1:7]
    x = _u(vals, name)
    acc, want = 0, []
    for v in vals:
        acc += v
        want.append(_as_int64(acc))
    assert x.cumsum(0).dtype is ember.int64 and x.cumsum(0).tolist() == want
    acc, want = 1, []
    for v in vals:
        acc *= v
        want.append(_as_int64(acc))
    assert x.cumprod(0).tolist() == want
    with pytest.raises(ember.DtypeNotImplementedError):
        x.cumsum(0, dtype=getattr(ember, name))


# ---- sorting and unique -----------------------------------------------------------------------
@pytest.mark.parametrize("name", UINTS)
def test_sort_argsort_msort(name):
    vals = _values(name) * 2  # ties, kept in index order (stable)
    a = np.array(vals, dtype=name)
    x = _u(a, name)
    v, i = x.sort()
    assert v.dtype is getattr(ember, name) and v.tolist() == sorted(vals)
    assert i.tolist() == np.argsort(a, kind="stable").tolist()
    v, i = x.sort(descending=True)
    assert v.tolist() == sorted(vals, reverse=True)
    assert [vals[k] for k in i.tolist()] == sorted(vals, reverse=True)
    assert x.argsort(stable=True).tolist() == np.argsort(a, kind="stable").tolist()
    m = x.reshape(4, 6)
    assert m.sort(0).values.tolist() == np.sort(a.reshape(4, 6), axis=0).tolist()
    assert ember.msort(m).tolist() == np.sort(a.reshape(4, 6), axis=0).tolist()
    assert m.sort(-1).values.tolist() == np.sort(a.reshape(4, 6), axis=1).tolist()
    assert m.t().sort(1).values.tolist() == np.sort(a.reshape(4, 6).T, axis=1).tolist()


@pytest.mark.parametrize("name", UINTS)
def test_unique(name):
    vals = _values(name) * 2
    a = np.array(vals, dtype=name)
    x = _u(a, name)
    u, inv, cnt = ember.unique(x, return_inverse=True, return_counts=True)
    wu, winv, wcnt = np.unique(a, return_inverse=True, return_counts=True)
    assert u.dtype is getattr(ember, name) and u.tolist() == wu.tolist()
    assert inv.tolist() == winv.tolist() and cnt.tolist() == wcnt.tolist()
    rows = _u(np.concatenate([a[:6], a[:6], a[6:12]]), name).reshape(3, 6)
    assert ember.unique(rows, dim=0).tolist() == np.unique(rows.numpy(), axis=0).tolist()
    c = ember.unique_consecutive(_u([1, 1, _top(name), _top(name), 1], name), return_counts=True)
    assert c[0].tolist() == [1, _top(name), 1] and c[1].tolist() == [2, 2, 1]
    assert ember.unique(x[:0]).tolist() == []


# ---- bitwise, predicates, closeness -----------------------------------------------------------
@pytest.mark.parametrize("name", UINTS)
def test_bitwise_and_or_xor(name):
    a = np.array(_values(name), dtype=name)
    b = np.roll(a, 5)
    x, y = _u(a, name), _u(b, name)
    assert (x & y).tolist() == (a & b).tolist()
    assert (x | y).tolist() == (a | b).tolist()
    assert (x ^ y).tolist() == (a ^ b).tolist()
    assert ember.bitwise_xor(x, 3).tolist() == (a ^ np.array(3, dtype=name)).tolist()
    assert (x & -1).tolist() == a.tolist()  # -1 wraps to all ones
    assert (5 | x).tolist() == (a | np.array(5, dtype=name)).tolist()
    z = x.clone()
    z ^= y
    assert z.dtype is getattr(ember, name) and z.tolist() == (a ^ b).tolist()


@pytest.mark.parametrize("name", UINTS)
def test_any_all_and_float_predicates(name):
    x = _u([0, 1, _top(name)], name)
    assert x.any().item() is True and x.all().item() is False
    assert x[1:].all().item() is True and x[:1].any().item() is False
    m = _u([0, 0, _top(name), 4], name).reshape(2, 2)
    assert m.any(0).tolist() == [True, True] and m.all(1).tolist() == [False, True]
    assert m.t().any(1).tolist() == [True, True] and m.any((0, 1)).item() is True
    for op in (ember.isnan, ember.isinf):
        assert op(x).tolist() == [False] * 3
    assert ember.isfinite(x).tolist() == [True] * 3
    assert ember.nan_to_num(x).tolist() == x.tolist() and ember.nan_to_num(x).dtype is x.dtype


@pytest.mark.parametrize("name", UINTS)
def test_isclose_allclose_equal(name):
    top = _top(name)
    x = _u([0, 10, top, top], name)
    y = _u([top, 12, top - 1, top], name)
    # distances are |x - y| of the values (no wraparound: 0 and top are far apart)
    assert ember.isclose(x, y, rtol=0, atol=2).tolist() == [False, True, True, True]
    assert ember.isclose(x, y, rtol=0, atol=0).tolist() == [False, False, False, True]
    assert ember.allclose(x, x) and not ember.allclose(x, y, rtol=0, atol=0)
    assert ember.equal(x, x.clone()) and not ember.equal(x, y)


def test_isclose_of_integers_is_in_the_default_float_dtype():
    # as PyTorch: integers are compared in the default float dtype (2**28 + 1 is 2**28 in float32)
    a = _u([2 ** 28 + 1, 2 ** 28 + 64], "uint32")
    b = _u([2 ** 28, 2 ** 28], "uint32")
    assert ember.isclose(a, b, rtol=0, atol=0.5).tolist() == [True, False]
    assert ember.isclose(a.to(ember.int64), b.to(ember.int64), rtol=0, atol=0.5).tolist() == [
        True, False]
    assert ember.isclose(a, b, rtol=0, atol=0).tolist() == [False, False]  # exact
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.isclose(a, b, rtol=0, atol=0.5).tolist() == [False, False]
        assert ember.isclose(a, b, rtol=0, atol=1.0).tolist() == [True, False]
    finally:
        ember.set_default_dtype(ember.float32)


# ---- division and indexing --------------------------------------------------------------------
@pytest.mark.parametrize("name", UINTS)
def test_true_division_and_bool_mask_indexing(name):
    vals = _values(name)[:6]
    x = _u(vals, name)
    assert (x / 2).dtype is ember.float32
    assert (x / 2).tolist() == [float(np.float32(v) / np.float32(2)) for v in vals]
    mask = ember.tensor([True, False, True, True, False, True])
    assert x[mask].dtype is x.dtype and x[mask].tolist() == [vals[i] for i in (0, 2, 3, 5)]
    m2 = x.reshape(2, 3)
    assert m2[mask.reshape(2, 3)].tolist() == [vals[i] for i in (0, 2, 3, 5)]
    assert m2[ember.tensor([False, True])].tolist() == [vals[3:6]]
    with pytest.raises(ember.DtypeNotImplementedError, match="masked_select"):
        x.masked_select(mask)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_bool_mask_indexing_and_masked_select(name):
    x = ember.tensor([1.0, 2.0, 3.0]).to(getattr(ember, name))
    mask = ember.tensor([True, False, True])
    for r in (x[mask], x.masked_select(mask)):  # (the mask took part in type promotion)
        assert r.dtype is x.dtype and r.float().tolist() == [1.0, 3.0]
    with pytest.raises(ember.DtypeNotImplementedError, match=f"gather.*{name}"):
        x.gather(0, ember.tensor([0]))


# ---- what PyTorch refuses ---------------------------------------------------------------------
def _refused(x, L):
    """The ops PyTorch 2.13 has no uint16/32/64 CPU kernel for (NotImplementedError there)."""
    i = L.tensor([0])
    return {
        "add": lambda: x + x, "add_scalar": lambda: x + 1, "sub": lambda: x - x,
        "rsub": lambda: 1 - x, "max": lambda: x.max(), "min": lambda: x.min(),
        "max_dim": lambda: x.max(0), "amax": lambda: x.amax(), "aminmax": lambda: L.aminmax(x),
        "remainder": lambda: x % 3, "fmod": lambda: L.fmod(x, 3), "lt": lambda: x < x,
        "gt": lambda: x > 1, "le": lambda: x <= x, "ge": lambda: x >= x, "abs": lambda: x.abs(),
        "neg": lambda: -x, "sign": lambda: x.sign(), "argmax": lambda: x.argmax(),
        "argmin": lambda: x.argmin(), "topk": lambda: x.topk(2), "kthvalue": lambda: x.kthvalue(1),
        "median": lambda: x.median(), "mode": lambda: x.mode(), "cummax": lambda: x.cummax(0),
        "floor_divide": lambda: x // 2, "div_floor": lambda: L.div(x, x, rounding_mode="floor"),
        "div_trunc": lambda: L.div(x, x, rounding_mode="trunc"), "pow": lambda: x ** 2,
        "square": lambda: x.square(), "clamp": lambda: x.clamp(0, 5),
        "maximum": lambda: L.maximum(x, x), "minimum": lambda: L.minimum(x, x),
        "shl": lambda: x << 1, "shr": lambda: x >> 1, "bitwise_not": lambda: ~x,
        "nonzero": lambda: x.nonzero(), "count_nonzero": lambda: L.count_nonzero(x),
        "masked_select": lambda: x.masked_select(x == x), "isin": lambda: L.isin(x, x),
        "searchsorted": lambda: L.searchsorted(x, x), "gather": lambda: x.gather(0, i),
        "scatter": lambda: x.clone().scatter_(0, i, x), "addcmul": lambda: L.addcmul(x, x, x),
        "matmul": lambda: x.reshape(2, 2) @ x.reshape(2, 2), "dot": lambda: L.dot(x, x),
        "logical_and": lambda: L.logical_and(x, x), "logical_or": lambda: L.logical_or(x, x),
        "logical_not": lambda: L.logical_not(x), "trace": lambda: x.reshape(2, 2).trace(),
        "cross": lambda: L.linalg.cross(x[:3], x[1:]), "diff": lambda: x.diff(),
        "bincount": lambda: L.bincount(x), "take_along_dim": lambda: L.take_along_dim(x, i),
        "einsum_dot": lambda: L.einsum("i,i->", x, x), "cumsum_dtype": lambda: x.cumsum(0, dtype=x.dtype),
        "sum_dtype": lambda: x.sum(dtype=x.dtype), "prod_dtype": lambda: x.prod(dtype=x.dtype),
        "count_nonzero_dims_empty": lambda: L.count_nonzero(x, ()),
    }


@pytest.mark.parametrize("name", UINTS)
def test_ops_pytorch_refuses_raise(name):
    x = _u([1, 2, 3, _top(name)], name)
    for key, call in _refused(x, ember).items():
        with pytest.raises(NotImplementedError, match=f"not implemented for dtype {name}"):
            call()
            pytest.fail(key)
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        x.mean()
    with pytest.raises(RuntimeError, match="std and var only support"):
        x.std()


@pytest.mark.parametrize("name", UINTS)
def test_pytorch_refuses_the_same_ops(name):
    torch = _torch()
    x = torch.from_numpy(np.array([1, 2, 3, _top(name)], dtype=name))
    for key, call in _refused(x, torch).items():
        with pytest.raises(NotImplementedError):
            call()
            pytest.fail(key)


# ---- against PyTorch --------------------------------------------------------------------------
def _working(x, L):
    mask = L.tensor([True, False, True, True, False, True] * 2)
    return {
        "mul": lambda: x * x.roll(1), "mul_k": lambda: x * 3, "mul_neg": lambda: x * -7,
        "mul_": lambda: x.clone().mul_(x), "outer": lambda: L.outer(x[:4], x[4:8]),
        "sum": lambda: x.sum(), "sum_dim": lambda: x.reshape(3, 4).sum(1),
        "sum_f64": lambda: x.sum(dtype=L.float64), "nansum": lambda: x.reshape(3, 4).nansum(0),
        "prod": lambda: x[1:].prod(), "prod_dim": lambda: x.reshape(3, 4).prod(0),
        "cumsum": lambda: x.cumsum(0), "cumprod": lambda: x.cumprod(0),
        "sort": lambda: x.sort(), "sort_desc": lambda: x.sort(descending=True),
        "argsort": lambda: x.argsort(stable=True), "msort": lambda: L.msort(x.reshape(3, 4)),
        "unique": lambda: L.unique(x, return_inverse=True, return_counts=True),
        "unique_dim": lambda: L.unique(x.reshape(3, 4), dim=1),
        "unique_consecutive": lambda: L.unique_consecutive(x, return_counts=True),
        "div": lambda: x / x, "div_k": lambda: x / 3, "and": lambda: x & x.roll(2),
        "or": lambda: x | 6, "xor": lambda: x ^ x.roll(3), "any": lambda: x.any(),
        "all": lambda: x.reshape(3, 4).all(1), "isnan": lambda: x.isnan(),
        "isinf": lambda: x.isinf(), "isfinite": lambda: x.isfinite(),
        "nan_to_num": lambda: x.nan_to_num(), "isclose": lambda: L.isclose(x, x.roll(1), atol=3),
        "allclose": lambda: L.allclose(x, x), "equal": lambda: L.equal(x, x.roll(1)),
        "repeat": lambda: x.repeat(2), "roll": lambda: x.roll(1), "cat": lambda: L.cat([x, x]),
        "contiguous": lambda: x.reshape(3, 4).t().contiguous(), "bool_mask": lambda: x[mask],
        "fill_": lambda: x.clone().fill_(5), "zero_": lambda: x.clone().zero_(),
        "eq": lambda: x == x.roll(1), "ne": lambda: x != 1, "where": lambda: L.where(x == 1, x, x),
        "einsum_outer": lambda: L.einsum("i,j->ij", x[:3], x[3:6]),
        "einsum_mul": lambda: L.einsum("i,i->i", x, x), "einsum_sum": lambda: L.einsum("ij->i", x.reshape(3, 4)),
        "count_nonzero_dim": lambda: L.count_nonzero(x.reshape(3, 4), 1),
        "count_nonzero_dims": lambda: L.count_nonzero(x.reshape(3, 4), (0, 1)),
        "signbit": lambda: L.signbit(x), "copysign": lambda: L.copysign(x, -1.5),
        "kron": lambda: L.kron(x[:3], x[3:5]), "sort_2d": lambda: x.reshape(3, 4).sort(0, descending=True),
    }


def _plain(r):
    if isinstance(r, float) and r != r:
        return "nan"
    if isinstance(r, (bool, int, float)):
        return r
    if isinstance(r, (tuple, list)):
        return [_plain(v) for v in r]
    return str(r.dtype).split(".")[-1], tuple(r.shape), _plain(r.tolist())


@pytest.mark.parametrize("name", UINTS)
def test_results_match_torch(name):
    torch = _torch()
    a = np.array(_values(name), dtype=name)
    ours = _working(ember.from_numpy(a.copy()), ember)
    theirs = _working(torch.from_numpy(a.copy()), torch)
    for key in ours:
        assert _plain(ours[key]()) == _plain(theirs[key]()), key


@pytest.mark.parametrize("name", UINTS)
def test_isclose_matches_torch_on_large_values(name):
    torch = _torch()
    top = _top(name)
    a = np.array([top, top - 1000, 2 ** (BITS[name] - 4) + 1, 0, 5, top // 3], dtype=name)
    b = np.array([top - 1000, top, 2 ** (BITS[name] - 4), top, 0, top // 3 + 7], dtype=name)
    for rtol, atol in [(1e-5, 1e-8), (0.0, 0.5), (1e-10, 0.0), (0.0, 6.0), (1e-3, 0.0)]:
        ours = ember.isclose(ember.from_numpy(a), ember.from_numpy(b), rtol=rtol, atol=atol)
        theirs = torch.isclose(torch.from_numpy(a), torch.from_numpy(b), rtol=rtol, atol=atol)
        assert ours.tolist() == theirs.tolist(), (rtol, atol)


# ---- CUDA: the same kernels on the device against the CPU's -------------------------------------
needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")


def _device_cases(x, L):
    m = x.reshape(3, 4)
    return {
        "mul": lambda: x * x.roll(1), "mul_k": lambda: x * 5, "sum": lambda: x.sum(),
        "sum_dim": lambda: m.sum(1), "sum_t": lambda: m.t().sum(1), "nansum": lambda: m.nansum(0),
        "sum_f64": lambda: x.sum(dtype=L.float64), "prod": lambda: m[:, 1:].prod(1),
        "cumsum": lambda: x.cumsum(0), "sort": lambda: m.sort(1), "sort_t": lambda: m.t().sort(1),
        "sort_desc": lambda: x.sort(descending=True), "argsort": lambda: x.argsort(stable=True),
        "unique": lambda: L.unique(x, return_inverse=True, return_counts=True),
        "and": lambda: x & x.roll(2), "or": lambda: x | 6, "xor": lambda: x ^ x.roll(3),
        "any": lambda: m.any(1), "all": lambda: x.all(), "isnan": lambda: x.isnan(),
        "isfinite": lambda: x.isfinite(), "isclose": lambda: L.isclose(x, x.roll(1), atol=3),
        "count_nonzero": lambda: L.count_nonzero(m, 0),
        "bool_mask": lambda: x[x == x.roll(1)], "einsum_outer": lambda: L.einsum("i,j->ij", x, x),
    }


@needs_cuda
@pytest.mark.parametrize("name", UINTS)
def test_cuda_kernels_match_the_cpu(name):
    a = np.array(_values(name), dtype=name)
    x = ember.from_numpy(a)
    cpu = _device_cases(x, ember)
    dev = _device_cases(x.cuda(), ember)
    for key in cpu:
        got = dev[key]()
        got = [t.cpu() for t in got] if isinstance(got, tuple) else got.cpu()
        assert _plain(got) == _plain(cpu[key]()), key
    with pytest.raises(ember.DtypeNotImplementedError):
        x.cuda().masked_select(x.cuda() == x.cuda())
    with pytest.raises(ember.DtypeNotImplementedError):
        x.cuda().topk(2)
