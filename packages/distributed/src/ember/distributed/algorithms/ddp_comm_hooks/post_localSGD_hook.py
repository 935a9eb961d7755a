"""Post-local SGD (torch's post_localSGD_hook): DDP averages gradients over the whole group
for the first start_localSGD_iter iterations, then only within a subgroup (or not at all);
a model averager (algorithms.model_averaging) averages the parameters every few steps.

Example::

    >>> state = PostLocalSGDState(process_group=None, subgroup=subgroup,  # doctest: +SKIP
    ...                           start_localSGD_iter=100)
    >>> ddp_model.register_comm_hook(state, post_localSGD_hook)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import ember
from ember.distributed.algorithms._comm_types import Future, GradBucket
from ember.distributed.algorithms.ddp_comm_hooks.default_hooks import (
    _allreduce_divided,
    _world_size,
)

__all__ = ["PostLocalSGDState", "post_localSGD_hook"]


class PostLocalSGDState:
    """process_group (None: the world) averages the gradients until iteration
    start_localSGD_iter; after it, subgroup does (None: one subgroup per node, made on first
    use as dist.new_subgroups() does), or nothing when post_local_gradient_allreduce is
    False."""

    __slots__ = ["process_group", "subgroup", "start_localSGD_iter",
                 "post_local_gradient_allreduce", "iter"]

    def __init__(self, process_group: Any, subgroup: Any, start_localSGD_iter: int,
                 post_local_gradient_allreduce: bool = True) -> None:
        self.process_group = process_group
        self.subgroup = subgroup
        self.start_localSGD_iter = start_localSGD_iter
        self.post_local_gradient_allreduce = post_local_gradient_allreduce
        self.iter = 0

    def maybe_increase_iter(self, bucket: GradBucket) -> None:
        """One more iteration once its last bucket is reduced."""
        if bucket.is_last():
            self.iter += 1


def post_localSGD_hook(state: PostLocalSGDState, bucket: GradBucket) -> Future[ember.Tensor]:
    """The gradient average over the whole group before state.start_localSGD_iter, over
    state.subgroup after it (the bucket unchanged without post_local_gradient_allreduce)."""
    if state.iter < state.start_localSGD_iter:
        state.maybe_increase_iter(bucket)
        return _allreduce_divided(state.process_group, bucket, _world_size(state.process_group))
    if not state.post_local_gradient_allreduce:
        buf = bucket.buffer()
        return Future(lambda: buf)
    if state.subgroup is None:
        import ember.distributed as dist

        state.subgroup, _ = dist.new_subgroups()
    return _allreduce_divided(state.subgroup, bucket, _world_size(state.subgroup))
