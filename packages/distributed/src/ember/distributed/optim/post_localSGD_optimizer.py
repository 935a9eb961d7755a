"""PostLocalSGDOptimizer: a local optimizer followed by a model averager at every step."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["PostLocalSGDOptimizer"]


class PostLocalSGDOptimizer:
    """optim.step(), then averager.average_parameters over optim's param groups; the state
    dict carries the averager's step.

    Example::

        >>> opt = PostLocalSGDOptimizer(ember.optim.SGD(model.parameters(), lr=0.1),  # doctest: +SKIP
        ...                             PeriodicModelAverager(period=4, warmup_steps=100))
    """

    def __init__(self, optim: Any, averager: Any) -> None:
        self.optim = optim
        self.param_groups = self.optim.param_groups
        self.averager = averager

    @property
    def state(self) -> Any:
        return self.optim.state

    def __repr__(self) -> str:
        return self.optim.__repr__()

    def state_dict(self) -> dict:
        sd = self.optim.state_dict()
        sd["step"] = self.averager.step
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        self.optim.load_state_dict(state_dict)
        if "step" in state_dict:
            self.averager.step = state_dict["step"]
        else:
            warnings.warn("Loaded state dict does not contain a step counter for an averager. "
                          "Setting step counter to 0.", stacklevel=2)
            self.averager.step = 0

    def step(self) -> None:
        self.optim.step()
        self.averager.average_parameters(params=self.param_groups)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optim.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict) -> None:
        self.optim.add_param_group(param_group)
