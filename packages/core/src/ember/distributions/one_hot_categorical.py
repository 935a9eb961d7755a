"""The OneHotCategorical distribution: Categorical samples as one-hot vectors.

>>> import ember
>>> from ember.distributions import OneHotCategorical
>>> OneHotCategorical(probs=ember.tensor([0.0, 1.0])).sample().tolist()
[0.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import CategoricalParams
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_hot(index: Tensor, num_classes: int, dtype: Any) -> Tensor:
    # contiguous, as torch's F.one_hot (a comparison with arange would take the layout of the
    # index, which Categorical.sample gives transposed)
    out = ember.zeros((*index.shape, num_classes), dtype=dtype, device=index.device)
    return out.scatter_(-1, index.unsqueeze(-1), 1)


class OneHotCategorical(CategoricalParams, Distribution):
    """One-hot vectors of length K drawn from ``Categorical(probs or logits)``.

    >>> import ember
    >>> d = OneHotCategorical(logits=ember.zeros(2, 3))
    >>> d.batch_shape, d.event_shape
    (ember.Size([2]), ember.Size([3]))
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: bool | None = None
    ) -> None:
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> OneHotCategorical:
        return self._expand_params(OneHotCategorical, batch_shape, _instance, "_categorical")

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        return _one_hot(probs.argmax(-1), probs.shape[-1], probs.dtype)

    @property
    def variance(self) -> Tensor:
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        probs = self._categorical.probs
        num_events = self._categorical._num_events
        indices = self._categorical.sample(sample_shape)
        return _one_hot(indices, num_events, probs.dtype)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.event_shape[0]
        values = ember.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose ``rsample`` passes gradients straight through to ``probs``
    (the sample plus probs minus probs detached)."""

    has_rsample = True

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
