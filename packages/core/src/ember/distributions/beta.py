"""The Beta distribution.

>>> import ember
>>> from ember.distributions import Beta
>>> Beta(ember.tensor([2.0]), ember.tensor([2.0])).mean.tolist()
[0.5]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._special import digamma, lgamma, standard_gamma, xlogy
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """Beta distribution with ``concentration1`` (alpha) and ``concentration0`` (beta).

    ``rsample`` is G1 / (G1 + G0) of two reparameterized Gamma draws.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = Beta(2.0, 3.0).sample((50,))
    >>> bool(((x > 0) & (x < 1)).all())
    True
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(
        self, concentration1: Tensor | float, concentration0: Tensor | float, validate_args: bool | None = None
    ) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.size(), validate_args=validate_args)

    def __repr__(self) -> str:
        # PyTorch keeps the concentrations inside a Dirichlet, so its repr lists none
        return "Beta()"

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Beta:
        return self._expand_params(Beta, batch_shape, _instance, "concentration1", "concentration0")

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        # As a two-category Dirichlet: at 0 or 1 when a concentration is below one.
        from ember.distributions.dirichlet import Dirichlet

        both = ember.stack([self.concentration1, self.concentration0], -1)
        return Dirichlet(both, validate_args=False).mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return lgamma(x) + lgamma(y) - lgamma(x + y)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        g1 = standard_gamma(self.concentration1.expand(shape))
        g0 = standard_gamma(self.concentration0.expand(shape))
        tiny = ember.finfo(g1.dtype).tiny
        eps = ember.finfo(g1.dtype).eps
        return (g1 / (g1 + g0)).clamp(min=tiny, max=1 - eps)

    def log_prob(self, value: Tensor) -> Tensor:
        value = ember.as_tensor(value, dtype=self.concentration1.dtype, device=self.concentration1.device)
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return xlogy(a - 1, value) + xlogy(b - 1, 1 - value) + lgamma(a + b) - lgamma(a) - lgamma(b)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        total = a + b
        log_beta = lgamma(a) + lgamma(b) - lgamma(total)
        return log_beta - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (total - 2) * digamma(total)
