"""The Weibull distribution.

>>> import ember
>>> from ember.distributions import Weibull
>>> Weibull(ember.tensor([2.0]), ember.tensor([1.0])).mean.tolist()
[2.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions._special import lgamma
from ember.distributions.distribution import Distribution
from ember.distributions.exponential import Exponential
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, PowerTransform
from ember.distributions.utils import broadcast_all

__all__ = ["Weibull"]

_EULER = 0.57721566490153286060


class Weibull(TransformedDistribution):
    """Weibull distribution with ``scale`` and shape ``concentration``: scale * E^(1/k) for
    E ~ Exponential(1).

    >>> import ember
    >>> Weibull(1.0, 2.0).sample((3,)).shape
    ember.Size([3])
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(
        self, scale: Tensor | float, concentration: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ember.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Weibull:
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal), AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.scale * ember.exp(lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self) -> Tensor:
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (
            ember.exp(lgamma(1 + 2 * self.concentration_reciprocal))
            - ember.exp(2 * lgamma(1 + self.concentration_reciprocal))
        )

    def entropy(self) -> Tensor:
        return (
            _EULER * (1 - self.concentration_reciprocal)
            + ember.log(self.scale * self.concentration_reciprocal)
            + 1
        )


