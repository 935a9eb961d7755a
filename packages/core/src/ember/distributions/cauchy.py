"""The Cauchy (Lorentz) distribution.

>>> import ember
>>> from ember.distributions import Cauchy
>>> Cauchy(0.0, 1.0).cdf(ember.tensor(0.0)).item()
0.5
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions._params import LocScale
from ember.distributions.distribution import Distribution

__all__ = ["Cauchy"]


class Cauchy(LocScale, Distribution):
    """Cauchy distribution with median ``loc`` and half width ``scale`` (no mean or variance).

    >>> import ember
    >>> Cauchy(ember.tensor([1.0]), ember.tensor([2.0])).mode.tolist()
    [1.0]
    """


    @property
    def mean(self) -> Tensor:
        return ember.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def variance(self) -> Tensor:
        return ember.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            u = ember.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
            eps = ember.tan(math.pi * (u - 0.5))
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - ember.log(self.scale) - ember.log1p(z * z)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ember.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return ember.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + ember.log(self.scale)
