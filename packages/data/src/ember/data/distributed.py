"""DistributedSampler: each of ``num_replicas`` processes reads its own equal share."""

from __future__ import annotations

import math
from typing import Iterator, Sized

import ember

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _world() -> tuple[int, int]:
    try:
        import ember.distributed as dist
    except ImportError as e:
        raise RuntimeError("Requires distributed package to be available") from e
    is_available = getattr(dist, "is_available", None)
    is_initialized = getattr(dist, "is_initialized", None)
    if not (is_available and is_available() and is_initialized and is_initialized()):
        raise ValueError(  # PyTorch's class (its get_world_size raises it)
            "DistributedSampler: num_replicas and rank were not given and the default process "
            "group is not initialized (call ember.distributed.init_process_group, or pass "
            "num_replicas= and rank=)"
        )
    return dist.get_world_size(), dist.get_rank()


class DistributedSampler(Sampler[int]):
    """The indices of ``dataset`` for replica ``rank`` of ``num_replicas``.

    The (optionally shuffled, with seed ``seed + epoch``) index list is padded by repeating its
    head to a multiple of ``num_replicas`` (or cut to one with ``drop_last``), and rank ``r``
    takes every ``num_replicas``-th index starting at ``r``: all ranks get the same count.
    Call :meth:`set_epoch` at the start of every epoch to get a new order.
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            world, me = _world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = me if rank is None else rank
        if num_replicas <= 0:
            raise ValueError(f"num_replicas should be a positive integer, but got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = ember.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = ember.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            elif indices:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank : self.total_size : self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch, which seeds the shuffle (``seed + epoch``)."""
        self.epoch = epoch
