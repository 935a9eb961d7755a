"""Algorithms on top of ember.distributed: DistributedDataParallel's communication hooks
(``ember.distributed.algorithms.ddp_comm_hooks``) and training with uneven inputs
(``ember.distributed.algorithms.join``: Join, Joinable, JoinHook)."""

from ember.distributed.algorithms import ddp_comm_hooks, join
from ember.distributed.algorithms._comm_types import Future, GradBucket
from ember.distributed.algorithms.join import Join, Joinable, JoinHook

__all__ = ["Future", "GradBucket", "Join", "JoinHook", "Joinable", "ddp_comm_hooks", "join"]
