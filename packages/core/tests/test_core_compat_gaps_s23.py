"""Core compatibility gaps with PyTorch (session 23): NumPy conversion of tensors that require
grad, the storage APIs (shrinking resize_, from_file, byteswap, tensor(storage)), recorded
in-place writes into multi-output views of tensors that require no grad and the wording of the
view/in-place errors, class-index target dtypes of nll_loss / cross_entropy and PyTorch's
native_group_norm signature, stable sort order, and the argument errors of the random in-place
methods written in Python."""

import math
import os
import warnings

import ember
import ember.nn.functional as F
import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the comparisons against PyTorch skip without it
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

NUMPY_GRAD = ("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
              "instead.")


def _error(fn):
    """(class name, message) of what fn raises, or None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e).__name__, str(e)
    return None


# ---- 1. NumPy conversion of a tensor that requires grad ----------------------------------------

@pytest.mark.parametrize("convert", [np.asarray, np.array, lambda t: np.asarray(t[1:]),
                                     lambda t: np.asarray(t, dtype=np.float64), np.exp,
                                     lambda t: np.add(t, 1.0)])
def test_numpy_of_tensor_requiring_grad_is_refused(convert):
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        convert(x)
    assert str(info.value) == NUMPY_GRAD
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_numpy_of_tensor_requiring_grad_allowed_where_torch_allows_it():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with ember.no_grad():  # grad mode off: PyTorch converts too
        assert np.asarray(x).tolist() == [1.0, 2.0, 3.0]
    assert np.asarray(x.detach()).tolist() == [1.0, 2.0, 3.0]
    assert x.numpy(force=True).tolist() == [1.0, 2.0, 3.0]
    # a plain tensor still converts through the buffer, sharing memory
    y = ember.tensor([1.0, 2.0])
    a = np.asarray(y)
    a[0] = 7.0
    assert y.tolist() == [7.0, 2.0]
    assert np.array(ember.arange(3)).tolist() == [0, 1, 2]


@needs_torch
def test_numpy_of_tensor_requiring_grad_matches_torch():
    for convert in (np.asarray, np.array):
        got = _error(lambda: convert(ember.ones(2, requires_grad=True)))
        want = _error(lambda: convert(torch.ones(2, requires_grad=True)))
        assert got == want == ("RuntimeError", NUMPY_GRAD)


# ---- 2. storages ---------------------------------------------------------------------------------

def test_untyped_storage_resize_shrinks():
    t = ember.tensor([1.0, 2.0, 3.0, 4.0])
    s = t.untyped_storage()
    s.resize_(8)
    assert s.nbytes() == 8 and t.untyped_storage().nbytes() == 8
    assert s.tolist() == [0, 0, 128, 63, 0, 0, 0, 64]  # 1.0 and 2.0, little-endian
    assert t.storage().size() == 2 and t.storage().tolist() == [1.0, 2.0]
    assert t.shape == (4,) and t[:2].tolist() == [1.0, 2.0]  # still readable, no crash
    s.resize_(0)
    assert s.nbytes() == 0 and s.tolist() == []
    s.resize_(16)  # grows again: new memory
    t.copy_(ember.tensor([5.0, 6.0, 7.0, 8.0]))
    assert t.tolist() == [5.0, 6.0, 7.0, 8.0]
    typed = ember.TypedStorage([1.0, 2.0, 3.0], dtype=ember.float64)
    typed.resize_(2)
    assert typed.tolist() == [1.0, 2.0] and typed.nbytes() == 16


def test_untyped_storage_resize_errors():
    s = ember.UntypedStorage(4)
    with pytest.raises(RuntimeError, match="nbytes must be >= 0, got -1"):
        s.resize_(-1)
    a = np.zeros(4, dtype=np.float32)
    with pytest.raises(RuntimeError, match="Trying to resize storage that is not resizable"):
        ember.from_numpy(a).untyped_storage().resize_(4)


@needs_torch
def test_untyped_storage_resize_matches_torch():
    for lib in (ember, torch):
        s = lib.tensor([1.0, 2.0, 3.0, 4.0]).untyped_storage()
        s.resize_(8)
        if lib is ember:
            got = (s.nbytes(), s.tolist())
        else:
            assert (s.nbytes(), s.tolist()) == got
    assert _error(lambda: torch.UntypedStorage(4).resize_(-1))[0] == \
        _error(lambda: ember.UntypedStorage(4).resize_(-1))[0] == "RuntimeError"


@pytest.fixture
def eight_floats(tmp_path):
    path = str(tmp_path / "f.bin")
    with open(path, "wb") as f:
        f.write(np.arange(8, dtype=np.float32).tobytes())
    return path


def test_untyped_storage_from_file_private(eight_floats):
    s = ember.UntypedStorage.from_file(eight_floats, False, 32)
    t = ember.empty(0).set_(s)
    assert s.nbytes() == 32 and t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert not s.resizable()
    t[0] = 100.0  # copy-on-write: the file keeps its bytes
    del s, t
    assert np.fromfile(eight_floats, dtype=np.float32).tolist()[0] == 0.0
    part = ember.UntypedStorage.from_file(filename=eight_floats, shared=False, nbytes=8)
    assert part.nbytes() == 8 and ember.empty(0).set_(part).tolist() == [0.0, 1.0]
    assert ember.UntypedStorage.from_file(eight_floats).nbytes() == 0


def test_untyped_storage_from_file_shared(tmp_path, eight_floats):
    s = ember.UntypedStorage.from_file(eight_floats, True, 32)
    s[0] = 9
    del s
    with open(eight_floats, "rb") as f:
        assert f.read(4) == b"\x09\x00\x00\x00"
    fresh = str(tmp_path / "new.bin")  # created, then grown to the mapping
    s = ember.UntypedStorage.from_file(fresh, True, 16)
    s[0] = 7
    del s
    assert os.path.getsize(fresh) == 16
    with open(fresh, "rb") as f:
        assert f.read() == b"\x07" + b"\x00" * 15


def test_untyped_storage_from_file_errors(tmp_path, eight_floats):
    with pytest.raises(RuntimeError, match=r"size <32> is smaller than the required mapping "
                                           r"size <64>"):
        ember.UntypedStorage.from_file(eight_floats, False, 64)
    with pytest.raises(RuntimeError, match="unable to open file .* in read-only mode"):
        ember.UntypedStorage.from_file(str(tmp_path / "missing"), False, 4)
    with pytest.raises(TypeError, match="argument 'filename' must be str, not bytes"):
        ember.UntypedStorage.from_file(eight_floats.encode(), False, 4)
    with pytest.raises(TypeError, match="argument 'nbytes' must be int, not str"):
        ember.UntypedStorage.from_file(eight_floats, False, "4")
    with pytest.raises(RuntimeError, match="size must be >= 0"):
        ember.UntypedStorage.from_file(eight_floats, False, -1)


def test_typed_storage_from_file(eight_floats):
    with pytest.raises(RuntimeError, match="from_file can only be called on derived classes"):
        ember.TypedStorage.from_file(eight_floats, False, 2)
    s = ember.TypedStorage.from_file(eight_floats, False, 3, dtype=ember.float32)
    assert s.dtype == ember.float32 and s.tolist() == [0.0, 1.0, 2.0]


@needs_torch
def test_from_file_matches_torch(eight_floats):
    for shared in (False, True):
        e = ember.UntypedStorage.from_file(eight_floats, shared, 16)
        t = torch.UntypedStorage.from_file(eight_floats, shared, 16)
        assert e.tolist() == t.tolist() and e.nbytes() == t.nbytes()
        assert e.resizable() == t.resizable()
        del e, t
    got = _error(lambda: ember.UntypedStorage.from_file(eight_floats, False, 64))
    want = _error(lambda: torch.UntypedStorage.from_file(eight_floats, False, 64))
    assert got[0] == want[0] == "RuntimeError"
    assert want[1] in got[1]
    got = _error(lambda: ember.TypedStorage.from_file(eight_floats, False, 2))
    want = _error(lambda: torch.TypedStorage.from_file(eight_floats, False, 2))
    assert got[0] == want[0] and got[1].startswith(want[1])


def test_storage_small_apis():
    s = ember.tensor([1.0, 2.5]).storage()
    f8 = s.float8_e4m3fn()
    assert f8.dtype == ember.float8_e4m3fn and f8.tolist() == [1.0, 2.5]
    u = ember.tensor([1, 2], dtype=ember.uint8).untyped_storage()
    assert u.float8_e5m2().tolist() == [1.0, 2.0]
    fresh = u.new()
    assert isinstance(fresh, ember.UntypedStorage) and fresh.nbytes() == 0
    assert fresh.device == u.device
    assert s.is_hpu is False and u.is_hpu is False
    s._resize_(1)  # PyTorch's FSDP frees storages through this name
    assert s.tolist() == [1.0]


def test_byteswap_values():
    s = ember.tensor([1, 2], dtype=ember.int32).untyped_storage()
    assert s.byteswap(ember.int32) is None
    assert s.tolist() == [0, 0, 0, 1, 0, 0, 0, 2]
    s = ember.tensor([1, 2], dtype=ember.int16).untyped_storage()
    s.byteswap(ember.complex64)  # 4-byte halves
    assert s.tolist() == [0, 2, 0, 1]
    c = ember.tensor([1 + 2j], dtype=ember.complex64)
    c.untyped_storage().byteswap(ember.complex64)
    assert c.untyped_storage().tolist() == [63, 128, 0, 0, 64, 0, 0, 0]
    b = ember.tensor([1, 2], dtype=ember.int32).untyped_storage()
    b.byteswap(ember.bool)  # 1-byte elements: unchanged
    assert b.tolist() == [1, 0, 0, 0, 2, 0, 0, 0]
    x = ember.tensor([1.5, -2.0], dtype=ember.float64)
    x.untyped_storage().byteswap(ember.float64)
    x.untyped_storage().byteswap(ember.float64)  # twice: back
    assert x.tolist() == [1.5, -2.0]
    with pytest.raises(RuntimeError, match="not a multiple of 2"):
        ember.tensor([1, 2, 3], dtype=ember.uint8).untyped_storage().byteswap(ember.int16)
    with pytest.raises(RuntimeError, match="expected an ember.dtype"):
        s.byteswap("int32")


@needs_torch
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int64", "int16",
                                  "complex64", "complex128", "uint8", "bool"])
def test_byteswap_matches_torch(name):
    data = list(range(1, 17))
    e = ember.tensor(data, dtype=ember.uint8).untyped_storage()
    t = torch.tensor(data, dtype=torch.uint8).untyped_storage()
    e.byteswap(getattr(ember, name))
    t.byteswap(getattr(torch, name))
    assert e.tolist() == t.tolist()


def test_tensor_of_untyped_storage_is_a_view():
    s = ember.tensor([1, 2], dtype=ember.int32).untyped_storage()
    t = ember.tensor(s)
    assert t.dtype == ember.int64 and t.tolist() == [8589934593]  # the 8 bytes as one int64
    f = ember.tensor(s, dtype=ember.int32)
    assert f.tolist() == [1, 2]
    f[0] = 5  # shares the storage, as PyTorch's
    assert s.tolist()[:4] == [5, 0, 0, 0]
    assert ember.as_tensor(s, dtype=ember.int32).data_ptr() == s.data_ptr()
    assert ember.tensor(ember.UntypedStorage(3)).shape == (0,)  # 3 bytes hold no int64
    g = ember.tensor(ember.tensor([1.0, 2.0]).untyped_storage(), dtype=ember.float32,
                     requires_grad=True)
    assert g.requires_grad and g.is_leaf and g.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="Expected a Storage of type Float or an "
                                           "UntypedStorage, but got Int"):
        ember.tensor(ember.tensor([1, 2], dtype=ember.int32).storage())
    assert ember.tensor(ember.tensor([1, 2], dtype=ember.int32).storage(),
                        dtype=ember.int32).tolist() == [1, 2]


@needs_torch
def test_tensor_of_storage_matches_torch():
    warnings.simplefilter("ignore")
    cases = [
        lambda L: L.tensor(L.tensor([1, 2], dtype=L.int32).untyped_storage()),
        lambda L: L.tensor(L.tensor([1, 2], dtype=L.int32).untyped_storage(), dtype=L.float32),
        lambda L: L.as_tensor(L.tensor([1.0, 2.0]).untyped_storage(), dtype=L.float32),
        lambda L: L.tensor(L.UntypedStorage([1, 2, 3]), dtype=L.int16),
        lambda L: L.tensor(L.tensor([1.0, 2.0]).storage()),
    ]
    for case in cases:
        e, t = case(ember), case(torch)
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert e.shape == t.shape
        if e.numel():
            assert e.tolist() == t.tolist()
    got = _error(lambda: ember.tensor(ember.tensor([1, 2], dtype=ember.int32).storage()))
    want = _error(lambda: torch.tensor(torch.tensor([1, 2], dtype=torch.int32).storage()))
    assert got == want


# ---- 3. in-place writes into views: multi-output views, messages ---------------------------------

MULTI = ("A view was created in no_grad mode and is being modified inplace with grad mode "
         "enabled. This view is the output of a function that returns multiple views. Such "
         "functions do not allow the output views to be modified inplace. You should replace "
         "the inplace operation by an out-of-place one.")

MULTI_CASES = [
    lambda L, x, w: x.split(2)[0].mul_(w),
    lambda L, x, w: x.split(2)[1].add_(w),
    lambda L, x, w: x.chunk(2)[0].copy_(w.expand(2)),
    lambda L, x, w: x.view(2, 2).unbind()[1].mul_(w),
    lambda L, x, w: x.split_with_sizes([1, 3])[1].mul_(w),
    lambda L, x, w: x.split([3, 1])[0].mul_(w),
    lambda L, x, w: L.split(x, 2)[0].mul_(w),
    lambda L, x, w: x.split(2)[0].view(2).mul_(w),  # a view of an output inherits the rule
    lambda L, x, w: x.split(2)[0][0:1].mul_(w),
]


@pytest.mark.parametrize("case", MULTI_CASES)
def test_multi_output_view_of_base_without_grad_refuses_recorded_write(case):
    x = ember.arange(4.0, dtype=ember.float64)
    w = ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as info:
        case(ember, x, w)
    assert str(info.value) == MULTI
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and x.grad_fn is None


def test_multi_output_view_setitem_with_grad_value_refused():
    x = ember.arange(4.0)
    a = x.split(2)[0]
    with pytest.raises(RuntimeError) as info:
        a[0] = ember.tensor(5.0, requires_grad=True)
    assert str(info.value) == MULTI
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_multi_output_view_of_base_without_grad_allowed_cases():
    w = ember.tensor(2.0, requires_grad=True)
    x = ember.arange(4.0)
    a, b = x.split(2)
    a.mul_(3)  # nothing records: allowed
    with ember.no_grad():
        b.mul_(w)  # no grad mode: allowed
    assert x.tolist() == [0.0, 3.0, 4.0, 6.0]
    y = ember.arange(4.0)
    y.tensor_split(2)[0].mul_(w)  # single views in PyTorch: recorded into y
    assert y.tolist() == [0.0, 2.0, 2.0, 3.0] and y.grad_fn.name() == "CopySlices"
    y.sum().backward()
    assert w.grad.item() == 1.0  # d/dw (0*w + 1*w) = 1
    z = ember.arange(4.0)
    c = z.split(2)[0]
    assert c.is_leaf and not c.requires_grad and c.grad_fn is None
    c.requires_grad_()  # still a leaf, as PyTorch's
    assert c.requires_grad


@needs_torch
@pytest.mark.parametrize("case", MULTI_CASES)
def test_multi_output_view_of_base_without_grad_matches_torch(case):
    def run(L):
        return _error(lambda: case(L, L.arange(4.0), L.tensor(2.0, requires_grad=True)))

    assert run(ember) == run(torch)


VIEW_ERRORS = [
    # leaf, view of a leaf, view made in no_grad, multi-output with history, inference tensor,
    # detach_ of a view
    lambda L: L.ones(2, requires_grad=True).mul_(2),
    lambda L: L.ones(2, requires_grad=True)[0].mul_(2),
    lambda L: _no_grad_view(L).mul_(2),
    lambda L: (L.ones(4, requires_grad=True) * 1).split(2)[1].add_(1),
    lambda L: (L.ones(4, requires_grad=True) * 1).unbind()[2].add_(1),
    lambda L: _inference_tensor(L).add_(1),
    lambda L: (L.ones(4, requires_grad=True) * 1)[0].detach_(),
]


def _custom_view(L, same):
    class Id(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x if same else x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    return Id.apply(L.ones(2, requires_grad=True) * 1)


CUSTOM_VIEW = ("Output 0 of Id is a view and is being modified inplace. This view was created "
               "inside a custom Function (or because an input was returned as-is) and the autograd "
               "logic to handle view+inplace would override the custom backward associated with "
               "the custom Function, leading to incorrect gradients. This behavior is forbidden. "
               "You can fix this by cloning the output of the custom Function.")


@pytest.mark.parametrize("same", [False, True])
def test_custom_function_view_inplace_message(same):
    out = _custom_view(ember, same)
    assert _error(lambda: out.mul_(2)) == ("RuntimeError", CUSTOM_VIEW)
    with ember.no_grad():
        out.mul_(2)  # not recorded: allowed
    assert out.tolist() == [2.0, 2.0]
    if torch is not None:
        assert _error(lambda: _custom_view(torch, same).mul_(2)) == ("RuntimeError", CUSTOM_VIEW)


def _no_grad_view(L):
    x = L.ones(4, requires_grad=True) * 1
    with L.no_grad():
        return x[:2]


def _inference_tensor(L):
    with L.inference_mode():
        return L.ones(2)


def test_view_inplace_messages_are_pytorch_wording():
    assert _error(lambda: VIEW_ERRORS[0](ember)) == (
        "RuntimeError", "a leaf Variable that requires grad is being used in an in-place "
        "operation.")
    assert _error(lambda: VIEW_ERRORS[1](ember)) == (
        "RuntimeError", "a view of a leaf Variable that requires grad is being used in an "
        "in-place operation.")
    assert _error(lambda: VIEW_ERRORS[2](ember))[1].startswith(
        "A view was created in no_grad mode and is being modified inplace with grad mode "
        "enabled. Given that this use case is ambiguous and error-prone, it is forbidden.")
    assert _error(lambda: VIEW_ERRORS[4](ember))[1].startswith(
        "Output 2 of Unbind is a view and is being modified inplace.")
    assert _error(lambda: VIEW_ERRORS[5](ember))[1].startswith(
        "Inplace update to inference tensor outside InferenceMode is not allowed.")
    assert _error(lambda: VIEW_ERRORS[6](ember))[1].startswith(
        "Can't detach views in-place. Use detach() instead.")


@needs_torch
@pytest.mark.parametrize("case", VIEW_ERRORS)
def test_view_inplace_messages_match_torch(case):
    assert _error(lambda: case(ember)) == _error(lambda: case(torch))


# ---- 4. class-index targets, native norms ---------------------------------------------------------

LOGITS = [[0.1, 0.5, -0.3, 0.9], [1.0, 2.0, 0.0, -1.0], [0.3, 0.3, 0.2, 0.1]]


@pytest.mark.parametrize("name, torch_name", [("int32", "Int"), ("int16", "Short"),
                                              ("int8", "Char"), ("bool", "Bool"),
                                              ("uint16", "UInt16")])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_class_target_dtypes_refused_as_torch(name, torch_name, loss):
    x = ember.tensor(LOGITS)
    target = ember.tensor([1, 0, 0], dtype=getattr(ember, name))
    with pytest.raises(RuntimeError) as info:
        getattr(F, loss)(x, target)
    assert str(info.value) == f"expected target dtype to be Long or Byte, but got {torch_name}"
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
        getattr(F, loss)(x.view(1, 3, 4).transpose(1, 2), target.view(1, 3), label_smoothing=0.1) \
            if loss == "cross_entropy" else F.nll_loss(x.view(1, 3, 4).transpose(1, 2),
                                                       target.view(1, 3))


def test_class_target_uint8():
    x = ember.tensor(LOGITS, dtype=ember.float64)
    t8 = ember.tensor([1, 3, 0], dtype=ember.uint8)
    t64 = t8.long()
    # (N, C) input: uint8 targets are taken, with the int64 result
    assert F.nll_loss(x, t8).item() == F.nll_loss(x, t64).item() == pytest.approx(
        -(0.5 - 1.0 + 0.3) / 3)
    assert F.cross_entropy(x, t8, label_smoothing=0.2).item() == \
        F.cross_entropy(x, t64, label_smoothing=0.2).item()
    # (N, C, d) input: int64 only
    with pytest.raises(RuntimeError, match="^expected scalar type Long but found Byte$"):
        F.nll_loss(x.view(1, 3, 4).transpose(1, 2), t8.view(1, 3))
    with pytest.raises(RuntimeError, match="^expected target dtype to be Long or Byte, but got "
                                           "Float$"):
        F.nll_loss(x, t8.float())


@needs_torch
@pytest.mark.parametrize("name", ["int64", "int32", "int16", "int8", "uint8", "bool"])
@pytest.mark.parametrize("shape", ["2d", "3d"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_class_target_dtypes_match_torch(name, shape, loss):
    def run(L, fn):
        x = L.tensor(LOGITS, dtype=L.float64)
        t = L.tensor([1, 0, 0], dtype=getattr(L, name))
        if shape == "3d":
            x, t = x.view(1, 3, 4).transpose(1, 2), t.view(1, 3)
        try:
            return getattr(fn, loss)(x, t).item()
        except RuntimeError as e:
            return str(e)

    got, want = run(ember, F), run(torch, TF)
    assert got == pytest.approx(want) if isinstance(want, float) else got == want


def test_native_group_norm_torch_signature():
    x = ember.arange(24.0, dtype=ember.float64).reshape(2, 4, 3).sin()
    w = ember.tensor([1.0, 2.0, 0.5, -1.0], dtype=ember.float64)
    b = ember.tensor([0.0, 1.0, 0.0, 2.0], dtype=ember.float64)
    out, mean, rstd = ember.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)
    ref = ember.native_group_norm(x, 2, w, b, 1e-5)  # ember's short form, unchanged
    assert out.tolist() == ref[0].tolist() and mean.tolist() == ref[1].tolist()
    assert mean.shape == rstd.shape == (2, 2)
    g = x[0, :2].reshape(-1)
    assert mean[0, 0].item() == pytest.approx(g.mean().item())
    assert rstd[0, 0].item() == pytest.approx(1 / math.sqrt(g.var(unbiased=False).item() + 1e-5))
    # N and C are PyTorch's view of the input: (2, 4, 3) as N=1, C=8
    o2, m2, _ = ember.native_group_norm(x, None, None, 1, 8, 3, 2, 1e-5)
    assert o2.shape == (2, 4, 3) and m2.shape == (1, 2)
    with pytest.raises(RuntimeError, match="N \\* C \\* HxW"):
        ember.native_group_norm(x, None, None, 3, 4, 3, 2, 1e-5)
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor, not float"):
        ember.native_group_norm(x, 2.5, None, 2, 4, 3, 2, 1e-5)
    # differentiable through the reshape
    xg = x.clone().requires_grad_()
    wg = w.clone().requires_grad_()
    assert ember.autograd.gradcheck(
        lambda a, c: ember.native_group_norm(a, c, None, 2, 4, 3, 2, 1e-5)[0], (xg, wg))


@needs_torch
def test_native_group_norm_matches_torch():
    xs = np.sin(np.arange(48.0)).reshape(2, 4, 3, 2)
    ws = np.linspace(-1, 1, 4)
    e = ember.native_group_norm(ember.tensor(xs), ember.tensor(ws), None, 2, 4, 6, 2, 1e-5)
    t = torch.native_group_norm(torch.tensor(xs), torch.tensor(ws), None, 2, 4, 6, 2, 1e-5)
    for a, b in zip(e, t):
        assert a.shape == tuple(b.shape)
        assert np.allclose(a.numpy(), b.numpy(), atol=1e-12)


NATIVE_NORMS = {
    "layer": lambda L, x, w: L.native_layer_norm(x, [3], w, w, 1e-5),
    "batch": lambda L, x, w: L.native_batch_norm(x, w, w, None, None, True, 0.1, 1e-5),
    "batch_eval": lambda L, x, w: L.native_batch_norm(x, w, w, w.clone(), w.abs() + 1, False,
                                                      0.1, 1e-5),
    "group": lambda L, x, w: L.native_group_norm(x.view(2, 3, 1), w, w, 2, 3, 1, 1, 1e-5),
}


@pytest.mark.parametrize("norm", sorted(NATIVE_NORMS))
@pytest.mark.parametrize("xd, wd", [("float64", "float32"), ("float32", "float64"),
                                    ("float32", "float16")])
def test_native_norms_refuse_mixed_parameter_dtypes(norm, xd, wd):
    x = ember.ones(2, 3, dtype=getattr(ember, xd))
    w = ember.ones(3, dtype=getattr(ember, wd))
    with pytest.raises(RuntimeError, match=f"expected weight to have the input's dtype {xd}, "
                                           f"but got {wd}"):
        NATIVE_NORMS[norm](ember, x, w)
    if torch is not None:
        with pytest.raises(RuntimeError, match="mixed dtype"):
            NATIVE_NORMS[norm](torch, torch.ones(2, 3, dtype=getattr(torch, xd)),
                               torch.ones(3, dtype=getattr(torch, wd)))


@pytest.mark.parametrize("norm", ["layer", "batch"])
def test_native_norms_take_float_parameters_of_half_input(norm):
    x = ember.tensor([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]], dtype=ember.bfloat16)
    out, mean, rstd = NATIVE_NORMS[norm](ember, x, ember.ones(3))
    assert out.dtype == ember.bfloat16 and mean.dtype == rstd.dtype == ember.float32
    if norm == "layer":
        assert mean.view(-1).tolist() == pytest.approx([7 / 3, 2 / 3], rel=1e-2)


# ---- 5. sort order ------------------------------------------------------------------------------

def test_stable_sort_order_with_ties_nan_and_signed_zero():
    nan = float("nan")
    x = ember.tensor([3.0, 1.0, 3.0, 2.0, 1.0, 3.0, nan, 1.0, 2.0, nan, -0.0, 0.0])
    v, i = ember.sort(x, stable=True)
    assert i.tolist() == [10, 11, 1, 4, 7, 3, 8, 0, 2, 5, 6, 9]  # NaN last, ties in order
    v, i = ember.sort(x, stable=True, descending=True)
    assert i.tolist() == [6, 9, 0, 2, 5, 3, 8, 1, 4, 7, 10, 11]  # NaN first, ties in order
    assert ember.argsort(x, stable=True).tolist() == [10, 11, 1, 4, 7, 3, 8, 0, 2, 5, 6, 9]
    m = ember.tensor([[2, 1, 2], [1, 1, 0]])
    assert ember.sort(m, dim=0, stable=True)[1].tolist() == [[1, 0, 1], [0, 1, 0]]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "bool"])
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_matches_torch(dtype, descending):
    rng = np.random.default_rng(5)
    for shape, dim in [((300,), 0), ((4, 70), 1), ((70, 3), 0)]:
        a = rng.integers(0, 4, size=shape).astype(np.float64)
        if dtype.startswith("float"):
            a[rng.random(shape) < 0.1] = np.nan
            a[rng.random(shape) < 0.1] = -0.0
        e = ember.sort(ember.tensor(a).to(getattr(ember, dtype)), dim=dim, stable=True,
                       descending=descending)
        t = torch.sort(torch.tensor(a).to(getattr(torch, dtype)), dim=dim, stable=True,
                       descending=descending)
        assert e[1].tolist() == t[1].tolist()


@needs_torch
def test_topk_and_kthvalue_values_match_torch():
    # tie order of the indices is not specified by PyTorch: the values are
    nan = float("nan")
    data = [3.0, 1.0, 3.0, 2.0, 1.0, 3.0, nan, 1.0, 2.0, nan, 0.5, 0.0]
    e, t = ember.tensor(data), torch.tensor(data)
    for k in (1, 3, 5):
        for largest in (True, False):
            ev, ei = e.topk(k, largest=largest)
            tv, _ = t.topk(k, largest=largest)
            assert str(ev.tolist()) == str(tv.tolist())
            assert str(e[ei].tolist()) == str(ev.tolist())
        assert str(e.kthvalue(k)[0].item()) == str(t.kthvalue(k)[0].item())


# ---- 6. argument errors of the random in-place methods --------------------------------------------

ARG_ERRORS = [
    ("x.uniform_(1, 2, 3)", "uniform_() takes from 0 to 2 positional arguments but 3 were given"),
    ("x.uniform_(1, 2, bogus=1)", "uniform_() got an unexpected keyword argument 'bogus'"),
    ("x.uniform_('a')", "uniform_(): argument 'from' (position 1) must be float, not str"),
    ("x.uniform_(None)", "uniform_(): argument 'from' (position 1) must be float, not NoneType"),
    ("x.uniform_(0, to='b')", "uniform_(): argument 'to' must be float, not str"),
    ("x.normal_(mean=0., bogus=1)", "normal_() got an unexpected keyword argument 'bogus'"),
    ("x.normal_(0, 1, 2)", "normal_() takes from 0 to 2 positional arguments but 3 were given"),
    ("x.normal_('a')", "normal_(): argument 'mean' (position 1) must be float, not str"),
    ("x.normal_(mean=x)", "normal_(): argument 'mean' must be float, not Tensor"),
    ("x.geometric_(p=0.5, bogus=1)", "geometric_() got an unexpected keyword argument 'bogus'"),
    ("x.geometric_('a')", "geometric_(): argument 'p' (position 1) must be float, not str"),
    ("x.cauchy_(median=0, sigma=1, bogus=2)",
     "cauchy_() got an unexpected keyword argument 'bogus'"),
    ("x.cauchy_('a')", "cauchy_(): argument 'median' (position 1) must be float, not str"),
    ("x.log_normal_(bogus=1)", "log_normal_() got an unexpected keyword argument 'bogus'"),
    ("x.log_normal_('a')", "log_normal_(): argument 'mean' (position 1) must be float, not str"),
    ("x.log_normal_(1, 2, 3)",
     "log_normal_() takes from 0 to 2 positional arguments but 3 were given"),
]


@pytest.mark.parametrize("expr, message", ARG_ERRORS)
def test_random_method_argument_errors(expr, message):
    x = ember.rand(3)  # noqa: F841 - used by expr
    with pytest.raises(TypeError) as info:
        eval(expr)
    assert str(info.value) == message


def test_random_method_argument_errors_generator():
    x = ember.rand(3)
    with pytest.raises(TypeError, match=r"^uniform_\(\): argument 'generator' must be "
                                        r"ember.Generator, not int$"):
        x.uniform_(0, 1, generator=1)
    with pytest.raises(TypeError, match="^geometric_\\(\\) missing 1 required positional "
                                        "argument: 'p'$"):
        x.geometric_()


def test_random_methods_still_work_and_check_values():
    g = ember.Generator().manual_seed(0)
    x = ember.empty(1000)
    x.uniform_(2, 3, generator=g)
    assert 2.0 <= x.min().item() and x.max().item() < 3.0
    x.uniform_(**{"from": -1, "to": 0})  # PyTorch's keyword name
    assert -1.0 <= x.min().item() and x.max().item() < 0.0
    x.normal_(5.0, 0.5)
    assert abs(x.mean().item() - 5.0) < 0.1
    assert (x.log_normal_(0.0, 0.25) > 0).all()
    assert (x.geometric_(0.5) >= 1).all()
    with pytest.raises(RuntimeError, match="normal_: expects std >= 0.0, but found std -1"):
        x.normal_(0, -1)
    with pytest.raises(RuntimeError, match="geometric_ expects p to be in \\(0, 1\\)"):
        x.geometric_(1.5)
    # integer tensors: the classes PyTorch raises
    i = ember.zeros(3, dtype=ember.int32)
    with pytest.raises(NotImplementedError, match="log_normal_: not implemented for dtype"):
        i.log_normal_()
    with pytest.raises(RuntimeError, match="cauchy_: Cauchy distribution is a continuous"):
        i.cauchy_()


@needs_torch
@pytest.mark.parametrize("expr, message", ARG_ERRORS)
def test_random_method_argument_errors_match_torch(expr, message):
    got = _error(lambda: eval(expr, {"x": ember.rand(3)}))
    want = _error(lambda: eval(expr, {"x": torch.rand(3)}))
    assert got == want == ("TypeError", message)
