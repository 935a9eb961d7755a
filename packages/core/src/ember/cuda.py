"""ember.cuda: CUDA device queries. The CUDA backend lives in the optional extension
``ember._C_cuda`` (built with ``EMBER_CUDA=ON``); without it everything here reports no device.

>>> import ember
>>> isinstance(ember.cuda.is_available(), bool)
True
"""

from __future__ import annotations

from types import ModuleType


def _module() -> ModuleType | None:
    try:
        from ember import _C_cuda
    except ImportError:  # CPU-only build, or the CUDA runtime library is missing
        return None
    return _C_cuda


def is_available() -> bool:
    """Whether ember was built with CUDA and a CUDA device is present."""
    m = _module()
    return bool(m and m.is_available())


def device_count() -> int:
    """Number of visible CUDA devices (0 without CUDA support)."""
    m = _module()
    return m.device_count() if m else 0


def _require() -> ModuleType:
    m = _module()
    if m is None or not m.is_available():
        raise RuntimeError(
            "ember.cuda: no CUDA device available (ember was built without EMBER_CUDA=ON, or "
            "no GPU/driver is present)"
        )
    return m


def synchronize() -> None:
    """Waits for all work on the current CUDA device."""
    _require().synchronize()


def current_device() -> int:
    return _require().current_device()


def set_device(device: int) -> None:
    _require().set_device(device)


def get_device_name(device: int = 0) -> str:
    return _require().get_device_name(device)


def memory_allocated() -> int:
    """Bytes held by live CUDA tensors (through ember's caching allocator)."""
    return _require().memory_allocated()


def memory_reserved() -> int:
    """Bytes the CUDA caching allocator holds from the driver."""
    return _require().memory_reserved()


def empty_cache() -> None:
    """Returns cached, unused CUDA memory to the driver."""
    _require().empty_cache()
