"""The Multinomial distribution: counts of ``total_count`` Categorical draws.

>>> import ember
>>> from ember.distributions import Multinomial
>>> Multinomial(4, ember.tensor([0.25, 0.75])).mean.tolist()
[1.0, 3.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import CategoricalParams
from ember.distributions._special import lgamma
from ember.distributions.binomial import Binomial
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(CategoricalParams, Distribution):
    """Counts over K categories of ``total_count`` independent draws from
    ``Categorical(probs or logits)``; ``sample`` needs an int ``total_count``.

    >>> import ember
    >>> x = Multinomial(10, ember.tensor([0.2, 0.3, 0.5])).sample((2,))
    >>> x.sum(-1).tolist()
    [10.0, 10.0]
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    total_count: int

    def __init__(
        self,
        total_count: int = 1,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Multinomial:
        new = self._expand_params(Multinomial, batch_shape, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        return constraints.multinomial(self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        sample_shape = Size(sample_shape)
        k = self._categorical._num_events
        with ember.no_grad():
            draws = self._categorical.sample(Size((self.total_count,) + tuple(sample_shape)))
            onehot = (draws.unsqueeze(-1) == ember.arange(k, device=draws.device)).to(self.probs.dtype)
            return onehot.sum(0)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        logits = ember.where((value == 0) & ember.isinf(logits) & (logits < 0), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers

    def entropy(self) -> Tensor:
        n = ember.tensor(float(self.total_count), dtype=self.probs.dtype, device=self.probs.device)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - lgamma(n + 1)
        # E[log X_i!] with X_i ~ Binomial(n, p_i), summed over the support 0..n
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = ember.exp(self._binomial.log_prob(support))
        weights = lgamma(support + 1)
        term2 = (binomial_probs * weights).sum([0, -1])
        return term1 + term2
