"""ember.cuda: CUDA devices, streams, events, the caching allocator and pinned memory, with
PyTorch's names and semantics. The CUDA backend lives in the optional extension
``ember._C_cuda`` (built with ``EMBER_CUDA=ON``); without it (or without a GPU) ``is_available()``
is False and everything that needs a device raises a clear RuntimeError.

Work is queued asynchronously on the current stream of the current device. ``Stream`` objects
come from a pool of non-blocking streams per device (as in PyTorch), ``Event`` marks a point in a
stream, ``stream(s)`` makes ``s`` current for a block, ``Tensor.record_stream(s)`` tells the
caching allocator that a tensor is also used on ``s``.

>>> import ember
>>> isinstance(ember.cuda.is_available(), bool)
True
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "device_of",
    "get_device_name", "get_device_properties", "get_device_capability", "synchronize",
    "is_initialized", "init", "mem_get_info", "Stream", "ExternalStream", "Event",
    "StreamContext", "stream", "current_stream", "default_stream", "set_stream",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_stats", "memory_snapshot",
    "memory_summary", "empty_cache", "host_memory_stats", "OutOfMemoryError",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "ipc_collect",
]


def _module() -> ModuleType | None:
    try:
        from ember import _C_cuda
    except ImportError:  # CPU-only build, or the CUDA runtime library is missing
        return None
    return _C_cuda


def _loaded_module() -> ModuleType | None:
    """ember._C_cuda if something has loaded it already: seeding must not load CUDA (and
    cuBLAS) into a CPU-only program; the module applies a pending seed when it loads."""
    import sys

    return sys.modules.get("ember._C_cuda")


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


def _OutOfMemoryError() -> type:
    from ember import _C

    return _C.OutOfMemoryError


OutOfMemoryError = _OutOfMemoryError()


# ---- devices -----------------------------------------------------------------------------------


def _device_index(dev: Any, optional: bool = True) -> int:
    """A CUDA device index from an int, a "cuda[:N]" string or an ember.device; -1 (the current
    device) for None or a device without an index."""
    from ember import _C

    if dev is None:
        if optional:
            return -1
        raise ValueError("ember.cuda: expected a CUDA device, got None")
    if isinstance(dev, str):
        dev = _C.device(dev)
    if isinstance(dev, _C.device):
        if dev.type != "cuda":
            raise ValueError(f"ember.cuda: expected a cuda device, got {dev}")
        return -1 if dev.index is None else int(dev.index)
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise TypeError(f"ember.cuda: invalid device {dev!r} (expected an int, str or device)")
    return int(dev)


def _index(dev: Any = None) -> int:
    """The resolved index (the current device for None)."""
    i = _device_index(dev)
    return _require().current_device() if i < 0 else i


def init() -> None:
    """Initializes CUDA (creates the current device's context). Idempotent."""
    _require()._init()


def is_initialized() -> bool:
    """Whether CUDA has been initialized in this process (by init() or any CUDA work)."""
    m = _module()
    return bool(m and m.is_available() and m._is_initialized())


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on every stream of ``device`` (default: the current device)."""
    _require().synchronize(_device_index(device))


def current_device() -> int:
    """Index of the current CUDA device of this thread."""
    return _require().current_device()


def set_device(device: Any) -> None:
    """Makes ``device`` (an int, "cuda:N" or ember.device) the current CUDA device. A negative
    index is a no-op, as in PyTorch."""
    i = _device_index(device)
    if i >= 0:
        _require().set_device(i)


class device:
    """Context manager that makes a CUDA device current for a block (``None`` or -1: no-op).

    >>> import ember
    >>> with ember.cuda.device(None):
    ...     pass
    """

    def __init__(self, device: Any) -> None:
        self.idx = _device_index(device)
        self.prev_idx = -1

    def __enter__(self) -> "device":
        if self.idx >= 0:
            self.prev_idx = _require()._exchange_device(self.idx)
        return self

    def __exit__(self, *exc: Any) -> bool:
        if self.idx >= 0 and self.prev_idx >= 0:
            _require()._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """``device`` of a tensor's CUDA device; a no-op for a CPU tensor."""

    def __init__(self, obj: Any) -> None:
        dev = obj.device
        super().__init__(dev.index if dev.type == "cuda" and dev.index is not None else -1)


def get_device_name(device: Any = None) -> str:
    """Name of a CUDA device (default: the current one)."""
    return get_device_properties(device).name


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns: PyTorch's field names."""

    def __init__(self, d: dict) -> None:
        self.name: str = d["name"]
        self.total_memory: int = d["total_memory"]
        self.major: int = d["major"]
        self.minor: int = d["minor"]
        self.multi_processor_count: int = d["multi_processor_count"]
        self.L2_cache_size: int = d["L2_cache_size"]
        self.max_threads_per_multi_processor: int = d["max_threads_per_multi_processor"]
        self.warp_size: int = d["warp_size"]
        self.is_integrated: int = d["is_integrated"]
        self.is_multi_gpu_board: int = d["is_multi_gpu_board"]
        self.uuid: str = d["uuid"]

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
                f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


def get_device_properties(device: Any = None) -> _CudaDeviceProperties:
    """Properties of a CUDA device: name, total_memory, major, minor, multi_processor_count..."""
    m = _require()
    i = _index(device)
    if not 0 <= i < m.device_count():
        raise AssertionError(f"Invalid device id {i} ({m.device_count()} CUDA device(s))")
    return _CudaDeviceProperties(m._device_properties(i))


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) compute capability of a CUDA device."""
    p = get_device_properties(device)
    return p.major, p.minor


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of device memory, as the driver reports them."""
    return tuple(_require().mem_get_info(_device_index(device)))


# ---- streams and events --------------------------------------------------------------------------


class Stream:
    """A CUDA stream: work queued on it runs in order; different streams may run concurrently.

    ``Stream(device=None, priority=0)`` takes a stream from the device's pool of non-blocking
    streams (they never synchronize implicitly with the default stream: use ``wait_stream`` or
    events). Lower priority numbers run first; ``Stream.priority_range()`` gives the range.
    """

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        m = _require()
        if "stream_ptr" in kwargs:  # ExternalStream
            self.cuda_stream = int(kwargs.pop("stream_ptr"))
            self._idx = _index(device)
        else:
            self._idx = _index(device)
            self.cuda_stream = m._stream_create(self._idx, int(priority))
        if kwargs:
            raise TypeError(f"Stream() got unexpected keyword arguments {sorted(kwargs)}")

    @classmethod
    def _wrap(cls, handle: int, idx: int) -> "Stream":
        s = cls.__new__(cls)
        s.cuda_stream, s._idx = int(handle), int(idx)
        return s

    @staticmethod
    def priority_range(device: Any = None) -> tuple[int, int]:
        """(least, greatest) stream priority of the device, e.g. (0, -5)."""
        return tuple(_require()._stream_priority_range(_device_index(device)))

    @property
    def device(self) -> Any:
        from ember import _C

        return _C.device("cuda", self._idx)

    @property
    def device_index(self) -> int:
        return self._idx

    @property
    def priority(self) -> int:
        return _require()._stream_priority(self.cuda_stream, self._idx)

    def query(self) -> bool:
        """Whether all work queued on the stream has completed."""
        return _require()._stream_query(self.cuda_stream, self._idx)

    def synchronize(self) -> None:
        """Waits until all work queued on the stream has completed."""
        _require()._stream_synchronize(self.cuda_stream, self._idx)

    def wait_event(self, event: "Event") -> None:
        """Makes work queued on this stream from now on wait for ``event`` (no host wait)."""
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        """Makes work queued on this stream from now on wait for the work queued on ``stream``
        so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Records ``event`` (a new one by default) on this stream and returns it."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and self.cuda_stream == other.cuda_stream
                and self._idx == other._idx)

    def __hash__(self) -> int:
        return hash((self.cuda_stream, self._idx))

    def __repr__(self) -> str:
        return f"<ember.cuda.Stream device=cuda:{self._idx} cuda_stream={self.cuda_stream:#x}>"


class ExternalStream(Stream):
    """A stream created elsewhere (e.g. by another library), from its cudaStream_t value."""

    def __init__(self, stream_ptr: int, device: Any = None) -> None:
        super().__init__(device, stream_ptr=stream_ptr)


class Event:
    """A CUDA event: a marker in a stream, to wait for or to time.

    ``Event(enable_timing=False, blocking=False, interprocess=False)``. The event is created on
    its first ``record``, on the device of that stream.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self.interprocess = bool(interprocess)
        self._handle: int | None = None
        self._idx = -1
        self._recorded = False

    def _create(self, idx: int) -> None:
        if self._handle is None:
            self._handle = _require()._event_create(idx, self.enable_timing, self.blocking,
                                                    self.interprocess)
            self._idx = idx
        elif idx != self._idx:
            raise RuntimeError(f"Event: the event was created on cuda:{self._idx}; it cannot be "
                               f"recorded on a stream of cuda:{idx}")

    @property
    def device(self) -> Any:
        from ember import _C

        return None if self._handle is None else _C.device("cuda", self._idx)

    @property
    def cuda_event(self) -> int:
        return self._handle or 0

    def record(self, stream: Stream | None = None) -> None:
        """Records the event on ``stream`` (default: the current stream)."""
        if stream is None:
            stream = current_stream()
        self._create(stream._idx)
        _require()._event_record(self._handle, stream.cuda_stream, self._idx)
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Makes work queued on ``stream`` (default: the current stream) from now on wait for
        this event. Does nothing if the event was never recorded."""
        if stream is None:
            stream = current_stream()
        if self._handle is not None:
            _require()._stream_wait_event(stream.cuda_stream, self._handle, stream._idx)

    def query(self) -> bool:
        """Whether the work recorded before the event has completed (True if never recorded)."""
        if self._handle is None:
            return True
        return _require()._event_query(self._handle, self._idx)

    def synchronize(self) -> None:
        """Waits until the work recorded before the event has completed."""
        if self._handle is not None:
            _require()._event_synchronize(self._handle, self._idx)

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded with
        ``enable_timing=True``; waits for ``end_event``)."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with argument "
                               "'enable_timing=True'")
        if not (self._recorded and end_event._recorded):
            raise RuntimeError("Event.elapsed_time: both events must be recorded before "
                               "calculating elapsed time")
        end_event.synchronize()
        return _require()._event_elapsed_time(self._handle, end_event._handle, self._idx)

    def __del__(self) -> None:
        h = getattr(self, "_handle", None)
        if h is not None:
            m = _module()
            if m is not None:
                try:
                    m._event_destroy(h, self._idx)
                except Exception:  # interpreter teardown
                    pass

    def __repr__(self) -> str:
        return (f"<ember.cuda.Event {self._handle:#x}>" if self._handle is not None
                else "<ember.cuda.Event uninitialized>")


def current_stream(device: Any = None) -> Stream:
    """This thread's current stream of ``device`` (default: the current device)."""
    m = _require()
    i = _index(device)
    return Stream._wrap(m._current_stream(i), i)


def default_stream(device: Any = None) -> Stream:
    """The default (legacy null) stream of ``device``; its ``cuda_stream`` is 0."""
    return Stream._wrap(0, _index(device))


def set_stream(stream: Stream | None) -> None:
    """Makes ``stream`` this thread's current stream (and its device the current device).
    ``None`` is a no-op."""
    if stream is None:
        return
    m = _require()
    if m.current_device() != stream._idx:
        m.set_device(stream._idx)
    m._set_stream(stream._idx, stream.cuda_stream)


class StreamContext:
    """Context manager: ``stream`` is current for the block (its device too); the previous
    streams and device come back on exit. ``None`` makes it a no-op."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._saved: list[tuple[int, int]] = []
        self._prev_device = -1

    def __enter__(self) -> Stream | None:
        s = self.stream
        if s is None:
            return None
        m = _require()
        self._prev_device = m.current_device()
        self._saved = [(self._prev_device, m._current_stream(self._prev_device))]
        if s._idx != self._prev_device:
            self._saved.append((s._idx, m._current_stream(s._idx)))
        set_stream(s)
        return s

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is None:
            return False
        m = _require()
        for idx, handle in reversed(self._saved):
            m._set_stream(idx, handle)
        if m.current_device() != self._prev_device:
            m.set_device(self._prev_device)
        return False


def stream(stream: Stream | None) -> StreamContext:
    """``with ember.cuda.stream(s):`` queues the block's work on ``s`` (None: no-op)."""
    return StreamContext(stream)


def _sleep(cycles: int) -> None:
    """Queues a kernel that spins for ``cycles`` GPU clock cycles on the current stream (a way
    for tests to keep a stream busy)."""
    _require()._sleep(int(cycles))


# ---- the caching allocator ----------------------------------------------------------------------


def memory_stats(device: Any = None) -> dict[str, int]:
    """The caching allocator's statistics for ``device``, with PyTorch's keys
    ("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_alloc_retries", ...)."""
    return dict(sorted(_require()._memory_stats(_device_index(device)).items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live CUDA tensors on ``device`` (rounded block sizes)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds from the driver on ``device`` (allocated + cached)."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved since the start or the last reset_peak_memory_stats."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Resets the peaks (allocated, reserved, active, segments) to the current values."""
    _require()._reset_peak_memory_stats(_device_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    """Resets max_memory_allocated (as PyTorch does, through reset_peak_memory_stats)."""
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Returns every cached, unused segment of every device to the driver (blocks held for
    record_stream events are waited for first)."""
    _require().empty_cache()


def ipc_collect() -> None:
    """Frees the CUDA memory of tensors this process sent to others (``ember.multiprocessing``)
    that every receiver has released. It happens anyway at each send and at exit; call it to get
    the memory back sooner, e.g. before measuring ``memory_allocated``.

    >>> import ember
    >>> if ember.cuda.is_available():
    ...     ember.cuda.ipc_collect()
    """
    _require()._ipc_collect()


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments of the caching allocators: dicts with device, address, total_size,
    allocated_size, active_size, stream, segment_type ("small"/"large") and blocks (address,
    size, requested_size, state "active_allocated"/"active_pending_free"/"inactive")."""
    return _require()._memory_snapshot()


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A readable table of the caching allocator's statistics for ``device``."""
    s = memory_stats(device)
    idx = _index(device)
    w = 75
    rows = [
        ("Allocated memory", _fmt(s["allocated_bytes.all.current"]),
         _fmt(s["allocated_bytes.all.peak"])),
        ("Active memory", _fmt(s["active_bytes.all.current"]), _fmt(s["active_bytes.all.peak"])),
        ("Requested memory", _fmt(s["requested_bytes.all.current"]), ""),
        ("GPU reserved memory", _fmt(s["reserved_bytes.all.current"]),
         _fmt(s["reserved_bytes.all.peak"])),
        ("Non-releasable memory", _fmt(s["inactive_split_bytes.all.current"]), ""),
        ("Allocations", str(s["allocation.all.current"]), ""),
        ("Active allocs", str(s["active.all.current"]), ""),
        ("GPU reserved segments", str(s["segment.all.current"]), str(s["segment.all.peak"])),
    ]
    if not abbreviated:
        rows += [
            ("Held for other streams' events", str(s["pending_event_blocks"]), ""),
            ("Allocations (total) / frees", f"{s['num_alloc']} / {s['num_free']}", ""),
            ("Cache hits", str(s["num_cache_hits"]), ""),
            ("cudaMalloc / cudaFree calls", f"{s['num_device_alloc']} / {s['num_device_free']}",
             ""),
            ("Splits / merges", f"{s['num_splits']} / {s['num_merges']}", ""),
        ]
    lines = ["=" * w,
             f"|{'ember CUDA memory summary, device ID ' + str(idx):^{w - 2}}|",
             "|" + "-" * (w - 2) + "|",
             f"|{'  CUDA OOMs: ' + str(s['num_ooms']):<36}"
             f"{'cudaMalloc retries: ' + str(s['num_alloc_retries']):>37}|",
             "=" * w,
             f"| {'Metric':<40}| {'Cur Usage':>14} | {'Peak Usage':>12} |",
             "|" + "-" * (w - 2) + "|"]
    for name, cur, peak in rows:
        lines.append(f"| {name:<40}| {cur:>14} | {peak:>12} |")
    lines.append("=" * w)
    return "\n".join(lines) + "\n"


def host_memory_stats() -> dict[str, int]:
    """Statistics of the pinned (page-locked) host memory allocator (same keys as
    memory_stats)."""
    return dict(sorted(_require()._host_memory_stats().items()))


# ---- Tensor methods: pin_memory, is_pinned, record_stream ----------------------------------------


def _tensor_pin_memory(self: Any, device: Any = None) -> Any:
    """A copy of the tensor in page-locked (pinned) host memory, from which copies to the GPU
    (``to("cuda", non_blocking=True)``) run asynchronously; a pinned tensor returns itself.
    Without CUDA there is no page-locked allocator and the tensor itself is returned."""
    m = _module()
    if m is None or not m.is_available():
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.device}' memory: only dense CPU tensors can "
                               "be pinned")
        return self
    return m._pin_memory(self)


def _tensor_is_pinned(self: Any, device: Any = None) -> bool:
    """Whether the tensor lives in page-locked host memory (always False without CUDA)."""
    m = _module()
    if m is None or not m.is_available():
        return False
    return m._is_pinned(self)


def _tensor_record_stream(self: Any, stream: Stream) -> None:
    """Marks this CUDA tensor's memory as used by ``stream``: when the tensor is freed, the
    caching allocator reuses the block only after the work queued on ``stream`` by then has
    completed. Needed when a tensor allocated on one stream is used on another."""
    if not isinstance(stream, Stream):
        raise TypeError(f"record_stream(): expected an ember.cuda.Stream, got "
                        f"{type(stream).__name__}")
    _require()._record_stream(self, stream.cuda_stream, stream._idx)


def _install_tensor_methods() -> None:
    from ember._C import Tensor

    Tensor.pin_memory = _tensor_pin_memory
    Tensor.is_pinned = _tensor_is_pinned
    Tensor.record_stream = _tensor_record_stream


_install_tensor_methods()


def _pinned_result(t: Any, op: str, requires_grad: bool = False) -> Any:
    """``t`` moved to pinned memory (the pin_memory=True of factories)."""
    if not is_available():
        raise RuntimeError(f"{op}(): pin_memory=True needs a CUDA device (ember.cuda."
                           "is_available() is False); create the tensor without it")
    if t.device.type != "cpu":
        raise RuntimeError(f"{op}(): only dense CPU tensors can be pinned, but device="
                           f"'{t.device}' was given with pin_memory=True")
    out = _require()._pin_memory(t)
    return out.requires_grad_(True) if requires_grad else out


_PIN_FACTORIES = ("empty", "zeros", "ones", "full", "rand", "randn", "randint", "randperm",
                  "arange", "linspace", "logspace", "eye", "empty_strided", "empty_like",
                  "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                  "randint_like")


def _pinnable(fn: Any, name: str) -> Any:
    def factory(*args: Any, **kwargs: Any) -> Any:
        if kwargs.pop("pin_memory", False):
            rg = kwargs.pop("requires_grad", False)
            return _pinned_result(fn(*args, **kwargs), name, rg)
        return fn(*args, **kwargs)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = fn.__doc__
    factory.__wrapped__ = fn
    return factory


def _install_pin_memory_factories() -> None:
    """``pin_memory=True`` on the factories: the tensor is made as usual, then pinned."""
    import sys

    ember = sys.modules["ember"]
    for name in _PIN_FACTORIES:
        fn = getattr(ember, name, None)
        if fn is not None and not hasattr(fn, "__wrapped__"):
            setattr(ember, name, _pinnable(fn, name))


_install_pin_memory_factories()


# ---- random seeds: accepted without a GPU, as PyTorch accepts them (queued for the device) ------

_pending_seed: int | None = None
_SEED_MASK = 0xFFFF_FFFF_FFFF_FFFF


def manual_seed(seed: int) -> None:
    """Seeds the random generator of the current CUDA device. Without CUDA the seed is kept
    and applied if a device appears, so scripts that seed every backend run on the CPU."""
    global _pending_seed
    _pending_seed = int(seed) & _SEED_MASK  # negative seeds wrap, as in PyTorch
    m = _loaded_module()
    if m is not None and m.is_available() and hasattr(m, "manual_seed"):
        m.manual_seed(_pending_seed)


def manual_seed_all(seed: int) -> None:
    """Seeds the random generators of all CUDA devices (kept for later without CUDA)."""
    global _pending_seed
    _pending_seed = int(seed) & _SEED_MASK
    m = _loaded_module()
    if m is not None and m.is_available():
        fn = getattr(m, "manual_seed_all", None) or getattr(m, "manual_seed", None)
        if fn is not None:
            fn(_pending_seed)


def seed() -> None:
    """Seeds the current CUDA device's generator non-deterministically (nothing without CUDA)."""
    m = _module()
    if m is not None and m.is_available() and hasattr(m, "seed"):
        m.seed()


def seed_all() -> None:
    """Seeds every CUDA device's generator non-deterministically (nothing without CUDA)."""
    m = _module()
    if m is not None and m.is_available():
        fn = getattr(m, "seed_all", None) or getattr(m, "seed", None)
        if fn is not None:
            fn()


def initial_seed() -> int:
    """The current CUDA device's seed; like PyTorch, an error without CUDA."""
    m = _require()
    if hasattr(m, "initial_seed"):
        return int(m.initial_seed())
    if _pending_seed is None:
        raise RuntimeError("ember.cuda.initial_seed: the CUDA generator was never seeded")
    return _pending_seed


def _install_amp() -> None:
    # `import ember.cuda.amp` / `from ember.cuda.amp import autocast, GradScaler`
    import sys

    from ember import _cuda_amp

    sys.modules[__name__ + ".amp"] = _cuda_amp
    globals()["amp"] = _cuda_amp
    # a package to the import system, as torch.cuda is: imports of `<alias>.cuda.amp` through
    # an importer that maps another name onto ember (a torch -> ember shim) then resolve too
    globals()["__path__"] = []


_install_amp()


def _install_memory() -> None:
    # `import ember.cuda.memory` / `ember.cuda.memory._record_memory_history()`: the CUDA
    # allocators' memory history (ember/cuda_memory.py)
    import sys

    from ember import cuda_memory

    sys.modules[__name__ + ".memory"] = cuda_memory
    globals()["memory"] = cuda_memory


_install_memory()
