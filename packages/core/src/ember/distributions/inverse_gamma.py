"""The InverseGamma distribution: 1 / X for X ~ Gamma(concentration, rate).

>>> import ember
>>> from ember.distributions import InverseGamma
>>> InverseGamma(ember.tensor([3.0]), ember.tensor([4.0])).mean.tolist()
[2.0]
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions._special import digamma, lgamma
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import PowerTransform

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """Inverse-gamma distribution with shape ``concentration`` and scale ``rate``;
    reparameterized through Gamma.

    >>> import ember
    >>> bool((InverseGamma(2.0, 1.0).rsample((4,)) > 0).all())
    True
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True
    base_dist: Gamma

    def __init__(
        self, concentration: Tensor | float, rate: Tensor | float, validate_args: bool | None = None
    ) -> None:
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -ember.ones_like(base_dist.rate)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> InverseGamma:
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        result = self.rate / (self.concentration - 1)
        return ember.where(self.concentration > 1, result, math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        result = self.rate.pow(2) / ((c - 1).pow(2) * (c - 2))
        return ember.where(c > 2, result, math.inf)

    def entropy(self) -> Tensor:
        c = self.concentration
        return c + ember.log(self.rate) + lgamma(c) - (1 + c) * digamma(c)
