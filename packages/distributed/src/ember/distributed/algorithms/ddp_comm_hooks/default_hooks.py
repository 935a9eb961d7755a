"""DistributedDataParallel's built-in communication hooks (torch's default_hooks).

Each is ``hook(state, bucket) -> Future[Tensor]``, where ``state`` is the process group to
reduce over (None: the default group), registered with ``ddp.register_comm_hook(state, hook)``:

- ``allreduce_hook``: the default reduction, an all-reduce of the gradients averaged over ranks;
- ``fp16_compress_hook`` / ``bf16_compress_hook``: the same in float16 / bfloat16, halving the
  bytes sent, then back to the bucket's dtype;
- ``fp16_compress_wrapper(hook)`` / ``bf16_compress_wrapper(hook)``: any hook (PowerSGD's, one's
  own) run on a float16 / bfloat16 copy of the bucket.

>>> from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
>>> # ddp_model.register_comm_hook(None, default_hooks.fp16_compress_hook)
>>> callable(default_hooks.fp16_compress_hook)
True
"""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.distributed.algorithms._comm_types import Future, GradBucket

__all__ = ["allreduce_hook", "bf16_compress_hook", "bf16_compress_wrapper", "fp16_compress_hook",
           "fp16_compress_wrapper"]


def _dist() -> Any:
    import ember.distributed as dist

    return dist


def _world_size(group: Any) -> int:
    return int(_dist().get_world_size(group))


def _all_reduce_future(tensor: ember.Tensor, group: Any) -> Future[ember.Tensor]:
    """Starts a sum all-reduce of ``tensor`` in place; the future's value is ``tensor``."""
    dist = _dist()
    work = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group, async_op=True)

    def finish() -> ember.Tensor:
        if work is not None:
            work.wait()
        return tensor

    return Future(finish)


def allreduce_hook(process_group: Any, bucket: GradBucket) -> Future[ember.Tensor]:
    """Averages the bucket's gradients over the ranks of ``process_group`` (None: the default
    group) with one all-reduce; DDP's behaviour without a hook."""
    return _allreduce_divided(process_group, bucket, _world_size(process_group))


def _allreduce_divided(
    process_group: Any, bucket: GradBucket, divisor: int
) -> Future[ember.Tensor]:
    """The sum over the ranks of the bucket's gradients divided by ``divisor`` (the world size,
    or under ``Join`` with ``divide_by_initial_world_size=False`` the ranks still training)."""
    buf = bucket.buffer()
    with ember.no_grad():
        buf.div_(divisor)
    return _all_reduce_future(buf, process_group)


def _compress_hook(
    dtype: ember.dtype, process_group: Any, bucket: GradBucket
) -> Future[ember.Tensor]:
    buf = bucket.buffer()
    with ember.no_grad():
        compressed = buf.to(dtype)
        compressed.div_(_world_size(process_group))
    fut = _all_reduce_future(compressed, process_group)

    def decompress(f: Future[ember.Tensor]) -> ember.Tensor:
        with ember.no_grad():
            buf.copy_(f.value())
        return buf

    return fut.then(decompress)


def fp16_compress_hook(process_group: Any, bucket: GradBucket) -> Future[ember.Tensor]:
    """Like ``allreduce_hook`` but sends the gradients as float16 (divided by the world size
    first, so the sum stays in range), then casts them back to the bucket's dtype."""
    return _compress_hook(ember.float16, process_group, bucket)


def bf16_compress_hook(process_group: Any, bucket: GradBucket) -> Future[ember.Tensor]:
    """Like ``fp16_compress_hook`` in bfloat16: float32's range with fewer mantissa bits."""
    return _compress_hook(ember.bfloat16, process_group, bucket)


_Hook = Callable[[Any, GradBucket], Future[ember.Tensor]]


def _compress_wrapper(dtype: ember.dtype, hook: _Hook) -> _Hook:
    def wrapped(state: Any, bucket: GradBucket) -> Future[ember.Tensor]:
        # the wrapped hook sees (and reduces) a low-precision copy of the bucket; its result
        # lands back in that copy, whose values DDP then takes (casting to the grads' dtype)
        bucket.set_buffer(bucket.buffer().to(dtype))
        fut = hook(state, bucket)

        def decompress(f: Future[ember.Tensor]) -> ember.Tensor:
            value = f.value()
            if isinstance(value, (list, tuple)):  # a torch-style future of [tensor]
                value = value[0]
            out = bucket.buffer()
            with ember.no_grad():
                out.copy_(value.reshape(out.shape))
            return out

        return fut.then(decompress)

    wrapped.__name__ = f"{_dtype_name(dtype)}_compress_wrapper_hook"
    return wrapped


def _dtype_name(dtype: ember.dtype) -> str:
    return "fp16" if dtype == ember.float16 else "bf16"


def fp16_compress_wrapper(hook: _Hook) -> _Hook:
    """Wraps a communication hook so that it runs on a float16 copy of each bucket (half the
    bytes on the wire); its result is cast back to the gradients' dtype.

    >>> from ember.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
    >>> hook = fp16_compress_wrapper(powerSGD.powerSGD_hook)
    >>> # ddp_model.register_comm_hook(powerSGD.PowerSGDState(None), hook)
    >>> callable(hook)
    True
    """
    return _compress_wrapper(ember.float16, hook)


def bf16_compress_wrapper(hook: _Hook) -> _Hook:
    """``fp16_compress_wrapper`` in bfloat16 (float32's range, fewer mantissa bits).

    >>> callable(bf16_compress_wrapper(allreduce_hook))
    True
    """
    return _compress_wrapper(ember.bfloat16, hook)
