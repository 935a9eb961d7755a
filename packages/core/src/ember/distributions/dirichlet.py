"""The Dirichlet distribution over the probability simplex.

>>> import ember
>>> from ember.distributions import Dirichlet
>>> Dirichlet(ember.tensor([1.0, 3.0])).mean.tolist()
[0.25, 0.75]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._special import digamma, lgamma, standard_gamma, xlogy
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Dirichlet distribution with ``concentration`` of shape ``batch_shape + (K,)``.

    ``rsample`` normalizes K reparameterized Gamma draws.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = Dirichlet(ember.ones(3)).sample((5,))
    >>> bool(((x.sum(-1) - 1).abs() < 1e-5).all())
    True
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if not isinstance(concentration, Tensor) or concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Dirichlet:
        new = self._expand_params(Dirichlet, batch_shape, _instance)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        # All concentrations below one: the density is unbounded at every vertex; PyTorch
        # reports the first one (its argmax over the all-NaN 0/0 row), and so do we.
        all_small = (self.concentration < 1).all(-1, keepdim=True)
        k = self.concentration.shape[-1]
        vertex = (ember.arange(k, device=mode.device) == 0).to(mode.dtype)
        return ember.where(all_small, vertex, mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(shape))
        x = g / g.sum(-1, True)
        tiny = ember.finfo(x.dtype).tiny
        eps = ember.finfo(x.dtype).eps
        return x.clamp(min=tiny, max=1 - eps)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    def entropy(self) -> Tensor:
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return (
            lgamma(self.concentration).sum(-1)
            - lgamma(a0)
            - (k - a0) * digamma(a0)
            - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1)
        )
