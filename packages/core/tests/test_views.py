"""View ops (ops/views.yaml): values against NumPy (and torch when installed), storage sharing,
non-contiguous inputs, 0-d/empty tensors and every error case."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import to_np, torch

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def make(shape, layout="contiguous"):
    """An ember tensor with values 0..n-1 in the given shape; 'strided' and 'transposed' layouts
    give non-contiguous tensors with the same values."""
    n = int(np.prod(shape)) if len(shape) else 1
    a = np.arange(n, dtype=np.float32).reshape(shape)
    if layout == "contiguous":
        return ember.tensor(a), a
    if layout == "strided":  # every other element of a buffer twice as long in the last dim
        big = np.zeros(shape[:-1] + (2 * shape[-1],), dtype=np.float32) if shape else None
        if big is None:
            return ember.tensor(a), a
        big[..., ::2] = a
        t = ember.tensor(big)[..., ::2]
        assert not t.is_contiguous() or a.size <= 1
        return t, a
    # transposed: memory in reversed dim order
    rev = np.ascontiguousarray(np.transpose(a))
    t = ember.tensor(rev).permute(*range(a.ndim - 1, -1, -1))
    return t, a


def check_same(got, want):
    """got: ember tensor or tuple of them; want: numpy array or tuple of them."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple), type(got)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            check_same(g, w)
        return
    assert tuple(got.shape) == tuple(np.shape(want)), (tuple(got.shape), np.shape(want))
    np.testing.assert_array_equal(to_np(got), want)


def shares(view, base):
    """view's elements lie in base's storage."""
    return view.untyped_storage_ptr() == base.untyped_storage_ptr()


# (id, shape, ember/torch function f(x, module), numpy reference g(a), needs contiguous input)
CASES = [
    ("view", (2, 3, 4), lambda x, m: x.view(6, 4), lambda a: a.reshape(6, 4), True),
    ("view_tuple", (2, 3, 4), lambda x, m: x.view((4, -1)), lambda a: a.reshape(4, -1), True),
    ("view_infer", (2, 3, 4), lambda x, m: x.view(-1), lambda a: a.reshape(-1), True),
    ("view_0d", (), lambda x, m: x.view(1, 1), lambda a: a.reshape(1, 1), True),
    ("view_to_0d", (1,), lambda x, m: x.view(()), lambda a: a.reshape(()), True),
    ("view_empty", (0, 3), lambda x, m: x.view(3, 0, 5), lambda a: a.reshape(3, 0, 5), True),
    ("view_as", (2, 6), lambda x, m: x.view_as(m.zeros(3, 4)), lambda a: a.reshape(3, 4), True),
    ("view_split_dim", (6, 4), lambda x, m: x.view(2, 3, 4), lambda a: a.reshape(2, 3, 4), False),
    ("reshape", (2, 3, 4), lambda x, m: x.reshape(4, 6), lambda a: a.reshape(4, 6), False),
    ("reshape_fn", (2, 3, 4), lambda x, m: m.reshape(x, (3, -1)), lambda a: a.reshape(3, -1), False),
    ("reshape_0d", (), lambda x, m: x.reshape(-1), lambda a: a.reshape(-1), False),
    ("reshape_as", (2, 6), lambda x, m: x.reshape_as(m.zeros(4, 3)), lambda a: a.reshape(4, 3), False),
    ("transpose", (2, 3, 4), lambda x, m: x.transpose(0, 2), lambda a: a.swapaxes(0, 2), False),
    ("transpose_neg", (2, 3, 4), lambda x, m: m.transpose(x, -1, -2), lambda a: a.swapaxes(2, 1), False),
    ("transpose_0d", (), lambda x, m: x.transpose(0, -1), lambda a: a, False),
    ("swapaxes", (2, 3), lambda x, m: m.swapaxes(x, 0, 1), lambda a: a.T, False),
    ("swapdims", (2, 3), lambda x, m: x.swapdims(1, 0), lambda a: a.T, False),
    ("t", (2, 3), lambda x, m: x.t(), lambda a: a.T, False),
    ("t_1d", (3,), lambda x, m: m.t(x), lambda a: a, False),
    ("t_0d", (), lambda x, m: x.t(), lambda a: a, False),
    ("adjoint", (2, 3, 4), lambda x, m: x.adjoint(), lambda a: a.swapaxes(-1, -2), False),
    ("T", (2, 3), lambda x, m: x.T, lambda a: a.T, False),
    ("T_1d", (3,), lambda x, m: x.T, lambda a: a, False),
    ("mT", (2, 3, 4), lambda x, m: x.mT, lambda a: a.swapaxes(-1, -2), False),
    ("H", (2, 3), lambda x, m: x.H, lambda a: a.T, False),
    ("mH", (5, 2, 3), lambda x, m: x.mH, lambda a: a.swapaxes(-1, -2), False),
    ("permute", (2, 3, 4), lambda x, m: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), False),
    ("permute_list", (2, 3, 4), lambda x, m: x.permute([1, -1, 0]), lambda a: a.transpose(1, 2, 0), False),
    ("permute_fn", (2, 3, 4), lambda x, m: m.permute(x, (2, 1, 0)), lambda a: a.transpose(2, 1, 0), False),
    ("permute_0d", (), lambda x, m: x.permute(()), lambda a: a, False),
    ("squeeze", (1, 3, 1, 2), lambda x, m: x.squeeze(), lambda a: a.squeeze(), False),
    ("squeeze_dim", (1, 3, 1, 2), lambda x, m: x.squeeze(2), lambda a: a.squeeze(2), False),
    ("squeeze_dim_noop", (1, 3, 1, 2), lambda x, m: x.squeeze(1), lambda a: a, False),
    ("squeeze_dims", (1, 3, 1, 2), lambda x, m: m.squeeze(x, (0, -2, 1)), lambda a: a.squeeze((0, 2)), False),
    ("squeeze_kw", (1, 3), lambda x, m: x.squeeze(dim=0), lambda a: a.squeeze(0), False),
    ("squeeze_0d", (), lambda x, m: x.squeeze(0), lambda a: a, False),
    ("squeeze_empty", (0, 1), lambda x, m: x.squeeze(), lambda a: a.reshape(0), False),
    ("unsqueeze", (2, 3), lambda x, m: x.unsqueeze(1), lambda a: a[:, None], False),
    ("unsqueeze_end", (2, 3), lambda x, m: m.unsqueeze(x, -1), lambda a: a[..., None], False),
    ("unsqueeze_0d", (), lambda x, m: x.unsqueeze(0), lambda a: a.reshape(1), False),
    ("expand", (3, 1), lambda x, m: x.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), False),
    ("expand_keep", (3, 1), lambda x, m: x.expand(-1, 5), lambda a: np.broadcast_to(a, (3, 5)), False),
    ("expand_tuple", (3, 1), lambda x, m: x.expand((3, 2)), lambda a: np.broadcast_to(a, (3, 2)), False),
    ("expand_0d", (), lambda x, m: x.expand(2, 2), lambda a: np.broadcast_to(a, (2, 2)), False),
    ("expand_zero", (1, 3), lambda x, m: x.expand(0, 3), lambda a: np.broadcast_to(a, (0, 3)), False),
    ("expand_as", (3, 1), lambda x, m: x.expand_as(m.zeros(3, 3)), lambda a: np.broadcast_to(a, (3, 3)), False),
    ("broadcast_to", (3, 1), lambda x, m: m.broadcast_to(x, (2, 3, 2)), lambda a: np.broadcast_to(a, (2, 3, 2)), False),
    ("broadcast_to_m", (3,), lambda x, m: x.broadcast_to((2, 3)), lambda a: np.broadcast_to(a, (2, 3)), False),
    ("narrow", (4, 5), lambda x, m: x.narrow(1, 1, 3), lambda a: a[:, 1:4], False),
    ("narrow_neg", (4, 5), lambda x, m: m.narrow(x, 0, -2, 2), lambda a: a[2:4], False),
    ("narrow_empty", (4, 5), lambda x, m: x.narrow(0, 4, 0), lambda a: a[4:4], False),
    ("select", (4, 5), lambda x, m: x.select(1, 2), lambda a: a[:, 2], False),
    ("select_neg", (4, 5), lambda x, m: m.select(x, 0, -1), lambda a: a[-1], False),
    ("select_1d", (4,), lambda x, m: x.select(0, 3), lambda a: a[3], False),
    ("unfold", (2, 7), lambda x, m: x.unfold(1, 3, 2),
     lambda a: np.lib.stride_tricks.sliding_window_view(a, 3, axis=1)[:, ::2], False),
    ("unfold_dim0", (6, 2), lambda x, m: x.unfold(0, 2, 2),
     lambda a: np.lib.stride_tricks.sliding_window_view(a, 2, axis=0)[::2], False),
    ("unfold_full", (5,), lambda x, m: x.unfold(0, 5, 1), lambda a: a.reshape(1, 5), False),
    ("unfold_0d", (), lambda x, m: x.unfold(0, 1, 1), lambda a: a.reshape(1), False),
    ("as_strided", (3, 4), lambda x, m: x.as_strided((2, 2), (1, 2)),
     lambda a: np.lib.stride_tricks.as_strided(a.ravel(), (2, 2), (4, 8)), True),
    ("as_strided_off", (3, 4), lambda x, m: m.as_strided(x, (3,), (5,), 1),
     lambda a: a.ravel()[1::5][:3], True),
    ("as_strided_bcast", (3, 4), lambda x, m: x.as_strided((2, 3), (0, 1)),
     lambda a: np.broadcast_to(a.ravel()[:3], (2, 3)), True),
    ("flatten", (2, 3, 4), lambda x, m: x.flatten(), lambda a: a.reshape(-1), False),
    ("flatten_range", (2, 3, 4, 5), lambda x, m: m.flatten(x, 1, 2), lambda a: a.reshape(2, 12, 5), False),
    ("flatten_neg", (2, 3, 4), lambda x, m: x.flatten(-2), lambda a: a.reshape(2, 12), False),
    ("flatten_same", (2, 3), lambda x, m: x.flatten(1, 1), lambda a: a, False),
    ("flatten_0d", (), lambda x, m: x.flatten(), lambda a: a.reshape(1), False),
    ("ravel", (2, 3), lambda x, m: x.ravel(), lambda a: a.ravel(), False),
    ("unflatten", (2, 12), lambda x, m: x.unflatten(1, (3, 4)), lambda a: a.reshape(2, 3, 4), False),
    ("unflatten_infer", (2, 12), lambda x, m: m.unflatten(x, -1, (2, -1, 3)), lambda a: a.reshape(2, 2, 2, 3), False),
    ("split", (7, 2), lambda x, m: x.split(3), lambda a: (a[:3], a[3:6], a[6:]), False),
    ("split_dim", (2, 7), lambda x, m: m.split(x, 4, 1), lambda a: (a[:, :4], a[:, 4:]), False),
    ("split_big", (2, 3), lambda x, m: x.split(5), lambda a: (a,), False),
    ("split_sizes", (7, 2), lambda x, m: x.split([2, 0, 5]), lambda a: (a[:2], a[2:2], a[2:]), False),
    ("split_sizes_fn", (2, 7), lambda x, m: m.split(x, (3, 4), dim=-1), lambda a: (a[:, :3], a[:, 3:]), False),
    ("split_with_sizes", (7,), lambda x, m: x.split_with_sizes([3, 4]), lambda a: (a[:3], a[3:]), False),
    ("split_empty", (0, 2), lambda x, m: x.split(0), lambda a: (a,), False),
    ("tensor_split", (7,), lambda x, m: x.tensor_split(3), lambda a: tuple(np.array_split(a, 3)), False),
    ("tensor_split_idx", (7, 2), lambda x, m: m.tensor_split(x, [1, 5, 3, 9]),
     lambda a: tuple(np.split(a, [1, 5, 3, 9])), False),
    ("tensor_split_dim", (2, 5), lambda x, m: x.tensor_split(2, dim=1), lambda a: tuple(np.array_split(a, 2, axis=1)), False),
    ("hsplit", (2, 6), lambda x, m: x.hsplit(3), lambda a: tuple(np.hsplit(a, 3)), False),
    ("hsplit_1d", (6,), lambda x, m: m.hsplit(x, [2]), lambda a: tuple(np.hsplit(a, [2])), False),
    ("vsplit", (4, 2), lambda x, m: x.vsplit([1, 3]), lambda a: tuple(np.vsplit(a, [1, 3])), False),
    ("chunk", (7, 2), lambda x, m: x.chunk(3), lambda a: (a[:3], a[3:6], a[6:]), False),
    ("chunk_fewer", (6,), lambda x, m: m.chunk(x, 4), lambda a: (a[:2], a[2:4], a[4:]), False),
    ("chunk_dim", (2, 5), lambda x, m: x.chunk(2, dim=1), lambda a: (a[:, :3], a[:, 3:]), False),
    ("chunk_empty", (0,), lambda x, m: x.chunk(3), lambda a: (a, a, a), False),
    ("unbind", (3, 2), lambda x, m: x.unbind(), lambda a: tuple(a), False),
    ("unbind_dim", (3, 2), lambda x, m: m.unbind(x, -1), lambda a: (a[:, 0], a[:, 1]), False),
    ("unbind_empty", (0, 2), lambda x, m: x.unbind(), lambda a: (), False),
    ("diagonal", (3, 4), lambda x, m: x.diagonal(), lambda a: a.diagonal(), False),
    ("diagonal_off", (3, 4), lambda x, m: m.diagonal(x, 2), lambda a: a.diagonal(2), False),
    ("diagonal_negoff", (3, 4), lambda x, m: x.diagonal(-1), lambda a: a.diagonal(-1), False),
    ("diagonal_far", (3, 4), lambda x, m: x.diagonal(7), lambda a: a.diagonal(7), False),
    ("diagonal_dims", (2, 3, 4), lambda x, m: x.diagonal(0, 2, 0), lambda a: a.diagonal(0, 2, 0), False),
    ("diagonal_kw", (2, 3, 4), lambda x, m: m.diagonal(x, offset=1, dim1=-1, dim2=1),
     lambda a: a.diagonal(1, -1, 1), False),
    ("movedim", (2, 3, 4), lambda x, m: x.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1), False),
    ("movedim_list", (2, 3, 4, 5), lambda x, m: m.movedim(x, (0, 3), (1, 0)),
     lambda a: np.moveaxis(a, (0, 3), (1, 0)), False),
    ("moveaxis", (2, 3, 4), lambda x, m: m.moveaxis(x, [2], [0]), lambda a: np.moveaxis(a, 2, 0), False),
]


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_view_values(case, layout):
    name, shape, f, g, needs_contiguous = case
    if layout != "contiguous" and (needs_contiguous or len(shape) < 2 or 0 in shape):
        pytest.skip("view needs a contiguous input / layout needs >= 2 non-empty dims")
    x, a = make(shape, layout)
    got = f(x, ember)
    check_same(got, g(a))
    # Views share storage with their input (reshape/flatten of non-viewable inputs copy).
    for r in got if isinstance(got, tuple) else (got,):
        if r.numel() and name.split("_")[0] not in ("reshape", "flatten", "ravel"):
            assert shares(r, x), name
    if torch is not None:
        tx = torch.from_numpy(a.copy())
        if layout == "transposed":
            rev = tuple(range(a.ndim - 1, -1, -1))
            tx = tx.permute(*rev).contiguous().permute(*rev)
        want = f(tx, torch)
        gots, wants = (got, want) if isinstance(want, (tuple, list)) else ((got,), (want,))
        check_same(gots, tuple(w.numpy() for w in wants))
        if layout != "strided":  # same memory layout as torch's input: same strides
            for r, w in zip(gots, wants):
                if r.numel() > 1:
                    assert tuple(r.stride()) == tuple(w.stride()), name
                    assert r.is_contiguous() == w.is_contiguous(), name


def test_T_warns_outside_matrices():
    with pytest.warns(UserWarning, match="x.T"):
        assert ember.zeros(2, 3, 4).T.shape == (4, 3, 2)


def test_view_shares_storage_and_version():
    x = ember.zeros(2, 3)
    v = x.view(3, 2)
    assert v._base is x and v._is_view()
    assert v.data_ptr() == x.data_ptr()
    v[0, 1] = 5.0
    assert x[0, 1].item() == 5.0
    assert v._version == x._version
    t = x.t()
    t[2, 1] = 7.0
    assert x[1, 2].item() == 7.0
    # a view of a view has the root tensor as its base
    assert t.unsqueeze(0)._base is x


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x.transpose(0, 1), lambda x: x.permute(1, 0), lambda x: x.unsqueeze(0),
        lambda x: x.expand(2, 2, 3), lambda x: x.narrow(1, 1, 2), lambda x: x.select(0, 1),
        lambda x: x.unfold(1, 2, 1), lambda x: x.diagonal(), lambda x: x.movedim(0, 1),
        lambda x: x.as_strided((2,), (1,)), lambda x: x.split(1)[1], lambda x: x.chunk(2, 1)[0],
        lambda x: x.unbind(1)[2], lambda x: x.squeeze(), lambda x: x.view(ember.int32),
        lambda x: x.flatten(), lambda x: x.T, lambda x: x.unflatten(1, (3, 1)),
        lambda x: ember.broadcast_tensors(x, ember.zeros(4, 1, 1))[0],
    ],
)
def test_writes_through_views(f):
    x = ember.zeros(2, 3)
    v = f(x)
    assert v._base is x
    before = x._version
    v.fill_(1)
    assert x._version > before
    assert to_np(x).view(np.int32).any() if v.dtype == ember.int32 else to_np(x).any()


def test_reshape_copies_only_when_needed():
    x = ember.zeros(3, 4)
    assert x.reshape(12)._base is x
    t = x.t()
    r = t.reshape(12)
    assert r._base is None and not shares(r, x)
    check_same(r, to_np(x).T.reshape(12))
    assert x[::2].flatten()._base is None  # strided rows cannot merge
    assert x[:, ::2].reshape(3, 2)._base is x


def test_view_noncontiguous_error():
    x = ember.zeros(2, 3).t()
    with pytest.raises(RuntimeError, match=r"view size is not compatible.*Use \.reshape\(\.\.\.\) instead"):
        x.view(6)
    # compatible splits of a non-contiguous tensor still work
    y = ember.zeros(4, 6)[:, ::2]
    assert y.view(2, 2, 3).shape == (2, 2, 3)


@pytest.mark.parametrize("dt", DTYPES)
def test_views_every_dtype(dt):
    dtype = getattr(ember, dt)
    x = ember.tensor(np.arange(12).reshape(3, 4) % 2).to(dtype)
    ref = (np.arange(12).reshape(3, 4) % 2).astype(np.float64)
    for f, g in [
        (lambda t: t.t(), lambda a: a.T),
        (lambda t: t.reshape(2, 6), lambda a: a.reshape(2, 6)),
        (lambda t: t.t().reshape(12), lambda a: a.T.reshape(12)),
        (lambda t: t.diagonal(1), lambda a: a.diagonal(1)),
        (lambda t: t.unfold(1, 2, 2), lambda a: a.reshape(3, 2, 2)),
    ]:
        r = f(x)
        assert r.dtype == dtype
        np.testing.assert_array_equal(to_np(r.double()), g(ref))


@pytest.mark.parametrize(
    "src,dst,cols",
    [("float32", "int32", 2), ("float32", "int16", 2), ("int16", "float32", 2), ("uint8", "int32", 8),
     ("float64", "uint8", 1), ("int64", "float64", 3), ("bool", "uint8", 3)],
)
def test_view_dtype(src, dst, cols):
    a = (np.arange(2 * cols, dtype=np.int64).reshape(2, cols) * 1000003).astype(src)
    x = ember.tensor(a)
    v = x.view(getattr(ember, dst))
    want = a.view(dst)
    assert tuple(v.shape) == want.shape and v.dtype == getattr(ember, dst)
    np.testing.assert_array_equal(np.asarray(v), want)
    assert shares(v, x) and v._base is x


def test_view_dtype_strided():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)
    x = ember.tensor(a)[1:, 2:]
    np.testing.assert_array_equal(to_np(x.view(ember.int32)), a[1:, 2:].view(np.int32))
    np.testing.assert_array_equal(to_np(x.view(ember.uint8)), a[1:, 2:].view(np.uint8))


def test_view_dtype_bfloat16_bits():
    x = ember.tensor([1.0, -2.0]).to(ember.bfloat16)
    assert x.view(ember.int16).tolist() == [0x3F80, -16384]
    assert x.view(ember.float16).dtype == ember.float16


def test_inplace_metadata_ops():
    x = ember.zeros(2, 3)
    ptr = x.data_ptr()
    assert x.unsqueeze_(0) is x and x.shape == (1, 2, 3)
    assert x.squeeze_() is x and x.shape == (2, 3)
    x.t_()
    assert x.shape == (3, 2) and x.stride() == (1, 3)
    x.transpose_(0, 1)
    assert x.shape == (2, 3) and x.is_contiguous()
    x.swapaxes_(0, 1)
    x.swapdims_(0, 1)
    assert x.shape == (2, 3)
    x.as_strided_((3,), (2,), 1)
    assert x.shape == (3,) and x.storage_offset() == 1
    x.squeeze_(0)
    assert x.shape == (3,) and x.data_ptr() == ptr + 4


def test_broadcast_tensors_and_shapes():
    a, b = ember.zeros(3, 1), ember.ones(4)
    ra, rb = ember.broadcast_tensors(a, b)
    assert ra.shape == rb.shape == (3, 4)
    assert ra._base is a and rb.stride() == (0, 1)
    assert [t.shape for t in ember.broadcast_tensors([a, b, ember.tensor(1.0)])] == [(3, 4)] * 3
    assert ember.broadcast_tensors(a)[0].shape == (3, 1)
    assert ember.broadcast_shapes((2, 1), (3,), 1) == (2, 3)
    assert ember.broadcast_shapes() == ()
    with pytest.raises(RuntimeError, match="broadcast"):
        ember.broadcast_tensors(ember.zeros(2), ember.zeros(3))
    with pytest.raises(RuntimeError, match="Shape mismatch"):
        ember.broadcast_shapes((2,), (3,))
    with pytest.raises(TypeError, match="expected Tensor"):
        ember.broadcast_tensors(a, 1)


def test_split_chunk_unbind_are_views():
    x = ember.zeros(6, 2)
    for parts in (x.split(2), x.split([1, 5]), x.chunk(3), x.unbind(), x.tensor_split(4)):
        assert isinstance(parts, tuple)
        for p in parts:
            assert p._base is x
        parts[-1].fill_(3)
    assert to_np(x)[-1].tolist() == [3.0, 3.0]


def test_expand_strides_and_write():
    x = ember.tensor([[1.0], [2.0]])
    e = x.expand(3, 2, 4)
    assert e.stride() == (0, 1, 0) and e._base is x
    x[1, 0] = 5.0
    assert to_np(e)[2, 1].tolist() == [5.0] * 4


def test_diagonal_writes():
    x = ember.zeros(3, 3)
    x.diagonal().fill_(1)
    np.testing.assert_array_equal(to_np(x), np.eye(3))
    x.diagonal(1).fill_(2)
    assert to_np(x)[0, 1] == 2 and to_np(x)[1, 2] == 2


ERRORS = [
    # (callable, exception type, regex)
    (lambda x: x.view(5), RuntimeError, r"shape '\[5\]' is invalid for input of size 6"),
    (lambda x: x.view(-1, -1), RuntimeError, "only one dimension can be inferred"),
    (lambda x: x.view(-2, 3), RuntimeError, r"invalid shape dimension -2"),
    (lambda x: x.view(2.0, 3), TypeError, "must be tuple of ints, but found element of type float"),
    (lambda x: x.reshape(4, -1), RuntimeError, r"shape '\[4, -1\]' is invalid for input of size 6"),
    (lambda x: ember.zeros(0, 3).reshape(0, -1), RuntimeError, "ambiguous"),
    (lambda x: x.view(ember.int16).view(ember.float64), RuntimeError, "must be divisible by 4"),
    (lambda x: ember.tensor(1.0).view(ember.int16), RuntimeError, "self.dim\\(\\) cannot be 0"),
    (lambda x: x.t().view(ember.int16), RuntimeError, r"self.stride\(-1\) must be 1"),
    (lambda x: ember.zeros(4, dtype=ember.uint8)[1:3].view(ember.int16), RuntimeError,
     r"storage_offset\(\) must be divisible by 2"),
    (lambda x: x.transpose(0, 2), IndexError, r"out of range.*\[-2, 1\].*got 2"),
    (lambda x: x.transpose(-3, 0), IndexError, "out of range"),
    (lambda x: ember.zeros(2, 2, 2).t(), RuntimeError, r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"),
    (lambda x: ember.zeros(2, 2, 2).t_(), RuntimeError, "<= 2 dimensions"),
    (lambda x: ember.zeros(3).adjoint(), RuntimeError, "matrices"),
    (lambda x: ember.zeros(3).mT, RuntimeError, r"mT is only supported on matrices or batches of matrices. Got 1-D"),
    (lambda x: ember.zeros(3).mH, RuntimeError, "mH is only supported"),
    (lambda x: ember.zeros(2, 2, 2).H, RuntimeError, r"H is only supported on matrices \(2-D tensors\). Got 3-D"),
    (lambda x: x.permute(0), RuntimeError, "number of dims don't match"),
    (lambda x: x.permute(0, 0), RuntimeError, "duplicate dims"),
    (lambda x: x.permute(0, 2), IndexError, "out of range"),
    (lambda x: x.squeeze(2), IndexError, "out of range"),
    (lambda x: x.squeeze((0, 0)), RuntimeError, "dim 0 appears multiple times"),
    (lambda x: x.squeeze_((1, -1)), RuntimeError, "appears multiple times"),
    (lambda x: x.unsqueeze(3), IndexError, r"\[-3, 2\]"),
    (lambda x: x.unsqueeze_(-4), IndexError, "out of range"),
    (lambda x: x.expand(3), RuntimeError, r"number of sizes provided \(1\) must be greater or equal to the number of dimensions in the tensor \(2\)"),
    (lambda x: x.expand(2, 4), RuntimeError, r"expanded size of the tensor \(4\) must match the existing size \(3\) at non-singleton dimension 1"),
    (lambda x: x.expand(-1, 2, 3), RuntimeError, "leading, non-existing dimension 0"),
    (lambda x: x.expand(-2, 3), RuntimeError, "-2"),
    (lambda x: x.expand_as(ember.zeros(3)), RuntimeError, "number of sizes"),
    (lambda x: ember.broadcast_to(x, (3, 3)), RuntimeError, "must match the existing size"),
    (lambda x: x.narrow(0, 1, 5), RuntimeError, r"start \(1\) \+ length \(5\) exceeds dimension size \(2\)"),
    (lambda x: x.narrow(0, 1, -1), RuntimeError, "length must be non-negative"),
    (lambda x: x.narrow(0, 5, 0), IndexError, r"start out of range"),
    (lambda x: x.narrow(2, 0, 1), IndexError, "out of range"),
    (lambda x: ember.tensor(1.0).narrow(0, 0, 1), RuntimeError, "cannot be applied to a 0-dim tensor"),
    (lambda x: x.select(0, 2), IndexError, r"select\(\): index 2 out of range for tensor of size \[2, 3\] at dimension 0"),
    (lambda x: x.select(1, -4), IndexError, "index -4 out of range"),
    (lambda x: ember.tensor(1.0).select(0, 0), IndexError, "0-dim tensor"),
    (lambda x: x.unfold(1, 4, 1), RuntimeError, "maximum size for tensor at dimension 1 is 3 but size is 4"),
    (lambda x: x.unfold(1, 2, 0), RuntimeError, "step is 0 but must be > 0"),
    (lambda x: x.unfold(2, 1, 1), IndexError, "out of range"),
    (lambda x: x.as_strided((3, 3), (3, 1)), RuntimeError, "out of bounds for storage"),
    (lambda x: x.as_strided((2,), (1,), 5), RuntimeError, "out of bounds for storage"),
    (lambda x: x.as_strided((2,), (-1,)), RuntimeError, "Negative strides are not supported"),
    (lambda x: x.as_strided((2,), (1, 1)), RuntimeError, "mismatch in length of strides and shape"),
    (lambda x: x.as_strided((-1,), (1,)), RuntimeError, "negative dimension"),
    (lambda x: x.as_strided_((7,), (1,)), RuntimeError, "out of bounds"),
    (lambda x: x.flatten(1, 0), RuntimeError, "start_dim cannot come after end_dim"),
    (lambda x: x.flatten(0, 2), IndexError, "out of range"),
    (lambda x: x.unflatten(1, (2, 2)), RuntimeError, r"Provided sizes \[2, 2\] don't multiply up to the size of dim 1 \(3\)"),
    (lambda x: x.unflatten(1, (2, -1)), RuntimeError, "don't multiply up"),
    (lambda x: x.unflatten(1, (-1, -1)), RuntimeError, "only one dimension can be inferred"),
    (lambda x: x.unflatten(1, ()), RuntimeError, "sizes must be non-empty"),
    (lambda x: x.split(0), RuntimeError, "split_size can only be 0 if dimension size is 0, but got dimension size of 2"),
    (lambda x: x.split(-1), RuntimeError, "split_size be non-negative"),
    (lambda x: x.split([1, 3], 1), RuntimeError, r"split_sizes to sum exactly to 3 .*dimension 1.*\[1, 3\]"),
    (lambda x: x.split([-1, 4], 1), RuntimeError, "non-negative entries"),
    (lambda x: ember.tensor(1.0).split(1), RuntimeError, "at least a 1-dimensional"),
    (lambda x: x.tensor_split(0), RuntimeError, "number of sections must be larger than 0, got 0"),
    (lambda x: x.hsplit(2), RuntimeError, "not divisible by the split_size 2"),
    (lambda x: ember.zeros(4).vsplit(2), RuntimeError, "at least 2 dimension"),
    (lambda x: x.chunk(0), RuntimeError, r"chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda x: ember.tensor(1.0).chunk(1), RuntimeError, "chunk expects at least a 1-dimensional tensor"),
    (lambda x: ember.tensor(1.0).unbind(), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda x: x.unbind(2), IndexError, "out of range"),
    (lambda x: x.diagonal(0, 1, 1), RuntimeError, "diagonal dimensions cannot be identical 1, 1"),
    (lambda x: x.diagonal(0, 0, 2), IndexError, "out of range"),
    (lambda x: ember.zeros(3).diagonal(), IndexError, "out of range"),
    (lambda x: x.movedim((0, 1), (0,)), RuntimeError, r"source \(\[0, 1\] dims\) should contain the same number of dims as destination \(\[0\] dims\)"),
    (lambda x: x.movedim((0, 0), (0, 1)), RuntimeError, r"repeated dim in `source` \(\[0, 0\]\)"),
    (lambda x: x.movedim((0, 1), (1, -1)), RuntimeError, "repeated dim in `destination`"),
    (lambda x: x.movedim(2, 0), IndexError, "out of range"),
]


@pytest.mark.parametrize("f,exc,pattern", ERRORS)
def test_view_errors(f, exc, pattern):
    x = ember.zeros(2, 3)
    with pytest.raises(exc, match=pattern):
        f(x)
