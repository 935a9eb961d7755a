"""The Laplace (double exponential) distribution.

>>> import ember
>>> from ember.distributions import Laplace
>>> Laplace(ember.tensor([0.0]), ember.tensor([1.0])).variance.tolist()
[2.0]
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions._params import LocScale
from ember.distributions.distribution import Distribution

__all__ = ["Laplace"]


class Laplace(LocScale, Distribution):
    """Laplace distribution with location ``loc`` and scale ``scale``.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> Laplace(0.0, 1.0).sample((3,)).shape
    ember.Size([3])
    """


    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = ember.finfo(self.loc.dtype).eps
        with ember.no_grad():
            # uniform on (eps - 1, 1): keeps log1p(-|u|) finite
            u = ember.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * ember.sign(u) * ember.log1p(-ember.abs(u))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -ember.log(2 * self.scale) - ember.abs(value - self.loc) / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = value - self.loc
        return 0.5 - 0.5 * ember.sign(z) * ember.expm1(-ember.abs(z) / self.scale)

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * ember.sign(term) * ember.log1p(-2 * ember.abs(term))

    def entropy(self) -> Tensor:
        return 1 + ember.log(2 * self.scale)
