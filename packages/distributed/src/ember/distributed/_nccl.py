"""The `nccl` backend: collectives on CUDA tensors through NVIDIA's NCCL, bound with ctypes.

The library: ``EMBER_NCCL_LIBRARY`` (a path) when set, else ``libnccl.so*`` of NVIDIA's wheel
(``nvidia-nccl-cu13`` / ``-cu12``: any ``lib`` folder under the ``nvidia`` namespace package),
else the system's ``libnccl.so.2``. NCCL 2.10 or newer (ncclAvg, bfloat16).

Communicators: one per CUDA device a rank uses in the group, made at its first collective on
that device (or at init_process_group(device_id=...)): rank 0 makes an ncclUniqueId and shares
it through the group's store; every rank calls ncclCommInitRank on a helper thread, waited for
within the group's timeout.

Streams, as in PyTorch: each communicator has an internal stream (ember.cuda.Stream). A
collective makes that stream wait for an event recorded on the caller's current stream (so it
sees what the caller's kernels wrote), runs there, and records an end event. ``Work.wait()``
makes the caller's current stream wait for that event (no host block); ``Work.synchronize()``
and ``barrier()`` block the host; ``is_completed()`` queries the event. Every tensor involved is
``record_stream``-ed on the internal stream, so the caching allocator does not hand its memory
to anything else before NCCL is done with it. ``async_op=False`` returns once the collective is
queued and the caller's stream waits for it (as PyTorch does).
``EMBER_NCCL_BLOCKING_WAIT=1`` (or ``TORCH_NCCL_BLOCKING_WAIT=1``) makes every wait() block the
host until the collective completed (within the group's timeout).

Failures: a watchdog thread per group polls ncclCommGetAsyncError and the pending collectives;
when one has not completed within the group's timeout (or NCCL reports an error) it calls
ncclCommAbort on the group's communicators, so the GPU work ends, and the pending and every
later wait() or collective raise DistBackendError naming the rank, the collective and the
timeout. The group is unusable afterwards (NCCL cannot repair a communicator): catch the error
only to save state or log, then exit. An error code from an NCCL call raises DistBackendError
(a RuntimeError) with ncclGetErrorString's and ncclGetLastError's text.

Point to point: send / recv run on the group's communicator, in issue order with the
collectives (NCCL needs the receiver to have posted its receive before a large send completes:
a rank that sends to a peer that sends back first deadlocks, as in PyTorch; use
``batch_isend_irecv``, which runs its operations in one ncclGroupStart/End). NCCL has no
receive from any source and no tags (tags are ignored).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
import time
from typing import Any, Callable

import ember

from ._common import DistBackendError, ReduceOp, check_op_dtype
from ._work import Future, Work

__all__ = ["NcclBackend", "NcclLibrary", "is_available", "library", "version"]

# ---- the C API (nccl.h) -----------------------------------------------------------------------
UNIQUE_ID_BYTES = 128

# ncclResult_t
SUCCESS, IN_PROGRESS = 0, 7
_RESULT_NAMES = {
    0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError",
    3: "ncclInternalError", 4: "ncclInvalidArgument", 5: "ncclInvalidUsage",
    6: "ncclRemoteError", 7: "ncclInProgress", 8: "ncclTimeout",
}

# ncclRedOp_t
_SUM, _PROD, _MAX, _MIN, _AVG = 0, 1, 2, 3, 4

# ncclDataType_t
_INT8, _UINT8, _INT32, _UINT32, _INT64, _UINT64 = 0, 1, 2, 3, 4, 5
_FLOAT16, _FLOAT32, _FLOAT64, _BFLOAT16 = 6, 7, 8, 9

_MIN_VERSION = (2, 10, 0)  # ncclAvg and ncclBfloat16


class UniqueId(ctypes.Structure):
    """ncclUniqueId: 128 opaque bytes, passed by value to ncclCommInitRank."""

    _fields_ = [("internal", ctypes.c_byte * UNIQUE_ID_BYTES)]


_comm_t = ctypes.c_void_p
_stream_t = ctypes.c_void_p
_buf = ctypes.c_void_p
_res = ctypes.c_int
_int = ctypes.c_int
_size = ctypes.c_size_t

# name -> (restype, argtypes); the functions every use of the backend needs.
_PROTOTYPES: dict[str, tuple[Any, list]] = {
    "ncclGetVersion": (_res, [ctypes.POINTER(_int)]),
    "ncclGetUniqueId": (_res, [ctypes.POINTER(UniqueId)]),
    "ncclGetErrorString": (ctypes.c_char_p, [_res]),
    "ncclCommInitRank": (_res, [ctypes.POINTER(_comm_t), _int, UniqueId, _int]),
    "ncclCommDestroy": (_res, [_comm_t]),
    "ncclCommAbort": (_res, [_comm_t]),
    "ncclCommGetAsyncError": (_res, [_comm_t, ctypes.POINTER(_res)]),
    "ncclCommCount": (_res, [_comm_t, ctypes.POINTER(_int)]),
    "ncclCommCuDevice": (_res, [_comm_t, ctypes.POINTER(_int)]),
    "ncclCommUserRank": (_res, [_comm_t, ctypes.POINTER(_int)]),
    "ncclAllReduce": (_res, [_buf, _buf, _size, _int, _int, _comm_t, _stream_t]),
    "ncclReduce": (_res, [_buf, _buf, _size, _int, _int, _int, _comm_t, _stream_t]),
    "ncclBroadcast": (_res, [_buf, _buf, _size, _int, _int, _comm_t, _stream_t]),
    "ncclAllGather": (_res, [_buf, _buf, _size, _int, _comm_t, _stream_t]),
    "ncclReduceScatter": (_res, [_buf, _buf, _size, _int, _int, _comm_t, _stream_t]),
    "ncclSend": (_res, [_buf, _size, _int, _int, _comm_t, _stream_t]),
    "ncclRecv": (_res, [_buf, _size, _int, _int, _comm_t, _stream_t]),
    "ncclGroupStart": (_res, []),
    "ncclGroupEnd": (_res, []),
}
# Newer than 2.10: used when present.
_OPTIONAL = {
    "ncclGetLastError": (ctypes.c_char_p, [_comm_t]),  # 2.13
    "ncclCommFinalize": (_res, [_comm_t]),  # 2.14
}


def _decode_version(code: int) -> tuple[int, int, int]:
    """ncclGetVersion's integer as (major, minor, patch): X*10000+Y*100+Z since 2.9, X*1000+
    Y*100+Z before."""
    if code >= 10000:
        return code // 10000, code // 100 % 100, code % 100
    return code // 1000, code // 100 % 10, code % 100


class NcclLibrary:
    """The functions of one loaded libnccl, with their C signatures.

    Example::

        >>> lib = NcclLibrary("/path/to/libnccl.so.2")  # doctest: +SKIP
        >>> lib.version()                               # doctest: +SKIP
        (2, 32, 3)
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.dll = ctypes.CDLL(path)
        except OSError as e:
            raise RuntimeError(f"nccl backend: cannot load the NCCL library {path}: {e}") from e
        for name, (restype, argtypes) in list(_PROTOTYPES.items()) + list(_OPTIONAL.items()):
            try:
                fn = getattr(self.dll, name)
            except AttributeError:
                if name in _OPTIONAL:
                    setattr(self, name, None)
                    continue
                raise RuntimeError(f"nccl backend: {path} has no function {name} (not an NCCL "
                                   "library, or one older than 2.10)") from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        code = _int()
        self.check(self.ncclGetVersion(ctypes.byref(code)), "ncclGetVersion")
        self.version_code = code.value
        if self.version() < _MIN_VERSION:
            raise RuntimeError(f"nccl backend: {path} is NCCL {'.'.join(map(str, self.version()))}"
                               f"; ember needs NCCL {'.'.join(map(str, _MIN_VERSION))} or newer "
                               "(pip install nvidia-nccl-cu13, or set EMBER_NCCL_LIBRARY)")

    def version(self) -> tuple[int, int, int]:
        """(major, minor, patch) of the library."""
        return _decode_version(self.version_code)

    def error_string(self, result: int) -> str:
        """ncclGetErrorString's text for an ncclResult_t."""
        s = self.ncclGetErrorString(int(result))
        return s.decode(errors="replace") if s else f"unknown result code {result}"

    def last_error(self, comm: Any = None) -> str:
        """ncclGetLastError's text (the detail of the last failure; '' when none or unknown)."""
        if self.ncclGetLastError is None:
            return ""
        s = self.ncclGetLastError(comm)
        return s.decode(errors="replace") if s else ""

    def check(self, result: int, what: str, comm: Any = None) -> None:
        """Raises DistBackendError naming `what` when result is not ncclSuccess."""
        if result == SUCCESS:
            return
        name = _RESULT_NAMES.get(result, f"result {result}")
        detail = self.last_error(comm)
        raise DistBackendError(f"{what} failed: NCCL error {result} ({name}): "
                               f"{self.error_string(result)}"
                               + (f"; last NCCL error: {detail}" if detail else ""))

    def unique_id(self) -> UniqueId:
        """A new ncclUniqueId (rank 0 makes it; the others receive it)."""
        uid = UniqueId()
        self.check(self.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        return uid


def library_candidates() -> list[str]:
    """Where libnccl is looked for, in order: EMBER_NCCL_LIBRARY alone when set, else every
    libnccl.so* in a lib folder of the `nvidia` namespace package (NVIDIA's wheels), then the
    system's libnccl.so.2 (found by the dynamic linker)."""
    env = os.environ.get("EMBER_NCCL_LIBRARY")
    if env:
        return [env]
    found: list[str] = []
    try:
        import nvidia

        bases = list(getattr(nvidia, "__path__", []))
    except ImportError:
        bases = []
    for base in bases:
        for pattern in ("nccl/lib/libnccl.so*", "*/lib/libnccl.so*", "lib/libnccl.so*"):
            for p in sorted(glob.glob(os.path.join(base, pattern))):
                if p not in found:
                    found.append(p)
    # libnccl.so.2 before libnccl.so.2.x.y before libnccl.so: the name the wheel links against.
    found.sort(key=lambda p: (os.path.basename(p) != "libnccl.so.2", p))
    found.append("libnccl.so.2")
    return found


_lib: NcclLibrary | None = None
_lib_error: str | None = None
_lib_lock = threading.Lock()


def library() -> NcclLibrary:
    """The loaded NCCL library (loaded once); RuntimeError saying what was tried otherwise."""
    global _lib, _lib_error
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in library_candidates():
            try:
                _lib = NcclLibrary(path)
                _lib_error = None
                return _lib
            except RuntimeError as e:
                errors.append(str(e))
        _lib_error = "; ".join(errors)
        raise RuntimeError("the nccl backend needs NCCL: pip install nvidia-nccl-cu13 (or set "
                           f"EMBER_NCCL_LIBRARY to a libnccl.so.2). Tried: {_lib_error}")


def _reset_library_for_tests() -> None:
    global _lib, _lib_error
    with _lib_lock:
        _lib, _lib_error = None, None


def version() -> tuple[int, int, int]:
    """NCCL's version as (major, minor, patch) (torch.cuda.nccl.version()).

    Example::

        >>> version()  # doctest: +SKIP
        (2, 32, 3)
    """
    return library().version()


def library_loads() -> bool:
    """Whether an NCCL library can be loaded (no GPU needed)."""
    try:
        library()
    except RuntimeError:
        return False
    return True


def is_available() -> bool:
    """Whether the nccl backend can run: NCCL loads and ember has a CUDA device."""
    return ember.cuda.is_available() and library_loads()


# ---- dtypes and reductions --------------------------------------------------------------------
_REDUCE_DTYPES = {
    ember.int8: _INT8, ember.uint8: _UINT8, ember.int32: _INT32, ember.int64: _INT64,
    ember.float16: _FLOAT16, ember.bfloat16: _BFLOAT16, ember.float32: _FLOAT32,
    ember.float64: _FLOAT64, ember.bool: _UINT8,
}
_REDUCE_OPS = {ReduceOp.SUM: _SUM, ReduceOp.AVG: _AVG, ReduceOp.PRODUCT: _PROD,
               ReduceOp.MIN: _MIN, ReduceOp.MAX: _MAX}


def reduce_dtype(name: str, dtype: Any) -> int:
    """The ncclDataType_t a reduction of `dtype` runs in (bool as uint8)."""
    try:
        return _REDUCE_DTYPES[dtype]
    except KeyError:
        raise TypeError(f"{name}: the nccl backend cannot reduce {dtype} tensors; supported: "
                        "float16, bfloat16, float32, float64, int8, uint8, int32, int64, "
                        "bool") from None


def reduce_op(name: str, op: Any, dtype: Any) -> int:
    """The ncclRedOp_t of a ReduceOp on `dtype`. On bool (moved as uint8, 0 or 1) SUM is a
    logical or (MAX) and PRODUCT a logical and (MIN), as in PyTorch."""
    check_op_dtype(name, op, dtype)
    op = ReduceOp(op)
    if op not in _REDUCE_OPS:
        raise ValueError(f"{name}: ReduceOp.{op.name} is not supported by the nccl backend "
                         "(SUM, AVG, PRODUCT, MIN, MAX are)")
    if dtype == ember.bool:
        if op == ReduceOp.SUM:
            return _MAX
        if op == ReduceOp.PRODUCT:
            return _MIN
    return _REDUCE_OPS[op]


def check_cuda_tensor(name: str, t: Any, arg: str = "tensor", device: int | None = None) -> int:
    """Checks that t is a CUDA tensor (on cuda:`device` when given); returns its device index."""
    if not isinstance(t, ember.Tensor):
        raise TypeError(f"{name}: {arg} must be an ember.Tensor, got {type(t).__name__}")
    dev = t.device
    if dev.type != "cuda":
        raise ValueError(f"{name}: {arg} is on {dev}; the nccl backend takes CUDA tensors (move "
                         "it with .cuda(), or use a 'shm'/'gloo' group, or "
                         "init_process_group('cpu:gloo,cuda:nccl') for both kinds)")
    idx = 0 if dev.index is None else int(dev.index)
    if device is not None and idx != device:
        raise ValueError(f"{name}: {arg} is on {dev} but the call's other tensors are on "
                         f"cuda:{device}; one nccl call takes tensors of one device")
    return idx


def check_cuda_list(name: str, lst: Any, n: int, arg: str, like: Any, device: int) -> list:
    """Checks a list of n CUDA tensors of like's element count and dtype on cuda:device."""
    if not isinstance(lst, (list, tuple)) or len(lst) != n:
        got = len(lst) if isinstance(lst, (list, tuple)) else type(lst).__name__
        raise ValueError(f"{name}: {arg} must be a list of {n} tensors (one per rank), got {got}")
    for i, t in enumerate(lst):
        check_cuda_tensor(name, t, f"{arg}[{i}]", device)
        if like is not None and (t.numel() != like.numel() or t.dtype != like.dtype):
            raise ValueError(f"{name}: {arg}[{i}] has {t.numel()} elements of {t.dtype}; "
                             f"expected {like.numel()} of {like.dtype} like the input")
    return list(lst)


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


def _contig(t: Any) -> Any:
    """t itself when contiguous, else a contiguous copy (made on the caller's stream)."""
    return t if t.is_contiguous() else t.contiguous()


def _out(t: Any) -> Any:
    """Where an output is written: t itself when contiguous, else a 1-D temporary (copied into
    t on the internal stream afterwards)."""
    return t if t.is_contiguous() else ember.empty(t.numel(), dtype=t.dtype, device=t.device)


def _debug_detail() -> bool:
    v = os.environ.get("EMBER_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    return (v or "").upper() == "DETAIL"


def _blocking_wait() -> bool:
    v = os.environ.get("EMBER_NCCL_BLOCKING_WAIT") or os.environ.get("TORCH_NCCL_BLOCKING_WAIT")
    return (v or "0").strip().lower() in ("1", "true", "yes")


# ---- work handles -----------------------------------------------------------------------------
class _NcclFuture(Future):
    """The future of an nccl Work: complete at once, as PyTorch's CUDA futures are; wait() and
    value() make the caller's current stream wait for the collective (and raise its error)."""

    def __init__(self, work: NcclWork) -> None:
        super().__init__()
        self._work = work
        self.set_result(work._outputs)

    def wait(self, timeout: float | None = None) -> Any:
        self._work.wait()
        return super().wait(timeout)

    def value(self) -> Any:
        return self.wait()


class NcclWork(Work):
    """A collective queued on a communicator's internal stream.

    wait() makes the caller's current stream (of the collective's device) wait for it and
    raises its error (blocks the host only for a barrier, with a timeout, or under
    EMBER_NCCL_BLOCKING_WAIT=1); synchronize() blocks the host until it completed.
    """

    def __init__(self, op_name: str, seq: int, backend: NcclBackend, comm: _Comm,
                 outputs: list, blocking: bool = False) -> None:
        super().__init__(op_name, outputs)
        self.seq = seq
        self._backend = backend
        self._comm = comm
        self._end = ember.cuda.Event()
        self._recorded = False  # the end event is recorded (the launch is over)
        self._error: BaseException | None = None
        self._blocking = blocking
        self._start = time.monotonic()
        self._nccl_future: _NcclFuture | None = None

    @property
    def device(self) -> Any:
        return ember.device("cuda", self._comm.device)

    def _gpu_done(self) -> bool:
        return self._recorded and self._end.query()

    def is_completed(self) -> bool:
        """Whether the collective finished on the GPU (or failed)."""
        return self._error is not None or self._gpu_done()

    def is_success(self) -> bool:
        return self._error is None and self._gpu_done()

    def exception(self) -> BaseException | None:
        return self._error

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def wait(self, timeout: Any = None) -> bool:
        """Makes the caller's current stream wait for the collective; raises its error. With a
        timeout (or for a barrier, or EMBER_NCCL_BLOCKING_WAIT=1) the host blocks until the
        collective completed. Returns True."""
        self._raise_if_failed()
        t = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        if t is not None and t <= 0:
            t = None
        if t is not None:
            self._backend._block(self, t, abort=False)
        elif self._blocking or _blocking_wait():
            self._backend._block(self, self._backend.timeout, abort=True)
        self._end.wait(ember.cuda.current_stream(self._comm.device))
        return True

    def synchronize(self) -> None:
        """Blocks the host until the collective completed (within the group's timeout)."""
        self._backend._block(self, self._backend.timeout, abort=True)
        self._end.wait(ember.cuda.current_stream(self._comm.device))

    def result(self) -> list:
        self.wait()
        return self._outputs

    def get_future(self) -> Future:
        """A Future of the output tensors; waiting on it waits for the collective as wait()."""
        if self._nccl_future is None:
            self._nccl_future = _NcclFuture(self)
        return self._nccl_future

    def __repr__(self) -> str:
        state = ("failed" if self._error is not None else
                 "completed" if self._gpu_done() else "pending")
        return f"<NcclWork {self.op_name} #{self.seq} on cuda:{self._comm.device} {state}>"


# ---- communicators ----------------------------------------------------------------------------
class _Comm:
    """One ncclComm_t (this rank on one device) with its internal stream."""

    def __init__(self, handle: ctypes.c_void_p, device: int, stream: Any) -> None:
        self.handle = handle
        self.device = device
        self.stream = stream
        self.valid = True  # False once destroyed or aborted
        self.barrier_tensor: Any = None
        # Recorded on the caller's stream before each operation; the internal stream's wait is
        # queued at once (it uses the event as recorded then), so one event serves them all.
        self.ready = ember.cuda.Event()
        self.ready_lock = threading.Lock()

    @property
    def stream_handle(self) -> int:
        return self.stream.cuda_stream


class NcclBackend:
    """One process group's NCCL communicators (group-local ranks), made lazily per device."""

    name = "nccl"

    def __init__(self, store: Any, rank: int, size: int, timeout: float, label: str) -> None:
        try:
            self.lib = library()
        except RuntimeError as e:
            raise RuntimeError(f"the nccl backend is not available: {e}") from e
        if not ember.cuda.is_available():
            raise RuntimeError("the nccl backend is not available: it needs a CUDA device, and "
                               "ember.cuda has none (ember built without EMBER_CUDA=ON, or no "
                               "GPU/driver)")
        self.store = store
        self._rank, self._size = rank, size
        self.timeout, self.label = float(timeout), label
        self._debug = _debug_detail()
        self._seq = 0  # operations launched (collectives and point to point)
        self._debug_seq = 0  # collectives checked under EMBER_DISTRIBUTED_DEBUG=DETAIL
        self._n_comms = 0
        self._comms: dict[int, _Comm] = {}
        self._last_device: int | None = None
        self._lock = threading.Lock()  # guards _pending, _broken, the comms' validity
        self._pending: list[NcclWork] = []
        self._broken: str | None = None
        self._closed = False
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._poll_s = min(0.1, max(0.005, self.timeout / 20))

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    # ---- communicators -------------------------------------------------------------------
    def _check_usable(self, op: str) -> None:
        if self._broken:
            raise DistBackendError(f"{op}: the process group {self.label} is unusable after an "
                                   f"earlier failure: {self._broken}")
        if self._closed:
            raise DistBackendError(f"{op}: the process group {self.label} was destroyed")

    def comm(self, device: int, op: str = "init") -> _Comm:
        """The communicator of cuda:device (made now if this is its first use)."""
        c = self._comms.get(device)
        if c is not None:
            return c
        if not 0 <= device < ember.cuda.device_count():
            raise ValueError(f"{op}: cuda:{device} does not exist (this process sees "
                             f"{ember.cuda.device_count()} CUDA device(s))")
        key = f"uid/{self._n_comms}"
        self._n_comms += 1
        where = f"rank {self._rank} of group {self.label} on cuda:{device}"
        if self._rank == 0:
            uid = self.lib.unique_id()
            self.store.set(key, bytes(bytearray(uid.internal)))
        else:
            try:
                raw = self.store.get(key)
            except Exception as e:  # noqa: BLE001  (the store's timeout, or rank 0 is gone)
                raise DistBackendError(f"{op}: {where} did not receive rank 0's ncclUniqueId "
                                       f"through the store: {e}") from e
            if len(raw) != UNIQUE_ID_BYTES:
                raise DistBackendError(f"{op}: the ncclUniqueId from the store has {len(raw)} "
                                       f"bytes, expected {UNIQUE_ID_BYTES}")
            uid = UniqueId()
            ctypes.memmove(uid.internal, raw, UNIQUE_ID_BYTES)
        handle = self._init_rank(uid, device, op, where)
        stream = ember.cuda.Stream(device=device)
        c = _Comm(handle, device, stream)
        self._comms[device] = c
        self._start_watchdog()
        return c

    def _init_rank(self, uid: UniqueId, device: int, op: str, where: str) -> ctypes.c_void_p:
        """ncclCommInitRank on a helper thread (it blocks until every rank joined), waited for
        within the group's timeout."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                with ember.cuda.device(device):
                    handle = _comm_t()
                    box["result"] = self.lib.ncclCommInitRank(ctypes.byref(handle), self._size,
                                                              uid, self._rank)
                    box["handle"] = handle
            except BaseException as e:  # noqa: BLE001  (raised again below)
                box["error"] = e

        t = threading.Thread(target=run, name=f"ember-nccl-init-{self.label}", daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            raise DistBackendError(
                f"{op}: ncclCommInitRank for {where} did not complete within {self.timeout:g} s:"
                f" some rank of the {self._size} never created its communicator (hung, dead, or "
                "it runs a different collective)")
        if "error" in box:
            raise box["error"]
        self.lib.check(box["result"], f"{op}: ncclCommInitRank for {where}", box["handle"])
        return box["handle"]

    def bind(self, device: Any) -> None:
        """Makes the communicator of `device` now (init_process_group(device_id=...))."""
        dev = ember.device(device) if not isinstance(device, int) else ember.device("cuda", device)
        if dev.type != "cuda":
            raise ValueError(f"init_process_group: device_id must be a CUDA device for the nccl "
                             f"backend, got {dev}")
        idx = ember.cuda.current_device() if dev.index is None else int(dev.index)
        self.comm(idx, "init_process_group")
        self._last_device = idx  # barrier()'s device until a collective uses another

    # ---- watchdog ------------------------------------------------------------------------
    def _start_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch,
                                              name=f"ember-nccl-watchdog-{self.label}",
                                              daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self._check_progress()
            except Exception:  # noqa: BLE001  (e.g. CUDA torn down at exit: stop watching)
                return

    def _check_progress(self) -> None:
        """One watchdog round: NCCL's asynchronous errors, then the pending collectives."""
        for c in list(self._comms.values()):
            if not c.valid:
                continue
            err = _res(SUCCESS)
            r = self.lib.ncclCommGetAsyncError(c.handle, ctypes.byref(err))
            if r == SUCCESS and err.value not in (SUCCESS, IN_PROGRESS):
                detail = self.lib.last_error(c.handle)
                self._fail(f"NCCL reported an asynchronous error on rank {self._rank} of group "
                           f"{self.label} (cuda:{c.device}): {self.lib.error_string(err.value)}"
                           + (f" ({detail})" if detail else ""), None)
                return
        with self._lock:
            works = list(self._pending)
        if not works:
            return
        done = [w for w in works if w._gpu_done()]
        if done:
            with self._lock:
                self._pending = [w for w in self._pending if w not in done]
        now = time.monotonic()
        for w in works:
            if w not in done and now - w._start > self.timeout:
                self._fail(self._timeout_message(w), w)
                return

    def _timeout_message(self, w: NcclWork) -> str:
        return (f"{w.op_name} (collective #{w.seq} of group {self.label}) on rank {self._rank} "
                f"(cuda:{w._comm.device}) timed out after {self.timeout:g} s: a rank of the group "
                "did not take part (hung or dead); the NCCL communicators were aborted and "
                f"group {self.label} is unusable")

    def _fail(self, msg: str, culprit: NcclWork | None) -> None:
        """Marks the group broken, aborts its communicators and fails the pending works."""
        with self._lock:
            if self._broken:
                return
            self._broken = msg
            pending, self._pending = self._pending, []
            comms = [c for c in self._comms.values() if c.valid]
            for c in comms:
                c.valid = False
        for w in pending:
            if w is culprit:
                w._error = DistBackendError(msg)
            else:
                w._error = DistBackendError(f"{w.op_name} (collective #{w.seq} of group "
                                            f"{self.label}) on rank {self._rank} was aborted: "
                                            f"{msg}")
        for c in comms:
            self.lib.ncclCommAbort(c.handle)

    def _block(self, w: NcclWork, timeout: float, abort: bool) -> None:
        """Blocks the host until w completed; past `timeout` the group is aborted (abort=True,
        the group's timeout) or a RuntimeError says so (a wait(timeout) of the caller)."""
        deadline = time.monotonic() + timeout
        delay = 0.0
        while True:
            if w._error is not None:
                raise w._error
            if w._gpu_done():
                return
            if time.monotonic() >= deadline:
                if not abort:
                    raise RuntimeError(f"Work.wait: {w.op_name} (collective #{w.seq} of group "
                                       f"{self.label}) did not complete within {timeout:g} s "
                                       f"on rank {self._rank}")
                self._fail(self._timeout_message(w), w)
                if w._error is not None:
                    raise w._error
                raise DistBackendError(self._broken or self._timeout_message(w))
            delay = min(max(delay * 2, 2e-5), 1e-3)
            time.sleep(delay)

    # ---- bookkeeping ---------------------------------------------------------------------
    def begin(self, op: str, desc: Callable[[], str]) -> None:
        """EMBER_DISTRIBUTED_DEBUG=DETAIL: checks through the store that every rank calls the
        same collective with the same shapes and dtypes."""
        self._check_usable(op)
        if not self._debug:
            return
        self._debug_seq += 1
        seq = self._debug_seq
        mine = f"{op}({desc()})"
        self.store.set(f"debug/{seq}/{self._rank}", mine.encode()[:1000])
        keys = [f"debug/{seq}/{r}" for r in range(self._size)]
        try:
            got = self.store.multi_get(keys)
        except Exception as e:  # noqa: BLE001  (a rank never got there)
            raise DistBackendError(f"EMBER_DISTRIBUTED_DEBUG=DETAIL: collective #{seq} ({mine}) "
                                   f"of group {self.label} on rank {self._rank}: not every rank "
                                   f"reached it: {e}") from e
        for r, raw in enumerate(got):
            other = raw.decode(errors="replace")
            if other != mine:
                msg = (f"EMBER_DISTRIBUTED_DEBUG=DETAIL: collective #{seq} of group "
                       f"{self.label} differs between ranks: rank {self._rank} called {mine} but "
                       f"rank {r} called {other}")
                self._broken = msg
                raise DistBackendError(msg)
        if seq > 2:  # every rank has read the keys of two collectives back
            self.store.delete_key(f"debug/{seq - 2}/{self._rank}")

    def abort(self, why: str) -> None:
        """Makes the pending (and later) operations fail with `why` and aborts the
        communicators."""
        self._fail(f"rank {self._rank} aborted group {self.label}: {why}", None)

    def close(self) -> None:
        """Waits (up to the timeout, at most 30 s) for the pending collectives, then destroys the
        communicators (aborts them when some never completed)."""
        if self._closed:
            return
        with self._lock:
            pending = list(self._pending)
        deadline = time.monotonic() + min(self.timeout, 30.0)
        stuck = False
        for w in pending:
            while not w.is_completed():
                if time.monotonic() >= deadline:
                    stuck = True
                    break
                time.sleep(1e-3)
            if stuck:
                break
        if stuck:
            self._fail(f"rank {self._rank} destroyed group {self.label} while collectives were "
                       "pending", None)
        self._closed = True
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(5.0)
        with self._lock:
            comms = [c for c in self._comms.values() if c.valid]
            for c in comms:
                c.valid = False
        for c in comms:
            with ember.cuda.device(c.device):
                if self.lib.ncclCommFinalize is not None:
                    self.lib.ncclCommFinalize(c.handle)
                self.lib.ncclCommDestroy(c.handle)
        self._comms.clear()

    # ---- launching -----------------------------------------------------------------------
    def _launch(self, op: str, device: int, desc: Callable[[], str],
                enqueue: Callable[[_Comm], None], tensors: list, outputs: list,
                async_op: bool, blocking: bool = False, check: bool = True) -> NcclWork | None:
        """Queues one operation on cuda:device's communicator after the caller's stream's work;
        returns its Work (async_op) or None once the caller's stream waits for it."""
        if check:
            self.begin(op, desc)
        else:
            self._check_usable(op)
        c = self.comm(device, op)
        self._last_device = device
        self._seq += 1
        with c.ready_lock:
            c.ready.record(ember.cuda.current_stream(device))
            c.ready.wait(c.stream)
        w = NcclWork(op, self._seq, self, c, outputs, blocking)
        with self._lock:
            self._pending.append(w)  # from now on: a launch that hangs is timed out too
        try:
            with ember.cuda.stream(c.stream):
                enqueue(c)
        except BaseException as e:
            w._error = e
            with self._lock:
                if w in self._pending:
                    self._pending.remove(w)
            raise
        for t in tensors:
            if t.numel():
                try:
                    t.record_stream(c.stream)
                except RuntimeError:  # memory from outside ember's caching allocator
                    pass
        w._end.record(c.stream)
        w._recorded = True
        if async_op:
            return w
        w.wait()
        return None

    def _call(self, what: str, c: _Comm, result: int) -> None:
        self.lib.check(result, f"{what} on rank {self._rank} of group {self.label}", c.handle)

    def _group(self, what: str, c: _Comm, calls: list[Callable[[], int]]) -> None:
        """Runs NCCL calls between ncclGroupStart and ncclGroupEnd."""
        self.lib.check(self.lib.ncclGroupStart(), f"{what}: ncclGroupStart")
        try:
            for call in calls:
                self._call(what, c, call())
        finally:
            end = self.lib.ncclGroupEnd()
        self._call(f"{what} (ncclGroupEnd)", c, end)

    def _device(self, op: str, t: Any, arg: str = "tensor") -> int:
        return check_cuda_tensor(op, t, arg)

    # ---- collectives (group ranks; the c10d layer resolved them) -------------------------
    def all_reduce(self, t: Any, op: ReduceOp, async_op: bool, dst: int = -1,
                   name: str = "all_reduce") -> NcclWork | None:
        dev = self._device(name, t)
        dtype, rop = reduce_dtype(name, t.dtype), reduce_op(name, op, t.dtype)
        if dst >= 0 and not 0 <= dst < self._size:
            raise ValueError(f"{name}: dst {dst} outside group of size {self._size}")
        src = _contig(t)
        count = t.numel()

        def enqueue(c: _Comm) -> None:
            if count:
                p = src.data_ptr()
                if dst < 0:
                    r = self.lib.ncclAllReduce(p, p, count, dtype, rop, c.handle, c.stream_handle)
                else:
                    r = self.lib.ncclReduce(p, p, count, dtype, rop, dst, c.handle,
                                            c.stream_handle)
                self._call(name, c, r)
            if src is not t and (dst < 0 or dst == self._rank):
                with ember.no_grad():
                    t.copy_(src.view(t.shape))

        extra = {"op": ReduceOp(op).name} if dst < 0 else {"op": ReduceOp(op).name, "dst": dst}
        return self._launch(name, dev, lambda: _describe(t, **extra), enqueue, [t, src], [t],
                            async_op)

    def reduce(self, t: Any, dst: int, op: ReduceOp, async_op: bool) -> NcclWork | None:
        return self.all_reduce(t, op, async_op, dst, "reduce")

    def broadcast(self, t: Any, src: int, async_op: bool) -> NcclWork | None:
        dev = self._device("broadcast", t)
        if not 0 <= src < self._size:
            raise ValueError(f"broadcast: src {src} outside group of size {self._size}")
        buf = _contig(t)
        n = _nbytes(t)

        def enqueue(c: _Comm) -> None:
            if n:
                p = buf.data_ptr()
                self._call("broadcast", c, self.lib.ncclBroadcast(p, p, n, _UINT8, src, c.handle,
                                                                  c.stream_handle))
            if buf is not t and self._rank != src:
                with ember.no_grad():
                    t.copy_(buf.view(t.shape))

        return self._launch("broadcast", dev, lambda: _describe(t, src=src), enqueue, [t, buf],
                            [t], async_op)

    def all_gather_into_tensor(self, out: Any, inp: Any, async_op: bool,
                               name: str = "all_gather_into_tensor") -> NcclWork | None:
        dev = self._device(name, inp, "input_tensor")
        check_cuda_tensor(name, out, "output_tensor", dev)
        n = self._size
        if out.numel() != n * inp.numel() or out.dtype != inp.dtype:
            raise ValueError(f"{name}: output_tensor {tuple(out.shape)} {out.dtype} must hold "
                             f"world_size ({n}) x input {tuple(inp.shape)} {inp.dtype}")
        src = _contig(inp)
        dst = _out(out)
        nb = _nbytes(inp)

        def enqueue(c: _Comm) -> None:
            if nb:
                self._call(name, c, self.lib.ncclAllGather(src.data_ptr(), dst.data_ptr(), nb,
                                                           _UINT8, c.handle, c.stream_handle))
            if dst is not out:
                with ember.no_grad():
                    out.copy_(dst.view(out.shape))

        return self._launch(name, dev, lambda: _describe(inp), enqueue, [inp, src, out, dst],
                            [out], async_op)

    def all_gather(self, outs: list, inp: Any, async_op: bool) -> NcclWork | None:
        dev = self._device("all_gather", inp)
        outs = check_cuda_list("all_gather", outs, self._size, "tensor_list", inp, dev)
        src = _contig(inp)
        flat = ember.empty(self._size * inp.numel(), dtype=inp.dtype, device=inp.device)
        nb, k = _nbytes(inp), inp.numel()

        def enqueue(c: _Comm) -> None:
            if nb:
                self._call("all_gather", c, self.lib.ncclAllGather(
                    src.data_ptr(), flat.data_ptr(), nb, _UINT8, c.handle, c.stream_handle))
            with ember.no_grad():
                for i, o in enumerate(outs):
                    o.copy_(flat[i * k:(i + 1) * k].view(o.shape))

        return self._launch("all_gather", dev, lambda: _describe(inp), enqueue,
                            [inp, src, flat, *outs], outs, async_op)

    def reduce_scatter_tensor(self, out: Any, inp: Any, op: ReduceOp, async_op: bool,
                              name: str = "reduce_scatter_tensor") -> NcclWork | None:
        dev = self._device(name, out, "output")
        check_cuda_tensor(name, inp, "input", dev)
        n = self._size
        if inp.numel() != n * out.numel() or inp.dtype != out.dtype:
            raise ValueError(f"{name}: input {tuple(inp.shape)} {inp.dtype} must hold "
                             f"world_size ({n}) x output {tuple(out.shape)} {out.dtype}")
        dtype, rop = reduce_dtype(name, out.dtype), reduce_op(name, op, out.dtype)
        return self._reduce_scatter(name, dev, out, _contig(inp), dtype, rop, op, [inp], async_op)

    def reduce_scatter(self, out: Any, ins: list, op: ReduceOp, async_op: bool) -> NcclWork | None:
        name = "reduce_scatter"
        dev = self._device(name, out, "output")
        ins = check_cuda_list(name, ins, self._size, "input_list", out, dev)
        dtype, rop = reduce_dtype(name, out.dtype), reduce_op(name, op, out.dtype)
        flat = ember.cat([x.reshape(-1) for x in ins]) if ins else ember.empty(0, device=out.device)
        return self._reduce_scatter(name, dev, out, flat, dtype, rop, op, ins, async_op)

    def _reduce_scatter(self, name: str, dev: int, out: Any, flat: Any, dtype: int, rop: int,
                        op: ReduceOp, keep: list, async_op: bool) -> NcclWork | None:
        dst = _out(out)
        count = out.numel()

        def enqueue(c: _Comm) -> None:
            if count:
                self._call(name, c, self.lib.ncclReduceScatter(
                    flat.data_ptr(), dst.data_ptr(), count, dtype, rop, c.handle,
                    c.stream_handle))
            if dst is not out:
                with ember.no_grad():
                    out.copy_(dst.view(out.shape))

        return self._launch(name, dev, lambda: _describe(out, op=ReduceOp(op).name), enqueue,
                            [out, dst, flat, *keep], [out], async_op)

    def _exchange(self, name: str, dev: int, sends: list, recvs: list, desc: Callable[[], str],
                  after: Callable[[], None] | None, keep: list, outputs: list,
                  async_op: bool, p2p: bool = False) -> NcclWork | None:
        """Grouped ncclSend / ncclRecv: sends = [(peer, contiguous tensor)], recvs = [(peer,
        contiguous tensor)] (byte-wise), then `after` on the internal stream."""

        def enqueue(c: _Comm) -> None:
            calls: list[Callable[[], int]] = []
            for peer, t in sends:
                if _nbytes(t):
                    calls.append(lambda p=peer, t=t: self.lib.ncclSend(
                        t.data_ptr(), _nbytes(t), _UINT8, p, c.handle, c.stream_handle))
            for peer, t in recvs:
                if _nbytes(t):
                    calls.append(lambda p=peer, t=t: self.lib.ncclRecv(
                        t.data_ptr(), _nbytes(t), _UINT8, p, c.handle, c.stream_handle))
            if calls:
                self._group(name, c, calls)
            if after is not None:
                with ember.no_grad():
                    after()

        tensors = keep + [t for _, t in sends] + [t for _, t in recvs]
        return self._launch(name, dev, desc, enqueue, tensors, outputs, async_op, check=not p2p)

    def all_to_all(self, outs: list, ins: list, async_op: bool,
                   name: str = "all_to_all") -> NcclWork | None:
        n = self._size
        if not isinstance(ins, (list, tuple)) or not ins:
            raise ValueError(f"{name}: input_tensor_list must be a list of {n} tensors")
        dev = self._device(name, ins[0], "input_tensor_list[0]")
        ins = check_cuda_list(name, ins, n, "input_tensor_list", None, dev)
        outs = check_cuda_list(name, outs, n, "output_tensor_list", None, dev)
        dts = {t.dtype for t in ins + outs}
        if len(dts) != 1:
            raise ValueError(f"{name}: every tensor must have the same dtype, got "
                             f"{sorted(map(str, dts))}")
        srcs = [_contig(t) for t in ins]
        dsts = [_out(o) for o in outs]

        def after() -> None:
            for o, d in zip(outs, dsts):
                if d is not o:
                    o.copy_(d.view(o.shape))

        return self._exchange(name, dev, list(enumerate(srcs)), list(enumerate(dsts)),
                              lambda: _describe(dtype=next(iter(dts))), after, ins + outs, outs,
                              async_op)

    def all_to_all_single(self, out: Any, inp: Any, out_splits: list | None,
                          in_splits: list | None, async_op: bool) -> NcclWork | None:
        name = "all_to_all_single"
        dev = self._device(name, inp, "input")
        check_cuda_tensor(name, out, "output", dev)
        if out.dtype != inp.dtype:
            raise ValueError(f"{name}: output dtype {out.dtype} != input {inp.dtype}")
        src = _contig(inp)
        dst = _out(out)
        dflat = dst.reshape(-1)
        ins = _split_rows(src.reshape(-1), inp, in_splits, self._size, name, "input")
        outs = _split_rows(dflat, out, out_splits, self._size, name, "output")

        def after() -> None:
            if dst is not out:
                out.copy_(dst.view(out.shape))

        return self._exchange(name, dev, list(enumerate(ins)), list(enumerate(outs)),
                              lambda: _describe(dtype=inp.dtype), after, [inp, src, out, dst],
                              [out], async_op)

    def gather(self, t: Any, outs: list | None, root: int, async_op: bool) -> NcclWork | None:
        name = "gather"
        dev = self._device(name, t)
        src = _contig(t)
        if self._rank != root:
            if outs:
                raise ValueError(f"{name}: gather_list must be None or empty on ranks other "
                                 "than dst")
            return self._exchange(name, dev, [(root, src)], [], lambda: _describe(t, dst=root),
                                  None, [t], [], async_op)
        outs = check_cuda_list(name, outs, self._size, "gather_list", t, dev)
        dsts = [_out(o) for o in outs]

        def after() -> None:
            outs[root].copy_(src.view(outs[root].shape))
            for r, (o, d) in enumerate(zip(outs, dsts)):
                if r != root and d is not o:
                    o.copy_(d.view(o.shape))

        recvs = [(r, d) for r, d in enumerate(dsts) if r != root]
        return self._exchange(name, dev, [], recvs, lambda: _describe(t, dst=root), after,
                              [t, src, *outs], outs, async_op)

    def scatter(self, t: Any, ins: list | None, root: int, async_op: bool) -> NcclWork | None:
        name = "scatter"
        dev = self._device(name, t)
        dst = _out(t)
        if self._rank != root:
            if ins:
                raise ValueError(f"{name}: scatter_list must be None or empty on ranks other "
                                 "than src")

            def after_recv() -> None:
                if dst is not t:
                    t.copy_(dst.view(t.shape))

            return self._exchange(name, dev, [], [(root, dst)], lambda: _describe(t, src=root),
                                  after_recv, [t], [t], async_op)
        ins = check_cuda_list(name, ins, self._size, "scatter_list", t, dev)
        srcs = [_contig(x) for x in ins]

        def after() -> None:
            t.copy_(srcs[root].view(t.shape))

        sends = [(r, s) for r, s in enumerate(srcs) if r != root]
        return self._exchange(name, dev, sends, [], lambda: _describe(t, src=root), after,
                              [t, dst, *ins], [t], async_op)

    def barrier(self, async_op: bool, device_ids: Any = None) -> NcclWork | None:
        """A one-element all-reduce on the device of device_ids[0] (else the last one used, else
        the current device); waiting for it blocks the host."""
        if device_ids:
            d = device_ids[0]
            dev = int(d) if isinstance(d, int) else int(ember.device(d).index or 0)
        elif self._last_device is not None:
            dev = self._last_device
        else:
            dev = ember.cuda.current_device()
        c = self.comm(dev, "barrier")
        if c.barrier_tensor is None:
            c.barrier_tensor = ember.zeros(1, dtype=ember.float32, device=ember.device("cuda", dev))
        t = c.barrier_tensor

        def enqueue(c: _Comm) -> None:
            p = t.data_ptr()
            self._call("barrier", c, self.lib.ncclAllReduce(p, p, 1, _FLOAT32, _SUM, c.handle,
                                                            c.stream_handle))

        w = self._launch("barrier", dev, str, enqueue, [t], [], True, blocking=True)
        if async_op:
            return w
        w.wait()
        return None

    # ---- point to point ------------------------------------------------------------------
    def _peer(self, name: str, peer: int | None) -> int:
        if peer is None:
            raise ValueError(f"{name}: the nccl backend cannot receive from any source (NCCL "
                             "matches a receive with one peer): pass src")
        if not 0 <= peer < self._size:
            raise ValueError(f"{name}: peer {peer} outside group of size {self._size}")
        if peer == self._rank:
            raise ValueError(f"{name}: rank {self._rank} cannot {name} to itself")
        return peer

    def send(self, t: Any, dst: int, async_op: bool) -> NcclWork | None:
        dev = self._device("send", t)
        dst = self._peer("send", dst)
        return self._exchange("send", dev, [(dst, _contig(t))], [], str, None, [t], [t], async_op,
                              p2p=True)

    def recv(self, t: Any, src: int | None, async_op: bool) -> NcclWork | None:
        dev = self._device("recv", t)
        src = self._peer("recv", src)
        dst = _out(t)

        def after() -> None:
            if dst is not t:
                t.copy_(dst.view(t.shape))

        return self._exchange("recv", dev, [], [(src, dst)], str, after, [t], [t], async_op,
                              p2p=True)

    def batch(self, ops: list[tuple[str, Any, int]]) -> NcclWork:
        """batch_isend_irecv: [("send"|"recv", tensor, group peer)] in one ncclGroupStart/End;
        one Work for all of them."""
        if not ops:
            raise ValueError("batch_isend_irecv: the list of operations is empty")
        dev = self._device("batch_isend_irecv", ops[0][1], "the first operation's tensor")
        sends, recvs, copies, keep = [], [], [], []
        for i, (kind, t, peer) in enumerate(ops):
            check_cuda_tensor("batch_isend_irecv", t, f"the tensor of operation {i}", dev)
            if peer is None or not 0 <= peer < self._size:
                raise ValueError(f"batch_isend_irecv: operation {i} has peer {peer}; expected a "
                                 f"rank of the group (0..{self._size - 1})")
            keep.append(t)
            if kind == "send":
                sends.append((peer, _contig(t)))
            else:
                d = _out(t)
                recvs.append((peer, d))
                if d is not t:
                    copies.append((t, d))

        def after() -> None:
            for t, d in copies:
                t.copy_(d.view(t.shape))

        w = self._exchange("batch_isend_irecv", dev, sends, recvs, str, after, keep,
                           [t for _, t, _ in ops], True, p2p=True)
        assert w is not None
        return w


def _describe(*tensors: Any, **extra: Any) -> str:
    parts = [f"{tuple(t.shape)}:{str(t.dtype).replace('ember.', '')}" for t in tensors]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return ", ".join(parts)


def _split_rows(flat: Any, t: Any, splits: list | None, n: int, name: str, arg: str) -> list:
    """flat (t's elements) cut into n pieces of whole rows of t (splits: rows per piece)."""
    rows = t.shape[0] if t.dim() > 0 else 1
    if splits is None or len(splits) == 0:
        if rows % n:
            raise ValueError(f"{name}: {arg} has {rows} rows, not divisible by world size {n}; "
                             "pass split sizes")
        splits = [rows // n] * n
    splits = [int(s) for s in splits]
    if len(splits) != n or sum(splits) != rows or any(s < 0 for s in splits):
        raise ValueError(f"{name}: {arg} split sizes {splits} must be {n} non-negative numbers "
                         f"summing to its {rows} rows")
    per_row = t.numel() // rows if rows else 0
    out, start = [], 0
    for s in splits:
        out.append(flat[start * per_row:(start + s) * per_row])
        start += s
    return out
