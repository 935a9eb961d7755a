"""The Poisson distribution.

>>> import ember
>>> from ember.distributions import Poisson
>>> round(Poisson(ember.tensor([2.0])).log_prob(ember.tensor([0.0])).item(), 4)
-2.0
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._special import lgamma, poisson, xlogy
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """Poisson distribution with rate ``rate``; samples are float tensors of counts.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = Poisson(ember.tensor([3.0])).sample((5,))
    >>> bool((x == x.floor()).all())
    True
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Tensor | float, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Poisson:
        return self._expand_params(Poisson, batch_shape, _instance, "rate")

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (ember.log(self.rate),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return ember.exp(x)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return poisson(self.rate.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - lgamma(value + 1)
