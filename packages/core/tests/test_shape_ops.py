"""Shape ops that build new tensors (ops/shape.yaml): values against NumPy (and torch when
installed), dtype promotion, out=, non-contiguous/0-d/empty inputs and every error case."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def arr(*shape, start=0):
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n, dtype=np.float32) + start).reshape(shape)


def et(a):
    return ember.tensor(np.array(a))  # a contiguous copy (np.ascontiguousarray makes 0-d 1-d)


def tt(a):
    return torch.from_numpy(np.array(a))


def noncontig(a):
    """An ember tensor equal to `a` whose memory is in reversed dim order."""
    if a.ndim < 2:
        big = np.zeros((2 * a.size,), a.dtype)
        big[::2] = a.ravel()
        return ember.tensor(big)[::2].reshape(a.shape)
    return et(np.transpose(a)).permute(*range(a.ndim - 1, -1, -1))


def check_same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check_same(g, w)
        return
    assert tuple(got.shape) == tuple(np.shape(want)), (tuple(got.shape), np.shape(want))
    np.testing.assert_array_equal(np.asarray(got), want)


# (id, input arrays, f(inputs, module), numpy reference g(arrays))
CASES = [
    ("cat0", [arr(2, 3), arr(1, 3, start=10)], lambda x, m: m.cat(x), lambda a: np.concatenate(a)),
    ("cat1", [arr(2, 3), arr(2, 1, start=10)], lambda x, m: m.cat(x, 1), lambda a: np.concatenate(a, 1)),
    ("cat_neg", [arr(2, 2, 3), arr(2, 2, 2)], lambda x, m: m.cat(x, dim=-1), lambda a: np.concatenate(a, -1)),
    ("cat_three", [arr(1, 2), arr(0, 2), arr(3, 2, start=5)], lambda x, m: m.cat(tuple(x)), lambda a: np.concatenate(a)),
    ("cat_one", [arr(2, 3)], lambda x, m: m.cat(x), lambda a: a[0]),
    ("cat_skip_empty", [arr(2, 3), np.zeros(0, np.float32), arr(1, 3)], lambda x, m: m.cat(x),
     lambda a: np.concatenate([a[0], a[2]])),
    ("cat_all_empty", [np.zeros(0, np.float32)] * 2, lambda x, m: m.cat(x), lambda a: np.zeros(0)),
    ("concat", [arr(2), arr(3)], lambda x, m: m.concat(x), lambda a: np.concatenate(a)),
    ("concatenate", [arr(2, 1), arr(2, 2)], lambda x, m: m.concatenate(x, axis=1), lambda a: np.concatenate(a, 1)),
    ("stack", [arr(2, 3), arr(2, 3, start=6)], lambda x, m: m.stack(x), lambda a: np.stack(a)),
    ("stack1", [arr(2, 3), arr(2, 3, start=6)], lambda x, m: m.stack(x, 1), lambda a: np.stack(a, 1)),
    ("stack_last", [arr(2, 3), arr(2, 3, start=6)], lambda x, m: m.stack(x, dim=-1), lambda a: np.stack(a, -1)),
    ("stack_0d", [arr(), arr(start=3)], lambda x, m: m.stack(x), lambda a: np.stack(a)),
    ("hstack", [arr(2, 1), arr(2, 3)], lambda x, m: m.hstack(x), lambda a: np.hstack(a)),
    ("hstack_1d", [arr(2), arr(3), arr()], lambda x, m: m.hstack(x), lambda a: np.hstack(a)),
    ("vstack", [arr(3), arr(2, 3)], lambda x, m: m.vstack(x), lambda a: np.vstack(a)),
    ("row_stack", [arr(3), arr(3)], lambda x, m: m.row_stack(x), lambda a: np.vstack(a)),
    ("dstack", [arr(2, 3), arr(2, 3)], lambda x, m: m.dstack(x), lambda a: np.dstack(a)),
    ("dstack_1d", [arr(3), arr(3)], lambda x, m: m.dstack(x), lambda a: np.dstack(a)),
    ("column_stack", [arr(3), arr(3, 2), arr(3)], lambda x, m: m.column_stack(x), lambda a: np.column_stack(a)),
    ("flip", [arr(2, 3, 4)], lambda x, m: m.flip(x[0], (0, 2)), lambda a: np.flip(a[0], (0, 2))),
    ("flip_method", [arr(2, 3)], lambda x, m: x[0].flip(-1), lambda a: np.flip(a[0], -1)),
    ("flip_varargs", [arr(2, 3)], lambda x, m: x[0].flip(0, 1), lambda a: np.flip(a[0])),
    ("flip_none", [arr(2, 3)], lambda x, m: x[0].flip(()), lambda a: a[0]),
    ("flip_0d", [arr()], lambda x, m: x[0].flip(0), lambda a: a[0]),
    ("flip_empty", [arr(0, 3)], lambda x, m: x[0].flip(0, 1), lambda a: a[0]),
    ("fliplr", [arr(3, 4)], lambda x, m: m.fliplr(x[0]), lambda a: np.fliplr(a[0])),
    ("flipud", [arr(3, 4)], lambda x, m: x[0].flipud(), lambda a: np.flipud(a[0])),
    ("roll", [arr(5)], lambda x, m: m.roll(x[0], 2), lambda a: np.roll(a[0], 2)),
    ("roll_neg", [arr(5)], lambda x, m: x[0].roll(-7), lambda a: np.roll(a[0], -7)),
    ("roll_flat", [arr(3, 4)], lambda x, m: x[0].roll(5), lambda a: np.roll(a[0], 5)),
    ("roll_dims", [arr(3, 4)], lambda x, m: m.roll(x[0], (1, -1), (0, 1)), lambda a: np.roll(a[0], (1, -1), (0, 1))),
    ("roll_dim_kw", [arr(3, 4)], lambda x, m: x[0].roll(shifts=2, dims=1), lambda a: np.roll(a[0], 2, 1)),
    ("roll_same_dim", [arr(3, 4)], lambda x, m: x[0].roll((1, 1), (1, 1)), lambda a: np.roll(a[0], 2, 1)),
    ("roll_0d", [arr()], lambda x, m: x[0].roll(3), lambda a: a[0]),
    ("roll_empty", [arr(0, 2)], lambda x, m: x[0].roll(1, 0), lambda a: a[0]),
    ("rot90", [arr(2, 3)], lambda x, m: m.rot90(x[0]), lambda a: np.rot90(a[0])),
    ("rot90_k2", [arr(2, 3)], lambda x, m: x[0].rot90(2), lambda a: np.rot90(a[0], 2)),
    ("rot90_k3", [arr(2, 3)], lambda x, m: x[0].rot90(-1), lambda a: np.rot90(a[0], -1)),
    ("rot90_k0", [arr(2, 3)], lambda x, m: x[0].rot90(4), lambda a: a[0]),
    ("rot90_dims", [arr(2, 3, 4)], lambda x, m: x[0].rot90(1, [2, 0]), lambda a: np.rot90(a[0], 1, (2, 0))),
    ("repeat", [arr(2, 3)], lambda x, m: x[0].repeat(2, 3), lambda a: np.tile(a[0], (2, 3))),
    ("repeat_lead", [arr(2)], lambda x, m: x[0].repeat((3, 1, 2)), lambda a: np.tile(a[0], (3, 1, 2))),
    ("repeat_zero", [arr(2)], lambda x, m: x[0].repeat(0, 2), lambda a: np.tile(a[0], (0, 2))),
    ("repeat_0d", [arr()], lambda x, m: x[0].repeat(3), lambda a: np.tile(a[0], 3)),
    ("repeat_0d_none", [arr()], lambda x, m: x[0].repeat(()), lambda a: a[0]),
    ("tile", [arr(2, 3)], lambda x, m: m.tile(x[0], (2,)), lambda a: np.tile(a[0], 2)),
    ("tile_more", [arr(2, 3)], lambda x, m: x[0].tile((2, 1, 2)), lambda a: np.tile(a[0], (2, 1, 2))),
    ("repeat_interleave", [arr(2, 3)], lambda x, m: x[0].repeat_interleave(2), lambda a: np.repeat(a[0], 2)),
    ("ri_dim", [arr(2, 3)], lambda x, m: m.repeat_interleave(x[0], 3, dim=1), lambda a: np.repeat(a[0], 3, 1)),
    ("ri_dim_neg", [arr(2, 3)], lambda x, m: x[0].repeat_interleave(2, -2), lambda a: np.repeat(a[0], 2, 0)),
    ("ri_zero", [arr(2, 3)], lambda x, m: x[0].repeat_interleave(0, 0), lambda a: np.repeat(a[0], 0, 0)),
    ("ri_0d", [arr()], lambda x, m: x[0].repeat_interleave(3), lambda a: np.repeat(a[0], 3)),
    ("tril", [arr(3, 4)], lambda x, m: m.tril(x[0]), lambda a: np.tril(a[0])),
    ("tril_k", [arr(3, 4)], lambda x, m: x[0].tril(1), lambda a: np.tril(a[0], 1)),
    ("tril_negk", [arr(2, 4, 3)], lambda x, m: x[0].tril(-1), lambda a: np.tril(a[0], -1)),
    ("tril_far", [arr(3, 4)], lambda x, m: x[0].tril(-9), lambda a: np.tril(a[0], -9)),
    ("triu", [arr(3, 4)], lambda x, m: m.triu(x[0]), lambda a: np.triu(a[0])),
    ("triu_k", [arr(2, 3, 4)], lambda x, m: x[0].triu(diagonal=2), lambda a: np.triu(a[0], 2)),
    ("triu_negk", [arr(4, 3)], lambda x, m: x[0].triu(-1), lambda a: np.triu(a[0], -1)),
    ("triu_far", [arr(3, 4)], lambda x, m: x[0].triu(9), lambda a: np.triu(a[0], 9)),
    ("tril_empty", [arr(0, 3)], lambda x, m: x[0].tril(), lambda a: a[0]),
    ("atleast_1d", [arr()], lambda x, m: m.atleast_1d(x[0]), lambda a: np.atleast_1d(a[0])),
    ("atleast_2d", [arr(3)], lambda x, m: m.atleast_2d(x[0]), lambda a: np.atleast_2d(a[0])),
    ("atleast_3d", [arr(3)], lambda x, m: m.atleast_3d(x[0]), lambda a: np.atleast_3d(a[0])),
    ("atleast_3d_2d", [arr(2, 3)], lambda x, m: m.atleast_3d(x[0]), lambda a: np.atleast_3d(a[0])),
    ("atleast_3d_0d", [arr()], lambda x, m: m.atleast_3d(x[0]), lambda a: np.atleast_3d(a[0])),
    ("atleast_many", [arr(), arr(2), arr(1, 2, 3, 4)], lambda x, m: m.atleast_2d(*x),
     lambda a: tuple(np.atleast_2d(*a))),
    ("atleast_list", [arr(2)], lambda x, m: m.atleast_1d(x), lambda a: (a[0],)),
    ("meshgrid_ij", [arr(2), arr(3), arr(4)], lambda x, m: m.meshgrid(*x, indexing="ij"),
     lambda a: tuple(np.meshgrid(*a, indexing="ij"))),
    ("meshgrid_xy", [arr(2), arr(3), arr(4)], lambda x, m: m.meshgrid(x, indexing="xy"),
     lambda a: tuple(np.meshgrid(*a, indexing="xy"))),
    ("meshgrid_0d", [arr(), arr(3)], lambda x, m: m.meshgrid(x[0], x[1], indexing="ij"),
     lambda a: tuple(np.meshgrid(a[0].reshape(1), a[1], indexing="ij"))),
    ("meshgrid_one", [arr(3)], lambda x, m: m.meshgrid(x[0], indexing="xy"), lambda a: (a[0],)),
]


@pytest.mark.parametrize("layout", ["contiguous", "noncontiguous"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_shape_values(case, layout):
    name, arrays, f, g = case
    if layout == "noncontiguous" and all(a.size <= 1 for a in arrays):
        pytest.skip("nothing to make non-contiguous")
    xs = [et(a) if layout == "contiguous" else noncontig(a) for a in arrays]
    got = f(xs, ember)
    check_same(got, g(arrays))
    if torch is not None:
        want = f([tt(a) for a in arrays], torch)
        if isinstance(want, (tuple, list)):
            check_same(got, tuple(w.numpy() for w in want))
        else:
            check_same(got, want.numpy())
            assert got.dtype == getattr(ember, str(want.dtype).split(".")[1])


def test_cat_promotes_dtypes():
    r = ember.cat([ember.tensor([1, 2], dtype=ember.int32), ember.tensor([0.5]), ember.tensor([True])])
    assert r.dtype == ember.float32 and r.tolist() == [1.0, 2.0, 0.5, 1.0]
    r = ember.cat([ember.tensor([1], dtype=ember.uint8), ember.tensor([-1], dtype=ember.int8)])
    assert r.dtype == ember.int16 and r.tolist() == [1, -1]
    r = ember.stack([ember.tensor([1.0], dtype=ember.float16), ember.tensor([2.0], dtype=ember.bfloat16)])
    assert r.dtype == ember.float32
    # skipped legacy empty tensors still take part in type promotion (as in torch)
    r = ember.cat([ember.tensor([1], dtype=ember.int32), ember.zeros(0, dtype=ember.float64)])
    assert r.dtype == ember.float64


def test_cat_out():
    a, b = ember.tensor([[1.0, 2.0]]), ember.tensor([[3.0, 4.0]])
    out = ember.empty(2, 2)
    r = ember.cat([a, b], out=out)
    assert r is out and out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    out = ember.empty(0, dtype=ember.float64)  # resized and cast
    ember.cat([a, b], 1, out=out)
    assert out.shape == (1, 4) and out.dtype == ember.float64 and out.tolist() == [[1, 2, 3, 4]]
    out = ember.zeros(2, 2, 2)
    ember.stack([a, b], dim=1, out=out)
    assert out.shape == (1, 2, 2) and out.tolist() == [[[1, 2], [3, 4]]]
    out = ember.empty(4)
    ember.hstack([ember.tensor([1.0]), ember.tensor([2.0, 3.0, 4.0])], out=out)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    # writes into a non-contiguous out in place
    base = ember.zeros(2, 4)
    ember.cat([a, b], out=base[:, ::2])
    assert base.tolist() == [[1, 0, 2, 0], [3, 0, 4, 0]]
    with pytest.raises(TypeError, match="can't be cast to the desired output type int64"):
        ember.cat([a, b], out=ember.empty(2, 2, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        ember.cat([a, b], out=a)


@pytest.mark.parametrize("dt", DTYPES)
def test_shape_ops_every_dtype(dt):
    dtype = getattr(ember, dt)
    a = (np.arange(12).reshape(3, 4) % 3).astype(np.float64)
    if dt == "bool":
        a = a > 0
    x = ember.tensor(a.astype(np.float64)).to(dtype)
    ref = a.astype(np.float64)

    def check(r, want):
        assert r.dtype == dtype
        np.testing.assert_array_equal(np.asarray(r.double()), want)

    check(ember.cat([x, x.t().t()], 1), np.concatenate([ref, ref], 1))
    check(ember.stack([x, x]), np.stack([ref, ref]))
    check(x.flip(0, 1), ref[::-1, ::-1])
    check(x.t().flip(0), ref.T[::-1])
    check(x.roll(1, 1), np.roll(ref, 1, 1))
    check(x.rot90(), np.rot90(ref))
    check(x.repeat(2, 1), np.tile(ref, (2, 1)))
    check(x.repeat_interleave(2, 0), np.repeat(ref, 2, 0))
    check(x.tril(), np.tril(ref))
    check(x.t().triu(1), np.triu(ref.T, 1))
    y = x.clone()
    y.tril_(-1)
    check(y, np.tril(ref, -1))


def test_results_are_fresh_tensors():
    x = ember.tensor(arr(3, 4))
    for r in (x.flip(0), x.roll(1), x.rot90(), x.rot90(0), x.repeat(1, 1), x.tile(1),
              x.repeat_interleave(1), x.tril(), ember.cat([x]), ember.stack([x])):
        assert r._base is None and r.untyped_storage_ptr() != x.untyped_storage_ptr()
    r = x.rot90()
    assert r.shape == (4, 3) and not r.is_contiguous()  # like torch's transpose_ of a flip


def test_meshgrid_and_atleast_are_views():
    a, b = ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0, 5.0])
    ga, gb = ember.meshgrid(a, b, indexing="ij")
    assert ga._base is a and gb._base is b and ga.stride() == (1, 0)
    gx, gy = ember.meshgrid([a, b], indexing="xy")
    assert gx.shape == (3, 2) and gx._base is a
    assert ember.meshgrid(a, b)[0].shape == (2, 3)  # default 'ij'
    s = ember.tensor(1.0)
    assert ember.atleast_1d(s)._base is s
    assert ember.atleast_1d(a) is a


def test_tril_triu_inplace_and_out():
    a = arr(3, 3)
    x = ember.tensor(a)
    ptr = x.data_ptr()
    v = x._version
    assert x.tril_() is x and x.data_ptr() == ptr and x._version > v
    np.testing.assert_array_equal(np.asarray(x), np.tril(a))
    # in place on a non-contiguous view writes through to the base
    base = ember.tensor(a)
    base.t().triu_(1)
    np.testing.assert_array_equal(np.asarray(base), np.triu(a.T, 1).T)
    out = ember.empty(0)
    r = ember.triu(ember.tensor(a), -1, out=out)
    assert r is out and out.dtype == ember.float32
    np.testing.assert_array_equal(np.asarray(out), np.triu(a, -1))
    # out= must have the input's dtype, as in torch (fuzz s22: no cast, not even a widening one)
    with pytest.raises(RuntimeError, match="expected the out= tensor to have dtype float32"):
        ember.triu(ember.tensor(a), -1, out=ember.empty(0, dtype=ember.float64))
    out = ember.empty(3, 3)
    ember.tril(ember.tensor(a), out=out)
    np.testing.assert_array_equal(np.asarray(out), np.tril(a))
    with pytest.raises(RuntimeError, match="expected the out= tensor to have dtype"):
        ember.tril(ember.tensor(a), out=ember.empty(3, 3, dtype=ember.int32))
    big = ember.ones(70, 300, 300)  # large enough to run in parallel
    t = big.tril(5)
    np.testing.assert_array_equal(np.asarray(t[37]), np.tril(np.ones((300, 300), np.float32), 5))


def test_repeat_interleave_tensor_repeats():
    x = ember.tensor(arr(3, 2))
    r = x.repeat_interleave(ember.tensor([1, 0, 2]), dim=0)
    np.testing.assert_array_equal(np.asarray(r), np.repeat(arr(3, 2), [1, 0, 2], 0))
    r = ember.repeat_interleave(x, ember.tensor([2, 3], dtype=ember.int32), dim=1, output_size=5)
    np.testing.assert_array_equal(np.asarray(r), np.repeat(arr(3, 2), [2, 3], 1))
    r = x.repeat_interleave(ember.tensor(2))  # 0-d repeats: like an int
    np.testing.assert_array_equal(np.asarray(r), np.repeat(arr(3, 2), 2))
    r = x.t().repeat_interleave(ember.tensor([2]), dim=1)  # one count broadcasts
    np.testing.assert_array_equal(np.asarray(r), np.repeat(arr(3, 2).T, 2, 1))
    r = ember.repeat_interleave(ember.tensor([1, 0, 3]))
    assert r.dtype == ember.int64 and r.tolist() == [0, 2, 2, 2]
    if torch is not None:
        assert r.tolist() == torch.repeat_interleave(torch.tensor([1, 0, 3])).tolist()


ERRORS = [
    (lambda: ember.cat([]), ValueError, "expected a non-empty list of Tensors"),
    (lambda: ember.cat([ember.tensor(1.0), ember.tensor(2.0)]), RuntimeError,
     r"zero-dimensional tensor \(at position 0\) cannot be concatenated"),
    (lambda: ember.cat([ember.zeros(2, 3), ember.zeros(2, 3, 1)]), RuntimeError,
     "Tensors must have same number of dimensions: got 2 and 3"),
    (lambda: ember.cat([ember.zeros(2, 3), ember.zeros(2, 3), ember.zeros(3, 3)], 1), RuntimeError,
     r"Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for tensor "
     r"number 2 in the list \(shapes \(2, 3\) and \(3, 3\)\)"),
    (lambda: ember.cat([ember.zeros(2, 3)], 2), IndexError, r"out of range.*\[-2, 1\]"),
    (lambda: ember.cat([ember.zeros(2), 1]), TypeError,
     r"cat\(\) received an invalid combination of arguments - got \(list of \(Tensor, int\)\)"),
    (lambda: ember.stack([]), RuntimeError, "stack expects a non-empty TensorList"),
    (lambda: ember.stack([ember.zeros(2, 3), ember.zeros(3, 3)]), RuntimeError,
     r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[3, 3\] at entry 1"),
    (lambda: ember.stack([ember.zeros(2)], 3), IndexError, "out of range"),
    (lambda: ember.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
    (lambda: ember.vstack([]), RuntimeError, "vstack expects a non-empty TensorList"),
    (lambda: ember.dstack([]), RuntimeError, "dstack expects a non-empty TensorList"),
    (lambda: ember.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
    (lambda: ember.vstack([ember.zeros(2), ember.zeros(3)]), RuntimeError, "Sizes of tensors must match"),
    (lambda: ember.zeros(2, 3).flip(0, 0), RuntimeError, "dim 0 appears multiple times in the list of dims"),
    (lambda: ember.zeros(2, 3).flip(2), IndexError, "out of range"),
    (lambda: ember.zeros(3).fliplr(), RuntimeError, "Input must be >= 2-d"),
    (lambda: ember.tensor(1.0).flipud(), RuntimeError, "Input must be >= 1-d"),
    (lambda: ember.zeros(2, 3).roll((1, 2), (0,)), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:1"),
    (lambda: ember.zeros(2, 3).roll((1, 2)), RuntimeError, "shifts and dimensions must align. shifts: 2, dims:0"),
    (lambda: ember.zeros(2, 3).roll(1, 2), IndexError, "out of range"),
    (lambda: ember.zeros(2, 3).rot90(1, (0, 1, 2)), RuntimeError, "expected total rotation dims == 2, but got dims = 3"),
    (lambda: ember.zeros(2, 3).rot90(1, (0, 0)), RuntimeError, "expected rotation dims to be different, but got dim0 = 0 and dim1 = 0"),
    (lambda: ember.zeros(3).rot90(), RuntimeError, "expected total dims >= 2, but got total dims = 1"),
    (lambda: ember.zeros(2, 3).rot90(1, (0, 2)), IndexError, "out of range"),
    (lambda: ember.zeros(2, 3).repeat(2), RuntimeError, "Number of dimensions of repeat dims .* can not be smaller"),
    (lambda: ember.zeros(2, 3).repeat(-1, 2), RuntimeError, r"negative dimension -2: \[-2, 6\]"),
    (lambda: ember.zeros(2, 3).tile(-1), RuntimeError, r"negative dimension -3: \[2, -3\]"),
    (lambda: ember.zeros(2, 3).repeat_interleave(-1), RuntimeError, "Repeats must be non-negative"),
    (lambda: ember.zeros(2, 3).repeat_interleave(1.5), TypeError, "repeats must be an int"),
    (lambda: ember.zeros(2, 3).repeat_interleave(ember.ones(2, 2, dtype=ember.int64)), RuntimeError,
     "repeats must be 0-dim or 1-dim tensor"),
    (lambda: ember.zeros(2, 3).repeat_interleave(ember.tensor([1, 1]), dim=1), RuntimeError,
     r"repeats must have the same size as input along dim, but got repeats.size\(0\) = 2 and input.size\(1\) = 3"),
    (lambda: ember.zeros(2, 3).repeat_interleave(ember.ones(3), dim=1), NotImplementedError, "int32 or int64"),
    (lambda: ember.zeros(2, 3).repeat_interleave(ember.tensor([1, -1, 1]), dim=1), RuntimeError,
     "repeats can not be negative"),
    (lambda: ember.zeros(2, 3).repeat_interleave(ember.tensor([1, 1, 1]), dim=1, output_size=5), RuntimeError,
     "allocated size does not match required size"),
    (lambda: ember.zeros(2, 3).repeat_interleave(2, dim=2), IndexError, "out of range"),
    (lambda: ember.repeat_interleave(ember.ones(2, 2, dtype=ember.int64)), RuntimeError, "1D vector"),
    (lambda: ember.zeros(3).tril(), RuntimeError, "tril: input tensor must have at least 2 dimensions"),
    (lambda: ember.tensor(1.0).triu_(), RuntimeError, "triu: input tensor must have at least 2 dimensions"),
    (lambda: ember.meshgrid(ember.zeros(2), ember.zeros(2, dtype=ember.int64), indexing="ij"), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    (lambda: ember.meshgrid(ember.zeros(2, 2), ember.zeros(2), indexing="ij"), RuntimeError,
     "Expected 0D or 1D tensor in the tensor list"),
    (lambda: ember.meshgrid(ember.zeros(2), indexing="foo"), RuntimeError,
     'indexing must be one of "xy" or "ij", but received: foo'),
    (lambda: ember.meshgrid([], indexing="ij"), RuntimeError, "meshgrid expects a non-empty TensorList"),
    (lambda: ember.meshgrid(ember.zeros(2), 3), TypeError, "expected Tensor as element 1"),
]


@pytest.mark.parametrize("f,exc,pattern", ERRORS)
def test_shape_errors(f, exc, pattern):
    with pytest.raises(exc, match=pattern):
        f()
