"""``ember.accelerator``: the device-generic API of PyTorch's ``torch.accelerator``, over
ember's one accelerator type, CUDA (``ember.cuda``). Without a CUDA device there is no
accelerator: ``is_available()`` is False, ``current_accelerator()`` is None,
``device_count()`` is 0, and the calls that need a device raise RuntimeError, as PyTorch.

>>> import ember
>>> ember.accelerator.is_available() == ember.cuda.is_available()
True
>>> ember.accelerator.device_count() == ember.cuda.device_count()
True
"""

from __future__ import annotations

from typing import Any

from ember import _C, cuda
from ember._device_streams import Stream

__all__ = [
    "is_available", "current_accelerator", "device_count", "current_device_index",
    "current_device_idx", "set_device_index", "set_device_idx", "device_index", "synchronize",
    "current_stream", "set_stream", "empty_cache", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "memory_stats", "reset_peak_memory_stats",
]


def is_available() -> bool:
    """Whether an accelerator (a CUDA device) is present and usable.

    >>> import ember
    >>> isinstance(ember.accelerator.is_available(), bool)
    True
    """
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Any:
    """The accelerator's device type (``device('cuda')``) when ember was built with CUDA (and,
    with ``check_available=True``, a device is present); else None.

    >>> import ember
    >>> ember.accelerator.current_accelerator(check_available=True) in (None, ember.device("cuda"))
    True
    """
    if check_available:
        return _C.device("cuda") if cuda.is_available() else None
    return _C.device("cuda") if cuda._module() is not None else None


def device_count() -> int:
    """The number of accelerator devices (0 without one).

    >>> import ember
    >>> ember.accelerator.device_count() >= 0
    True
    """
    return cuda.device_count()


def _require(what: str) -> None:
    if not cuda.is_available():
        raise RuntimeError(f"accelerator.{what}: Cannot access accelerator device when none is "
                           "available.")


def current_device_index() -> int:
    """The index of the current accelerator device.

    >>> import ember
    >>> ember.accelerator.current_device_index() if ember.accelerator.is_available() else 0
    0
    """
    _require("current_device_index")
    return cuda.current_device()


current_device_idx = current_device_index


def _index(device: Any) -> int:
    if isinstance(device, (str, _C.device)):
        dev = _C.device(device) if isinstance(device, str) else device
        if dev.type != "cuda":
            raise ValueError(f"accelerator: {dev} is not an accelerator device")
        return -1 if dev.index is None else int(dev.index)
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"accelerator: expected a device index, str or device, got {device!r}")
    return device


def set_device_index(device: Any) -> None:
    """Makes ``device`` (an index, ``"cuda:N"`` or a device) the current accelerator device; a
    negative index changes nothing.

    >>> import ember
    >>> ember.accelerator.set_device_index(-1)
    """
    i = _index(device)
    if i < 0:
        return
    _require("set_device_index")
    cuda.set_device(i)


set_device_idx = set_device_index


class device_index:
    """A context manager that makes ``device`` the current accelerator device for its block
    (``None`` changes nothing).

    >>> import ember
    >>> with ember.accelerator.device_index(None):
    ...     pass
    """

    def __init__(self, device: Any) -> None:
        self.idx = None if device is None else _index(device)
        self.prev: int | None = None

    def __enter__(self) -> device_index:
        if self.idx is not None and self.idx >= 0:
            self.prev = current_device_index()
            set_device_index(self.idx)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.prev is not None:
            set_device_index(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on the accelerator device (the current one by default).

    >>> import ember
    >>> ember.accelerator.synchronize() if ember.accelerator.is_available() else None
    """
    _require("synchronize")
    cuda.synchronize(None if device is None else _index(device))


def current_stream(device: Any = None) -> Stream:
    """The current stream of the accelerator device, as an ``ember.Stream``."""
    _require("current_stream")
    i = None if device is None else _index(device)
    return Stream._from_cuda(cuda.current_stream(i))


def set_stream(stream: Stream) -> None:
    """Makes ``stream`` the current stream of its device."""
    if not isinstance(stream, Stream) or stream._impl is None:
        raise TypeError("accelerator.set_stream(): expected an ember.Stream on an accelerator")
    cuda.set_stream(stream._impl)


def empty_cache() -> None:
    """Returns the caching allocator's unused memory to the device (nothing without one)."""
    if cuda.is_available():
        cuda.empty_cache()


def memory_allocated(device_index: Any = None) -> int:
    """Bytes held by tensors on the device."""
    _require("memory_allocated")
    return cuda.memory_allocated(device_index)


def max_memory_allocated(device_index: Any = None) -> int:
    """Peak of :func:`memory_allocated` since the start or the last reset."""
    _require("max_memory_allocated")
    return cuda.max_memory_allocated(device_index)


def memory_reserved(device_index: Any = None) -> int:
    """Bytes the caching allocator holds on the device."""
    _require("memory_reserved")
    return cuda.memory_reserved(device_index)


def max_memory_reserved(device_index: Any = None) -> int:
    """Peak of :func:`memory_reserved`."""
    _require("max_memory_reserved")
    return cuda.max_memory_reserved(device_index)


def memory_stats(device_index: Any = None) -> dict[str, int]:
    """The caching allocator's statistics for the device."""
    _require("memory_stats")
    return cuda.memory_stats(device_index)


def reset_peak_memory_stats(device_index: Any = None) -> None:
    """Resets the peaks that :func:`max_memory_allocated` and :func:`max_memory_reserved`
    report."""
    _require("reset_peak_memory_stats")
    cuda.reset_peak_memory_stats(device_index)
