"""The ``file_descriptor`` sharing strategy: tensors travel as file descriptors.

A tensor that needs a copy in shared memory goes into anonymous memory (``memfd_create``), which
has no name in ``/dev/shm``; its descriptor crosses to the receiver with
``multiprocessing.reduction.DupFd`` (``SCM_RIGHTS`` over a Unix socket, or inherited when the
tensor is an argument of a starting process). The receiver maps the same pages
(``mmap`` wrapped zero-copy by a tensor). The pages are freed by the kernel when the last process
holding the descriptor or a mapping lets go: nothing can be left behind, whatever way the
processes exit. As with PyTorch, the sender must be alive when the receiver unpickles (it serves
the descriptor).

A tensor received this way is sent on by the same descriptor. A tensor moved to shared memory by
``share_memory_()`` keeps its named segment and is sent by name.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import weakref
from multiprocessing import reduction
from typing import Any

from ember import _C
from ember import multiprocessing_reductions as _red
from ember._C import Tensor

# Storage base address -> (descriptor, nbytes) of the memfd mappings of this process.
_segments: dict[int, tuple[int, int]] = {}
_lock = threading.Lock()


def _forget(addr: int, fd: int) -> None:
    with _lock:
        if _segments.get(addr, (None,))[0] == fd:
            del _segments[addr]
    os.close(fd)


def _base_address(t: Tensor) -> int:
    return t.data_ptr() - t.storage_offset() * t.dtype.itemsize


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _fail_no_memory(nbytes: int, err: str) -> None:
    avail = _mem_available()
    where = f" ({avail / 2**20:.1f} MiB of memory available)" if avail is not None else ""
    raise RuntimeError(
        f"unable to allocate {nbytes} bytes of shared memory (memfd, sharing strategy "
        f"'file_descriptor'): {err}{where}. Free memory, raise the container's memory limit, or "
        "send smaller tensors."
    )


def _new_segment(nbytes: int) -> tuple[int, mmap.mmap]:
    avail = _mem_available()
    if avail is not None and nbytes > avail:
        _fail_no_memory(nbytes, "more than the available memory")
    fd = os.memfd_create("ember_mp", os.MFD_CLOEXEC)
    try:
        try:  # reserve the pages now (no SIGBUS or OOM kill on first touch)
            os.posix_fallocate(fd, 0, nbytes)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
                _fail_no_memory(nbytes, os.strerror(e.errno))
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(fd, nbytes)
        return fd, mmap.mmap(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise


def _wrap(fd: int, mm: mmap.mmap, nbytes: int, dtype: Any) -> Tensor:
    """A 1-d tensor of ``dtype`` over the whole mapping; the mapping (and the kept descriptor)
    live as long as a tensor uses it."""
    base = _C._from_buffer(mm)
    addr = base.data_ptr()
    with _lock:
        _segments[addr] = (fd, nbytes)
    weakref.finalize(mm, _forget, addr, fd)
    return base.view(dtype)


def rebuild_fd_tensor(dupfd: Any, nbytes: int, dtype: str, shape: tuple, strides: tuple,
                      offset: int, requires_grad: bool) -> Tensor:
    fd = dupfd.detach()
    try:
        mm = mmap.mmap(fd, nbytes)
    except BaseException:
        os.close(fd)
        raise
    t = _wrap(fd, mm, nbytes, getattr(_C, dtype)).as_strided(list(shape), list(strides), offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_fd(t: Tensor) -> tuple | None:
    """Reduces ``t`` by file descriptor, or returns None for the default path (by name for a
    ``share_memory_()`` tensor, by value for a small one)."""
    if t.device.type != "cpu":
        return None
    itemsize = t.dtype.itemsize
    with _lock:
        entry = _segments.get(_base_address(t))
    if entry is not None:
        fd, nbytes = entry
        strides, offset = tuple(t.stride()), t.storage_offset()
    else:
        if _red._sendable(_C._shm_handle(t, False)):
            return None
        nbytes = t.numel() * itemsize
        if nbytes < _red.MP_SHARE_MIN_BYTES:
            return None
        fd, mm = _new_segment(nbytes)
        copy = _wrap(fd, mm, nbytes, t.dtype).view(list(t.shape))
        copy.copy_(t)
        strides, offset = tuple(copy.stride()), 0
    # DupFd duplicates the descriptor now: this process may free the tensor right after sending.
    return (
        rebuild_fd_tensor,
        (
            reduction.DupFd(fd),
            nbytes,
            _red._dtype_name(t),
            tuple(t.shape),
            strides,
            offset,
            bool(getattr(t, "requires_grad", False)),
        ),
    )
