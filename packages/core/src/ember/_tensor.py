"""Tensor methods written in Python: conversions and protocols that are not hot paths."""

from __future__ import annotations

from typing import Any

from ember import _C
from ember._C import Tensor


def _numpy(self: Tensor, *, force: bool = False) -> Any:
    """A NumPy array sharing memory with this tensor.

    >>> import ember
    >>> ember.ones(2).numpy()
    array([1., 1.], dtype=float32)
    """
    import numpy as np

    return np.asarray(self)


def _array(self: Tensor, dtype: Any = None, copy: Any = None) -> Any:
    import numpy as np

    a = np.asarray(self)
    return a if dtype is None else a.astype(dtype, copy=False)


def _iter(self: Tensor):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``.

    >>> import ember
    >>> ember.ones(2).to(ember.int64).dtype
    ember.int64
    """
    dtype = kwargs.pop("dtype", None)
    dev = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, (str, _C.device)):
            dev = a
        elif isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
    if dev is not None and _C.device(dev).type != "cpu":
        raise RuntimeError(f"to(): device {dev} is not available in this build of ember (CPU only)")
    if dtype is None:
        return self.clone() if copy else self
    return self._to_dtype(dtype, copy)


def _make_cast(dt: Any):
    def cast(self: Tensor) -> Tensor:
        return self._to_dtype(dt)

    cast.__doc__ = f"self converted to {dt!r}."
    return cast


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    return self._to_dtype(other.dtype)


def _new_tensor(self: Tensor, data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    return _C.tensor(data, dtype=dtype or self.dtype)


def _repr(self: Tensor) -> str:
    from ember._printing import tensor_repr

    return tensor_repr(self)


Tensor.numpy = _numpy
Tensor.__array__ = _array
Tensor.__iter__ = _iter
Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.to = _to
Tensor.type_as = _type_as
Tensor.new_tensor = _new_tensor
Tensor.cpu = lambda self: self
for _name, _dt in [
    ("float", _C.float32), ("double", _C.float64), ("half", _C.float16), ("bfloat16", _C.bfloat16),
    ("long", _C.int64), ("int", _C.int32), ("short", _C.int16), ("char", _C.int8),
    ("byte", _C.uint8), ("bool", _C.bool),
]:
    setattr(Tensor, _name, _make_cast(_dt))
Tensor.__array_priority__ = 1000  # NumPy defers binary operators to ember
