"""PyTorch's older tensor spellings that real programs still use.

* the legacy constructors ``ember.Tensor(2, 3)``, ``ember.Tensor([[1, 2]])``,
  ``ember.Tensor(tensor)`` (an alias), ``ember.Tensor(storage)``, ``ember.FloatTensor(...)``,
  ``ember.LongTensor(...)`` ... (``isinstance(t, ember.FloatTensor)`` checks the dtype, as in
  PyTorch), with PyTorch's error messages;
* ``Tensor.__new__`` is that constructor, so a subclass's ``__new__`` calls
  ``super().__new__(cls, data)`` and its ``__init__`` receives the call's arguments, as in
  PyTorch (``Tensor.__init__`` does nothing);
* ``Tensor.type()`` / ``Tensor.type(dtype or "ember.FloatTensor" / "torch.FloatTensor")``;
* ``format(t, "+.2f")`` and f-strings of 0-d tensors (formatted as their Python number);
* ``ember.tensor(data)`` for any sequence (``collections.deque``, ``range``, user sequences),
  not only lists and tuples.

>>> import ember
>>> ember.Tensor(2, 3).shape, ember.LongTensor([1.7, 2.0]).tolist()
(ember.Size([2, 3]), [1, 2])
>>> f"{ember.tensor(88.0)}", format(ember.tensor(2.5), "+.2f"), ember.ones(1).type()
('88.0', '+2.50', 'ember.FloatTensor')
"""

from __future__ import annotations

import collections.abc
import numbers
from typing import Any

from ember import _C
from ember._C import Tensor

__all__ = [
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor", "tensor",
]

# legacy type name -> dtype, in PyTorch's naming
_TYPE_NAMES = {
    "FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
    "BFloat16Tensor": _C.bfloat16, "ByteTensor": _C.uint8, "CharTensor": _C.int8,
    "ShortTensor": _C.int16, "IntTensor": _C.int32, "LongTensor": _C.int64,
    "BoolTensor": _C.bool,
}
_DTYPE_TYPE_NAMES = {repr(dt): name for name, dt in _TYPE_NAMES.items()}


# the dtypes without a legacy tensor class still have a type() name in PyTorch
_OTHER_TYPE_NAMES = {"complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
                     "uint16": "UInt16Tensor", "uint32": "UInt32Tensor", "uint64": "UInt64Tensor",
                     "float8_e4m3fn": "Float8_e4m3fnTensor", "float8_e5m2": "Float8_e5m2Tensor"}


def _type_name_of(dtype: Any) -> str:
    name = _DTYPE_TYPE_NAMES.get(repr(dtype))
    return name if name is not None else _OTHER_TYPE_NAMES[repr(dtype).split(".")[-1]]


def _default_dtype() -> Any:
    get = getattr(_C, "get_default_dtype", None)
    return get() if get is not None else _C.float32


# ---- tensor(data) for any sequence --------------------------------------------------------------

_NOT_SEQUENCES = (str, bytes, bytearray, memoryview, Tensor)


def _is_other_sequence(obj: Any) -> bool:
    """A sequence the binding does not walk itself (deque, range, a user Sequence)."""
    if isinstance(obj, (list, tuple, *_NOT_SEQUENCES)) or hasattr(obj, "__array_interface__"):
        return False
    return isinstance(obj, collections.abc.Sequence) or (
        hasattr(obj, "__len__") and hasattr(obj, "__getitem__")
        and not isinstance(obj, collections.abc.Mapping))


def _as_nested_lists(obj: Any) -> tuple[Any, bool]:
    """(obj with every deque/range/user sequence turned into a list, whether any was)."""
    if _is_other_sequence(obj):
        return [_as_nested_lists(v)[0] for v in obj], True
    if hasattr(obj, "__array_interface__") and type(obj).__name__ == "ndarray":
        # a NumPy array inside a list: its rows, down to NumPy scalars (which keep the dtype)
        if obj.ndim == 0:
            return obj[()], True
        return [_as_nested_lists(v)[0] for v in obj], True
    if isinstance(obj, (list, tuple)):
        items = [_as_nested_lists(v) for v in obj]
        if any(changed for _, changed in items):
            return [v for v, _ in items], True
    return obj, False


# what the binding says when it meets a sequence type it does not walk
_RETRY_MESSAGES = ("could not infer dtype", "expected a number, got", "expected a sequence at dim")


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``: a number, a (nested) sequence of numbers or of
    tensors (lists, tuples, ``collections.deque``, ``range``, any ``Sequence``; a one-element
    tensor in a list is a number, as in PyTorch, a larger one a row), a NumPy array,
    a tensor, or another framework's tensor (through DLPack). Integers give int64, floats the default dtype, bools bool, unless ``dtype`` says.

    >>> import collections, ember
    >>> ember.tensor(collections.deque([1, 2])).tolist(), ember.tensor(range(3)).dtype
    ([1, 2], ember.int64)
    >>> ember.tensor([ember.tensor(1.0), 2]).tolist()
    [1.0, 2.0]
    """
    if pin_memory:
        from ember.cuda import _pinned_result

        return _pinned_result(tensor(data, dtype=dtype, device=device), "tensor", requires_grad)
    kind = type(data)
    if kind is not list and kind is not tuple:
        if hasattr(kind, "__dlpack__"):
            from ember._interop import foreign_tensor

            foreign = foreign_tensor(data)  # a torch.Tensor, say: copied through DLPack
            if foreign is not None:
                out = foreign.to(device=device, dtype=dtype, copy=True)
                return out.requires_grad_(True) if requires_grad else out
        if kind is _C.UntypedStorage or (kind.__name__ == "TypedStorage" and _is_storage(data)):
            return _tensor_of_storage(data, dtype, device, requires_grad)
    if dtype is _C.uint64:
        _check_unsigned(data)
    try:
        if dtype is None and device is None and not requires_grad:  # the common call, kept cheap
            return _C.tensor(data)
        return _C.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
    except (TypeError, ValueError, RuntimeError) as exc:
        if not any(m in str(exc) for m in _RETRY_MESSAGES):
            raise
        try:
            fixed, changed = _as_nested_lists(data)
        except RecursionError:
            raise exc from None
        if not changed:
            raise
    return _C.tensor(fixed, dtype=dtype, device=device, requires_grad=requires_grad)


def _tensor_of_storage(storage: Any, dtype: Any, device: Any, requires_grad: bool) -> Tensor:
    """``tensor(storage)`` as PyTorch builds it: a 1-d tensor over the storage's bytes, sharing
    them (not a copy), of ``dtype`` (int64 by default for an ``UntypedStorage``; a
    ``TypedStorage`` must hold the dtype asked for, the default dtype when none is); moved to
    ``device`` when given."""
    from ember._storage import TypedStorage

    if isinstance(storage, TypedStorage):
        want = _default_dtype() if dtype is None else dtype
        if storage.dtype is not want:
            raise RuntimeError(
                f"Expected a Storage of type {_STORAGE_NAMES.get(repr(want), want)} or an "
                f"UntypedStorage, but got {_STORAGE_NAMES.get(repr(storage.dtype), storage.dtype)}")
        storage, dtype = storage.untyped(), want
    out = _from_storage(storage, _C.int64 if dtype is None else dtype)
    if device is not None and _C.device(device) != out.device:
        out = out.to(device)
    return out.requires_grad_(True) if requires_grad else out


def _check_unsigned(data: Any) -> None:
    """PyTorch refuses a negative Python int, or one past 2**64 - 1, for a uint64 tensor
    (narrower unsigned types wrap a negative one): OverflowError, as it does."""
    stack = [data]
    while stack:
        d = stack.pop()
        if type(d) in (list, tuple):
            stack.extend(d)
        elif type(d) is int and d < 0:
            raise OverflowError(f"tensor(): can't convert negative int {d} to unsigned "
                                "(dtype ember.uint64)")
        elif type(d) is int and d >= 2**64:
            raise OverflowError(f"tensor(): int {d} too big to convert to ember.uint64 (the "
                                "largest is 2**64 - 1)")


# ---- legacy constructors ------------------------------------------------------------------------
# PyTorch's overloads of Tensor.__new__ / Tensor.new / <T>Tensor, in its order (messages name them)
_OVERLOADS = (
    "(*, ember.device device = None)",
    "(ember.Storage storage)",
    "(Tensor other)",
    "(tuple of ints size, *, ember.device device = None)",
    "(object data, *, ember.device device = None)",
)
_KEYWORDS = ("device", "storage", "other", "size", "data")


def _typename(obj: Any) -> str:
    """How PyTorch's argument parser names a type: ``Tensor``, ``list``, ``numpy.float32``."""
    if isinstance(obj, Tensor):
        return "Tensor"
    t = type(obj)
    mod = t.__module__
    if mod == "builtins":
        return t.__qualname__
    return f"{'ember' if mod.startswith('ember') else mod}.{t.__qualname__}"


def _invalid_combination(what: str, args: tuple, kwargs: dict) -> TypeError:
    got = ", ".join([_typename(a) for a in args] + [f"{k}={_typename(v)}" for k, v in kwargs.items()])
    bad = [k for k in kwargs if k not in _KEYWORDS or (args and k != "device")]
    if bad:
        why = f"some of the keywords were incorrect: {', '.join(bad)}"
    else:
        why = "some of the arguments have invalid types: (" + ", ".join(
            f"!{_typename(a)}!" for a in args) + ")"
    lines = [f" * {_OVERLOADS[0]}", f"      didn't match because {why}"]
    lines += [f" * {sig}" for sig in _OVERLOADS[1:]]
    return TypeError(f"{what}() received an invalid combination of arguments - got ({got}), but "
                     "expected one of:\n" + "\n".join(lines) + "\n")


def _is_int(a: Any) -> bool:
    """An int of a size list (a Python or NumPy integer; never a bool or a tensor)."""
    return type(a) is int or (isinstance(a, numbers.Integral) and not isinstance(a, bool))


def _is_storage(obj: Any) -> bool:
    from ember._storage import TypedStorage, UntypedStorage

    return isinstance(obj, (TypedStorage, UntypedStorage))


def _from_storage(storage: Any, dtype: Any) -> Tensor:
    """A 1-d tensor of dtype over the whole storage (sharing it), as ``Tensor(storage)``."""
    from ember._storage import TypedStorage

    if isinstance(storage, TypedStorage):
        if storage.dtype is not dtype:
            raise RuntimeError(
                f"Expected a Storage of type {_STORAGE_NAMES.get(repr(dtype), dtype)} or an "
                f"UntypedStorage, but got type {_STORAGE_NAMES.get(repr(storage.dtype), storage.dtype)}"
                " for argument 1 'storage'")
        storage = storage.untyped()
    return _C.empty(0, dtype=dtype, device=storage.device).set_(storage)


def _sizes(args: tuple, what: str) -> list[int]:
    sizes = []
    for i, a in enumerate(args):
        if not _is_int(a):
            raise TypeError(f"{what}(): argument 'size' failed to unpack the object at pos {i + 1} "
                            f"with error \"type must be tuple of ints,but got {_typename(a)}\"")
        sizes.append(int(a))
    if any(s < 0 for s in sizes):
        neg = next(s for s in sizes if s < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg}: {sizes}")
    return sizes


def _legacy_new(dtype: Any, args: tuple, kwargs: dict, what: str = "new",
                alias: bool = False) -> Tensor:
    """What ``ember.Tensor(*args)`` / ``ember.<T>Tensor(*args)`` / ``t.new(*args)`` builds, after
    PyTorch's legacy overloads: ``()``, ``(storage)``, ``(tensor)``, ``(*sizes)`` or
    ``(ember.Size)``, ``(data)`` (any sequence), each but ``storage``/``tensor`` with
    ``device=``; dtype None: the default dtype. ``alias`` (``Tensor.__new__``): ``(tensor)``
    gives the tensor itself (the caller makes the alias) and refuses ``device=``, else
    ``tensor.detach()``."""
    from ember._size import Size

    if kwargs:
        kwargs = dict(kwargs)
        if any(k not in _KEYWORDS for k in kwargs) or (args and set(kwargs) - {"device"}) or \
                len(set(kwargs) - {"device"}) > 1:
            raise _invalid_combination(what, args, kwargs)
        device = kwargs.pop("device", None)
        if kwargs:  # the one argument given by keyword (data=, size=, other=, storage=)
            (key, value), = kwargs.items()
            if key == "size":
                value = Size(value) if not isinstance(value, int) else Size([value])
            if key == "other" and device is not None:
                raise _invalid_combination(what, (), {key: value, "device": device})
            args = (value,)
    else:
        device = None
    target = dtype if dtype is not None else _default_dtype()
    out: Tensor
    if not args:
        out = _C.empty(0, dtype=target)
    elif len(args) == 1 and isinstance(args[0], Tensor):
        src = args[0]
        if device is not None and alias:  # Tensor(t, device=...); t.new(t2) passes its device
            raise RuntimeError(
                "Legacy tensor constructor of the form ember.Tensor(tensor, device=device) is not "
                "supported.  Use ember.tensor(...) or ember.as_tensor(...) instead.")
        if dtype is not None and src.dtype is not dtype:
            raise TypeError(f"ember.{_type_name_of(dtype)}(): expected a tensor of dtype "
                            f"{dtype!r}, got one of dtype {src.dtype!r}")
        return src if alias else src.detach()
    elif len(args) == 1 and _is_storage(args[0]):
        if device is not None and _C.device(device).type != args[0].device.type:
            raise RuntimeError(f"legacy constructor expects device type: {args[0].device.type} "
                               f"but device type: {_C.device(device).type} was passed")
        return _from_storage(args[0], target)
    elif len(args) == 1 and isinstance(args[0], Size):
        out = _C.empty(_sizes(tuple(args[0]), what), dtype=target)
    elif _is_int(args[0]):
        out = _C.empty(_sizes(args, what), dtype=target)
    elif len(args) == 1:
        data = args[0]
        if isinstance(data, (str, bytes)):
            raise TypeError(f"{what}(): invalid data type '{type(data).__name__}'")
        is_seq = not isinstance(data, (dict, collections.abc.Mapping)) and (
            isinstance(data, (list, tuple, collections.abc.Sequence))
            or hasattr(data, "__array_interface__")
            or (hasattr(data, "__len__") and hasattr(data, "__getitem__")))
        if not is_seq or not hasattr(data, "__len__"):  # NumPy scalars too (0-d arrays pass)
            raise TypeError(f"{what}(): data must be a sequence (got {_typename(data)})")
        out = tensor(data, dtype=target)
    else:
        raise _invalid_combination(what, args, {"device": device} if device is not None else {})
    if device is not None and _C.device(device).type != "cpu":
        out = out.to(device)
    return out


_STORAGE_NAMES = {repr(_C.float32): "Float", repr(_C.float64): "Double", repr(_C.float16): "Half",
                  repr(_C.bfloat16): "BFloat16", repr(_C.int64): "Long", repr(_C.int32): "Int",
                  repr(_C.int16): "Short", repr(_C.int8): "Char", repr(_C.uint8): "Byte",
                  repr(_C.bool): "Bool"}

_tensor_init = Tensor.__init__  # the binding: wraps a detached alias of a tensor
_tensor_new = Tensor.__new__  # pybind11's allocation (an instance without data yet)
_requires_grad = vars(Tensor)["requires_grad"].__get__  # the binding (no __torch_function__)
_ALIAS: list[Any] = []  # the autograd Function of differentiable aliases, made on first use


def _alias_function() -> Any:
    from ember.autograd import Function

    class Alias(Function):
        @staticmethod
        def forward(ctx: Any, x: Tensor, cls: type) -> Tensor:
            out = _tensor_new(cls)
            _tensor_init(out, x)
            return out

        @staticmethod
        def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
            return grad, None

    Alias._backward_cls.__name__ = Alias._backward_cls.__qualname__ = "AliasBackward0"
    return Alias


def _alias(cls: type, src: Tensor) -> Tensor:
    """A cls instance over src's memory and version counter (cls.__init__ is not called): a
    differentiable alias (grad_fn AliasBackward0) when src requires grad, as PyTorch's
    ``Tensor(src)`` and ``cls(src)``."""
    if _requires_grad(src):
        if _C.is_grad_enabled():
            if not _ALIAS:
                _ALIAS.append(_alias_function())
            with _C.DisableTorchFunctionSubclass():
                return _ALIAS[0].apply(src, cls)
        out = _tensor_new(cls)
        _tensor_init(out, src)
        out.requires_grad_(True)  # PyTorch: a leaf that requires grad under no_grad
        return out
    out = _tensor_new(cls)
    _tensor_init(out, src)
    return out


def _new(cls: Any, *args: Any, **kwargs: Any) -> Tensor:
    """``Tensor.__new__(cls, *args, device=None)``: a ``cls`` instance from PyTorch's legacy
    constructor arguments: sizes (uninitialized), a sequence or array (a copy in the default
    dtype), a tensor (an alias sharing its memory and autograd history) or a storage (a view of
    it). A subclass's ``__new__`` calls it as ``super().__new__(cls, data)``; its ``__init__``
    then receives the arguments of the call (``Tensor.__init__`` does nothing).

    >>> import ember
    >>> class Tagged(ember.Tensor):
    ...     def __new__(cls, data, tag):
    ...         return super().__new__(cls, data)
    ...     def __init__(self, data, tag):
    ...         self.tag = tag
    >>> t = Tagged([1.0, 2.0], "w")
    >>> type(t).__name__, t.tag, type(t * 2).__name__
    ('Tagged', 'w', 'Tagged')
    """
    if not isinstance(cls, type):
        raise TypeError(f"ember.Tensor.__new__(X): X is not a type object ({type(cls).__name__})")
    if not issubclass(cls, Tensor):
        raise TypeError(f"ember.Tensor.__new__({cls.__name__}): {cls.__name__} is not a subtype "
                        "of ember.Tensor")
    if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):  # cls(t): the common call
        if _requires_grad(args[0]):
            return _alias(cls, args[0])
        out = _tensor_new(cls)
        _tensor_init(out, args[0])
        return out
    if args and not kwargs and all(type(a) is int and a >= 0 for a in args):  # Tensor(2, 3)
        out = _C.empty(args, dtype=_default_dtype())
        return out if cls is Tensor else _alias(cls, out)
    out = _legacy_new(None, args, kwargs, "new", alias=True)
    if cls is Tensor and not any(out is a for a in (*args, *kwargs.values())):
        return out  # a new tensor: already what Tensor(...) returns
    return _alias(cls, out)


def _init(self: Tensor, *args: Any, **kwargs: Any) -> None:
    """``Tensor.__init__``: nothing (``Tensor.__new__`` gave the tensor its data). A subclass's
    ``__init__`` receives the constructor's arguments; calling ``super().__init__(...)`` from it
    is allowed and does nothing."""


class _LegacyTensorType(type):
    """Metaclass of ember.FloatTensor & co: calling one builds a tensor of its dtype, and
    ``isinstance(t, ember.FloatTensor)`` means "a CPU float32 tensor"."""

    dtype: Any

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        return _legacy_new(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.is_cpu

    def __repr__(cls) -> str:
        return f"<class 'ember.{cls.__name__}'>"


def _make_type(name: str, dtype: Any) -> type:
    doc = (f"Legacy constructor of {dtype!r} tensors: ``{name}(*sizes)`` (uninitialized), "
           f"``{name}(data)`` (a copy converted to {dtype!r}) or ``{name}(tensor)`` (an alias).")
    return _LegacyTensorType(name, (), {"dtype": dtype, "__doc__": doc, "__module__": "ember"})


FloatTensor = _make_type("FloatTensor", _C.float32)
DoubleTensor = _make_type("DoubleTensor", _C.float64)
HalfTensor = _make_type("HalfTensor", _C.float16)
BFloat16Tensor = _make_type("BFloat16Tensor", _C.bfloat16)
ByteTensor = _make_type("ByteTensor", _C.uint8)
CharTensor = _make_type("CharTensor", _C.int8)
ShortTensor = _make_type("ShortTensor", _C.int16)
IntTensor = _make_type("IntTensor", _C.int32)
LongTensor = _make_type("LongTensor", _C.int64)
BoolTensor = _make_type("BoolTensor", _C.bool)


# ---- Tensor.type --------------------------------------------------------------------------------

def _parse_type_string(s: str) -> tuple[Any, str]:
    """("torch" | "ember")[".cuda"].<Name>Tensor -> (dtype, device type)."""
    parts = s.split(".")
    if len(parts) in (2, 3) and parts[0] in ("torch", "ember") and parts[-1] in _TYPE_NAMES and (
            len(parts) == 2 or parts[1] == "cuda"):
        return _TYPE_NAMES[parts[-1]], ("cuda" if len(parts) == 3 else "cpu")
    raise ValueError(f"invalid type: {s!r} (expected a dtype or a name like 'ember.FloatTensor' / "
                     f"'torch.LongTensor'; known names: {', '.join(_TYPE_NAMES)})")


def _type(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """With no argument, this tensor's legacy type name (``'ember.FloatTensor'``, or
    ``'ember.cuda.FloatTensor'`` on a GPU); with a dtype, a legacy type (``ember.LongTensor``) or
    its name (``'ember.LongTensor'``, ``'torch.LongTensor'``), self converted to it (self when
    nothing changes).

    >>> import ember
    >>> t = ember.ones(2)
    >>> t.type(), t.type("torch.LongTensor").dtype, t.type(ember.int32).dtype
    ('ember.FloatTensor', ember.int64, ember.int32)
    """
    kwargs.pop("async", None)
    if kwargs:
        raise TypeError(f"type(): unexpected keyword arguments {sorted(kwargs)}")
    if dtype is None:
        dev = self.device.type
        return f"ember.{'' if dev == 'cpu' else dev + '.'}{_type_name_of(self.dtype)}"
    device = None
    if isinstance(dtype, str):
        dtype, device = _parse_type_string(dtype)
    elif isinstance(dtype, _LegacyTensorType):
        dtype, device = dtype.dtype, "cpu"
    elif not isinstance(dtype, _C.dtype):
        raise TypeError(f"type(): expected a dtype, a legacy tensor type or its name, got "
                        f"{type(dtype).__name__}")
    out = self
    if device is not None and self.device.type != device:
        out = out.to(device)
    return out if out.dtype is dtype else out._to_dtype(dtype)


def _format(self: Tensor, format_spec: str) -> str:
    # A plain 0-d tensor formats as its Python number (f"{loss:.4f}"); anything else as its repr
    # (and a non-empty spec is refused, as for any object).
    if self.ndim == 0 and type(self) is Tensor:
        return self.item().__format__(format_spec)
    return object.__format__(self, format_spec)


Tensor.__new__ = staticmethod(_new)
Tensor.__init__ = _init
Tensor.type = _type
Tensor.__format__ = _format
