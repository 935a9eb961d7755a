"""The shared part of HalfNormal and HalfCauchy: |X| for X of a base distribution symmetric
about 0 with a scale, so the density and cdf double and the quantiles halve.

>>> import ember
>>> from ember.distributions import HalfNormal
>>> HalfNormal(1.0).icdf(ember.tensor(0.0)).item()
0.0
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AbsTransform

__all__ = ["HalfDistribution"]


class HalfDistribution(TransformedDistribution):
    """|X| for X ~ ``_base(0, scale)``; subclasses name ``_base`` and give mean / variance.

    >>> import ember
    >>> from ember.distributions import HalfCauchy
    >>> HalfCauchy(1.0).cdf(ember.tensor(1.0)).item()
    0.5
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _base: ClassVar[Any]

    def __init__(self, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist = self._base(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Any:
        new = self._get_checked_instance(type(self), _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mode(self) -> Tensor:
        return ember.zeros_like(self.scale)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = ember.as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ember.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
