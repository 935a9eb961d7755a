"""RelaxedBernoulli (binary Concrete / Gumbel-sigmoid) and its logit-space base.

>>> import ember
>>> from ember.distributions import RelaxedBernoulli
>>> _ = ember.manual_seed(0)
>>> x = RelaxedBernoulli(ember.tensor(0.5), probs=ember.tensor([0.3])).rsample((4,))
>>> bool(((x > 0) & (x < 1)).all())
True
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions._params import ProbsOrLogits, RelaxedParams
from ember.distributions.distribution import Distribution
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import SigmoidTransform
from ember.distributions.utils import _stable_softplus, broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def _softplus(x: Tensor) -> Tensor:
    return _stable_softplus(x)


class LogitRelaxedBernoulli(ProbsOrLogits, Distribution):
    """The logit of a RelaxedBernoulli sample: (logit(U) + logits) / temperature for
    U ~ Uniform(0, 1)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(
        self,
        temperature: Tensor,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        self.temperature = temperature
        self._set_probs_or_logits(probs, logits)
        super().__init__(self._param.size(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> LogitRelaxedBernoulli:
        new = self._expand_params(LogitRelaxedBernoulli, batch_shape, _instance)
        new.temperature = self.temperature
        self._expand_probs_or_logits(new, new.batch_shape)
        return new

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(ember.rand(tuple(shape), dtype=probs.dtype, device=probs.device))
        return (ember.log(uniforms) - ember.log1p(-uniforms) + ember.log(probs) - ember.log1p(-probs)) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return ember.log(ember.as_tensor(self.temperature, dtype=diff.dtype)) + diff - 2 * _softplus(diff)


class RelaxedBernoulli(RelaxedParams, TransformedDistribution):
    """A continuous relaxation of Bernoulli on (0, 1), sharper as ``temperature`` goes to 0;
    reparameterized.

    >>> import ember
    >>> d = RelaxedBernoulli(ember.tensor(1.0), logits=ember.zeros(3))
    >>> d.batch_shape
    ember.Size([3])
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    base_dist: LogitRelaxedBernoulli

    def __init__(
        self,
        temperature: Tensor,
        probs: Tensor | float | None = None,
        logits: Tensor | float | None = None,
        validate_args: bool | None = None,
    ) -> None:
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> RelaxedBernoulli:
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]
