"""Pickling of tensors.

* Plain ``pickle`` (``Tensor.__reduce_ex__``) stores a tensor by value: its dtype, shape and bytes.
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
(DataLoader workers) is recycled by its creator once every receiver has freed it.
"""

from __future__ import annotations

from typing import Any

from ember import _C
from ember._C import Tensor

__all__ = ["init_reductions", "rebuild_tensor_from_bytes", "rebuild_shared_tensor"]


def _dtype_of(name: str) -> Any:
    return getattr(_C, name)


def rebuild_tensor_from_bytes(data: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    t = _C._tensor_from_bytes(data, _dtype_of(dtype), list(shape))
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


def _dtype_name(t: Tensor) -> str:
    return repr(t.dtype).split(".", 1)[1]


def _reduce_tensor(t: Tensor, protocol: int = 2) -> tuple:
    """By value: what ``pickle.dumps(tensor)`` stores."""
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

# Segment policies (core/shared_memory.h).
OWNER, HANDOFF, POOLED = 0, 1, 2


def _reduce_tensor_mp(t: Tensor) -> tuple:
    """Between processes: by shared-memory name when the storage is shared (or big enough to be
    worth one copy into shared memory), else by value."""
    handle = _C._shm_handle(t, True)
    if handle is None:
        if t.numel() * t.dtype.itemsize < MP_SHARE_MIN_BYTES:
            return _reduce_tensor(t)
        shared = _C._empty_shared(list(t.shape), t.dtype, HANDOFF)
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
