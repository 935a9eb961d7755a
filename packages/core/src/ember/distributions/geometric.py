"""The Geometric distribution: the number of failures before the first success.

>>> import ember
>>> from ember.distributions import Geometric
>>> Geometric(ember.tensor([0.25])).mean.tolist()
[3.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _stable_softplus, broadcast_all

__all__ = ["Geometric"]


def _bce_with_logits(logits: Tensor, target: Tensor) -> Tensor:
    return _stable_softplus(logits) - logits * target


class Geometric(ProbsOrLogits, Distribution):
    """Failures before the first success in Bernoulli(``probs``) trials (support 0, 1, 2, ...),
    given by ``probs`` or ``logits``.

    >>> import ember
    >>> bool((Geometric(ember.tensor([0.5])).sample((10,)) >= 0).all())
    True
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)
        if self._validate_args and probs is not None:
            # 0 < probs <= 1 (the unit_interval check above also lets 0 through)
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                invalid_value = value[~valid]
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to be positive but found invalid values:\n{invalid_value}"
                )

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Geometric:
        new = self._expand_params(Geometric, batch_shape, _instance)
        self._expand_probs_or_logits(new, new.batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return ember.zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny = ember.finfo(self.probs.dtype).tiny
        with ember.no_grad():
            u = ember.rand(tuple(shape), dtype=self.probs.dtype, device=self.probs.device).clamp(min=tiny)
            return ember.floor(ember.log(u) / ember.log1p(-self.probs))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # P(0) = 1 when probs == 1: avoid 0 * log(0)
        probs = ember.where((probs == 1) & (value == 0), 0.0, probs)
        return value * ember.log1p(-probs) + ember.log(self.probs)

    def entropy(self) -> Tensor:
        return _bce_with_logits(self.logits, self.probs) / self.probs
