"""The Binomial distribution.

>>> import ember
>>> from ember.distributions import Binomial
>>> Binomial(10, ember.tensor([0.5])).mean.tolist()
[5.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits
from ember.distributions._special import binomial, lgamma
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _stable_softplus

__all__ = ["Binomial"]


class Binomial(ProbsOrLogits, Distribution):
    """Number of successes in ``total_count`` independent trials of probability ``probs``
    (or ``logits``); ``total_count`` broadcasts with the probabilities.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = Binomial(5, ember.tensor([0.2, 0.8])).sample((3,))
    >>> x.shape, bool(((x >= 0) & (x <= 5)).all())
    (ember.Size([3, 2]), True)
    """

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(
        self,
        total_count: Tensor | int = 1,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        (total_count,) = self._set_probs_or_logits(probs, logits, total_count)
        self.total_count = total_count.to(self._param.dtype)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Binomial:
        new = self._expand_params(Binomial, batch_shape, _instance, "total_count")
        self._expand_probs_or_logits(new, new.batch_shape)
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ember.minimum(((self.total_count + 1) * self.probs).floor(), self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        n, k = self.total_count, value
        log_choose = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)
        # k log p + (n - k) log(1 - p) = k * logits - n * softplus(logits), written stably
        logits = self.logits
        softplus = _stable_softplus(logits)
        return log_choose + k * logits - n * softplus

    def entropy(self) -> Tensor:
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(ember.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = ember.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
