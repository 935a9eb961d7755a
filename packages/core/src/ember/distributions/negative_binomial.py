"""The NegativeBinomial distribution.

>>> import ember
>>> from ember.distributions import NegativeBinomial
>>> NegativeBinomial(ember.tensor([4.0]), ember.tensor([0.5])).mean.tolist()
[4.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits
from ember.distributions._special import lgamma, poisson, standard_gamma
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _stable_softplus

__all__ = ["NegativeBinomial"]


def _logsigmoid(x: Tensor) -> Tensor:
    return -_stable_softplus(-x)


class NegativeBinomial(ProbsOrLogits, Distribution):
    """Number of successes (each with probability ``probs``) before ``total_count`` failures;
    sampled as a Gamma-Poisson mixture.

    >>> import ember
    >>> x = NegativeBinomial(3.0, ember.tensor([0.4])).sample((5,))
    >>> bool((x >= 0).all())
    True
    """

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(
        self,
        total_count: Tensor | float,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        (total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.to(self._param.dtype)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> NegativeBinomial:
        new = self._expand_params(NegativeBinomial, batch_shape, _instance, "total_count")
        self._expand_probs_or_logits(new, new.batch_shape)
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self) -> Tensor:
        return self.total_count * ember.exp(self.logits)

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * ember.exp(self.logits)).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / ember.sigmoid(-self.logits)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            # Poisson(G) with G ~ Gamma(total_count, rate = (1 - p) / p)
            g = standard_gamma(self.total_count.expand(shape)) * ember.exp(self.logits).expand(shape)
            return poisson(g)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized = self.total_count * _logsigmoid(-self.logits) + value * _logsigmoid(self.logits)
        log_normalization = -lgamma(self.total_count + value) + lgamma(1.0 + value) + lgamma(self.total_count)
        # total_count + value == 0: the probability of 0 successes is 1
        log_normalization = ember.where(self.total_count + value == 0, 0.0, log_normalization)
        return log_unnormalized - log_normalization
