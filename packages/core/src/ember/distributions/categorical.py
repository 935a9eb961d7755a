"""The Categorical distribution over ``{0, ..., K-1}``.

>>> import ember
>>> from ember.distributions import Categorical
>>> Categorical(probs=ember.tensor([1.0, 3.0])).probs.tolist()
[0.25, 0.75]
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits
from ember.distributions.distribution import Distribution

__all__ = ["Categorical"]


class Categorical(ProbsOrLogits, Distribution):
    """Categorical distribution given by ``probs`` (normalized over the last dimension) or
    ``logits`` (unnormalized log-probabilities), exactly one of them.

    >>> import ember
    >>> _ = ember.manual_seed(0)
    >>> d = Categorical(logits=ember.zeros(2, 4))
    >>> d.batch_shape, d.sample((3,)).shape
    (ember.Size([2]), ember.Size([3, 2]))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True
    _is_binary = False

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: bool | None = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            assert logits is not None
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Categorical:
        new = self._expand_params(Categorical, batch_shape, _instance)
        self._expand_probs_or_logits(new, tuple(new.batch_shape) + (self._num_events,))
        new._num_events = self._num_events
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    @property
    def mean(self) -> Tensor:
        return ember.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return ember.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))  # checks sample_shape
        sample_shape = Size(sample_shape)
        if 0 in shape:  # no sample to draw (multinomial cannot draw zero of them)
            return ember.zeros(shape, dtype=ember.int64, device=self.probs.device)
        with ember.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            n = max(sample_shape.numel(), 1)
            samples_2d = ember.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = ember.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = ember.finfo(self.logits.dtype).min
        logits = ember.clamp(self.logits, min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        num_events = self._num_events
        values = ember.arange(num_events, dtype=ember.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
