"""NumPy / DLPack exchange, Python conversions and ember.tensor() construction."""

import gc
import sys

import ember
import numpy as np
import pytest

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
             np.float64]
EMBER_OF = {np.bool_: "bool", np.uint8: "uint8", np.int8: "int8", np.int16: "int16",
            np.int32: "int32", np.int64: "int64", np.float16: "float16", np.float32: "float32",
            np.float64: "float64"}


def _sample(dt, shape=(2, 3)):
    n = int(np.prod(shape))
    if dt is np.bool_:
        return (np.arange(n) % 2 == 0).reshape(shape)
    return (np.arange(n) % 100).astype(dt).reshape(shape)


# ---- NumPy -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", NP_DTYPES, ids=lambda d: d.__name__)
def test_numpy_round_trip_every_dtype(dt):
    a = _sample(dt)
    t = ember.from_numpy(a)
    assert t.dtype is getattr(ember, EMBER_OF[dt])
    assert t.shape == (2, 3)
    assert t.tolist() == a.tolist()
    back = t.numpy()
    assert back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)
    assert np.shares_memory(back, a)
    # ember.tensor copies
    c = ember.tensor(a)
    assert c.dtype is t.dtype and c.tolist() == a.tolist()
    assert not np.shares_memory(c.numpy(), a)


def test_from_numpy_shares_memory_both_ways():
    a = np.zeros(4, dtype=np.float32)
    t = ember.from_numpy(a)
    a[1] = 5.0
    assert t[1].item() == 5.0
    t[2] = 7.0
    assert a[2] == 7.0
    t += 1
    np.testing.assert_array_equal(a, [1.0, 6.0, 8.0, 1.0])
    n = t.numpy()
    n[0] = -3.0
    assert t[0].item() == -3.0 and a[0] == -3.0
    assert t.data_ptr() == a.ctypes.data


def test_from_numpy_keeps_array_alive():
    a = np.arange(10.0)
    t = ember.from_numpy(a)
    ref = sys.getrefcount(a)
    del a
    gc.collect()
    assert ref >= 3  # the tensor holds a buffer on the array
    assert t.tolist() == list(np.arange(10.0))


@pytest.mark.parametrize("make", [
    lambda a: a[::2],
    lambda a: a.T,
    lambda a: a[:, 1::2],
    lambda a: a[1:, :2],
    lambda a: np.broadcast_to(a[:1], (4, 6)),
], ids=["step", "transpose", "colstep", "offset", "broadcast"])
def test_from_numpy_strided(make):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    v = make(a)
    t = ember.from_numpy(v)
    assert t.shape == v.shape
    assert t.stride() == tuple(s // v.itemsize for s in v.strides)
    assert t.tolist() == v.tolist()
    np.testing.assert_array_equal(np.asarray(t), v)
    if v.flags.writeable:
        v[0, 0] = 100.0
        assert t[0, 0].item() == 100.0


def test_numpy_noncontiguous_tensor_export():
    t = ember.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    tt = t[:, 1::2]
    n = tt.numpy()
    assert n.shape == (3, 2) and n.strides == (16, 8)
    np.testing.assert_array_equal(n, np.arange(12).reshape(3, 4)[:, 1::2])
    n[1, 0] = 99  # still a view of t
    assert t[1, 1].item() == 99


@pytest.mark.parametrize("arr,match", [
    (np.zeros(2, dtype=np.clongdouble), "can't convert"),  # complex64/128 convert
    (np.zeros(2, dtype=np.float128), "can't convert"),  # (uint16/32/64 convert)
])
def test_from_numpy_unsupported_dtype(arr, match):
    with pytest.raises(TypeError, match=match):
        ember.from_numpy(arr)
    with pytest.raises(TypeError, match="supported types"):
        ember.tensor(arr)


@pytest.mark.parametrize("arr", [np.zeros(2, dtype=">f4"), np.zeros(2, dtype=">i8")])
def test_from_numpy_byte_swapped(arr):  # torch's class: a ValueError about the byte order
    with pytest.raises(ValueError, match="byte order is not the native one"):
        ember.from_numpy(arr)
    with pytest.raises(ValueError, match="byte order"):
        ember.tensor(arr)


def test_from_numpy_object_and_bad_input():
    with pytest.raises((TypeError, ValueError)):
        ember.from_numpy(np.array([1, "a"], dtype=object))
    with pytest.raises(TypeError, match="expected np.ndarray"):
        ember.from_numpy([1, 2, 3])


def test_from_numpy_negative_strides():
    a = np.arange(5.0)
    with pytest.raises(ValueError, match="negative"):
        ember.from_numpy(a[::-1])
    # ember.tensor() of it copies fine? numpy's buffer export of a reversed view has negative
    # strides too, so it must fail clearly rather than read wrong memory.
    try:
        t = ember.tensor(a[::-1])
    except ValueError:
        return
    assert t.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


def test_zero_dim_and_empty_numpy():
    t = ember.from_numpy(np.array(3.5))
    assert t.shape == () and t.item() == 3.5
    e = ember.from_numpy(np.zeros((0, 3), dtype=np.int16))
    assert e.shape == (0, 3) and e.dtype is ember.int16 and e.numel() == 0
    assert ember.zeros(0, 2).numpy().shape == (0, 2)
    assert ember.tensor(4).numpy().shape == ()


def test_array_protocol():
    t = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and np.shares_memory(a, t.numpy())
    d = np.array(t, dtype=np.float64)
    assert d.dtype == np.float64 and d.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.add(t, 1).tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert float(np.add.reduce(np.asarray(t), axis=None)) == 10.0


def test_bfloat16_numpy_raises():
    t = ember.ones(2, dtype=ember.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        t.numpy()
    with pytest.raises(TypeError, match="bfloat16"):
        np.asarray(t)
    assert t.float().numpy().tolist() == [1.0, 1.0]


# ---- DLPack -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", NP_DTYPES, ids=lambda d: d.__name__)
def test_dlpack_numpy_both_ways(dt):
    a = _sample(dt, (3, 4))
    t = ember.from_dlpack(a)
    assert t.dtype is getattr(ember, EMBER_OF[dt])
    assert t.tolist() == a.tolist()
    assert t.data_ptr() == a.ctypes.data
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert np.shares_memory(a, b)


def test_dlpack_shares_memory_and_strides():
    a = np.arange(12.0).reshape(3, 4)
    t = ember.from_dlpack(a[:, ::2])
    assert t.shape == (3, 2) and t.stride() == (4, 2)
    a[0, 2] = -1.0
    assert t[0, 1].item() == -1.0
    src = ember.tensor(np.arange(12, dtype=np.int64).reshape(3, 4))
    view = np.from_dlpack(src[:, ::2])
    assert view.shape == (3, 2)
    assert view.tolist() == np.arange(12).reshape(3, 4)[:, ::2].tolist()
    # NumPy marks arrays from a legacy (unversioned) DLPack capsule read-only; write via ember.
    src[1, 0] = 42
    assert view[1, 0] == 42
    view = np.from_dlpack(ember.from_numpy(np.arange(12).reshape(3, 4).T))
    assert view.tolist() == np.arange(12).reshape(3, 4).T.tolist()
    sliced = np.from_dlpack(src[1:, 1:])  # storage offset travels as a pointer shift
    assert sliced.tolist() == [[5, 6, 7], [9, 10, 11]]
    assert np.shares_memory(sliced, np.from_dlpack(src))


def test_dlpack_lifetime_producer_deleted():
    a = np.arange(1000.0)
    t = ember.from_dlpack(a)
    del a
    gc.collect()
    assert t[999].item() == 999.0 and sum(t.tolist()) == sum(range(1000))
    src = ember.tensor(np.arange(100, dtype=np.float32))
    n = np.from_dlpack(src)
    del src
    gc.collect()
    junk = [ember.ones(100) * 7 for _ in range(10)]  # reuse freed blocks if we were wrong
    assert n.tolist() == list(range(100))
    del junk


def test_dlpack_capsule_and_device():
    t = ember.ones(3)
    assert t.__dlpack_device__() == (1, 0)
    cap = t.__dlpack__()
    u = ember.from_dlpack(cap)
    assert u.data_ptr() == t.data_ptr()
    with pytest.raises(TypeError, match="unconsumed"):
        ember.from_dlpack(cap)  # a capsule can only be consumed once


def test_dlpack_torch():
    torch = pytest.importorskip("torch")
    for name in ("float32", "bfloat16", "int16", "bool", "uint8", "float16"):
        tt = torch.arange(6).reshape(2, 3).to(getattr(torch, name))
        e = ember.from_dlpack(tt)
        assert e.dtype is getattr(ember, name)
        assert e.data_ptr() == tt.data_ptr()
        back = torch.from_dlpack(e)
        assert back.dtype == tt.dtype and torch.equal(back, tt)
        assert back.data_ptr() == tt.data_ptr()
    tt = torch.arange(12.0).reshape(3, 4).t()
    e = ember.from_dlpack(tt)
    assert e.shape == (4, 3) and e.tolist() == tt.tolist()


# ---- as_tensor ----------------------------------------------------------------------------

def test_as_tensor():
    a = np.zeros(3, dtype=np.float32)
    t = ember.as_tensor(a)
    a[0] = 1.0
    assert t[0].item() == 1.0
    c = ember.as_tensor(a, dtype=ember.float64)  # a conversion copies
    a[1] = 2.0
    assert c.dtype is ember.float64 and c[1].item() == 0.0
    x = ember.ones(2)
    assert ember.as_tensor(x) is x
    assert ember.as_tensor(x, dtype=ember.float32) is x
    assert ember.as_tensor(x, dtype=ember.int64).dtype is ember.int64
    assert ember.as_tensor([1, 2]).dtype is ember.int64
    assert ember.as_tensor(2.5).shape == ()
    big = np.zeros(2, dtype=">f8")  # unsupported for sharing; torch raises for it too
    with pytest.raises(ValueError):
        ember.as_tensor(big)


# ---- Python conversions ---------------------------------------------------------------------

def test_tolist_item_and_scalars():
    t = ember.tensor([[1, 2], [3, 4]])
    assert t.tolist() == [[1, 2], [3, 4]]
    assert type(t.tolist()[0][0]) is int
    assert ember.tensor([1.5]).tolist() == [1.5]
    assert type(ember.tensor([True]).tolist()[0]) is bool
    assert ember.tensor(2.5).tolist() == 2.5
    assert ember.tensor(3).item() == 3 and type(ember.tensor(3).item()) is int
    assert type(ember.tensor(3.0).item()) is float
    assert ember.tensor([True]).item() is True
    assert ember.tensor([[7]]).item() == 7
    assert float(ember.tensor(2)) == 2.0 and type(float(ember.tensor(2))) is float
    assert int(ember.tensor(2.9)) == 2
    assert int(ember.tensor(-2.9)) == -2
    assert bool(ember.tensor(0.0)) is False and bool(ember.tensor([3])) is True
    assert ember.tensor(0.1, dtype=ember.float16).item() == float(np.float16(0.1))
    assert ember.tensor(0.1, dtype=ember.bfloat16).item() == 0.10009765625
    with pytest.raises(RuntimeError, match="elements"):
        ember.tensor([1, 2]).item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(ember.zeros(0))
    with pytest.raises(ValueError, match="only one element tensors"):  # torch's class
        float(ember.tensor([1.0, 2.0]))


def test_len_and_iteration():
    t = ember.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    assert [x.item() for x in ember.tensor([7, 8])] == [7, 8]
    assert list(ember.zeros(0)) == []
    with pytest.raises(TypeError, match="0-d"):
        len(ember.tensor(1))
    with pytest.raises(TypeError, match="0-d"):
        iter(ember.tensor(1))
    i = ember.tensor(3)
    assert [10, 20, 30, 40][i] == 40  # __index__
    with pytest.raises(TypeError, match="index"):
        [1, 2][ember.tensor(1.0)]


# ---- ember.tensor() ---------------------------------------------------------------------------

@pytest.mark.parametrize("data,dtype,shape", [
    ([True, False], "bool", (2,)),
    ([1, 2], "int64", (2,)),
    ([1, 2.0], "float32", (2,)),
    ([True, 2], "int64", (2,)),
    ([True, 2.5], "float32", (2,)),
    ([], "float32", (0,)),
    ([[]], "float32", (1, 0)),
    ([[], []], "float32", (2, 0)),
    (5, "int64", ()),
    (5.0, "float32", ()),
    (False, "bool", ()),
    (((1, 2), (3, 4)), "int64", (2, 2)),
    ([[1], [2.5]], "float32", (2, 1)),
    ([[[1]]], "int64", (1, 1, 1)),
])
def test_tensor_inference(data, dtype, shape):
    t = ember.tensor(data)
    assert t.dtype is getattr(ember, dtype)
    assert t.shape == shape
    torch = sys.modules.get("torch")
    if torch is not None:
        tt = torch.tensor(data)
        assert repr(tt.dtype).replace("torch", "ember") == repr(t.dtype)
        assert tuple(tt.shape) == shape


def test_tensor_explicit_dtype_and_values():
    t = ember.tensor([1.7, -2.7], dtype=ember.int32)
    assert t.dtype is ember.int32 and t.tolist() == [1, -2]
    assert ember.tensor([0, 2], dtype=ember.bool).tolist() == [False, True]
    assert ember.tensor([300], dtype=ember.float16).tolist() == [300.0]
    assert ember.tensor([2**62]).tolist() == [2**62]
    assert ember.tensor([1, 2], dtype=float).dtype is ember.float64
    assert ember.tensor([ember.tensor(1.0), ember.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert ember.tensor([ember.ones(2), ember.zeros(2)]).shape == (2, 2)
    assert ember.tensor(np.float64(2.5)).dtype in (ember.float64, ember.float32)
    src = ember.ones(3)
    cp = ember.tensor(src)
    cp[0] = 5.0
    assert src[0].item() == 1.0  # tensor() always copies


def test_tensor_from_numpy_copies():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = ember.tensor(a)
    a[0, 0] = 100
    assert t[0, 0].item() == 0 and t.dtype is ember.int16
    assert ember.tensor(a[:, ::2]).tolist() == a[:, ::2].tolist()
    assert ember.tensor(a, dtype=ember.float32).dtype is ember.float32


@pytest.mark.parametrize("data", [
    [[1, 2], [3]],
    [[[1], [2]], [[3]]],
    [[1, 2], [3, 4], []],
])
def test_tensor_ragged_raises(data):
    with pytest.raises(ValueError, match="expected sequence of length"):
        ember.tensor(data)


@pytest.mark.parametrize("data", [[[1, 2], 3], [1, [2, 3]]])
def test_tensor_mixed_depth_raises(data):
    # torch raises TypeError for these; either way it must be a clear error, not a crash
    with pytest.raises((TypeError, ValueError), match="sequence|number"):
        ember.tensor(data)


def test_tensor_bad_elements():
    with pytest.raises(TypeError, match="str"):
        ember.tensor(["a", "b"])
    with pytest.raises(RuntimeError):  # torch: "Could not infer dtype of NoneType"
        ember.tensor([None])
    with pytest.raises(RuntimeError):
        ember.tensor({1: 2})
    with pytest.raises(ValueError, match="shape"):
        ember.tensor([ember.ones(2), ember.ones(3)])


def test_numpy_refuses_a_tensor_that_requires_grad_as_torch_does():
    msg = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
    leaf = ember.ones(3, requires_grad=True)
    for t in (leaf, leaf * 2):
        with pytest.raises(RuntimeError) as e:
            t.numpy()
        assert str(e.value) == msg
    np.testing.assert_array_equal(leaf.detach().numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal((leaf * 2).numpy(force=True), [2.0, 2.0, 2.0])
    with ember.no_grad():  # grad mode off: allowed, as in torch
        np.testing.assert_array_equal(leaf.numpy(), [1.0, 1.0, 1.0])
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as te:
        torch.ones(3, requires_grad=True).numpy()
    assert str(te.value) == msg


# ---- tensors of other frameworks (a torch.Tensor from torchvision, say) -----------------------
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "bool", "int64"])
def test_foreign_tensors_to_ember_keep_dtype_and_values(dtype):
    torch = pytest.importorskip("torch")
    src = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))
    for make in (ember.tensor, ember.as_tensor, ember.asarray):
        t = make(src)
        assert isinstance(t, ember.Tensor) and str(t.dtype) == f"ember.{dtype}"
        assert t.tolist() == src.tolist()
    zero_d = torch.tensor(3, dtype=getattr(torch, dtype))
    assert str(ember.tensor(zero_d).dtype) == f"ember.{dtype}" and ember.tensor(zero_d).ndim == 0


def test_foreign_tensors_copy_or_share_as_asked():
    torch = pytest.importorskip("torch")
    src = torch.zeros(3)
    shared, copied = ember.as_tensor(src), ember.tensor(src, dtype=ember.float64)
    src[0] = 5.0
    assert shared[0].item() == 5.0 and copied[0].item() == 0.0 and copied.dtype == ember.float64
    g = ember.tensor(torch.ones(2, requires_grad=True), requires_grad=True)
    assert g.requires_grad and g.is_leaf
    assert not ember.as_tensor(torch.ones(2, requires_grad=True)).requires_grad


def test_a_foreign_tensor_passed_to_an_op_is_named_in_the_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"argument 'input' must be a Tensor, not torch\.Tensor "
                                        r"\(another framework's tensor: convert it with "
                                        r"ember\.as_tensor"):
        ember.nn.functional.linear(torch.ones(2, 3), ember.ones(2, 3))
