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


# The cumulative counters of memory_stats (reset_accumulated_memory_stats zeroes them: their
# values at the reset, per device, are subtracted).
_ACCUMULATED_KEYS = ("num_alloc", "num_free", "num_device_alloc", "num_device_free",
                     "num_alloc_retries", "num_ooms", "num_splits", "num_merges", "num_cache_hits")
_accumulated_base: dict[int, dict[str, int]] = {}


def memory_stats(device: Any = None) -> dict[str, int]:
    """The caching allocator's statistics for ``device``, with PyTorch's keys
    ("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_alloc_retries", ...);
    ``{}`` without a CUDA device, as in PyTorch (whose answer is ``{}`` until CUDA starts)."""
    if not is_available():
        return {}
    idx = _index(device)
    stats = dict(sorted(_require()._memory_stats(idx).items()))
    for key, base in _accumulated_base.get(idx, {}).items():
        if key in stats:
            stats[key] -= base
    return stats


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live CUDA tensors on ``device`` (rounded block sizes)."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)  # 0 without a device


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated since the start or the last reset_peak_memory_stats."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)  # 0 without a device


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds from the driver on ``device`` (allocated + cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)  # 0 without a device


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved since the start or the last reset_peak_memory_stats."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)  # 0 without a device


def reset_peak_memory_stats(device: Any = None) -> None:
    """Resets the peaks (allocated, reserved, active, segments) to the current values."""
    _require()._reset_peak_memory_stats(_device_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    """Resets max_memory_allocated (as PyTorch does, through reset_peak_memory_stats)."""
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Returns every cached, unused segment of every device to the driver (blocks held for
    record_stream events are waited for first). Without a CUDA device there is no cache: a
    no-op, as in PyTorch (training scripts call it unconditionally)."""
    if is_available():
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
    idx = _index(device)  # without a device: the clear "no CUDA device" error
    s = memory_stats(device)
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
    memory_stats); ``{}`` without a CUDA device, as in PyTorch."""
    if not is_available():
        return {}
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
                  "randint_like", "normal")


def _pinnable(fn: Any, name: str) -> Any:
    def factory(*args: Any, **kwargs: Any) -> Any:
        if "layout" in kwargs:  # layout=: ember.strided (the default) or a sparse one
            from ember._factory_kwargs import like_of_sparse, sparse_result, take_layout

            if like_of_sparse(name, args):
                return fn(*args, **kwargs)
            sparse = take_layout(name, kwargs)
            if sparse is not None:
                return sparse_result(name, factory, sparse, args, kwargs)
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
    # Tensor.new_*: layout= and pin_memory=False too, as PyTorch's
    from ember._C import Tensor
    from ember._factory_kwargs import with_layout

    for name in ("new_empty", "new_zeros", "new_ones", "new_full"):
        fn = getattr(Tensor, name, None)
        if fn is not None and not hasattr(fn, "__wrapped__"):
            setattr(Tensor, name, with_layout(fn, name))


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


# ---- capabilities, build, peers -----------------------------------------------------------------


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 runs on the current device: natively from compute capability 8.0
    (Ampere) on; on older devices only as emulation (float math on bfloat16 storage), which
    ``including_emulation=False`` excludes. False without a CUDA device.

    >>> import ember
    >>> isinstance(ember.cuda.is_bf16_supported(), bool)
    True
    """
    if not is_available():
        return False
    return get_device_capability() >= (8, 0) or bool(including_emulation)


def is_tf32_supported() -> bool:
    """Whether the current device has TF32 tensor cores (compute capability 8.0 on). False
    without a CUDA device."""
    if not is_available():
        return False
    return get_device_capability() >= (8, 0)


def get_arch_list() -> list[str]:
    """The architectures ember's CUDA kernels were compiled for (``['sm_80', 'sm_90']``); empty
    without a CUDA device (or a build without CUDA), as in PyTorch."""
    if not is_available():
        return []
    m = _require()
    return [f"sm_{cc}" for cc in m._arch_list()]


def get_gencode_flags() -> str:
    """nvcc's ``-gencode`` flags for the architectures of get_arch_list() ("" without a CUDA
    device)."""
    flags = []
    for arch in get_arch_list():
        kind, num = arch.split("_", 1)
        flags.append(f"-gencode compute=compute_{num},code={kind}_{num}")
    return " ".join(flags)


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """Whether ``device`` can read and write the memory of ``peer_device`` directly (peer to
    peer); a device index, "cuda:N" or ember.device each."""
    m = _require()
    d, p = _device_index(device, optional=False), _device_index(peer_device, optional=False)
    if d < 0 or p < 0:
        raise ValueError("ember.cuda.can_device_access_peer: expected explicit device indices, "
                         f"got {device!r} and {peer_device!r}")
    return bool(m._can_device_access_peer(d, p))


# ---- random number generator state --------------------------------------------------------------

_RNG_STATE_BYTES = 16  # the Philox generator's seed and offset, little-endian uint64 each


def _rng_device(device: Any) -> int:
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    i = _device_index(device, optional=False)
    return _require().current_device() if i < 0 else i


def get_rng_state(device: Any = "cuda") -> Any:
    """The random number generator state of a CUDA device (default: the current one) as a CPU
    uint8 tensor of 16 bytes (seed, offset), for set_rng_state."""
    import struct

    import ember

    m = _require()
    seed, offset = m._get_rng_state(_rng_device(device))
    raw = struct.pack("<QQ", int(seed) & _SEED_MASK, int(offset) & _SEED_MASK)
    return ember.tensor(list(raw), dtype=ember.uint8)


def get_rng_state_all() -> list[Any]:
    """get_rng_state of every CUDA device (an empty list without one)."""
    return [get_rng_state(i) for i in range(device_count())] if is_available() else []


def _unpack_rng_state(new_state: Any, what: str) -> tuple[int, int]:
    import struct

    import ember

    if not isinstance(new_state, ember.Tensor) or new_state.dtype != ember.uint8 or \
            new_state.numel() != _RNG_STATE_BYTES:
        got = (f"a {new_state.dtype} tensor of {new_state.numel()} elements"
               if isinstance(new_state, ember.Tensor) else type(new_state).__name__)
        raise TypeError(f"ember.cuda.{what}: expected a uint8 tensor of {_RNG_STATE_BYTES} "
                        f"elements (from get_rng_state), got {got}")
    raw = bytes(int(v) for v in new_state.detach().cpu().reshape(-1).tolist())
    return struct.unpack("<QQ", raw)


def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    """Restores a CUDA device's generator (default: the current device) from get_rng_state's
    tensor. Without a CUDA device the state is checked and nothing else happens, as PyTorch
    queues it for a device that never comes."""
    seed, offset = _unpack_rng_state(new_state, "set_rng_state")
    if not is_available():
        return
    _require()._set_rng_state(seed, offset, _rng_device(device))


def set_rng_state_all(new_states: Any) -> None:
    """set_rng_state for device 0, 1, ... from a sequence of states."""
    states = list(new_states)
    for i, state in enumerate(states):
        set_rng_state(state, i)


# ---- memory: fraction, nested stats, cumulative counters, deprecated names ----------------------


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Caps what ember's caching allocator may take from ``device`` (default: the current one) at
    ``fraction`` (0 to 1) of its total memory; past it an allocation frees the cache, retries and
    then raises OutOfMemoryError. 1 removes the cap."""
    m = _require()
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise TypeError("ember.cuda.set_per_process_memory_fraction: invalid type for fraction: "
                        f"{type(fraction).__name__} (expected a float in [0, 1])")
    if not 0.0 <= float(fraction) <= 1.0:
        raise ValueError(f"ember.cuda.set_per_process_memory_fraction: invalid fraction "
                         f"{fraction}, expected a value in [0, 1]")
    m._set_memory_fraction(float(fraction), _index(device))


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The cap set by set_per_process_memory_fraction for ``device`` (1.0 when none)."""
    return float(_require()._get_memory_fraction(_index(device)))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats as nested dicts ("allocated_bytes.all.current" becomes
    ``d["allocated_bytes"]["all"]["current"]``); ``{}`` without a CUDA device, as in PyTorch
    (whose answer is also ``{}`` before CUDA starts; ember's is then the allocator's zeros)."""
    if not is_available():
        return {}
    out: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Resets the caching allocator's cumulative counters of ``device`` (allocations, frees,
    cudaMalloc / cudaFree calls, retries, OOMs, splits, merges, cache hits) to zero."""
    idx = _index(device)
    raw = _require()._memory_stats(idx)
    _accumulated_base[idx] = {k: raw[k] for k in _ACCUMULATED_KEYS if k in raw}


def memory_cached(device: Any = None) -> int:
    """Deprecated name of memory_reserved (warns; 0 without a CUDA device, as in PyTorch)."""
    import warnings

    warnings.warn("ember.cuda.memory_cached has been renamed to ember.cuda.memory_reserved",
                  FutureWarning, stacklevel=2)
    return memory_reserved(device) if is_available() else 0


def max_memory_cached(device: Any = None) -> int:
    """Deprecated name of max_memory_reserved (warns; 0 without a CUDA device)."""
    import warnings

    warnings.warn("ember.cuda.max_memory_cached has been renamed to "
                  "ember.cuda.max_memory_reserved", FutureWarning, stacklevel=2)
    return max_memory_reserved(device) if is_available() else 0


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated name of reset_peak_memory_stats (warns)."""
    import warnings

    warnings.warn("ember.cuda.reset_max_memory_cached now resets every peak: use "
                  "ember.cuda.reset_peak_memory_stats", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


# ---- NVML: clocks, utilization, temperature, power (through nvidia-ml-py, when installed) -------


def _nvml_handle(device: Any, what: str) -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"ember.cuda.{what}: needs NVML through the nvidia-ml-py package (import pynvml), "
            "which is not installed or cannot be imported") from exc
    idx = _index(device)
    pynvml.nvmlInit()
    # NVML numbers every GPU; CUDA only the visible ones: map through CUDA_VISIBLE_DEVICES.
    import os

    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis:
        ids = [v.strip() for v in vis.split(",") if v.strip()]
        if idx < len(ids):
            v = ids[idx]
            if v.isdigit():
                return pynvml.nvmlDeviceGetHandleByIndex(int(v))
            return pynvml.nvmlDeviceGetHandleByUUID(v)
    return pynvml.nvmlDeviceGetHandleByIndex(idx)


def clock_rate(device: Any = None) -> int:
    """The device's current SM clock in MHz (NVML)."""
    handle = _nvml_handle(device, "clock_rate")
    import pynvml

    return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def utilization(device: Any = None) -> int:
    """Percent of the last sample period in which a kernel ran on the device (NVML)."""
    handle = _nvml_handle(device, "utilization")
    import pynvml

    return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)


def memory_usage(device: Any = None) -> int:
    """Percent of the last sample period in which device memory was read or written (NVML)."""
    handle = _nvml_handle(device, "memory_usage")
    import pynvml

    return int(pynvml.nvmlDeviceGetUtilizationRates(handle).memory)


def temperature(device: Any = None) -> int:
    """The GPU's temperature in degrees Celsius (NVML)."""
    handle = _nvml_handle(device, "temperature")
    import pynvml

    return int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))


def power_draw(device: Any = None) -> int:
    """The GPU's power draw in milliwatts (NVML)."""
    handle = _nvml_handle(device, "power_draw")
    import pynvml

    return int(pynvml.nvmlDeviceGetPowerUsage(handle))


def device_memory_used(device: Any = None) -> int:
    """Bytes of device memory in use by every process (NVML)."""
    handle = _nvml_handle(device, "device_memory_used")
    import pynvml

    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def list_gpu_processes(device: Any = None) -> str:
    """A readable list of the processes using ``device`` and their memory (NVML); without
    nvidia-ml-py, a line saying so (as PyTorch returns, rather than raising)."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        return "pynvml (nvidia-ml-py) is not installed: no process list"
    import pynvml

    handle = _nvml_handle(device, "list_gpu_processes")
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    lines = [f"GPU:{_index(device)}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        mem = (p.usedGpuMemory or 0) / (1024 * 1024)
        lines.append(f"process {p.pid:>10d} uses {mem:>12.3f} MB GPU memory")
    return "\n".join(lines)


# ---- synchronization debugging ------------------------------------------------------------------

_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Reports operations that make the host wait for the GPU: blocking device <-> host copies
    (``.item()``, ``.cpu()``, ``.tolist()``, printing) and the kernels that read a count or flag
    back (nonzero, masked_select / boolean indexing, unique, equal / allclose). 0 / "default"
    says nothing, 1 / "warn" warns (UserWarning), 2 / "error" raises RuntimeError. Explicit
    waits (synchronize, Stream / Event.synchronize) are never reported."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise RuntimeError(f"ember.cuda.set_sync_debug_mode: invalid mode {debug_mode!r}, "
                               "expected 'default', 'warn' or 'error'")
        debug_mode = _SYNC_MODES[debug_mode]
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, int):
        raise TypeError("ember.cuda.set_sync_debug_mode: expected an int or str, got "
                        f"{type(debug_mode).__name__}")
    _require()._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The mode of set_sync_debug_mode (0, 1 or 2)."""
    return int(_require()._get_sync_debug_mode())


# ---- legacy constructors: ember.cuda.FloatTensor & co -------------------------------------------


class _CudaLegacyType(type):
    """Metaclass of ember.cuda.FloatTensor & co: calling one builds a CUDA tensor of its dtype;
    ``isinstance(t, ember.cuda.FloatTensor)`` means "a CUDA float32 tensor"."""

    dtype: Any

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        from ember import _legacy

        if not is_available():
            raise TypeError(f"type ember.cuda.{cls.__name__} not available: no CUDA device (or "
                            "ember was built without CUDA)")
        device = kwargs.pop("device", "cuda")
        _device_index(device)  # a CUDA device (raises for another kind)
        return _legacy._legacy_new(cls.dtype, args, dict(kwargs, device=device),
                                   f"ember.cuda.{cls.__name__}")

    def __instancecheck__(cls, obj: Any) -> bool:
        from ember import _C

        return isinstance(obj, _C.Tensor) and obj.dtype is cls.dtype and obj.is_cuda

    def __repr__(cls) -> str:
        return f"<class 'ember.cuda.{cls.__name__}'>"


def _install_legacy_types() -> tuple[str, ...]:
    from ember import _legacy

    for name, dtype in _legacy._TYPE_NAMES.items():
        doc = (f"Legacy constructor of CUDA {dtype!r} tensors: ``{name}(*sizes)``, "
               f"``{name}(data)``.")
        globals()[name] = _CudaLegacyType(name, (), {"dtype": dtype, "__doc__": doc,
                                                     "__module__": "ember.cuda"})
    return tuple(_legacy._TYPE_NAMES)


_LEGACY_NAMES = _install_legacy_types()


# ---- NVTX: ember.cuda.nvtx ----------------------------------------------------------------------


def _install_nvtx() -> ModuleType:
    import contextlib
    import sys

    nvtx = ModuleType(__name__ + ".nvtx", "NVTX ranges and marks for NVIDIA's profilers (Nsight "
                      "Systems): no-ops unless a profiler is attached. Needs ember built with "
                      "CUDA (not a GPU).")

    def _lib() -> ModuleType:
        m = _module()
        if m is None:
            raise RuntimeError("ember.cuda.nvtx: NVTX needs ember's CUDA extension "
                               "(ember._C_cuda), which this build does not have")
        return m

    def range_push(msg: str) -> int:
        """Opens a nested range named msg; returns its depth (negative when no profiler)."""
        return int(_lib()._nvtx_range_push(str(msg)))

    def range_pop() -> int:
        """Closes the innermost range opened by range_push; returns its depth."""
        return int(_lib()._nvtx_range_pop())

    def range_start(msg: str) -> int:
        """Starts a range that may end on another thread; returns its id for range_end."""
        return int(_lib()._nvtx_range_start(str(msg)))

    def range_end(range_id: int) -> None:
        """Ends the range range_start returned ``range_id`` for."""
        _lib()._nvtx_range_end(int(range_id))

    def mark(msg: str) -> None:
        """An instantaneous event named msg."""
        _lib()._nvtx_mark(str(msg))

    @contextlib.contextmanager
    def range(msg: str, *args: Any, **kwargs: Any) -> Any:  # noqa: A001 (torch's name)
        """``with nvtx.range("step {}", i):`` a nested range around the block (msg formatted
        with args / kwargs)."""
        range_push(msg.format(*args, **kwargs))
        try:
            yield
        finally:
            range_pop()

    for f in (range_push, range_pop, range_start, range_end, mark, range):
        f.__module__ = nvtx.__name__
        setattr(nvtx, f.__name__, f)
    nvtx.__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]
    sys.modules[nvtx.__name__] = nvtx
    return nvtx


nvtx = _install_nvtx()

__all__ += [
    "is_bf16_supported", "is_tf32_supported", "get_arch_list", "get_gencode_flags",
    "can_device_access_peer", "get_rng_state", "get_rng_state_all", "set_rng_state",
    "set_rng_state_all", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
    "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "memory_cached",
    "max_memory_cached", "reset_max_memory_cached", "clock_rate", "utilization", "memory_usage",
    "temperature", "power_draw", "device_memory_used", "list_gpu_processes",
    "set_sync_debug_mode", "get_sync_debug_mode", "nvtx", *_LEGACY_NAMES,
]


# ---- what libraries query before they sync or allocate ------------------------------------------


def is_current_stream_capturing() -> bool:
    """False: ember records no CUDA graphs, so no stream is ever capturing (libraries and
    optimizers check this before they synchronize)."""
    return False


def get_allocator_backend() -> str:
    """``"native"``: ember's own per-stream caching allocator (PyTorch's name for its own)."""
    return "native"


has_half = True  # float16 CUDA tensors
has_magma = False  # no MAGMA: CUDA matrix products go through cuBLAS

__all__ += ["is_current_stream_capturing", "get_allocator_backend", "has_half", "has_magma"]
