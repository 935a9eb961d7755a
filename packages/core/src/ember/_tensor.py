"""Tensor methods written in Python: conversions and protocols that are not hot paths."""

from __future__ import annotations

import copy
import copyreg
import warnings
from typing import Any

from ember import _C
from ember._C import Tensor

_NO_NUMPY_DTYPES = (_C.float8_e4m3fn, _C.float8_e5m2)


def _numpy(self: Tensor, *, force: bool = False) -> Any:
    """A NumPy array sharing memory with this tensor.

    As in PyTorch, a tensor that requires grad (while grad mode is on) must be detached first,
    so the array cannot silently escape autograd; ``force=True`` detaches (and copies to the CPU)
    itself.

    >>> import ember
    >>> ember.ones(2).numpy()
    array([1., 1.], dtype=float32)
    >>> ember.ones(2, requires_grad=True).numpy(force=True)
    array([1., 1.], dtype=float32)
    """
    import numpy as np

    if force:
        self = self.detach().cpu()
    elif self.requires_grad and _C.is_grad_enabled():
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
            "instead."
        )
    if self.device.type != "cpu":
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."
        )
    if self.dtype is _C.bfloat16 or self.dtype in _NO_NUMPY_DTYPES:
        name = repr(self.dtype).split(".")[-1]
        raise TypeError(
            f"can't convert a {name} tensor to NumPy (NumPy has no {name}); convert it "
            "first, e.g. .float()"
        )
    # Through a memoryview: np.asarray(self) would call __array__ again if the buffer failed.
    return np.asarray(memoryview(self))


def _array(self: Tensor, dtype: Any = None, copy: Any = None) -> Any:
    a = _numpy(self)
    return a if dtype is None else a.astype(dtype, copy=False)


def _iter(self: Tensor):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


_warned_complex_cast = False


def _warn_complex_to_real(self: Tensor, dtype: Any) -> None:
    """PyTorch's one-time warning when a cast drops imaginary parts."""
    global _warned_complex_cast
    if _warned_complex_cast or dtype is None or dtype.is_complex or not self.dtype.is_complex:
        return
    _warned_complex_cast = True
    warnings.warn("Casting complex values to real discards the imaginary part", UserWarning,
                  stacklevel=3)


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``.

    A change of device copies (through the backends' copy hooks; ``non_blocking=True`` lets the
    copy run asynchronously where the device supports it) and is differentiable: the gradient
    goes back to the original device.

    >>> import ember
    >>> ember.ones(2).to(ember.int64).dtype
    ember.int64
    >>> ember.ones(2).to("meta").device
    device(type='meta')
    """
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if a is None:  # to(None) / to(None, dtype): no device given, as torch
            continue
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, bool):  # before int: True is an int too
            non_blocking = a
        elif isinstance(a, (str, _C.device, int)):
            dev = a
        elif isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
    if dtype is not None and not isinstance(dtype, _C.dtype):
        raise TypeError(f"to(): dtype must be an ember.dtype (such as ember.float32), got "
                        f"{type(dtype).__name__} {dtype!r}")
    if dev is not None and (isinstance(dev, bool)
                            or not isinstance(dev, (str, _C.device, int))):
        raise TypeError(f"to(): device must be an ember.device, a string or an int, got "
                        f"{type(dev).__name__} {dev!r}")
    _warn_complex_to_real(self, dtype)
    if dev is not None:
        dev, cur = _device(dev), self.device
        if dev.type != cur.type or (dev.index is not None and dev.index != cur.index):
            return _C._to_copy(self, dtype=dtype, device=dev, non_blocking=non_blocking)
    if dtype is None:
        return self.clone() if copy else self
    return self._to_dtype(dtype, copy)


def _device(dev: Any) -> Any:
    """An ember.device from a device, a string or a CUDA index."""
    if isinstance(dev, _C.device):
        return dev
    if isinstance(dev, int):
        return _C.device("cuda", dev)
    return _C.device(dev)


def _cpu(self: Tensor) -> Tensor:
    """self on the CPU (self itself when it is already there).

    >>> import ember
    >>> ember.ones(2).cpu().device
    device(type='cpu')
    """
    return self if self.device.type == "cpu" else self.to("cpu")


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False) -> Tensor:
    """self on a CUDA device (the current one by default)."""
    dev = _C.device("cuda") if device is None else _device(device)
    return self.to(dev, non_blocking=non_blocking)


def _make_cast(dt: Any):
    def cast(self: Tensor) -> Tensor:
        _warn_complex_to_real(self, dt)
        return self._to_dtype(dt)

    cast.__doc__ = f"self converted to {dt!r}."
    return cast


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as(): argument 'other' must be a Tensor, not "
                        f"{type(other).__name__}")
    return self._to_dtype(other.dtype)


def _new_tensor(self: Tensor, data: Any, dtype: Any = None, device: Any = None,
                requires_grad: bool = False) -> Tensor:
    # ember.tensor, not the raw binding: it walks any sequence (range, deque) as torch does;
    # self's dtype and device unless given
    from ember._legacy import tensor

    return tensor(data, dtype=dtype or self.dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)


def _repr(self: Tensor) -> str:
    from ember._printing import tensor_repr

    return tensor_repr(self)


def _check_one_element(t: Tensor) -> None:
    """int() / float() / complex() of a tensor: torch raises ValueError for any element count but
    one (``item()`` itself raises RuntimeError), and programs catch it as such."""
    if t.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars "
                         f"(got a tensor of shape {tuple(t.shape)})")


_c_float = Tensor.__float__
_c_int = Tensor.__int__


def _float(self: Tensor) -> float:
    _check_one_element(self)
    return _c_float(self)


def _int(self: Tensor) -> int:
    _check_one_element(self)
    if self.is_floating_point():
        # Python's float -> int: NaN raises ValueError and inf OverflowError (as in PyTorch);
        # the C++ conversion gave INT64_MIN for both, and clamped large values
        return int(_c_float(self))
    return _c_int(self)


def _array_wrap(self: Tensor, array: Any, context: Any = None, return_scalar: bool = False) -> Tensor:
    """NumPy hands a ufunc's result back through this: ``np.exp(t)`` and ``t * ndarray`` (the
    tensor's ``__mul__`` declines the array, NumPy's reflected operator computes) give a tensor,
    as in PyTorch, which also turns boolean results into uint8."""
    # NumPy read the tensors through the buffer protocol, which cannot refuse one that records
    # gradients; PyTorch's __array__ (numpy()) refuses it, so the result must not pass silently
    if context is not None and _C.is_grad_enabled():
        if any(isinstance(a, Tensor) and a.requires_grad for a in context[1]):
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
    if array.dtype == bool:
        array = array.astype("uint8")
    return _C.from_numpy(array)


_c_eq = Tensor.__eq__


def _eq(self: Tensor, other: Any) -> Any:
    # PyTorch converts an ndarray operand of == to a tensor; without it Python fell back to
    # identity and `t == array` was a silent False
    if type(other).__name__ == "ndarray" and type(other).__module__ == "numpy":
        other = _C.from_numpy(other)
    return _c_eq(self, other)


Tensor.numpy = _numpy
Tensor.__array_wrap__ = _array_wrap
Tensor.__eq__ = _eq
Tensor.__float__ = _float
Tensor.__int__ = _int
Tensor.__array__ = _array
Tensor.__iter__ = _iter
Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.to = _to
Tensor.type_as = _type_as
Tensor.new_tensor = _new_tensor
Tensor.cpu = _cpu
Tensor.cuda = _cuda
for _name, _dt in [
    ("float", _C.float32), ("double", _C.float64), ("half", _C.float16), ("bfloat16", _C.bfloat16),
    ("long", _C.int64), ("int", _C.int32), ("short", _C.int16), ("char", _C.int8),
    ("byte", _C.uint8), ("bool", _C.bool), ("cfloat", _C.complex64), ("cdouble", _C.complex128),
]:
    setattr(Tensor, _name, _make_cast(_dt))
Tensor.__array_priority__ = 1000  # NumPy defers binary operators to ember


# ---- pickling and deep copies of Tensor subclasses -----------------------------------------------
# A subclass instance, or a plain tensor with attributes, pickles as its plain tensor plus its
# type and Python state (its __dict__ and __slots__), rebuilt by _rebuild_from_type_v2 (PyTorch's name, so the reduction reads the
# same); deepcopy follows PyTorch's rules for subclasses. Plain tensors keep their own paths.
_reduce_ex_binding = Tensor.__reduce_ex__  # by value (ember.multiprocessing_reductions)


def _get_obj_state(obj: Any) -> Any:
    """The Python state of an object: its __dict__, or (__dict__, {slot: value}) with slots."""
    getstate = getattr(obj, "__getstate__", None)
    if getstate is not None:
        return getstate()
    slots = {n: getattr(obj, n) for n in copyreg._slotnames(type(obj)) if hasattr(obj, n)}
    d = getattr(obj, "__dict__", None)
    return (d, slots) if slots else d


def _set_obj_state(obj: Any, state: Any) -> Any:
    """Sets the state _get_obj_state returned on obj; returns obj."""
    slots = None
    if isinstance(state, tuple):
        if len(state) != 2:
            raise RuntimeError(f"Invalid serialized state: {state}")
        state, slots = state
    for part in (state, slots):
        for k, v in (part or {}).items():
            setattr(obj, k, v)
    return obj


def _rebuild_from_type_v2(func: Any, new_type: type, args: tuple, state: Any) -> Tensor:
    """Unpickles a Tensor subclass instance: func(*args) as new_type, with its state set."""
    ret = func(*args)
    if type(ret) is not new_type:
        ret = ret.as_subclass(new_type)
    return _set_state(ret, state)


def _set_state(t: Tensor, state: Any) -> Tensor:
    """Gives t the Python state _get_obj_state returned: through its class's __setstate__ when
    it defines one, else attribute by attribute."""
    if getattr(type(t), "__setstate__", None) is not None:
        t.__setstate__(state)
        return t
    return _set_obj_state(t, state)


def _reduce_ex(self: Tensor, proto: int) -> Any:
    # a plain tensor without attributes (t.name = value) takes the short path
    state = _get_obj_state(self)
    if type(self) is Tensor and not state:
        return _reduce_ex_binding(self, proto)
    if _C._has_torch_function_unary(self):
        from ember.overrides import handle_torch_function

        return handle_torch_function(Tensor.__reduce_ex__, (self,), self, proto)
    func, args = _reduce_ex_binding(self, proto)
    return (_rebuild_from_type_v2, (func, type(self), args, state))


_NOT_LEAF = ("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
             "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
             "because of a torch.nn.utils.weight_norm usage, see "
             "https://github.com/pytorch/pytorch/pull/103001")
_NOT_SAME_TYPE = (
    "The default implementation of __deepcopy__() for {kind} subclasses only works for subclass "
    "types that implement {fn}() and for which {what} returns another instance of the same "
    "subclass. You should either properly implement {fn}() for your subclass or override "
    "__deepcopy__() if it is intended behavior for {fn}() to return an instance of a different "
    "type.")


def _copy_over_storage(t: Tensor, memo: dict) -> Tensor:
    """A tensor with t's geometry over a deep copy of t's storage: the storage is copied once per
    deepcopy (memo), so views of one tensor copied together stay views of one new storage."""
    if t.device.type == "meta":
        return _C.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    storage = copy.deepcopy(t.untyped_storage(), memo)
    return _C.empty(0, dtype=t.dtype, device=t.device).set_(storage, t.storage_offset(), t.shape,
                                                           t.stride())


def _deepcopy(self: Tensor, memo: dict) -> Tensor:
    """``copy.deepcopy``: as in PyTorch, graph leaves only. A plain tensor copies its values and
    its ``grad``; a subclass instance gets its new tensor from ``new_empty()`` (``clone()`` for
    a wrapper subclass without data), which must be of its own type, then a copy of the data,
    of ``requires_grad`` and ``grad``, and a deep copy of its ``__dict__`` and ``__slots__``."""
    if type(self) is Tensor:
        if not self.is_leaf:
            raise RuntimeError(_NOT_LEAF)
        memo[id(self)] = new = _copy_over_storage(self, memo)
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:  # as in PyTorch, the copy's grad is a copy (memo-shared)
            new.grad = copy.deepcopy(self.grad, memo)
        if self.__dict__:
            new.__dict__ = copy.deepcopy(self.__dict__, memo)
        return new
    if _C._has_torch_function_unary(self):
        from ember.overrides import handle_torch_function

        return handle_torch_function(Tensor.__deepcopy__, (self,), self, memo)
    if not self.is_leaf:
        raise RuntimeError(_NOT_LEAF)
    if id(self) in memo:
        return memo[id(self)]
    from ember.autograd.grad_mode import no_grad

    with no_grad():
        if self.data_ptr() == 0:  # a wrapper subclass (metadata only)
            new = self.clone()
            if type(new) is not type(self):
                raise RuntimeError(_NOT_SAME_TYPE.format(kind="wrapper", fn="clone",
                                                         what="cloning"))
        else:
            new = self.new_empty([])
            if type(new) is not type(self):
                raise RuntimeError(_NOT_SAME_TYPE.format(kind="non-wrapper", fn="new_empty",
                                                         what="that function"))
            with _C.DisableTorchFunctionSubclass():
                storage = copy.deepcopy(Tensor.untyped_storage(self), memo)
                new.set_(storage, Tensor.storage_offset(self), Tensor.size(self),
                         Tensor.stride(self))
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        for slot in copyreg._slotnames(type(self)):
            if hasattr(self, slot):
                setattr(new, slot, copy.deepcopy(getattr(self, slot), memo))
        new.__dict__ = copy.deepcopy(self.__dict__, memo)
    memo[id(self)] = new
    return new


Tensor.__reduce_ex__ = _reduce_ex
Tensor.__deepcopy__ = _deepcopy


# ---- views and shape ops: Python-level properties and varargs wrappers (owner: views) --------
# Tensor.T/mT/H/mH are properties in PyTorch; the functions below accept tensors as separate
# arguments (broadcast_tensors(a, b)) as well as one list, which the generated bindings cannot.
def _T(self: Tensor) -> Tensor:
    """self with all dims reversed (the transpose of a matrix)."""
    if self.ndim == 0:
        import warnings

        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                      "these cases.", UserWarning, stacklevel=2)
        return self.permute(())
    if self.ndim != 2:
        import warnings

        warnings.warn(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` "
            "to reverse the dimensions of a tensor.",
            UserWarning,
            stacklevel=2,
        )
    return self.permute(tuple(range(self.ndim - 1, -1, -1)))


def _mT(self: Tensor) -> Tensor:
    """self with its last two dims swapped (a batch of transposed matrices)."""
    if self.ndim < 2:
        raise RuntimeError(
            f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor."
        )
    return self.transpose(-2, -1)


def _H(self: Tensor) -> Tensor:
    """Conjugate transpose of a matrix (the transpose for real dtypes)."""
    if self.ndim not in (0, 2):
        raise RuntimeError(
            f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor."
        )
    return self.permute(tuple(range(self.ndim - 1, -1, -1))).conj()


def _mH(self: Tensor) -> Tensor:
    """Conjugate transpose of a batch of matrices (the transpose for real dtypes)."""
    if self.ndim < 2:
        raise RuntimeError(
            f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor."
        )
    return self.transpose(-2, -1).conj()


Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.H = property(_H)
Tensor.mH = property(_mH)


def _tensor_args(name: str, tensors: tuple[Any, ...]) -> tuple[list[Tensor], bool]:
    """(the tensors, whether they came as one list) for f(a, b, ...) and f([a, b, ...])."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0]), True
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): expected Tensor as element {i}, but got {type(t).__name__}")
    return list(tensors), False


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Views of the tensors broadcast to their common shape.

    >>> import ember
    >>> [t.shape for t in ember.broadcast_tensors(ember.zeros(2, 1), ember.zeros(3))]
    [ember.Size([2, 3]), ember.Size([2, 3])]
    """
    ts, _ = _tensor_args("broadcast_tensors", tensors)
    return _C.broadcast_tensors(ts)


def broadcast_shapes(*shapes: Any) -> Any:
    """The shape the given shapes broadcast to (without allocating tensors).

    >>> import ember
    >>> ember.broadcast_shapes((2, 1), (3,))
    ember.Size([2, 3])
    """
    from ember._size import Size

    result: list[int] = []
    for s in shapes:
        s = (s,) if isinstance(s, int) else tuple(s)
        for v in s:
            if not isinstance(v, int):
                raise RuntimeError(f"broadcast_shapes: invalid shape {s}")
            if v < 0:  # PyTorch's ValueError
                raise ValueError(f"broadcast_shapes: invalid shape {s}: attempting to broadcast "
                                 "a dimension with negative length")
        n = max(len(result), len(s))
        a = [1] * (n - len(result)) + result
        b = [1] * (n - len(s)) + list(s)
        for i in range(n):
            if a[i] != b[i] and a[i] != 1 and b[i] != 1:
                raise RuntimeError(
                    f"Shape mismatch: objects cannot be broadcast to a single shape. "
                    f"Mismatch is between {tuple(result)} and {s} at dimension {i}."
                )
            a[i] = b[i] if a[i] == 1 else a[i]
        result = a
    return Size(result)


def meshgrid(*tensors: Tensor, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids (expanded views) from 0-D/1-D tensors; indexing 'ij' (default) or 'xy'.

    >>> import ember
    >>> [g.shape for g in ember.meshgrid(ember.zeros(2), ember.zeros(3), indexing="xy")]
    [ember.Size([3, 2]), ember.Size([3, 2])]
    """
    ts, _ = _tensor_args("meshgrid", tensors)
    return _C.meshgrid(ts, indexing=indexing)


def _make_atleast(name: str, fn: Any) -> Any:
    def atleast(*tensors: Tensor) -> Tensor | tuple[Tensor, ...]:
        ts, as_list = _tensor_args(name, tensors)
        if len(ts) == 1 and not as_list:
            return fn(ts[0])
        return tuple(fn(t) for t in ts)

    atleast.__name__ = name
    atleast.__doc__ = fn.__doc__
    return atleast


def _install_module_functions() -> None:
    import sys

    ember = sys.modules["ember"]
    ember.broadcast_tensors = broadcast_tensors
    ember.broadcast_shapes = broadcast_shapes
    ember.meshgrid = meshgrid
    for n in ("atleast_1d", "atleast_2d", "atleast_3d"):
        setattr(ember, n, _make_atleast(n, getattr(_C, n)))


_install_module_functions()
# ---- end of views section --------------------------------------------------------------------
