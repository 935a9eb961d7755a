"""``ember.cpu``: the CPU's device module, with the calls device-generic code makes on
``torch.cpu`` (or on ``ember.get_device_module("cpu")``): one device, always available, whose
work is done when an op returns (so ``synchronize`` has nothing to wait for).

>>> import ember
>>> ember.cpu.is_available(), ember.cpu.device_count(), ember.cpu.current_device()
(True, 1, 'cpu')
>>> with ember.cpu.stream(ember.cpu.current_stream()):
...     ember.cpu.synchronize()

``ember.cpu.amp`` holds PyTorch's deprecated ``torch.cpu.amp.autocast`` and ``GradScaler``.
"""

from __future__ import annotations

from typing import Any

from ember._device_streams import Event, Stream

__all__ = [
    "is_available", "is_initialized", "device_count", "current_device", "set_device",
    "synchronize", "current_stream", "stream", "StreamContext", "Stream", "Event",
]

_STREAM: list[Stream] = []


def is_available() -> bool:
    """True: the CPU is always there."""
    return True


def is_initialized() -> bool:
    """True: the CPU needs no initialization."""
    return True


def device_count() -> int:
    """1: ember treats the host as one device."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def set_device(device: Any) -> None:
    """Nothing to change: the CPU is the only CPU device."""


def synchronize(device: Any = None) -> None:
    """Returns at once: CPU ops have finished when they return."""


def current_stream(device: Any = None) -> Stream:
    """The CPU's one stream."""
    if not _STREAM:
        _STREAM.append(Stream("cpu"))
    return _STREAM[0]


class StreamContext:
    """``with ember.cpu.stream(s):`` (nothing to switch on the CPU)."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream

    def __enter__(self) -> Stream | None:
        return self.stream

    def __exit__(self, *exc: Any) -> bool:
        return False


def stream(stream: Stream | None) -> StreamContext:
    """A context manager for ``stream`` (a no-op on the CPU)."""
    return StreamContext(stream)





def __getattr__(name: str) -> Any:
    # `ember.cpu.amp` on first use (PyTorch's deprecated CPU spellings of autocast/GradScaler)
    if name == "amp":
        import importlib

        return importlib.import_module("ember.cpu.amp")
    raise AttributeError(f"module 'ember.cpu' has no attribute {name!r}")
