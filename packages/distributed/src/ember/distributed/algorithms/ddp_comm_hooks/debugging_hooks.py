"""Hooks for measuring DistributedDataParallel (torch's debugging_hooks).

>>> callable(noop_hook)
True
"""

from __future__ import annotations

from typing import Any

import ember
from ember.distributed.algorithms._comm_types import Future, GradBucket

__all__ = ["noop_hook"]


def noop_hook(_: Any, bucket: GradBucket) -> Future[ember.Tensor]:
    """Communicates nothing: the bucket's local gradients are kept as they are. Only for
    measuring how much of a step the gradient all-reduce takes (the ranks' gradients diverge).

    >>> b = GradBucket(0, ember.ones(2), [], [], True)
    >>> noop_hook(None, b).wait().tolist()
    [1.0, 1.0]
    """
    fut: Future[ember.Tensor] = Future()
    fut.set_result(bucket.buffer())
    return fut
