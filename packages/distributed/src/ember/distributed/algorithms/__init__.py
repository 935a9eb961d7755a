"""Algorithms on top of ember.distributed: DistributedDataParallel's communication hooks
(``ember.distributed.algorithms.ddp_comm_hooks``)."""

from ember.distributed.algorithms import ddp_comm_hooks
from ember.distributed.algorithms._comm_types import Future, GradBucket

__all__ = ["Future", "GradBucket", "ddp_comm_hooks"]
