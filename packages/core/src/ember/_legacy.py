"""PyTorch's older tensor spellings that real programs still use.

* the legacy constructors ``ember.Tensor(2, 3)``, ``ember.Tensor([[1, 2]])``,
  ``ember.FloatTensor(...)``, ``ember.LongTensor(...)`` ... (``isinstance(t, ember.FloatTensor)``
  checks the dtype, as in PyTorch);
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


def _type_name_of(dtype: Any) -> str:
    return _DTYPE_TYPE_NAMES[repr(dtype)]


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
    if isinstance(obj, (list, tuple)):
        items = [_as_nested_lists(v) for v in obj]
        if any(changed for _, changed in items):
            return [v for v, _ in items], True
    return obj, False


# what the binding says when it meets a sequence type it does not walk
_RETRY_MESSAGES = ("could not infer dtype", "expected a number, got", "expected a sequence at dim")


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data``: a number, a (nested) sequence of numbers or of
    tensors (lists, tuples, ``collections.deque``, ``range``, any ``Sequence``), a NumPy array or
    a tensor. Integers give int64, floats the default dtype, bools bool, unless ``dtype`` says.

    >>> import collections, ember
    >>> ember.tensor(collections.deque([1, 2])).tolist(), ember.tensor(range(3)).dtype
    ([1, 2], ember.int64)
    >>> ember.tensor([ember.tensor(1.0), 2]).tolist()
    [1.0, 2.0]
    """
    if pin_memory:
        from ember.cuda import _pinned_result

        return _pinned_result(tensor(data, dtype, device), "tensor", requires_grad)
    try:
        if dtype is None and device is None and not requires_grad:  # the common call, kept cheap
            return _C.tensor(data)
        return _C.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
    except (TypeError, ValueError) as exc:
        if not any(m in str(exc) for m in _RETRY_MESSAGES):
            raise
        try:
            fixed, changed = _as_nested_lists(data)
        except RecursionError:
            raise exc from None
        if not changed:
            raise
    return _C.tensor(fixed, dtype=dtype, device=device, requires_grad=requires_grad)


# ---- legacy constructors ------------------------------------------------------------------------

def _legacy_new(dtype: Any, args: tuple, kwargs: dict, what: str) -> Tensor:
    """What ``ember.Tensor(*args)`` / ``ember.<T>Tensor(*args)`` builds (dtype None: default)."""
    from ember._size import Size

    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"{what}(): unexpected keyword arguments {sorted(kwargs)}")
    target = dtype if dtype is not None else _default_dtype()
    if not args:
        out = _C.empty(0, dtype=target)
    elif len(args) == 1 and isinstance(args[0], Tensor):
        src = args[0]
        if dtype is not None and src.dtype is not dtype:
            raise TypeError(f"{what}(): expected a tensor of dtype {dtype!r} (ember."
                            f"{_type_name_of(dtype)}), got one of dtype {src.dtype!r}")
        out = src.detach()
    elif len(args) == 1 and isinstance(args[0], Size):
        out = _C.empty(list(args[0]), dtype=target)
    elif all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        if any(a < 0 for a in args):
            raise RuntimeError(f"{what}(): negative dimension in size {tuple(args)}")
        out = _C.empty(list(args), dtype=target)
    elif len(args) == 1:
        data = args[0]
        if isinstance(data, (str, bytes)):
            raise TypeError(f"{what}(): invalid data type {type(data).__name__!r}")
        is_seq = isinstance(data, (list, tuple, collections.abc.Sequence)) or hasattr(
            data, "__array_interface__") or (hasattr(data, "__len__") and hasattr(data, "__getitem__"))
        if not is_seq:
            raise TypeError(f"{what}(): data must be a sequence or sizes (got "
                            f"{type(data).__name__})")
        out = tensor(data, dtype=target)
    else:
        bad = next(a for a in args if not (isinstance(a, int) and not isinstance(a, bool)))
        raise TypeError(f"{what}(): sizes must be ints, got {type(bad).__name__} ({bad!r}) in "
                        f"{args!r}")
    if device is not None and _C.device(device).type != "cpu":
        out = out.to(device)
    return out


_tensor_init = Tensor.__init__
_tensor_new = Tensor.__new__
_raw_numel = Tensor.numel  # the binding itself (Tensor's methods are wrapped later)


def _holds_data(self: Tensor) -> bool:
    """Whether a Tensor instance was already given its data (by a subclass's ``__new__``)."""
    try:
        _raw_numel(self)
    except RuntimeError:  # pybind11: an instance whose __init__ has not run yet
        return False
    return True


def _init(self: Tensor, *args: Any, **kwargs: Any) -> None:
    if type(self) is not Tensor and (getattr(self, "_ember_made_subclass", False) or
                                     ((args or kwargs) and _holds_data(self))):
        # A subclass's __new__ already gave it its data (Tensor._make_subclass, as_subclass):
        # Python then calls __init__ with __new__'s arguments, which PyTorch's Tensor.__init__
        # ignores (it builds tensors in __new__).
        return
    # Tensor(t) (what nn.Parameter uses) and Tensor() keep the binding's fast path.
    if not kwargs and (not args or (len(args) == 1 and isinstance(args[0], Tensor))):
        _tensor_init(self, *args)
        return
    if "data" in kwargs and not args:
        args = (kwargs.pop("data"),)
    _tensor_init(self, _legacy_new(None, args, kwargs, type(self).__name__))


class _LegacyTensorType(type):
    """Metaclass of ember.FloatTensor & co: calling one builds a tensor of its dtype, and
    ``isinstance(t, ember.FloatTensor)`` means "a CPU float32 tensor"."""

    dtype: Any

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        return _legacy_new(cls.dtype, args, kwargs, cls.__name__)

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


Tensor.__init__ = _init
Tensor.type = _type
Tensor.__format__ = _format
