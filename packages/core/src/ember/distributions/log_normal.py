"""The LogNormal distribution: exp of a Normal.

>>> import ember
>>> from ember.distributions import LogNormal
>>> round(LogNormal(0.0, 1.0).mean.item(), 5)
1.64872
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.normal import Normal
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import ExpTransform

__all__ = ["LogNormal"]


class LogNormal(TransformedDistribution):
    """exp(X) for X ~ Normal(loc, scale).

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> bool((LogNormal(0.0, 1.0).sample((5,)) > 0).all())
    True
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True
    base_dist: Normal

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> LogNormal:
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return ember.exp(self.loc + self.scale.pow(2) / 2)

    @property
    def mode(self) -> Tensor:
        return ember.exp(self.loc - self.scale.square())

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return ember.expm1(scale_sq) * ember.exp(2 * self.loc + scale_sq)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc
