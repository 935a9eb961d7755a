"""Tensor attributes, conversions, new_* constructors, Python operators and devices."""

import operator

import ember
import numpy as np
import pytest

DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
               "float64"]


def _torch():
    return pytest.importorskip("torch")


# ---- attributes --------------------------------------------------------------------------------

def test_shape_size_stride():
    t = ember.zeros(2, 3, 4)
    assert isinstance(t.shape, ember.Size) and isinstance(t.shape, tuple)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4)
    assert isinstance(t.size(), ember.Size)
    assert repr(t.shape) == "ember.Size([2, 3, 4])"
    assert t.shape[1:] == (3, 4) and isinstance(t.shape[1:], ember.Size)
    assert t.shape.numel() == 24
    assert t.size(0) == 2 and t.size(-1) == 4 and t.size(dim=1) == 3
    assert t.stride() == (12, 4, 1) and t.stride(1) == 4 and t.stride(-1) == 1
    assert t.ndim == 3 and t.dim() == 3 and t.ndimension() == 3
    assert t.numel() == 24 and t.nelement() == 24
    assert t.element_size() == 4 and t.itemsize == 4 and t.nbytes == 96
    assert t.dtype is ember.float32
    assert t.device == ember.device("cpu") and t.device.type == "cpu"
    assert t.is_cpu and not t.is_cuda
    assert t.is_floating_point() and not ember.zeros(1, dtype=ember.int32).is_floating_point()


def test_zero_dim_and_empty_attributes():
    s = ember.tensor(3.0)
    assert s.shape == () and s.ndim == 0 and s.numel() == 1 and s.stride() == ()
    e = ember.zeros(0, 3)
    assert e.shape == (0, 3) and e.numel() == 0 and e.is_contiguous()


def test_views_contiguity_offsets():
    t = ember.zeros(4, 6)
    assert t.is_contiguous() and t.storage_offset() == 0
    row = t[1]
    assert row.storage_offset() == 6 and row.is_contiguous()
    assert row.data_ptr() == t.data_ptr() + 6 * 4
    cols = t[:, ::2]
    assert cols.shape == (4, 3) and cols.stride() == (6, 2) and not cols.is_contiguous()
    tail = t[2:, 3:]
    assert tail.storage_offset() == 15 and tail.data_ptr() == t.data_ptr() + 15 * 4
    assert ember.from_numpy(np.zeros((3, 4)).T).is_contiguous() is False


def test_size_stride_errors():
    t = ember.zeros(2, 3)
    with pytest.raises(IndexError, match="[Dd]imension out of range"):
        t.size(2)
    with pytest.raises(IndexError, match="[Dd]imension out of range"):
        t.stride(-3)
    with pytest.raises(AttributeError):
        t.shape = (3, 2)


def test_attributes_match_torch():
    torch = _torch()
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for view in (lambda x: x, lambda x: x[1], lambda x: x[:, ::2, 1:], lambda x: x[..., 2]):
        e, t = view(ember.from_numpy(a)), view(torch.from_numpy(a))
        assert tuple(e.shape) == tuple(t.shape)
        assert e.stride() == t.stride()
        assert e.storage_offset() == t.storage_offset()
        assert e.is_contiguous() == t.is_contiguous()
        assert e.data_ptr() == t.data_ptr()


# ---- conversions -------------------------------------------------------------------------------

def test_to_forms():
    x = ember.tensor([1.5, -2.5])
    assert x.to(ember.float32) is x  # nothing to do: the same tensor, like torch
    y = x.to(ember.float64)
    assert y.dtype is ember.float64 and y.tolist() == [1.5, -2.5]
    assert x.to("cpu") is x and x.to(ember.device("cpu")) is x
    assert x.to("cpu", ember.int64).tolist() == [1, -2]
    assert x.to(device="cpu", dtype=ember.int32).dtype is ember.int32
    assert x.to(dtype=ember.float16).dtype is ember.float16
    z = x.to(ember.float32, copy=True)
    assert z is not x and z.data_ptr() != x.data_ptr() and z.tolist() == x.tolist()
    other = ember.zeros(1, dtype=ember.int16)
    assert x.to(other).dtype is ember.int16
    assert x.to(ember.float64, non_blocking=True).dtype is ember.float64
    with pytest.raises(RuntimeError, match="cuda"):
        x.to(5)  # an int is a CUDA device index, as in PyTorch
    with pytest.raises(TypeError, match="invalid argument"):
        x.to(5.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.to(dtype=ember.float32, bogus=1)
    with pytest.raises(RuntimeError, match="cuda"):
        x.to("cuda")
    with pytest.raises((ValueError, RuntimeError), match="device"):
        x.to("tpu")


@pytest.mark.parametrize("method,dtype", [
    ("float", "float32"), ("double", "float64"), ("half", "float16"), ("bfloat16", "bfloat16"),
    ("long", "int64"), ("int", "int32"), ("short", "int16"), ("char", "int8"), ("byte", "uint8"),
    ("bool", "bool"),
])
def test_cast_methods(method, dtype):
    x = ember.tensor([0.0, 1.0, 2.75, -3.25])
    y = getattr(x, method)()
    assert y.dtype is getattr(ember, dtype)
    expected = np.array([0.0, 1.0, 2.75, -3.25])
    if dtype == "bool":
        assert y.tolist() == [False, True, True, True]
    elif dtype == "uint8":
        assert y.tolist()[:3] == [0, 1, 2]
    elif dtype.startswith("int"):
        assert y.tolist() == [0, 1, 2, -3]
    else:
        assert y.tolist() == expected.tolist()
    assert getattr(y, method)() is y  # already that dtype
    assert x.cpu() is x


def test_type_as():
    x = ember.tensor([1.7, 2.2])
    assert x.type_as(ember.zeros(1, dtype=ember.int64)).tolist() == [1, 2]
    assert x.type_as(x) is x


def test_new_constructors():
    x = ember.zeros(2, dtype=ember.int16)
    for t, shape in ((x.new_zeros(2, 3), (2, 3)), (x.new_zeros((4,)), (4,)),
                     (x.new_ones([1, 2]), (1, 2)), (x.new_empty(3), (3,)),
                     (x.new_full((2,), 7), (2,))):
        assert t.dtype is ember.int16 and t.shape == shape
    assert x.new_ones(2).tolist() == [1, 1]
    assert x.new_full((2,), 7).tolist() == [7, 7]
    assert x.new_zeros(2, dtype=ember.float64).dtype is ember.float64
    n = x.new_tensor([1, 2, 3])
    assert n.dtype is ember.int16 and n.tolist() == [1, 2, 3]
    assert x.new_tensor([1.5], dtype=ember.float32).dtype is ember.float32
    f = ember.zeros(1, dtype=ember.float64)
    assert f.new_tensor([1, 2]).dtype is ember.float64
    assert f.new_empty(0).shape == (0,)


# ---- Python operators ------------------------------------------------------------------------

_A = np.array([[1.5, -2.0, 3.25], [4.0, 0.5, -6.0]], dtype=np.float32)
_B = np.array([[2.0, 3.0, -1.5], [0.25, -4.0, 5.0]], dtype=np.float32)
_I = np.array([[7, -3, 12], [5, 9, -8]], dtype=np.int64)
_J = np.array([[2, 5, 3], [-4, 2, 3]], dtype=np.int64)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.lt, operator.le, operator.gt, operator.ge, operator.eq,
                                operator.ne], ids=lambda f: f.__name__)
def test_binary_float_ops(op):
    e = op(ember.tensor(_A), ember.tensor(_B))
    np.testing.assert_allclose(np.asarray(e), op(_A, _B), rtol=1e-6)
    e = op(ember.tensor(_A), 2.5)
    np.testing.assert_allclose(np.asarray(e), op(_A, np.float32(2.5)), rtol=1e-6)
    e = op(2.5, ember.tensor(_A))
    np.testing.assert_allclose(np.asarray(e), op(np.float32(2.5), _A), rtol=1e-6)
    # broadcasting and non-contiguous operands
    e = op(ember.tensor(_A)[:, ::2], ember.tensor(_B)[0, ::2])
    np.testing.assert_allclose(np.asarray(e), op(_A[:, ::2], _B[0, ::2]), rtol=1e-6)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.floordiv,
                                operator.mod, operator.and_, operator.or_, operator.xor],
                         ids=lambda f: f.__name__)
def test_binary_int_ops(op):
    e = op(ember.tensor(_I), ember.tensor(_J))
    assert e.dtype is ember.int64
    np.testing.assert_array_equal(np.asarray(e), op(_I, _J))
    np.testing.assert_array_equal(np.asarray(op(ember.tensor(_I), 3)), op(_I, 3))
    np.testing.assert_array_equal(np.asarray(op(3, ember.tensor(_J))), op(3, _J))


def test_reflected_operators():
    x = ember.tensor([1.0, 2.0, 4.0])
    assert (2 - x).tolist() == [1.0, 0.0, -2.0]
    assert (2 ** x).tolist() == [2.0, 4.0, 16.0]
    assert (8 / x).tolist() == [8.0, 4.0, 2.0]
    assert (7 // x).tolist() == [7.0, 3.0, 1.0]
    assert (7 % x).tolist() == [0.0, 1.0, 3.0]
    assert (3 + x).tolist() == [4.0, 5.0, 7.0]
    assert (3 * x).tolist() == [3.0, 6.0, 12.0]
    i = ember.tensor([1, 2, 3])
    assert (2 ** i).tolist() == [2, 4, 8] and (2 ** i).dtype is ember.int64
    assert (1 << i).tolist() == [2, 4, 8]
    assert (16 >> i).tolist() == [8, 4, 2]
    assert (i << 1).tolist() == [2, 4, 6] and (i >> 1).tolist() == [0, 1, 1]
    assert (6 & i).tolist() == [0, 2, 2] and (4 | i).tolist() == [5, 6, 7]
    assert (1 ^ i).tolist() == [0, 3, 2]
    assert (2.0 ** i).dtype is ember.float32


def test_unary_operators():
    x = ember.tensor([1.5, -2.0])
    assert (-x).tolist() == [-1.5, 2.0]
    assert (+x).tolist() == [1.5, -2.0]
    assert abs(x).tolist() == [1.5, 2.0]
    assert (~ember.tensor([True, False])).tolist() == [False, True]
    assert (~ember.tensor([0, 5])).tolist() == [-1, -6]
    assert (x ** 2).tolist() == [2.25, 4.0]


def test_operators_match_torch():
    torch = _torch()
    ops = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
           operator.mod, operator.pow]
    for op in ops:
        for lhs, rhs in ((_A, _B), (_I, _J)):
            if op is operator.pow and lhs is _I:
                rhs = np.abs(_J)
            e = op(ember.tensor(lhs), ember.tensor(rhs))
            t = op(torch.from_numpy(lhs), torch.from_numpy(rhs))
            assert repr(e.dtype) == repr(t.dtype).replace("torch", "ember"), op
            np.testing.assert_allclose(np.asarray(e), t.numpy(), rtol=1e-6)
            for s in (2, 2.5, -3):
                if op is operator.pow and lhs is _I and s == -3:
                    continue  # integers to negative integer powers raise in torch
                e, t = op(ember.tensor(lhs), s), op(torch.from_numpy(lhs), s)
                assert repr(e.dtype) == repr(t.dtype).replace("torch", "ember"), (op, s)
                np.testing.assert_allclose(np.asarray(e), t.numpy(), rtol=1e-6)
                e, t = op(s, ember.tensor(rhs)), op(s, torch.from_numpy(rhs))
                assert repr(e.dtype) == repr(t.dtype).replace("torch", "ember"), (op, s, "r")
                np.testing.assert_allclose(np.asarray(e), t.numpy(), rtol=1e-6)


def test_inplace_operators_keep_identity():
    x = ember.tensor([1.0, 2.0])
    ident, ptr, v = id(x), x.data_ptr(), x._version
    x += 1
    assert id(x) == ident and x.data_ptr() == ptr and x._version > v
    assert x.tolist() == [2.0, 3.0]
    v = x._version
    x *= 2
    x -= ember.tensor([1.0, 1.0])
    x /= 2
    x **= 2
    assert id(x) == ident and x._version >= v + 4
    assert x.tolist() == [2.25, 6.25]
    i = ember.tensor([7, 8])
    i //= 2
    i %= 3
    i <<= 1
    i |= 1
    i &= 7
    i ^= 2
    i >>= 1
    assert i.tolist() == [1, 0] and i.dtype is ember.int64


def test_inplace_through_view_writes_base():
    x = ember.zeros(2, 3)
    row = x[1]
    row += 5
    assert x.tolist() == [[0.0, 0.0, 0.0], [5.0, 5.0, 5.0]]
    assert x._version == row._version  # views share the version counter


def test_inplace_cast_errors():
    i = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast|cast"):
        i += 1.5
    with pytest.raises(RuntimeError, match="cast"):
        i /= 2
    b = ember.tensor([True])
    with pytest.raises(RuntimeError, match="cast"):
        b += 1
    x = ember.zeros(3)
    with pytest.raises(RuntimeError):
        x += ember.ones(2, 3)  # the result would not fit in x's shape


@pytest.mark.parametrize("other", ["a", None, [1.0, 2.0], object(), {1: 2}])
def test_unsupported_operands_raise_type_error(other):
    x = ember.ones(2)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
               operator.lt):
        with pytest.raises(TypeError):
            op(x, other)
        with pytest.raises(TypeError):
            op(other, x)
    assert (x == other) is False
    assert (x != other) is True


def test_shape_mismatch_errors():
    with pytest.raises(RuntimeError, match="size|shape|broadcast"):
        ember.ones(2) + ember.ones(3)
    with pytest.raises(RuntimeError, match="size|shape|broadcast"):
        ember.ones(2, 3) * ember.ones(4, 1, 2)


def test_bool_ops():
    a, b = ember.tensor([True, False, True]), ember.tensor([True, True, False])
    assert (a & b).tolist() == [True, False, False]
    assert (a | b).tolist() == [True, True, True]
    assert (a ^ b).tolist() == [False, True, True]
    assert (a + b).dtype is ember.bool
    with pytest.raises(RuntimeError, match="bool|Boolean|subtract"):
        a - b  # torch: subtraction of bools is not supported


# ---- devices -----------------------------------------------------------------------------------

def test_device():
    d = ember.device("cpu")
    assert d.type == "cpu" and d.index is None
    assert str(d) == "cpu" and repr(d) == "device(type='cpu')"
    assert d == ember.device("cpu") and hash(d) == hash(ember.device("cpu"))
    d0 = ember.device("cpu", 0)
    assert d0.index == 0 and repr(d0) == "device(type='cpu', index=0)"
    assert ember.device("cpu:0") == d0
    assert ember.device(d) == d
    c = ember.device("cuda:1")
    assert c.type == "cuda" and c.index == 1 and str(c) == "cuda:1"
    assert ember.zeros(1, device=d).device == d
    assert ember.full([1], 2.0, device="cpu").device == d
    assert ember.tensor([1.0], device="cpu").device == d
    with pytest.raises((ValueError, RuntimeError), match="device type"):
        ember.device("tpu")
    with pytest.raises((ValueError, RuntimeError), match="device string"):
        ember.device("cpu:x")


def test_device_matches_torch():
    torch = _torch()
    for s in ("cpu", "cpu:0", "cuda", "cuda:1"):
        assert repr(ember.device(s)) == repr(torch.device(s))
        assert str(ember.device(s)) == str(torch.device(s))


def test_cuda_unavailable():
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        ember.zeros(2, device=ember.device("cuda"))
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        ember.full([2], 1.0, device="cuda")
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        ember.tensor([1.0], device="cuda")


def test_device_string_for_varargs_creation():
    assert ember.zeros(2, device="cpu").device == ember.device("cpu")
    assert ember.ones(2, 3, device="cpu").shape == (2, 3)
    assert ember.empty(2, device="cpu").numel() == 2
    assert ember.zeros(1).new_zeros(2, device="cpu").shape == (2,)
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        ember.zeros(2, device="cuda")


def test_rsub_bool_raises():
    with pytest.raises(RuntimeError, match="bool"):
        1 - ember.tensor([True, False])  # like torch: use ~ or logical_not


def test_bad_constructor_inputs():
    with pytest.raises((RuntimeError, ValueError), match="negative"):
        ember.zeros(-1)
    with pytest.raises(TypeError):
        ember.zeros(2, dtype="float32")
    with pytest.raises(TypeError):
        ember.zeros("a")
    with pytest.raises(TypeError):
        ember.ones(2, 3, bogus=True)


def test_where_method_binds_self_as_receiver():
    x = ember.tensor([1.0, -2.0, 3.0])
    assert x.where(x > 0, 0.0).tolist() == [1.0, 0.0, 3.0]
    assert x.where(x > 0, ember.zeros(3)).tolist() == [1.0, 0.0, 3.0]


def test_methods_with_only_keyword_arguments():
    x = ember.zeros(4)
    x.random_()
    assert all(0 <= v <= 2**24 for v in x.tolist())
    x.random_(generator=ember.Generator().manual_seed(1))
    x.random_(2, 5)
    assert all(2 <= v < 5 for v in x.tolist())


def test_printoptions_reject_negative_values():
    with pytest.raises(ValueError, match="precision"):
        ember.set_printoptions(precision=-1)
    with pytest.raises(ValueError, match="linewidth"):
        ember.set_printoptions(linewidth="wide")


@pytest.mark.skipif(ember.cuda.is_available(), reason="needs a build without a usable GPU")
def test_as_tensor_honours_device():
    with pytest.raises(RuntimeError, match="cuda"):
        ember.as_tensor(np.zeros(2), device="cuda")
    assert ember.as_tensor(np.zeros(2), device="meta").device.type == "meta"
    assert ember.as_tensor(np.zeros(2), device="cpu").device.type == "cpu"


FRESH_RESULTS = {
    "zeros": lambda L, a: L.zeros(3),
    "ones": lambda L, a: L.ones(3),
    "full": lambda L, a: L.full((2,), 3.0),
    "zeros_like": lambda L, a: L.zeros_like(a),
    "ones_like": lambda L, a: L.ones_like(a),
    "new_zeros": lambda L, a: a.new_zeros(2),
    "new_full": lambda L, a: a.new_full((2,), 1.5),
    "rand": lambda L, a: L.rand(3),
    "randn": lambda L, a: L.randn(3),
    "randint": lambda L, a: L.randint(0, 5, (3,)),
    "normal": lambda L, a: L.normal(0.0, 1.0, (3,)),
    "bernoulli": lambda L, a: L.bernoulli(L.full((3,), 0.5)),
    "clone": lambda L, a: a.clone(),
    "to": lambda L, a: a.to(L.float64),
    "cat": lambda L, a: L.cat([a, a]),
    "stack": lambda L, a: L.stack([a, a]),
}


@pytest.mark.parametrize("name", sorted(FRESH_RESULTS))
def test_new_results_start_at_version_zero(name):
    """Results of factories and copies start at version 0, as PyTorch's (the internal fill of
    a freshly made tensor is not an in-place write anybody can observe)."""
    t = FRESH_RESULTS[name](ember, ember.ones(3))
    assert t._version == 0
    t.add_(1)
    assert t._version == 1
