"""ExponentialFamily: distributions with density exp(<t(x), theta> - F(theta) + k(x)).

A subclass gives its natural parameters theta (``_natural_params``), the log normalizer F
(``_log_normalizer``) and E[k(x)] (``_mean_carrier_measure``); the entropy and the KL divergence
between two members of the same family then follow from F by automatic differentiation
(Bregman divergence).

>>> import ember
>>> from ember.distributions import Normal
>>> from ember.distributions.exp_family import ExponentialFamily
>>> d = Normal(ember.tensor([0.0]), ember.tensor([2.0]))
>>> isinstance(d, ExponentialFamily)
True
>>> bool(ember.allclose(ExponentialFamily.entropy(d), d.entropy()))
True
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions (see the module docstring)."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        """The natural parameters theta, as a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        """The log normalizer F(theta), batched over ``batch_shape``."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> Any:
        """E[k(x)], the expected log carrier measure."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """H = F(theta) - <theta, grad F(theta)> - E[k(x)]."""
        result: Any = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with ember.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = ember.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for theta, g in zip(nparams, gradients):
            term = theta * g
            result = result - term.reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
