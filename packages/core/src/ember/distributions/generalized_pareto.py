"""The generalized Pareto distribution (GPD), the limit law of threshold exceedances: location
``loc``, scale ``scale`` and shape ``concentration`` (xi). xi = 0 is the exponential
distribution shifted by loc, xi > 0 a heavy (Pareto) tail, xi < 0 a bounded support ending at
loc - scale / xi (xi = -1: uniform).

>>> import ember
>>> from ember.distributions import GeneralizedPareto
>>> round(GeneralizedPareto(0.0, 1.0, 0.0).cdf(ember.tensor(1.0)).item(), 6)  # 1 - 1/e
0.632121
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """GPD(loc, scale, concentration): with z = (x - loc) / scale and xi = concentration,
    cdf 1 - (1 + xi z)^(-1 / xi) (1 - exp(-z) when xi = 0). Reparameterized through icdf.
    Outside the support, log_prob / cdf give what the formulas give (NaN past a bound), as
    PyTorch's do; with argument validation such values raise.

    >>> import ember
    >>> d = GeneralizedPareto(ember.tensor([0.0]), ember.tensor([2.0]), ember.tensor([0.5]))
    >>> d.mean.tolist(), d.icdf(ember.tensor([0.0])).tolist()
    ([4.0], [0.0])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc: Tensor | float, scale: Tensor | float,
                 concentration: Tensor | float, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        numbers = all(isinstance(a, (int, float)) for a in (loc, scale, concentration))
        super().__init__(Size() if numbers else self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None
               ) -> GeneralizedPareto:
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        for name in ("loc", "scale", "concentration"):
            setattr(new, name, getattr(self, name).expand(batch_shape))
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        upper = ember.where(self.concentration < 0, self.loc - self.scale / self.concentration,
                            math.inf)
        return constraints.interval(self.loc, upper)

    def _shape_terms(self) -> tuple[Tensor, Tensor]:
        """(xi == 0 up to isclose's tolerance, xi with those entries replaced by 1): the xi = 0
        case takes its own formula, and the other one must not divide by 0 there."""
        zero = ember.isclose(self.concentration, ember.zeros_like(self.concentration))
        return zero, ember.where(zero, ember.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        u = ember.rand(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        zero, xi = self._shape_terms()
        power = 1 / xi + 1
        # (1 / xi + 1) log(1 + xi z), kept 0 where the factor is (xi = -1: uniform)
        tail = ember.where(power == 0, power, power * ember.log1p(xi * z))
        return -ember.log(self.scale) - ember.where(zero, z, tail)

    def log_survival_function(self, value: Tensor) -> Tensor:
        """log P(X > value)."""
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        zero, xi = self._shape_terms()
        return ember.where(zero, -z, -ember.log1p(xi * z) / xi)

    def log_cdf(self, value: Tensor) -> Tensor:
        """log P(X <= value)."""
        return ember.log1p(-ember.exp(self.log_survival_function(value)))

    def cdf(self, value: Tensor) -> Tensor:
        return ember.exp(self.log_cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        zero, xi = self._shape_terms()
        log_q = ember.log1p(-value)  # log(1 - p)
        return ember.where(zero, self.loc - self.scale * log_q,
                           self.loc + self.scale / xi * ember.expm1(-xi * log_q))

    @property
    def mean(self) -> Tensor:
        ok = self.concentration < 1  # the mean is infinite from xi = 1 on: NaN, as PyTorch
        xi = ember.where(ok, self.concentration, ember.full_like(self.concentration, 0.5))
        return ember.where(ok, self.loc + self.scale / (1 - xi), math.nan)

    @property
    def variance(self) -> Tensor:
        ok = self.concentration < 0.5
        xi = ember.where(ok, self.concentration, ember.full_like(self.concentration, 0.25))
        return ember.where(ok, self.scale.pow(2) / ((1 - xi).pow(2) * (1 - 2 * xi)), math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return (ember.log(self.scale) + self.concentration + 1).broadcast_to(
            tuple(self._batch_shape))
