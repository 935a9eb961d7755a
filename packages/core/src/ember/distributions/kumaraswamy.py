"""The Kumaraswamy distribution on (0, 1): a Beta-like law with a closed-form CDF, so samples
are a transformed uniform (reparameterized).

>>> import ember
>>> from ember.distributions import Kumaraswamy
>>> round(Kumaraswamy(ember.tensor([2.0]), ember.tensor([3.0])).mean.item(), 5)
0.45714
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions._special import digamma, lgamma
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, PowerTransform
from ember.distributions.uniform import Uniform
from ember.distributions.utils import broadcast_all

__all__ = ["Kumaraswamy"]

_EULER_GAMMA = 0.57721566490153286060


def _moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    """E[X^n] = b B(1 + n / a, b)."""
    arg1 = 1 + n / a
    return ember.exp(ember.log(b) + lgamma(arg1) + lgamma(b) - lgamma(arg1 + b))


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy distribution with ``concentration1`` a and ``concentration0`` b: density
    a b x^(a-1) (1 - x^a)^(b-1); X = (1 - U^(1/b))^(1/a) for U uniform on (0, 1).

    >>> import ember
    >>> from ember.distributions import Kumaraswamy
    >>> _ = ember.manual_seed(0)
    >>> x = Kumaraswamy(2.0, 5.0).rsample((4,))
    >>> bool(((x > 0) & (x < 1)).all())
    True
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Tensor | float, concentration0: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(ember.full_like(self.concentration0, 0.0),
                       ember.full_like(self.concentration0, 1.0), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Kumaraswamy:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        """((a - 1) / (a b - 1))^(1/a); NaN where a < 1 or b < 1 (no interior mode)."""
        a, b = self.concentration1, self.concentration0
        log_mode = (ember.log(a - 1) - ember.log(a * b - 1)) / a
        bad = (a < 1) | (b < 1)
        return ember.where(bad, ember.full_like(log_mode, math.nan), ember.exp(log_mode))

    @property
    def variance(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = digamma(self.concentration0 + 1) + _EULER_GAMMA
        return t0 + t1 * h0 - ember.log(self.concentration1) - ember.log(self.concentration0)
