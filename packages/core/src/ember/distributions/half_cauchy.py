"""The HalfCauchy distribution: |X| for X ~ Cauchy(0, scale), a common prior on scales.

>>> import ember
>>> from ember.distributions import HalfCauchy
>>> HalfCauchy(1.0).cdf(ember.tensor(1.0)).item()
0.5
"""

from __future__ import annotations

import math

import ember
from ember import Tensor
from ember.distributions._half import HalfDistribution
from ember.distributions.cauchy import Cauchy

__all__ = ["HalfCauchy"]


class HalfCauchy(HalfDistribution):
    """Half-Cauchy distribution with scale ``scale`` (no mean or variance: inf).

    >>> import ember
    >>> bool((HalfCauchy(ember.tensor([2.0])).sample((5,)) >= 0).all())
    True
    """

    _base = Cauchy
    base_dist: Cauchy

    @property
    def mean(self) -> Tensor:
        return ember.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype,
                          device=self.scale.device)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance
