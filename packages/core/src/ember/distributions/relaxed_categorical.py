"""RelaxedOneHotCategorical (Concrete / Gumbel-softmax) and its log-space base.

>>> import ember
>>> from ember.distributions import RelaxedOneHotCategorical
>>> _ = ember.manual_seed(0)
>>> x = RelaxedOneHotCategorical(ember.tensor(0.5), logits=ember.zeros(3)).rsample()
>>> round(x.sum().item(), 5)
1.0
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import CategoricalParams, RelaxedParams
from ember.distributions._special import lgamma
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import ExpTransform
from ember.distributions.utils import clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(CategoricalParams, Distribution):
    """The log of a RelaxedOneHotCategorical sample: log_softmax((logits + Gumbel) / temperature)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        temperature: Tensor,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> ExpRelaxedCategorical:
        new = self._expand_params(ExpRelaxedCategorical, batch_shape, _instance)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        return new

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(ember.rand(tuple(shape), dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -ember.log(-ember.log(uniforms))
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = ember.broadcast_tensors(self.logits, value)
        temperature = ember.as_tensor(self.temperature, dtype=logits.dtype)
        log_scale = lgamma(ember.full_like(temperature, float(k))) + (k - 1) * ember.log(temperature)
        score = logits - value * temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(RelaxedParams, TransformedDistribution):
    """A continuous relaxation of OneHotCategorical on the simplex (Gumbel-softmax),
    reparameterized.

    >>> import ember
    >>> d = RelaxedOneHotCategorical(ember.tensor(1.0), probs=ember.tensor([0.2, 0.8]))
    >>> d.event_shape
    ember.Size([2])
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True
    base_dist: ExpRelaxedCategorical

    def __init__(
        self,
        temperature: Tensor,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> RelaxedOneHotCategorical:
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]
