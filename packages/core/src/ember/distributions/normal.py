"""The Normal (Gaussian) distribution.

>>> import ember
>>> from ember.distributions import Normal
>>> d = Normal(ember.tensor([0.0], dtype=ember.float64), ember.tensor([1.0], dtype=ember.float64))
>>> round(d.log_prob(ember.tensor([0.0], dtype=ember.float64)).item(), 6)
-0.918939
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions._params import LocScale
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import _standard_normal

__all__ = ["Normal"]


class Normal(LocScale, ExponentialFamily):
    """Normal distribution with mean ``loc`` and standard deviation ``scale``.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> Normal(ember.tensor([0.0]), ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """

    _mean_carrier_measure = 0

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal())

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return -0.25 * x.pow(2) / y + 0.5 * ember.log(-math.pi / y)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale**2
        return -((value - self.loc) ** 2) / (2 * var) - ember.log(self.scale) - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ember.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * ember.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + ember.log(self.scale)
