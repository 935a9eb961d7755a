"""Model averagers: when to average (utils.average_parameters).

Example (post-local SGD: DDP for 100 steps, then averaging every 4)::

    >>> averager = PeriodicModelAverager(period=4, warmup_steps=100)  # doctest: +SKIP
    >>> for step in range(200):  # doctest: +SKIP
    ...     loss_fn(model(x), y).backward()
    ...     optimizer.step()
    ...     averager.average_parameters(model.parameters())
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any

from . import utils

__all__ = ["ModelAverager", "PeriodicModelAverager"]


class ModelAverager(ABC):
    """Base of the averagers: the group (None: the world) and a step count."""

    def __init__(self, process_group: Any = None) -> None:
        import ember.distributed as dist

        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.step = 0

    @abstractmethod
    def average_parameters(self, params: Any) -> None:
        raise NotImplementedError


class PeriodicModelAverager(ModelAverager):
    """Averages at every period-th step once warmup_steps steps have passed (the first
    average at step warmup_steps)."""

    def __init__(self, period: int, warmup_steps: int = 0, process_group: Any = None) -> None:
        super().__init__(process_group)
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        if period < 1:
            raise ValueError("Arg ``period`` must be a positive value.")
        if period == 1:
            warnings.warn("When period is 1, no need to use model averaging because the "
                          "communication cost of all-reducing parameters will be no less than "
                          "the cost of all-reducing gradients by DistributedDataParallel in the "
                          "backward pass. Therefore, only DistributedDataParallel should be used "
                          "for this case.", stacklevel=2)
        self.warmup_steps = warmup_steps
        self.period = period

    def average_parameters(self, params: Any) -> None:
        """Averages params (parameters or param groups) if this step is due; counts the step."""
        if self.step >= self.warmup_steps and (self.step - self.warmup_steps) % self.period == 0:
            utils.average_parameters_or_parameter_groups(params, self.process_group)
        self.step += 1
