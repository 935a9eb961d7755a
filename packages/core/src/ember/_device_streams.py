"""Device-generic streams and events (PyTorch's ``torch.Stream`` and ``torch.Event``).

On a CUDA device they wrap ``ember.cuda.Stream`` / ``ember.cuda.Event``. On the CPU, where ember
runs every op synchronously on the calling thread, there is one stream (id 0) whose work is
always complete: ``query()`` is True, ``synchronize()`` returns at once, and an event records
the moment it was recorded (so ``elapsed_time`` measures host time between two events created
with ``enable_timing=True``; PyTorch's CPU backend has no events at all).

>>> import ember
>>> s = ember.Stream("cpu")
>>> s.query(), s.device
(True, device(type='cpu'))
>>> start, end = ember.Event("cpu", enable_timing=True), ember.Event("cpu", enable_timing=True)
>>> start.record(); end.record()
>>> end.elapsed_time(start) <= 0.0 <= start.elapsed_time(end)
True
"""

from __future__ import annotations

import time
from typing import Any

from ember import _C

__all__ = ["Stream", "Event"]

_DEVICE_TYPES = {"cpu": 0, "cuda": 1}


def _resolve(device: Any) -> Any:
    """An ember.device; None is the current accelerator (CUDA when available) else the CPU."""
    from ember import cuda

    if device is None:
        return _C.device("cuda", cuda.current_device()) if cuda.is_available() else _C.device("cpu")
    if isinstance(device, int) and not isinstance(device, bool):
        return _C.device("cuda", device)
    dev = device if isinstance(device, _C.device) else _C.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise RuntimeError(f"Stream/Event: device type {dev.type!r} has no streams in ember")
    if dev.type == "cuda" and dev.index is None:
        dev = _C.device("cuda", cuda.current_device())
    return dev


class Stream:
    """A queue of work on one device: ``Stream(device=None, *, priority=0)``.

    >>> import ember
    >>> ember.Stream("cpu").synchronize()
    """

    def __init__(self, device: Any = None, *, priority: int = 0) -> None:
        self._device = _resolve(device)
        self._impl: Any = None
        if self._device.type == "cuda":
            from ember import cuda

            self._impl = cuda.Stream(self._device, priority=priority)

    @classmethod
    def _from_cuda(cls, impl: Any) -> Stream:
        s = cls.__new__(cls)
        s._device, s._impl = impl.device, impl
        return s

    @property
    def device(self) -> Any:
        """The stream's device."""
        return self._device

    @property
    def device_type(self) -> int:
        """The device type as PyTorch's ``DeviceType`` number (0 CPU, 1 CUDA)."""
        return _DEVICE_TYPES[self._device.type]

    @property
    def device_index(self) -> int:
        return -1 if self._device.index is None else int(self._device.index)

    @property
    def stream_id(self) -> int:
        """The native handle (``cudaStream_t``) on CUDA; 0 for the CPU's one stream."""
        return 0 if self._impl is None else int(self._impl.cuda_stream)

    def query(self) -> bool:
        """Whether all work queued on the stream has completed."""
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        """Waits until all work queued on the stream has completed."""
        if self._impl is not None:
            self._impl.synchronize()

    def wait_event(self, event: Event) -> None:
        """Makes work queued on this stream from now on wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Makes work queued on this stream from now on wait for ``stream``'s work so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Records ``event`` (a new one by default) on this stream and returns it."""
        if event is None:
            event = Event(self._device)
        event.record(self)
        return event

    def __enter__(self) -> Stream:
        if self._impl is not None:
            from ember import cuda

            self._ctx = cuda.stream(self._impl)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> bool:
        ctx = self.__dict__.pop("_ctx", None)
        if ctx is not None:
            ctx.__exit__(*exc)
        return False

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and self._device == other._device
                and self.stream_id == other.stream_id)

    def __hash__(self) -> int:
        return hash((str(self._device), self.stream_id))

    def __repr__(self) -> str:
        return (f"ember.Stream device_type={self._device.type}, device_index={self.device_index}, "
                f"stream_id={self.stream_id}")


class Event:
    """A marker in a stream's work: ``Event(device=None, *, enable_timing=False,
    blocking=False, interprocess=False)``.

    >>> import ember
    >>> e = ember.Event("cpu")
    >>> e.record(); e.query()
    True
    """

    def __init__(self, device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self._device = _resolve(device)
        self.enable_timing = bool(enable_timing)
        self._impl: Any = None
        self._time: float | None = None
        if self._device.type == "cuda":
            from ember import cuda

            self._impl = cuda.Event(enable_timing=enable_timing, blocking=blocking,
                                    interprocess=interprocess)
        elif interprocess:
            raise RuntimeError("Event: interprocess events need a CUDA device")

    @property
    def device(self) -> Any:
        return self._device

    def record(self, stream: Stream | None = None) -> None:
        """Records the event on ``stream`` (the device's current stream by default)."""
        if self._impl is None:
            if stream is not None and stream.device.type != "cpu":
                raise RuntimeError(f"Event.record: a cpu event cannot be recorded on {stream!r}")
            self._time = time.perf_counter()
            return
        self._impl.record(None if stream is None else stream._impl)

    def wait(self, stream: Stream | None = None) -> None:
        """Makes ``stream`` (the current one by default) wait for the event."""
        if self._impl is not None:
            self._impl.wait(None if stream is None else stream._impl)

    def query(self) -> bool:
        """Whether the work before the event has completed (always True on the CPU)."""
        return True if self._impl is None else self._impl.query()

    def synchronize(self) -> None:
        """Waits until the work before the event has completed."""
        if self._impl is not None:
            self._impl.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, with timing)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time(): expected an Event, got {type(end_event).__name__}")
        if self._impl is not None:
            return self._impl.elapsed_time(end_event._impl)
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("elapsed_time(): both events must be created with "
                               "enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("elapsed_time(): both events must be recorded first")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self) -> str:
        index = -1 if self._device.index is None else int(self._device.index)
        return (f"ember.Event device_type={self._device.type}, device_index={index}, "
                f"enable_timing={self.enable_timing}")
