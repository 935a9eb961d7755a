"""Hierarchical model averaging (torch.distributed.algorithms.model_averaging.
hierarchical_model_averager): small groups average often, bigger ones more rarely.

Example (4 ranks: pairs average every 2 steps, everyone every 8)::

    >>> from collections import OrderedDict
    >>> averager = HierarchicalModelAverager(OrderedDict([(2, 2), (8, 4)]))  # doctest: +SKIP
    >>> for step in range(16):  # doctest: +SKIP
    ...     loss_fn(model(x), y).backward()
    ...     optimizer.step()
    ...     averager.average_parameters(model.parameters())
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from . import utils
from .averagers import ModelAverager

__all__ = ["HierarchicalModelAverager"]


class HierarchicalModelAverager(ModelAverager):
    """Averages parameters in groups of several sizes, each at its own period.

    ``period_group_size_dict`` maps a period to a group size, in increasing order of both; the
    last size must be the whole ``process_group``'s (None: the world). Groups of a smaller size
    are consecutive ranks (``new_subgroups(group_size=...)``: every rank must build the
    averager). From step ``warmup_steps`` on, a step divisible by several periods averages
    only over the group of the largest one; a step divisible by none averages nothing.
    """

    def __init__(self, period_group_size_dict: OrderedDict[int, int] | dict[int, int] | None
                 = None, warmup_steps: int = 0, process_group: Any = None) -> None:
        import ember.distributed as dist

        super().__init__(process_group)
        if not period_group_size_dict:
            raise ValueError("Arg ``period_group_size_dict`` must not be empty.")
        self._periods = list(period_group_size_dict)
        if self._periods[0] <= 0:
            raise ValueError("The minimum period in arg ``period_group_size_dict`` must be a "
                             "positive value.")
        if self._periods[-1] == 1:
            warnings.warn("When the maximum period in arg ``period_group_size_dict`` is 1, no "
                          "need to use model averaging: all-reducing parameters every step "
                          "costs no less than DistributedDataParallel's gradient all-reduce, "
                          "so use only DistributedDataParallel.", stacklevel=2)
        total = dist.get_world_size(group=self.process_group)
        last = list(period_group_size_dict.values())[-1]
        if last != total:
            raise ValueError(f"The last value in arg ``period_group_size_dict`` {last} must be "
                             f"equal to the size of arg ``process_group`` {total}.")
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        self.period_process_group_dict: OrderedDict[int, Any] = OrderedDict()
        for period, size in period_group_size_dict.items():
            if size == total:
                self.period_process_group_dict[period] = self.process_group
            else:
                self.period_process_group_dict[period], _ = dist.new_subgroups(
                    group_size=size, group=self.process_group)
        self.warmup_steps = warmup_steps

    def _find_process_group(self) -> Any:
        """The group of the largest period dividing the current step (None: no averaging)."""
        for period in reversed(self._periods):
            if self.step % period == 0:
                return self.period_process_group_dict[period]
        return None

    def average_parameters(self, params: Any) -> None:
        """Averages params (parameters or param groups) over this step's group, if any; counts
        the step."""
        if self.step >= self.warmup_steps:
            group = self._find_process_group()
            if group is not None:
                utils.average_parameters_or_parameter_groups(params, group)
        self.step += 1
