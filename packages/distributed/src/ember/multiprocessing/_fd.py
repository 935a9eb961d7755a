"""The ``file_descriptor`` sharing strategy: tensors travel as file descriptors.

Shared storages are unnamed segments (created in ``/dev/shm`` and unlinked at once, policy 3 of
``core/shared_memory.h``): ``share_memory_()`` makes them, and a tensor that needs a copy in
shared memory is copied into one (up to ``MP_POOL_MAX_BYTES``, one of the sender's recycled
unnamed segments, policy 4, which the receiver maps once and caches by inode). Their descriptor crosses to the receiver with
``multiprocessing.reduction.DupFd`` (``SCM_RIGHTS`` over a Unix socket, or inherited when the
tensor is an argument of a starting process) and the receiver maps the same pages. The kernel
frees the pages when the last descriptor and mapping close: nothing can be left in ``/dev/shm``,
whatever way the processes end. As with PyTorch, the sender must be alive when the receiver
unpickles (its resource sharer serves the descriptor), and each shared storage holds a
descriptor (mind ``ulimit -n``).

Tensors already in a named segment (``share_memory_()`` before the switch, DataLoader batches)
are still sent by name.
"""

from __future__ import annotations

import os
from multiprocessing import reduction

from ember import _C
from ember import multiprocessing_reductions as _red
from ember._C import Tensor

UNNAMED, POOLED_UNNAMED = 3, 4


def rebuild_fd_tensor(dupfd: reduction.DupFd, nbytes: int, pooled: bool, dtype: str,
                      shape: tuple, strides: tuple, offset: int, requires_grad: bool) -> Tensor:
    fd = dupfd.detach()
    try:
        t = _C._from_shm_fd(fd, nbytes, getattr(_C, dtype), list(shape), list(strides), offset,
                            pooled)
    finally:
        os.close(fd)  # the storage keeps its own duplicate (pooled: its cached mapping)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_fd(t: Tensor) -> tuple | None:
    """Reduces ``t`` by file descriptor, or returns None for the default path (by name for a
    named segment this process may send, by value for a small tensor)."""
    handle = _C._shm_handle(t, False)
    fd = -1 if handle is None else _C._shm_fd(t)
    if fd < 0:  # not an unnamed segment of this process (a received pooled one is copied)
        if handle is not None and handle[2] < UNNAMED and _red._sendable(handle):
            return None
        nbytes = t.numel() * t.dtype.itemsize
        if nbytes < _red.MP_SHARE_MIN_BYTES:
            return None
        # Like file_system: copies of up to MP_POOL_MAX_BYTES go to recycled segments.
        policy = POOLED_UNNAMED if nbytes <= _red.MP_POOL_MAX_BYTES else UNNAMED
        shared = _C._empty_shared(list(t.shape), t.dtype, policy)
        shared.copy_(t)
        t = shared
        fd = _C._shm_fd(t)
    _, nbytes, policy = _C._shm_handle(t, True)  # a pooled segment: the receiver's reference
    # DupFd duplicates the descriptor now: this process may free the tensor right after sending.
    return (
        rebuild_fd_tensor,
        (
            reduction.DupFd(fd),
            nbytes,
            policy == POOLED_UNNAMED,
            _red._dtype_name(t),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
            bool(getattr(t, "requires_grad", False)),
        ),
    )
