"""The Gumbel (type-I extreme value) distribution.

>>> import ember
>>> from ember.distributions import Gumbel
>>> round(Gumbel(0.0, 1.0).mean.item(), 5)  # Euler's constant
0.57722
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, ExpTransform
from ember.distributions.uniform import Uniform
from ember.distributions.utils import broadcast_all

__all__ = ["Gumbel"]

_EULER = 0.57721566490153286060


class Gumbel(TransformedDistribution):
    """Gumbel distribution with location ``loc`` and scale ``scale``: loc - scale * log(-log U).

    >>> import ember
    >>> Gumbel(ember.tensor([1.0]), ember.tensor([2.0])).sample((3,)).shape
    ember.Size([3, 1])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = ember.finfo(self.loc.dtype)
        if isinstance(loc, Number) and isinstance(scale, Number):
            base_dist = Uniform(fi.tiny, 1 - fi.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(
                ember.full_like(self.loc, fi.tiny), ember.full_like(self.loc, 1 - fi.eps), validate_args=validate_args
            )
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-ember.ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Gumbel:
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - ember.exp(y)) - ember.log(self.scale)

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * _EULER

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return ember.log(self.scale) + (1 + _EULER)
