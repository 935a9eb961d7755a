"""The HalfNormal distribution: |X| for X ~ Normal(0, scale).

>>> import ember
>>> from ember.distributions import HalfNormal
>>> HalfNormal(1.0).cdf(ember.tensor(0.0)).item()
0.0
"""

from __future__ import annotations

import math

from ember import Tensor
from ember.distributions._half import HalfDistribution
from ember.distributions.normal import Normal

__all__ = ["HalfNormal"]


class HalfNormal(HalfDistribution):
    """Half-normal distribution with scale ``scale``.

    >>> import ember
    >>> bool((HalfNormal(ember.tensor([2.0])).sample((5,)) >= 0).all())
    True
    """

    _base = Normal
    base_dist: Normal

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)
