"""The Bernoulli distribution.

>>> import ember
>>> from ember.distributions import Bernoulli
>>> Bernoulli(logits=ember.tensor([0.0])).probs.tolist()
[0.5]
"""

from __future__ import annotations

from numbers import Number
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


def _bce_with_logits(logits: Tensor, target: Tensor) -> Tensor:
    """Elementwise binary cross-entropy from logits: softplus(l) - target * l (stable)."""
    return ember.clamp(logits, min=0) - logits * target + ember.log1p(ember.exp(-ember.abs(logits)))


class Bernoulli(ExponentialFamily):
    """Bernoulli distribution (1 with probability ``probs``), given by ``probs`` or ``logits``.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> x = Bernoulli(ember.tensor([0.3, 0.9])).sample((4,))
    >>> x.shape, bool(((x == 0) | (x == 1)).all())
    (ember.Size([4, 2]), True)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(
        self,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)  # type: ignore[arg-type]
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Bernoulli:
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return ember.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return ember.clamp(x, min=0) + ember.log1p(ember.exp(-ember.abs(x)))

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.bernoulli(self.probs.expand(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self) -> Tensor:
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = ember.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
