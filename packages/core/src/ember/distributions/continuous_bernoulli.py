"""The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019): the
Bernoulli likelihood made a proper density, for VAEs on [0, 1]-valued data.

>>> import ember
>>> from ember.distributions import ContinuousBernoulli
>>> round(ContinuousBernoulli(ember.tensor([0.2])).mean.item(), 4)
0.388
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits
from ember.distributions.bernoulli import _bce_with_logits
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ProbsOrLogits, ExponentialFamily):
    """Continuous Bernoulli distribution with parameter ``probs`` (lambda, or ``logits``): density
    C(lambda) lambda^x (1 - lambda)^(1 - x) on [0, 1]. Near lambda = 1/2 (within ``lims``) the
    normalizer, mean and variance use Taylor expansions instead of their 0/0 closed forms.
    ``rsample`` inverts the CDF of a uniform draw (reparameterized).

    >>> import ember
    >>> from ember.distributions import ContinuousBernoulli
    >>> _ = ember.manual_seed(0)
    >>> x = ContinuousBernoulli(ember.tensor([0.3, 0.9])).rsample((5,))
    >>> x.shape, bool(((x >= 0) & (x <= 1)).all())
    (ember.Size([5, 2]), True)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, probs: Tensor | float | None = None, logits: Tensor | float | None = None,
                 lims: tuple[float, float] = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        self._set_probs_or_logits(probs, logits)
        if probs is not None:  # keep lambda inside (0, 1): the normalizer is infinite at 0, 1
            eps = ember.finfo(self.probs.dtype).eps
            self.probs = self._param = self.probs.clamp(eps, 1 - eps)
        self._lims = lims
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Any:
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        self._expand_probs_or_logits(new, Size(batch_shape))
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        # away from 1/2 the closed forms are used; inside, a safe stand-in value
        return ember.where(self._outside_unstable_region(), self.probs,
                           self._lims[0] * ember.ones_like(self.probs))

    def _cont_bern_log_norm(self) -> Tensor:
        """log C(lambda) = log(2 atanh(1 - 2 lambda) / (1 - 2 lambda))."""
        cut = self._cut_probs()
        cut_below = ember.where(cut <= 0.5, cut, ember.zeros_like(cut))
        cut_above = ember.where(cut >= 0.5, cut, ember.ones_like(cut))
        log_norm = ember.log(ember.abs(ember.log1p(-cut) - ember.log(cut))) - ember.where(
            cut <= 0.5, ember.log1p(-2.0 * cut_below), ember.log(2.0 * cut_above - 1.0))
        x = (self.probs - 0.5) ** 2
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ember.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / (ember.log1p(-cut) - ember.log(cut))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x ** 2) * x
        return ember.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return ember.sqrt(self.variance)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        v = cut * (cut - 1.0) / (1.0 - 2.0 * cut) ** 2 + 1.0 / (
            ember.log1p(-cut) - ember.log(cut)) ** 2
        x = (self.probs - 0.5) ** 2
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ember.where(self._outside_unstable_region(), v, taylor)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        u = ember.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (ember.pow(cut, value) * ember.pow(1.0 - cut, 1.0 - value) + cut - 1.0) / (
            2.0 * cut - 1.0)
        unbounded = ember.where(self._outside_unstable_region(), cdfs, value)
        return ember.where(value <= 0.0, ember.zeros_like(value),
                           ember.where(value >= 1.0, ember.ones_like(value), unbounded))

    def icdf(self, value: Tensor) -> Tensor:
        cut = self._cut_probs()
        inv = (ember.log1p(-cut + value * (2.0 * cut - 1.0)) - ember.log1p(-cut)) / (
            ember.log(cut) - ember.log1p(-cut))
        return ember.where(self._outside_unstable_region(), inv, value)

    def entropy(self) -> Tensor:
        log_probs0 = ember.log1p(-self.probs)
        log_probs1 = ember.log(self.probs)
        return (self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm()
                - log_probs0)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """log((exp(x) - 1) / x), with its Taylor series near x = 0."""
        out_unst = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = ember.where(out_unst, x, (self._lims[0] - 0.5) * ember.ones_like(x))
        log_norm = ember.log(ember.abs(ember.expm1(cut))) - ember.log(ember.abs(cut))
        taylor = 0.5 * x + x * x / 24.0 - ember.pow(x, 4) / 2880.0
        return ember.where(out_unst, log_norm, taylor)
