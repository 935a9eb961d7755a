"""Pickling of tensors.

* Plain ``pickle`` (``Tensor.__reduce_ex__``) stores a tensor by value, as PyTorch does: the bytes of
  its whole storage with its dtype, shape, strides and storage offset, so a view comes back as the
  same view of a copy of its storage. As in PyTorch, each tensor carries its own copy of the
  storage: two views pickled together no longer share memory once loaded (``ember.save`` and
  ``copy.deepcopy`` keep them shared).
* Between processes (``multiprocessing``'s ``ForkingPickler``, once :func:`init_reductions` has
  run), a tensor whose storage lives in shared memory (``share_memory_()``, or a DataLoader
  worker's batch) travels as ``(segment name, nbytes, dtype, shape, strides, offset)`` and the
  receiver maps the same pages: no copy. Other tensors of at least ``MP_SHARE_MIN_BYTES`` are
  copied once into a new "handoff" segment (the sender may drop the tensor right after sending);
  smaller ones travel by value.

A handoff segment (``ember._C._empty_shared(..., policy=HANDOFF)``) is unlinked by the process that
maps it, so nothing is left in ``/dev/shm`` once it is received; it can be received once. A
segment from ``share_memory_()`` is unlinked when its creator frees it: the creator must keep
the tensor alive until the receivers have it (as with PyTorch's CUDA tensors). A pooled segment
(DataLoader workers, and copies of up to ``MP_POOL_MAX_BYTES``) is recycled by its creator once
every receiver has freed it. A received handoff or pooled tensor that is sent on travels as a
new copy (its name is gone, or belongs to the creator's pool).

``ember.multiprocessing.set_sharing_strategy("file_descriptor")`` installs ``fd_reducer``: shared
storages are then unnamed segments that travel as file descriptors (nothing named in ``/dev/shm``).

A CUDA tensor travels as a CUDA IPC handle of its storage's allocation (whatever the sharing
strategy): the receiver maps the same device memory, so writes on either side are seen by the
other. The sender keeps the storage alive until every receiver has freed it (a reference count in
a small shared-memory file); it must stay alive itself until then (a receiver whose sender has
exited gets a RuntimeError saying so). Processes that use CUDA must be started with "spawn" (or
"forkserver"). See ``csrc/cuda/cuda_ipc.cpp``.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from ember import _C
from ember._C import Tensor

__all__ = [
    "init_reductions",
    "rebuild_cuda_tensor",
    "rebuild_shared_tensor",
    "rebuild_tensor_from_bytes",
    "rebuild_tensor_strided",
]


def _dtype_of(name: str) -> Any:
    return getattr(_C, name)


def rebuild_tensor_from_bytes(data: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    t = _C._tensor_from_bytes(data, _dtype_of(dtype), list(shape))
    if requires_grad:
        t.requires_grad_(True)
    return t


def rebuild_tensor_strided(
    data: bytes,
    dtype: str,
    shape: tuple,
    strides: tuple,
    offset: int,
    requires_grad: bool,
) -> Tensor:
    """Unpickles a tensor: a view (shape, strides, offset) of a storage holding ``data``."""
    import math

    dt = _dtype_of(dtype)
    like = _C.empty(0, dtype=dt)
    shape, strides = [int(n) for n in shape], [int(s) for s in strides]
    nbytes, itemsize = len(data), like.itemsize
    ok = (len(shape) == len(strides) and offset >= 0 and nbytes % itemsize == 0 and
          all(n >= 0 for n in shape) and all(s >= 0 for s in strides))
    if ok and math.prod(shape):
        # the last element the view touches must lie inside the storage
        last = offset + sum((n - 1) * s for n, s in zip(shape, strides))
        ok = last < nbytes // itemsize
    if not ok:
        raise ValueError(f"unpickling a tensor: shape {shape}, strides {strides} and offset "
                         f"{offset} do not fit a storage of {nbytes} bytes of {dtype}")
    raw = _C._tensor_from_bytes(data, _C.uint8, [nbytes])
    t = like.set_(raw.untyped_storage(), offset, shape, strides)
    if requires_grad:
        t.requires_grad_(True)
    return t


def rebuild_meta_tensor(dtype: str, shape: tuple, strides: tuple, requires_grad: bool) -> Tensor:
    """A meta tensor has no data to send: its shape, strides and dtype rebuild it."""
    import ember

    t = ember.empty_strided(shape, strides, dtype=_dtype_of(dtype), device="meta")
    if requires_grad:
        t.requires_grad_(True)
    return t


def rebuild_shared_tensor(
    name: str,
    nbytes: int,
    policy: int,
    dtype: str,
    shape: tuple,
    strides: tuple,
    offset: int,
    requires_grad: bool,
) -> Tensor:
    t = _C._from_shm(name, nbytes, _dtype_of(dtype), list(shape), list(strides), offset, policy)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _cuda_module() -> Any:
    """ember._C_cuda (imported without requiring a device: a receiver without one gets the
    producer's state or a device error from it)."""
    try:
        from ember import _C_cuda
    except ImportError as e:
        raise RuntimeError(
            "ember.multiprocessing: cannot share or receive a CUDA tensor: this ember was built "
            "without CUDA (EMBER_CUDA=ON), or the CUDA runtime library is missing"
        ) from e
    return _C_cuda


_cuda_exit_hook_installed = False


def _cuda_ipc_at_exit() -> None:
    """Releases what this process received and frees what it sent that nobody holds; warns when
    tensors it sent are still used elsewhere (their memory goes with this process)."""
    import sys

    m = sys.modules.get("ember._C_cuda")
    if m is None:
        return
    held = m._ipc_shutdown()
    if held:
        import warnings

        warnings.warn(
            f"ember.multiprocessing: process {os.getpid()} exits while {held} CUDA tensor(s) it "
            "shared are still held by other processes; that memory is freed with this process. "
            "Keep the producer alive until consumers have released the CUDA tensors it sent.",
            RuntimeWarning,
            stacklevel=1,
        )


def _install_cuda_exit_hook() -> None:
    """Runs `_cuda_ipc_at_exit` at exit, also in a multiprocessing child (which skips atexit):
    after the children were joined (negative priority), so that their references are back."""
    global _cuda_exit_hook_installed
    if _cuda_exit_hook_installed:
        return
    import multiprocessing.util as mputil

    mputil.Finalize(None, _cuda_ipc_at_exit, exitpriority=-50)
    _cuda_exit_hook_installed = True


def rebuild_cuda_tensor(
    info: tuple,
    dtype: str,
    shape: tuple,
    strides: tuple,
    storage_offset: int,
    requires_grad: bool,
) -> Tensor:
    """The receiving side of `_reduce_cuda_tensor`: maps the sender's CUDA memory (once per
    allocation and process), makes the current stream wait for the sender's queued writes, and
    takes over the message's reference (released when the storage is freed)."""
    m = _cuda_module()
    _install_cuda_exit_hook()
    if info[0] == "empty":  # a storage without memory: nothing to map
        import ember

        t = ember.empty_strided(list(shape), list(strides), dtype=_dtype_of(dtype),
                                device=f"cuda:{info[1]}")
    else:
        like = _C._tensor_from_bytes(b"", _dtype_of(dtype), [0])  # carries the dtype
        t = m._ipc_open(*info, like, list(shape), list(strides), storage_offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_cuda_tensor(t: Tensor) -> tuple:
    """By CUDA IPC handle (the storage's allocation and its offset in it)."""
    m = _cuda_module()
    if getattr(t, "requires_grad", False) and not t.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
            "does not support crossing process boundaries.  If you just want to transfer the "
            "data, call detach() on the tensor before serializing (e.g., putting it on the queue)."
        )
    if t._storage_nbytes() == 0:
        info: tuple = ("empty", t.device.index or 0)
    else:
        _install_cuda_exit_hook()
        info = tuple(m._ipc_share(t))
    return (
        rebuild_cuda_tensor,
        (
            info,
            _dtype_name(t),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
            bool(getattr(t, "requires_grad", False)),
        ),
    )


def _dtype_name(t: Tensor) -> str:
    return repr(t.dtype).split(".", 1)[1]


def _is_compact(t: Tensor, nbytes: int) -> bool:
    """Whether t is exactly its storage in row-major order (pickled as its elements alone)."""
    if t.storage_offset() != 0 or nbytes != t.numel() * t.itemsize:
        return False
    expect = 1
    for n, s in zip(reversed(t.shape), reversed(t.stride())):
        if s != expect:
            return False
        expect *= max(n, 1)
    return True


def _reduce_tensor(t: Tensor, protocol: int = 2, whole_storage: bool = True) -> tuple:
    """By value: what ``pickle.dumps(tensor)`` stores. ``whole_storage=False`` (a small tensor
    sent to another process) sends only its elements, in row-major order."""
    requires_grad = bool(getattr(t, "requires_grad", False))
    if t.device.type == "meta":  # as torch: pickled by its shape (copying data out would fail)
        return (rebuild_meta_tensor, (_dtype_name(t), tuple(t.shape), tuple(t.stride()),
                                      requires_grad))
    nbytes = t._storage_nbytes()
    if whole_storage and not _is_compact(t, nbytes) and nbytes % t.itemsize == 0:
        # a view: its whole storage and its geometry, as PyTorch pickles it
        from ember.serialization import _storage_bytes_view

        return (rebuild_tensor_strided,
                (_C._tensor_to_bytes(_storage_bytes_view(t)), _dtype_name(t), tuple(t.shape),
                 tuple(t.stride()), t.storage_offset(), requires_grad))
    return (
        rebuild_tensor_from_bytes,
        (
            _C._tensor_to_bytes(t),
            _dtype_name(t),
            tuple(t.shape),
            bool(getattr(t, "requires_grad", False)),
        ),
    )


MP_SHARE_MIN_BYTES = 64 * 1024
# Copies up to this size go into a recycled (pooled) segment of the sender: a steady stream of
# tensors then costs one memcpy and no page faults; bigger ones into a handoff segment, so that
# no large idle segment stays in /dev/shm.
MP_POOL_MAX_BYTES = 32 << 20

# Segment policies (core/shared_memory.h).
OWNER, HANDOFF, POOLED = 0, 1, 2

# Set by ember.multiprocessing.set_sharing_strategy("file_descriptor"): a function that reduces a
# tensor by file descriptor, or returns None for the default path below.
fd_reducer: Callable[[Tensor], tuple | None] | None = None


def _creator_pid(name: str) -> int:
    """The pid in a segment name "/ember_<pid>_<n>_<salt>" (-1 when it has another form)."""
    try:
        return int(name.lstrip("/").split("_")[1])
    except (IndexError, ValueError):
        return -1


def _sendable(handle: tuple | None) -> bool:
    """Whether the segment's name may be sent on: an owner segment's name lives as long as its
    creator keeps the tensor; a handoff segment's name is gone once received, and a pooled one is
    recycled by its creator, so a receiver that forwards such a tensor sends a copy."""
    if handle is None:
        return False
    name, _, policy = handle
    return policy == OWNER or (policy in (HANDOFF, POOLED) and _creator_pid(name) == os.getpid())


def _reduce_tensor_mp(t: Tensor) -> tuple:
    """Between processes: by shared-memory name when the storage is shared (or big enough to be
    worth one copy into shared memory), else by value; a CUDA tensor by CUDA IPC handle."""
    if t.device.type == "cuda":
        return _reduce_cuda_tensor(t)
    if fd_reducer is not None:
        reduced = fd_reducer(t)
        if reduced is not None:
            return reduced
    if _sendable(_C._shm_handle(t, False)):
        handle = _C._shm_handle(t, True)
    else:
        nbytes = t.numel() * t.dtype.itemsize
        if nbytes < MP_SHARE_MIN_BYTES:  # (a small slice must not carry a big storage)
            return _reduce_tensor(t, whole_storage=False)
        policy = POOLED if nbytes <= MP_POOL_MAX_BYTES else HANDOFF
        shared = _C._empty_shared(list(t.shape), t.dtype, policy)
        shared.copy_(t)
        t = shared
        handle = _C._shm_handle(t, True)
    name, nbytes, policy = handle
    return (
        rebuild_shared_tensor,
        (
            name,
            nbytes,
            policy,
            _dtype_name(t),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
            bool(getattr(t, "requires_grad", False)),
        ),
    )


_initialized = False


def init_reductions() -> None:
    """Registers the shared-memory reducer with ``multiprocessing`` (idempotent)."""
    global _initialized
    if _initialized:
        return
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(Tensor, _reduce_tensor_mp)
    _initialized = True
