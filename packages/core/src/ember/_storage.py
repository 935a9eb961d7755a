"""Storages and the in-place storage changes of a tensor, as in PyTorch.

``Tensor.untyped_storage()`` gives the bytes under a tensor (an ``ember.UntypedStorage``: shared
by every view); ``Tensor.storage()`` the same bytes seen as elements of the tensor's dtype (an
``ember.TypedStorage``). ``Tensor.resize_(*sizes, memory_format=None)`` gives a tensor new sizes
in place (contiguous strides, or channels-last ones), growing its storage when it is too small:
the storage gets new memory with the old bytes at its start, and every view of it sees the new
memory; it never shrinks. ``Tensor.set_()`` points a tensor at another storage.

>>> import ember
>>> x = ember.arange(4.)
>>> x.resize_(2, 3).shape, x.flatten()[:4].tolist()
(ember.Size([2, 3]), [0.0, 1.0, 2.0, 3.0])
>>> y = ember.empty(0).set_(x.untyped_storage(), 1, (2,), (1,))
>>> y.tolist()
[1.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ember import _C
from ember._C import Tensor, UntypedStorage, dtype
from ember._memory_format import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)

__all__ = ["TypedStorage", "UntypedStorage"]

# resize_'s format codes (ops/resize_ops.h ResizeFormat)
_FORMATS = {None: 0, contiguous_format: 1, channels_last: 2, channels_last_3d: 3}


def _untyped_tolist(self: UntypedStorage) -> list[int]:
    """The bytes as a list of ints.

    >>> import ember
    >>> ember.ones(1, dtype=ember.uint8).untyped_storage().tolist()
    [1]
    """
    return self._tensor().tolist()


def _untyped_new_shared(self: UntypedStorage, nbytes: int) -> UntypedStorage:
    """A new storage of ``nbytes`` bytes in shared memory."""
    return _C._empty_shared([nbytes], _C.uint8).untyped_storage()


def _untyped_is_shared(self: UntypedStorage) -> bool:
    return self._tensor().is_shared()


def _untyped_repr(self: UntypedStorage) -> str:
    return f"ember.UntypedStorage(nbytes={self.nbytes()}, device={self.device})"


UntypedStorage.tolist = _untyped_tolist  # type: ignore[attr-defined]
UntypedStorage.__repr__ = _untyped_repr  # type: ignore[method-assign]
UntypedStorage._new_shared = _untyped_new_shared  # type: ignore[attr-defined]
UntypedStorage.is_shared = _untyped_is_shared  # type: ignore[attr-defined]


class TypedStorage:
    """A storage seen as elements of ``dtype`` (what ``Tensor.storage()`` returns).

    >>> import ember
    >>> s = ember.ones(3).storage()
    >>> s.size(), s.nbytes(), s.dtype
    (3, 12, ember.float32)
    """

    def __init__(self, untyped: UntypedStorage, dtype: dtype) -> None:
        self._untyped_storage = untyped
        self.dtype = dtype

    def untyped(self) -> UntypedStorage:
        return self._untyped_storage

    def element_size(self) -> int:
        return self.dtype.itemsize

    def size(self) -> int:
        return self._untyped_storage.nbytes() // self.element_size()

    def __len__(self) -> int:
        return self.size()

    def nbytes(self) -> int:
        return self._untyped_storage.nbytes()

    def data_ptr(self) -> int:
        return self._untyped_storage.data_ptr()

    @property
    def device(self) -> Any:
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> bool:
        return self._untyped_storage.is_cuda

    def tolist(self) -> list[Any]:
        return self._tensor().tolist()

    def is_shared(self) -> bool:
        return self._tensor().is_shared()

    def _new_shared(self, size: int) -> TypedStorage:
        """A new storage of ``size`` elements of this dtype in shared memory (what the old
        ``default_collate`` preallocates a batch with)."""
        return TypedStorage(_C._empty_shared([size], self.dtype).untyped_storage(), self.dtype)

    def _tensor(self) -> Tensor:
        return _storage_view(self._untyped_storage, self.dtype)

    def __repr__(self) -> str:
        return f"ember.TypedStorage(size={self.size()}, dtype={self.dtype}, device={self.device})"


def _storage_view(storage: UntypedStorage, dt: dtype) -> Tensor:
    """A 1-d tensor of dtype dt over the whole storage."""
    from ember import empty

    t = empty(0, dtype=dt, device=storage.device)
    return t.set_(storage)


def _sizes(args: tuple[Any, ...], op: str) -> list[int]:
    if len(args) == 1 and not isinstance(args[0], int) and hasattr(args[0], "__iter__"):
        args = tuple(args[0])
    out = []
    for s in args:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}(): sizes must be ints, got {type(s).__name__}")
        out.append(s.__index__())
    return out


def _format_code(fmt: Any, op: str) -> int:
    if fmt is not None and not isinstance(fmt, memory_format):
        raise TypeError(f"{op}(): memory_format must be an ember.memory_format, got "
                        f"{type(fmt).__name__}")
    if fmt is preserve_format:
        raise RuntimeError(f"{op}(): unsupported memory format {fmt}")
    return _FORMATS[fmt]


def _resize_(self: Tensor, *sizes: Any, memory_format: memory_format | None = None) -> Tensor:
    """Gives self the sizes in place; its storage grows (keeping its bytes) when too small.

    >>> import ember
    >>> ember.zeros(2).resize_(3, 4).shape
    ember.Size([3, 4])
    """
    return self._resize_(_sizes(sizes, "resize_"), _format_code(memory_format, "resize_"))


def _resize_as_(self: Tensor, other: Tensor, *,
                memory_format: memory_format | None = None) -> Tensor:
    """``self.resize_(other.shape)``.

    >>> import ember
    >>> ember.zeros(2).resize_as_(ember.ones(2, 2)).shape
    ember.Size([2, 2])
    """
    if not isinstance(other, Tensor):
        raise TypeError(f"resize_as_(): argument 'the_template' must be Tensor, not "
                        f"{type(other).__name__}")
    return self._resize_(list(other.shape), _format_code(memory_format, "resize_as_"))


def _contiguous_strides(size: list[int]) -> list[int]:
    strides, step = [1] * len(size), 1
    for d in range(len(size) - 1, -1, -1):
        strides[d] = step
        step *= max(size[d], 1)
    return strides


def _set_(self: Tensor, source: Any = None, storage_offset: int = 0, size: Any = None,
          stride: Any = None) -> Tensor:
    """``set_()`` (empty), ``set_(tensor)`` (share its storage, offset, sizes and strides) or
    ``set_(storage, storage_offset=0, size=None, stride=None)``; a storage too small for the
    view grows.

    >>> import ember
    >>> a = ember.arange(4.)
    >>> ember.empty(0).set_(a).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    if source is None:
        return self._set_empty_()
    if isinstance(source, Tensor) and size is None and storage_offset == 0 and stride is None:
        return self._set_tensor_(source)
    if isinstance(source, Tensor):
        if source.dtype != self.dtype:
            raise RuntimeError(f"set_: could not set tensor of type {source.dtype} to a tensor "
                               f"of type {self.dtype}")
        storage = source.untyped_storage()
    elif isinstance(source, TypedStorage):
        if source.dtype != self.dtype:
            raise RuntimeError(f"set_: expected a storage of dtype {self.dtype}, got one of "
                               f"{source.dtype}")
        storage = source.untyped()
    elif isinstance(source, UntypedStorage):
        storage = source
    else:
        raise TypeError(f"set_(): source must be a Tensor or a storage, got "
                        f"{type(source).__name__}")
    if size is None:
        if stride is not None:
            raise RuntimeError("set_(): stride needs size")
        size = [(storage.nbytes() // self.element_size()) - storage_offset]
    size = _sizes((size,), "set_")
    stride = _contiguous_strides(size) if stride is None else _sizes((stride,), "set_")
    return self._set_storage_(storage, storage_offset, size, stride)


def _typed_storage(self: Tensor) -> TypedStorage:
    """The storage of self as elements of self's dtype.

    >>> import ember
    >>> ember.ones(2, 3).storage().size()
    6
    """
    return TypedStorage(self.untyped_storage(), self.dtype)


def _is_set_to(self: Tensor, other: Tensor) -> bool:
    """Whether self and other view the same storage with the same offset, sizes and strides.

    >>> import ember
    >>> a = ember.ones(2)
    >>> a.is_set_to(a), a.is_set_to(a.clone())
    (True, False)
    """
    return (self.untyped_storage()._same(other.untyped_storage())
            and self.storage_offset() == other.storage_offset()
            and self.shape == other.shape and self.stride() == other.stride())


Tensor.resize_ = _resize_  # type: ignore[attr-defined]
Tensor.resize_as_ = _resize_as_  # type: ignore[attr-defined]
Tensor.set_ = _set_  # type: ignore[attr-defined]
Tensor.storage = _typed_storage  # type: ignore[attr-defined]
Tensor._typed_storage = _typed_storage  # type: ignore[attr-defined]
Tensor.is_set_to = _is_set_to  # type: ignore[attr-defined]
