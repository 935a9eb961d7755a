"""Storages and the in-place storage changes of a tensor, as in PyTorch.

``Tensor.untyped_storage()`` gives the bytes under a tensor (an ``ember.UntypedStorage``: shared
by every view); ``Tensor.storage()`` the same bytes seen as elements of the tensor's dtype (an
``ember.TypedStorage``). ``Tensor.resize_(*sizes, memory_format=None)`` gives a tensor new sizes
in place (contiguous strides, or channels-last ones), growing its storage when it is too small:
the storage gets new memory with the old bytes at its start, and every view of it sees the new
memory; it never shrinks (``UntypedStorage.resize_`` does). ``Tensor.set_()`` points a tensor at another storage.

>>> import ember
>>> x = ember.arange(4.)
>>> x.resize_(2, 3).shape, x.flatten()[:4].tolist()
(ember.Size([2, 3]), [0.0, 1.0, 2.0, 3.0])
>>> y = ember.empty(0).set_(x.untyped_storage(), 1, (2,), (1,))
>>> y.tolist()
[1.0, 2.0]
"""

from __future__ import annotations

import sys
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


_BYTE_ORDERS = ("native", "little", "big")


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
    lines = [f" {v}" for v in self.tolist()]
    lines.append(f"[ember.storage.UntypedStorage(device={self.device}) of size {self.nbytes()}]")
    return "\n".join(lines)


def _check_index(idx: Any, size: int, cls: str, err: type = TypeError) -> int:
    """idx as an in-range element index (negative counts from the end), as PyTorch's storages
    (a bad index type raises err: PyTorch's class differs between the two storages)."""
    if isinstance(idx, (bool, Tensor)) or not hasattr(idx, "__index__"):
        raise err(f"can't index an {cls} with {type(idx).__name__}")
    i = idx.__index__()
    j = i + size if i < 0 else i
    if not 0 <= j < size:
        raise IndexError(f"index {i} out of range for storage of size {size}")
    return j


def _slice_bounds(sl: slice, size: int) -> tuple[int, int]:
    start, stop, step = sl.indices(size)
    if step != 1:
        raise RuntimeError(f"Trying to slice with a step of {step}, but only a step of 1 is "
                           "supported")
    return start, max(start, stop)


def _untyped_getitem(self: UntypedStorage, idx: Any) -> Any:
    """``s[i]`` (a byte as an int) or ``s[a:b]`` (a storage sharing those bytes).

    >>> import ember
    >>> s = ember.tensor([1, 2, 3], dtype=ember.uint8).untyped_storage()
    >>> s[0], s[-1], s[1:3].tolist()
    (1, 3, [2, 3])
    """
    n = self.nbytes()
    if isinstance(idx, slice):
        return self._slice(*_slice_bounds(idx, n))
    return int(self._tensor()[_check_index(idx, n, "ember.UntypedStorage")].item())


def _byte(value: Any, what: str) -> int:
    """value (an int or a bool) as a byte, taken modulo 256 as PyTorch; anything else (a float,
    a tensor) raises PyTorch's RuntimeError, an int beyond int64 its OverflowError (it was
    wrapped silently too)."""
    if isinstance(value, Tensor) or not hasattr(value, "__index__"):
        raise RuntimeError(f"{what} expects int, but got {type(value).__name__}")
    v = value.__index__()
    if not -2**63 <= v < 2**63:
        raise OverflowError(f"{what}: value {v} does not fit in int64 (a byte value is taken "
                            "modulo 256 from an int64)")
    return v & 0xFF


def _untyped_setitem(self: UntypedStorage, idx: Any, value: Any) -> None:
    """``s[i] = v`` / ``s[a:b] = v``: writes the byte ``v`` (an int or a bool, taken modulo
    256 as PyTorch) into the memory the tensors over this storage see."""
    byte = _byte(value, "UntypedStorage.__setitem__")
    n = self.nbytes()
    if isinstance(idx, slice):
        a, b = _slice_bounds(idx, n)
        self._tensor()[a:b] = byte
        return
    if isinstance(idx, (bool, Tensor)) or not hasattr(idx, "__index__"):
        raise TypeError(f"can't index an ember.UntypedStorage with {type(idx).__name__}")
    i = idx.__index__()
    if not -n <= i < n:
        raise RuntimeError(f"UntypedStorage.__setitem__: index {i} out of bounds for storage of "
                           f"size {n}")
    self._tensor()[i] = byte


def _untyped_iter(self: UntypedStorage) -> Any:
    return iter(self.tolist())


def _untyped_fill_(self: UntypedStorage, value: Any) -> UntypedStorage:
    """Sets every byte to ``value`` (an int or a bool, taken modulo 256 as PyTorch); returns
    self."""
    self._tensor().fill_(_byte(value, "UntypedStorage.fill_"))
    return self


def _check_copy_sizes(dst_nbytes: int, src_nbytes: int) -> None:
    if dst_nbytes != src_nbytes:
        raise RuntimeError(f"copy_: size does not match, self was {dst_nbytes} bytes but src was "
                           f"{src_nbytes} bytes")


def _untyped_copy_(self: UntypedStorage, src: Any, non_blocking: bool | None = None
                   ) -> UntypedStorage:
    """Copies the bytes of ``src`` (a storage of the same number of bytes) into self.

    >>> import ember
    >>> a = ember.zeros(2)
    >>> _ = a.untyped_storage().copy_(ember.ones(2).untyped_storage()); a.tolist()
    [1.0, 1.0]
    """
    if isinstance(src, TypedStorage):
        src = src.untyped()
    if not isinstance(src, UntypedStorage):
        raise TypeError(f"copy_(): src must be a storage, got {type(src).__name__}")
    _check_copy_sizes(self.nbytes(), src.nbytes())
    self._tensor().copy_(src._tensor(), non_blocking=bool(non_blocking))
    return self


def _untyped_clone(self: UntypedStorage) -> UntypedStorage:
    """A copy of the storage in new memory on the same device."""
    return self._tensor().clone().untyped_storage()


def _untyped_to(self: UntypedStorage, *, device: Any = None, non_blocking: bool = False
                ) -> UntypedStorage:
    """The storage on ``device`` (self when already there)."""
    from ember import device as _device

    dev = self.device if device is None else _device(device)
    if dev == self.device:
        return self
    return self._tensor().to(dev, non_blocking=non_blocking).untyped_storage()


def _untyped_cpu(self: UntypedStorage) -> UntypedStorage:
    return _untyped_to(self, device="cpu")


def _untyped_cuda(self: UntypedStorage, device: Any = None, non_blocking: bool = False
                  ) -> UntypedStorage:
    return _untyped_to(self, device="cuda" if device is None else _cuda_device(device),
                       non_blocking=non_blocking)


def _cuda_device(device: Any) -> Any:
    return f"cuda:{device}" if isinstance(device, int) else device


def _untyped_share_memory_(self: UntypedStorage) -> UntypedStorage:
    """Moves the bytes to shared memory in place (every tensor over them follows); returns
    self."""
    self._tensor().share_memory_()
    return self


def _byte_swapped(data: bytes, itemsize: int, byte_order: str, op: str) -> bytes:
    if byte_order not in _BYTE_ORDERS:
        raise ValueError(f"{op}: invalid byte_order {byte_order!r} (expected 'big', 'little', or "
                         "'native')")
    if itemsize == 1 or byte_order in ("native", sys.byteorder):
        return data
    out = bytearray(len(data))
    for k in range(itemsize):  # reverse the bytes of every element
        out[k::itemsize] = data[itemsize - 1 - k::itemsize]
    return bytes(out)


def _buffer_bytes(buffer: Any, byte_order: str | None, count: int, offset: int, dt: dtype,
                  op: str) -> bytes:
    """The bytes of ``count`` elements of dt from ``buffer`` at byte ``offset``, in native
    byte order."""
    if not isinstance(dt, dtype):
        raise TypeError(f"{op}: dtype must be an ember.dtype, got {type(dt).__name__}")
    itemsize = dt.itemsize
    if byte_order is None:
        if itemsize != 1:
            raise RuntimeError(f"{op}: byte_order is required for dtype {dt}")
        byte_order = "native"
    data = memoryview(buffer).cast("B").tobytes()
    if offset < 0 or offset > len(data):
        raise ValueError(f"{op}: offset must be in [0, {len(data)}], got {offset}")
    data = data[offset:]
    if count < 0:
        if len(data) % itemsize:
            raise ValueError(f"{op}: buffer size ({len(data)}) must be a multiple of element "
                             f"size ({itemsize})")
        count = len(data) // itemsize
    if count * itemsize > len(data):
        raise ValueError(f"{op}: buffer has only {len(data) // itemsize} elements after offset "
                         f"{offset}, but specified a size of {count}")
    return _byte_swapped(data[:count * itemsize], itemsize, byte_order, op)


def _storage_of_bytes(data: bytes) -> UntypedStorage:
    out = UntypedStorage(len(data))
    if data:
        from ember import tensor, uint8

        out._tensor().copy_(tensor(list(data), dtype=uint8))
    return out


def _untyped_from_buffer(buffer: Any, byte_order: str | None = None, count: int = -1,
                         offset: int = 0, *, dtype: dtype) -> UntypedStorage:
    """A new storage holding ``count`` elements of ``dtype`` (all when -1) read from a Python
    buffer at byte ``offset``, converted from ``byte_order`` to the native one (a copy).

    >>> import ember
    >>> ember.UntypedStorage.from_buffer(b"\\x00\\x01", "big", dtype=ember.int16).tolist()
    [1, 0]
    """
    return _storage_of_bytes(_buffer_bytes(buffer, byte_order, count, offset, dtype,
                                           "UntypedStorage.from_buffer"))


def _untyped_byteswap(self: UntypedStorage, dtype: dtype) -> None:
    """Reverses, in place, the bytes of every element of ``dtype`` (each half of a complex
    one): converts the storage between little- and big-endian elements of that dtype.

    >>> import ember
    >>> s = ember.tensor([1], dtype=ember.int16).untyped_storage()
    >>> s.byteswap(ember.int16); s.tolist()
    [0, 1]
    """
    if not isinstance(dtype, _C.dtype):
        raise RuntimeError(f"byteswap(): expected an ember.dtype, but got {type(dtype)}")
    k = dtype.itemsize // 2 if dtype.is_complex else dtype.itemsize
    n = self.nbytes()
    if k <= 1 or n == 0:
        return
    if n % k:
        raise RuntimeError(f"byteswap(): the length of data ({n} bytes) is not a multiple of {k} "
                           f"(the element size of {dtype}{', halved' if dtype.is_complex else ''})")
    groups = self._tensor().view(-1, k)
    groups.copy_(groups.flip(1))


def _map_file(filename: Any, shared: Any, nbytes: Any, op: str) -> UntypedStorage:
    """A CPU storage over the first ``nbytes`` bytes of a memory-mapped file (see from_file)."""
    import os

    if not isinstance(filename, str):
        raise TypeError(f"{op}(): argument 'filename' must be str, not {type(filename).__name__}")
    for name, v in (("shared", shared), ("nbytes", nbytes)):
        if isinstance(v, float) or not hasattr(v, "__index__"):
            raise TypeError(f"{op}(): argument '{name}' must be {'bool' if name == 'shared' else 'int'}"
                            f", not {type(v).__name__}")
    shared, nbytes = bool(shared), nbytes.__index__()
    if nbytes < 0:
        raise RuntimeError(f"{op}(): unable to map {nbytes} bytes from file <{filename}> (the size "
                           "must be >= 0)")
    try:
        fd = os.open(filename, (os.O_RDWR | os.O_CREAT) if shared else os.O_RDONLY, 0o600)
    except OSError as e:
        mode = "read-write" if shared else "read-only"
        raise RuntimeError(f"{op}(): unable to open file <{filename}> in {mode} mode: "
                           f"{e.strerror} ({e.errno})") from None
    try:
        size = os.fstat(fd).st_size
        if size < nbytes:
            if not shared:
                raise RuntimeError(f"{op}(): file <{filename}> size <{size}> is smaller than the "
                                   f"required mapping size <{nbytes}>")
            os.ftruncate(fd, nbytes)  # shared: the file grows to the mapping, as PyTorch's
        if nbytes == 0:
            return UntypedStorage(0)
        if shared:  # MAP_SHARED: writes reach the file (and other processes mapping it)
            t = _C._from_shm_fd(fd, nbytes, _C.uint8, [nbytes], [1], 0)
        else:  # MAP_PRIVATE, copy-on-write: writes stay in this process
            t = _C._map_file(fd, 0, nbytes)
        return t.untyped_storage()
    finally:
        os.close(fd)


def _untyped_from_file(filename: str, shared: bool = False, nbytes: int = 0) -> UntypedStorage:
    """A CPU storage of ``nbytes`` bytes memory-mapped from the file ``filename``.

    ``shared=True`` maps it shared: writes go to the file (created, or grown to ``nbytes``,
    when needed) and other processes mapping it see them. ``shared=False`` maps a private
    copy-on-write view of a file holding at least ``nbytes`` bytes: writes never reach it.

    >>> import ember, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "bytes")
    >>> s = ember.UntypedStorage.from_file(path, True, 4)
    >>> s[0] = 7; del s
    >>> list(open(path, "rb").read())
    [7, 0, 0, 0]
    """
    return _map_file(filename, shared, nbytes, "from_file")


def _untyped_typed(self: UntypedStorage, dt: dtype) -> TypedStorage:
    """self's bytes as uint8 values converted to dt (PyTorch's UntypedStorage.float() etc.)."""
    return TypedStorage(self._tensor().to(dt).untyped_storage(), dt)


def _untyped_reduce(self: UntypedStorage) -> tuple[Any, tuple[Any, ...]]:
    return _rebuild_untyped, (bytes(self.cpu().tolist()), str(self.device))


def _rebuild_untyped(data: bytes, device: str) -> UntypedStorage:
    return _untyped_to(_storage_of_bytes(data), device=device)


def _untyped_deepcopy(self: UntypedStorage, memo: dict[int, Any]) -> UntypedStorage:
    if id(self) not in memo:
        memo[id(self)] = self.clone()
    return memo[id(self)]


_DTYPE_METHODS = {"double": "float64", "float": "float32", "half": "float16",
                  "bfloat16": "bfloat16", "long": "int64", "int": "int32", "short": "int16",
                  "char": "int8", "byte": "uint8", "bool": "bool", "complex_double": "complex128",
                  "complex_float": "complex64", "float8_e4m3fn": "float8_e4m3fn",
                  "float8_e5m2": "float8_e5m2"}


def _add_dtype_methods(cls: Any, convert: Any) -> None:
    for meth, name in _DTYPE_METHODS.items():
        dt = getattr(_C, name)

        def f(self: Any, _dt: dtype = dt) -> TypedStorage:
            return convert(self, _dt)

        f.__name__ = meth
        f.__doc__ = f"The storage as {name} elements."
        setattr(cls, meth, f)


def _untyped_init_wrapper(orig: Any) -> Any:
    def __init__(self: UntypedStorage, *args: Any, **kwargs: Any) -> None:
        # UntypedStorage(sequence of byte values): the bytes, as PyTorch
        if len(args) == 1 and not isinstance(args[0], (int, str, bytes)) and \
                hasattr(args[0], "__len__") and not hasattr(args[0], "__index__"):
            values = [_byte(v, "UntypedStorage(sequence)") for v in args[0]]
            orig(self, len(values), **kwargs)
            if values:
                from ember import tensor, uint8

                self._tensor().copy_(tensor(values, dtype=uint8))
            return
        orig(self, *args, **kwargs)

    return __init__


UntypedStorage.__init__ = _untyped_init_wrapper(UntypedStorage.__init__)  # type: ignore[method-assign]
UntypedStorage.tolist = _untyped_tolist  # type: ignore[attr-defined]
UntypedStorage.__repr__ = _untyped_repr  # type: ignore[method-assign]
UntypedStorage.__str__ = _untyped_repr  # type: ignore[method-assign]
UntypedStorage._new_shared = _untyped_new_shared  # type: ignore[attr-defined]
UntypedStorage.is_shared = _untyped_is_shared  # type: ignore[attr-defined]
UntypedStorage.__getitem__ = _untyped_getitem  # type: ignore[attr-defined]
UntypedStorage.__setitem__ = _untyped_setitem  # type: ignore[attr-defined]
UntypedStorage.__iter__ = _untyped_iter  # type: ignore[attr-defined]
UntypedStorage.fill_ = _untyped_fill_  # type: ignore[attr-defined]
UntypedStorage.copy_ = _untyped_copy_  # type: ignore[attr-defined]
UntypedStorage.clone = _untyped_clone  # type: ignore[attr-defined]
UntypedStorage.__copy__ = _untyped_clone  # type: ignore[attr-defined]
UntypedStorage.__deepcopy__ = _untyped_deepcopy  # type: ignore[attr-defined]
UntypedStorage.__reduce__ = _untyped_reduce  # type: ignore[method-assign]
UntypedStorage.to = _untyped_to  # type: ignore[attr-defined]
UntypedStorage.cpu = _untyped_cpu  # type: ignore[attr-defined]
UntypedStorage.cuda = _untyped_cuda  # type: ignore[attr-defined]
UntypedStorage.share_memory_ = _untyped_share_memory_  # type: ignore[attr-defined]
UntypedStorage.from_buffer = staticmethod(_untyped_from_buffer)  # type: ignore[attr-defined]
UntypedStorage.from_file = staticmethod(_untyped_from_file)  # type: ignore[attr-defined]
UntypedStorage.byteswap = _untyped_byteswap  # type: ignore[attr-defined]
UntypedStorage.untyped = lambda self: self  # type: ignore[attr-defined]
UntypedStorage.type = lambda self, dtype=None, non_blocking=False: "ember.storage.UntypedStorage"  # type: ignore[attr-defined]
UntypedStorage.get_device = lambda self: self.device.index  # type: ignore[attr-defined]
UntypedStorage.is_pinned = lambda self, device="cuda": False  # type: ignore[attr-defined]
UntypedStorage.pin_memory = lambda self, device="cuda": self  # type: ignore[attr-defined]
UntypedStorage.is_sparse = False  # type: ignore[attr-defined]
UntypedStorage.is_hpu = False  # type: ignore[attr-defined]
UntypedStorage.new = lambda self: UntypedStorage(0, device=self.device)  # type: ignore[attr-defined]
UntypedStorage.is_sparse_csr = False  # type: ignore[attr-defined]
_add_dtype_methods(UntypedStorage, _untyped_typed)


class TypedStorage:
    """A storage seen as elements of ``dtype`` (what ``Tensor.storage()`` returns); it shares
    the memory of the tensors over it.

    ``TypedStorage()``, ``TypedStorage(size, dtype=, device=)``,
    ``TypedStorage(sequence, dtype=, device=)`` or ``TypedStorage(wrap_storage=untyped, dtype=)``.

    >>> import ember
    >>> s = ember.ones(3).storage()
    >>> s.size(), s.nbytes(), s.dtype
    (3, 12, ember.float32)
    >>> s[0] = 5; s.tolist()
    [5.0, 1.0, 1.0]
    """

    is_sparse = False
    is_hpu = False

    def __init__(self, *args: Any, wrap_storage: UntypedStorage | None = None,
                 dtype: dtype | None = None, device: Any = None, _internal: bool = False) -> None:
        from ember import get_default_dtype

        if args and isinstance(args[0], UntypedStorage) and wrap_storage is None:
            wrap_storage, args = args[0], args[1:]
            if args and dtype is None and isinstance(args[0], _C.dtype):
                dtype, args = args[0], args[1:]
        dt = get_default_dtype() if dtype is None else dtype
        if not isinstance(dt, _C.dtype):
            raise TypeError(f"TypedStorage(): dtype must be an ember.dtype, got "
                            f"{type(dt).__name__}")
        if wrap_storage is not None:
            if args or device is not None:
                raise TypeError("TypedStorage(): wrap_storage takes no other data or device")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"TypedStorage(): wrap_storage must be an UntypedStorage, got "
                                f"{type(wrap_storage).__name__}")
            self._untyped_storage = wrap_storage
        elif not args:
            self._untyped_storage = UntypedStorage(0, device=device)
        elif len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
            self._untyped_storage = UntypedStorage(args[0] * dt.itemsize, device=device)
        elif len(args) == 1 and hasattr(args[0], "__len__") and not isinstance(args[0], str):
            from ember import tensor

            t = tensor(list(args[0]), dtype=dt, device=device)
            self._untyped_storage = t.untyped_storage()
        else:
            raise TypeError("TypedStorage.__init__ received an invalid combination of arguments: "
                            "expected (), (int size), (Sequence data) or (wrap_storage="
                            "UntypedStorage), each with keyword dtype and device; got "
                            f"({', '.join(type(a).__name__ for a in args)})")
        self.dtype = dt

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

    def get_device(self) -> int | None:
        return self.device.index

    def tolist(self) -> list[Any]:
        return self._tensor().tolist()

    def __iter__(self) -> Any:
        return iter(self.tolist())

    def __getitem__(self, idx: Any) -> Any:
        """``s[i]``: the element as a Python number (slices are only for UntypedStorage)."""
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        i = _check_index(idx, self.size(), "ember.TypedStorage", RuntimeError)
        return self._tensor()[i].item()

    def __setitem__(self, idx: Any, value: Any) -> None:
        """``s[i] = v`` or ``s[a:b] = v``: writes into the memory of the tensors over s."""
        n = self.size()
        if isinstance(idx, slice):
            a, b = _slice_bounds(idx, n)
            self._tensor()[a:b] = value
            return
        if isinstance(idx, (bool, Tensor)) or not hasattr(idx, "__index__"):
            raise RuntimeError(f"can't index an ember.TypedStorage with {type(idx).__name__}")
        i = idx.__index__()
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n}")
        self._tensor()[i] = value

    def fill_(self, value: Any) -> TypedStorage:
        """Sets every element to ``value``; returns self."""
        self._tensor().fill_(value)
        return self

    def copy_(self, source: Any, non_blocking: bool | None = None) -> TypedStorage:
        """Copies ``source``'s elements (a storage of the same number of bytes; a typed one is
        converted to this dtype) into self; returns self."""
        if isinstance(source, TypedStorage):
            _check_copy_sizes(self.nbytes(), source.nbytes())
            self._tensor().copy_(source._tensor(), non_blocking=bool(non_blocking))
        else:
            _untyped_copy_(self._untyped_storage, source, non_blocking)
        return self

    def clone(self) -> TypedStorage:
        """A copy in new memory."""
        return TypedStorage(self._untyped_storage.clone(), self.dtype)

    __copy__ = clone

    def __deepcopy__(self, memo: dict[int, Any]) -> TypedStorage:
        if id(self) not in memo:
            memo[id(self)] = self.clone()
        return memo[id(self)]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _rebuild_typed, (self._untyped_storage, repr(self.dtype).split(".")[-1])

    def to(self, *, device: Any = None, non_blocking: bool = False) -> TypedStorage:
        """The storage on ``device`` (self when already there)."""
        u = _untyped_to(self._untyped_storage, device=device, non_blocking=non_blocking)
        return self if u is self._untyped_storage else TypedStorage(u, self.dtype)

    def cpu(self) -> TypedStorage:
        return TypedStorage(self._untyped_storage.cpu(), self.dtype)

    def cuda(self, device: Any = None, non_blocking: bool = False) -> TypedStorage:
        return TypedStorage(_untyped_cuda(self._untyped_storage, device, non_blocking),
                            self.dtype)

    def resize_(self, size: int) -> None:
        """Resizes the storage to ``size`` elements in place (see ``UntypedStorage.resize_``)."""
        self._untyped_storage.resize_(size * self.element_size())

    _resize_ = resize_  # the name PyTorch's FSDP calls

    def resizable(self) -> bool:
        return self._untyped_storage.resizable()

    def share_memory_(self) -> TypedStorage:
        """Moves the memory to shared memory in place; returns self."""
        self._untyped_storage.share_memory_()
        return self

    def is_shared(self) -> bool:
        return self._tensor().is_shared()

    def is_pinned(self, device: Any = "cuda") -> bool:
        return False

    def pin_memory(self, device: Any = "cuda") -> TypedStorage:
        return self

    def pickle_storage_type(self) -> str:
        """The legacy class name PyTorch pickles this dtype's storages under ("FloatStorage")."""
        return _legacy_storage_name(self.dtype)

    def type(self, dtype: Any = None, non_blocking: bool = False) -> str:
        return f"ember.{_legacy_storage_name(self.dtype)}"

    @classmethod
    def from_buffer(cls, buffer: Any, byte_order: str | None = None, count: int = -1,
                    offset: int = 0, *, dtype: dtype | None = None,
                    device: Any = None) -> TypedStorage:
        """A new storage of ``count`` elements of ``dtype`` read from a Python buffer at byte
        ``offset`` in ``byte_order`` (a copy).

        >>> import ember
        >>> ember.TypedStorage.from_buffer(b"\\x01\\x00", "little", dtype=ember.int16).tolist()
        [1]
        """
        from ember import get_default_dtype

        dt = get_default_dtype() if dtype is None else dtype
        u = _storage_of_bytes(_buffer_bytes(buffer, byte_order, count, offset, dt,
                                            "TypedStorage.from_buffer"))
        return TypedStorage(_untyped_to(u, device=device), dt)

    @classmethod
    def from_file(cls, filename: str, shared: bool = False, size: int = 0, *,
                  dtype: dtype | None = None) -> TypedStorage:
        """A CPU storage of ``size`` elements of ``dtype`` memory-mapped from ``filename`` (see
        ``UntypedStorage.from_file`` for ``shared``). On ``TypedStorage`` itself ``dtype`` must be
        given; the legacy per-dtype classes (``ember.FloatStorage.from_file``) supply it.

        >>> import ember, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "floats")
        >>> ember.TypedStorage.from_file(path, True, 2, dtype=ember.float32).tolist()
        [0.0, 0.0]
        """
        if dtype is None:
            raise RuntimeError("from_file can only be called on derived classes (FloatStorage, "
                               "...): pass dtype=, or use UntypedStorage.from_file")
        if not isinstance(dtype, _C.dtype):
            raise TypeError(f"from_file(): dtype must be an ember.dtype, got "
                            f"{type(dtype).__name__}")
        if isinstance(size, float) or not hasattr(size, "__index__"):
            raise TypeError(f"from_file(): argument 'size' must be int, not {type(size).__name__}")
        return TypedStorage(_map_file(filename, shared, size.__index__() * dtype.itemsize,
                                      "from_file"), dtype)

    def _to_dtype(self, dt: dtype) -> TypedStorage:
        if dt == self.dtype:
            return self
        return TypedStorage(self._tensor().to(dt).untyped_storage(), dt)

    def _new_shared(self, size: int) -> TypedStorage:
        """A new storage of ``size`` elements of this dtype in shared memory (what the old
        ``default_collate`` preallocates a batch with)."""
        return TypedStorage(_C._empty_shared([size], self.dtype).untyped_storage(), self.dtype)

    def _tensor(self) -> Tensor:
        return _storage_view(self._untyped_storage, self.dtype)

    def __repr__(self) -> str:
        lines = [f" {v}" for v in self.tolist()]
        lines.append(f"[ember.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of "
                     f"size {self.size()}]")
        return "\n".join(lines)

    __str__ = __repr__


_add_dtype_methods(TypedStorage, TypedStorage._to_dtype)


class _LegacyStorageMeta(type):
    """The metaclass of ``FloatStorage`` and its kin: as in PyTorch, a CPU ``TypedStorage`` of
    the class's dtype is an instance of the class (they construct plain TypedStorages)."""

    dtype: dtype

    def __instancecheck__(cls, instance: Any) -> bool:
        if type(instance) is TypedStorage:
            return instance.dtype == cls.dtype and instance.device.type == "cpu"
        return super().__instancecheck__(instance)


class _LegacyStorage(TypedStorage, metaclass=_LegacyStorageMeta):
    """Base of PyTorch's legacy per-dtype storage classes (``ember.FloatStorage``, ...): each
    builds a CPU ``TypedStorage`` of its fixed dtype, from (), (int size), (Sequence data) or
    (wrap_storage=UntypedStorage).

    >>> import ember
    >>> s = ember.FloatStorage([1, 2])
    >>> s.tolist(), s.dtype, isinstance(s, ember.FloatStorage), type(s).__name__
    ([1.0, 2.0], ember.float32, True, 'TypedStorage')
    """

    def __new__(cls, *args: Any, wrap_storage: UntypedStorage | None = None,
                **kwargs: Any) -> TypedStorage:  # type: ignore[misc]
        if cls is _LegacyStorage:
            raise RuntimeError("Only child classes of _LegacyStorage can be instantiated")
        usage = (f"{cls.__name__}() received an invalid combination of arguments: expected one "
                 "of (), (int size), (Sequence data) or (*, UntypedStorage wrap_storage)")
        if kwargs:
            raise RuntimeError(f"{usage}; got the keyword arguments {', '.join(sorted(kwargs))}")
        if wrap_storage is not None:
            if args:
                raise RuntimeError(f"{usage}; got positional arguments with wrap_storage")
            if not isinstance(wrap_storage, UntypedStorage):
                raise TypeError(f"{cls.__name__}(): wrap_storage must be an UntypedStorage, got "
                                f"{type(wrap_storage).__name__}")
            return TypedStorage(wrap_storage=wrap_storage, dtype=cls.dtype)
        if len(args) > 1:
            raise RuntimeError(f"{usage}; got {len(args)} positional arguments")
        if args:
            a = args[0]
            if isinstance(a, (str, bytes, Tensor)) or not (
                    (isinstance(a, int) and not isinstance(a, bool)) or hasattr(a, "__len__")):
                raise TypeError(f"{cls.__name__}(): invalid data type '{type(a).__name__}' "
                                "(expected an int size or a sequence of numbers)")
            if isinstance(a, int) and a < 0:
                raise RuntimeError(f"{cls.__name__}(): size must be non-negative, got {a}")
        return TypedStorage(*args, dtype=cls.dtype)

    @classmethod
    def from_buffer(cls, buffer: Any, byte_order: str | None = None, count: int = -1,
                    offset: int = 0, *, dtype: dtype | None = None,
                    device: Any = None) -> TypedStorage:
        """``TypedStorage.from_buffer`` with the class's dtype."""
        return TypedStorage.from_buffer(buffer, byte_order, count, offset, dtype=cls.dtype,
                                        device=device)

    @classmethod
    def from_file(cls, filename: str, shared: bool = False, size: int = 0, *,
                  dtype: dtype | None = None) -> TypedStorage:
        """``TypedStorage.from_file`` with the class's dtype."""
        return TypedStorage.from_file(filename, shared, size, dtype=cls.dtype)


def _legacy_class(name: str, dt: dtype) -> type:
    cls = _LegacyStorageMeta(name, (_LegacyStorage,), {
        "dtype": dt, "__module__": "ember",
        "__doc__": f"The legacy storage class of {dt}: ``{name}(size)`` or ``{name}(data)`` "
                   "builds a CPU TypedStorage of that dtype."})
    return cls


FloatStorage = _legacy_class("FloatStorage", _C.float32)
DoubleStorage = _legacy_class("DoubleStorage", _C.float64)
HalfStorage = _legacy_class("HalfStorage", _C.float16)
BFloat16Storage = _legacy_class("BFloat16Storage", _C.bfloat16)
LongStorage = _legacy_class("LongStorage", _C.int64)
IntStorage = _legacy_class("IntStorage", _C.int32)
ShortStorage = _legacy_class("ShortStorage", _C.int16)
CharStorage = _legacy_class("CharStorage", _C.int8)
ByteStorage = _legacy_class("ByteStorage", _C.uint8)
BoolStorage = _legacy_class("BoolStorage", _C.bool)
ComplexFloatStorage = _legacy_class("ComplexFloatStorage", _C.complex64)
ComplexDoubleStorage = _legacy_class("ComplexDoubleStorage", _C.complex128)
_LEGACY_CLASSES = {c.dtype: c for c in (
    FloatStorage, DoubleStorage, HalfStorage, BFloat16Storage, LongStorage, IntStorage,
    ShortStorage, CharStorage, ByteStorage, BoolStorage, ComplexFloatStorage,
    ComplexDoubleStorage)}


def _storage_type(self: Tensor) -> type | None:
    """The legacy storage class of self's dtype (``ember.FloatStorage`` for float32), None for
    a dtype without one (uint16, float8, ...), as ``torch.Tensor.storage_type``.

    >>> import ember
    >>> ember.arange(3).storage_type()
    <class 'ember.LongStorage'>
    """
    return _LEGACY_CLASSES.get(self.dtype)


def _legacy_storage_name(dt: dtype) -> str:
    from ember._legacy import _STORAGE_NAMES

    name = _STORAGE_NAMES.get(repr(dt))
    if name is None:
        name = {"complex64": "ComplexFloat", "complex128": "ComplexDouble"}.get(
            repr(dt).split(".")[-1], repr(dt).split(".")[-1])
    return f"{name}Storage"


def _rebuild_typed(untyped: UntypedStorage, dtype_name: str) -> TypedStorage:
    return TypedStorage(untyped, getattr(_C, dtype_name))


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
Tensor.storage_type = _storage_type  # type: ignore[attr-defined]
Tensor._typed_storage = _typed_storage  # type: ignore[attr-defined]
Tensor.is_set_to = _is_set_to  # type: ignore[attr-defined]
