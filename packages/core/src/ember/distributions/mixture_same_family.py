"""MixtureSameFamily: a mixture whose components are the batch of one distribution.

>>> import ember
>>> from ember.distributions import Categorical, MixtureSameFamily, Normal
>>> mix = Categorical(probs=ember.tensor([0.5, 0.5]))
>>> gmm = MixtureSameFamily(mix, Normal(ember.tensor([-1.0, 1.0]), ember.tensor([1.0, 1.0])))
>>> gmm.mean.item()
0.0
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """Mixture of the components along the rightmost batch dimension of
    ``component_distribution``, weighted by the Categorical ``mixture_distribution``.

    >>> import ember
    >>> from ember.distributions import Categorical, Independent, Normal
    >>> mix = Categorical(ember.ones(5))
    >>> comp = Independent(Normal(ember.zeros(5, 2), ember.ones(5, 2)), 1)
    >>> MixtureSameFamily(mix, comp).sample((3,)).shape
    ember.Size([3, 2])
    """

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(
        self,
        mixture_distribution: Categorical,
        component_distribution: Distribution,
        validate_args: bool | None = None,
    ) -> None:
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError("The Mixture distribution needs to be an instance of ember.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError(
                "The Component distribution needs to be an instance of ember.distributions.Distribution"
            )
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(tuple(mdbs)), reversed(tuple(cdbs))):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(
                    f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                    f"`component_distribution.batch_shape`({cdbs})"
                )
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1] if len(component_distribution.batch_shape) else None
        if kc is None or km != kc:
            raise ValueError(
                f"`mixture_distribution component` ({km}) does not equal "
                f"`component_distribution.batch_shape[-1]` ({kc})"
            )
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=cdbs, event_shape=event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> MixtureSameFamily:
        batch_shape = Size(batch_shape)
        batch_shape_comp = Size(tuple(batch_shape) + (self._num_component,))
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape_comp)
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self) -> constraints.Constraint:
        return self._component_distribution.support  # type: ignore[return-value]

    @property
    def mixture_distribution(self) -> Categorical:
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        return self._component_distribution

    def _pad(self, x: Tensor) -> Tensor:
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x: Tensor) -> Tensor:
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(xs[:-1] + (1,) * pad_ndims + xs[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(dim)
        var_cond_mean = (probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2)).sum(dim)
        return mean_cond_var + var_cond_mean

    def cdf(self, x: Tensor) -> Tensor:
        x = self._pad(x)
        cdf_x = self.component_distribution.cdf(x)
        mix_prob = self.mixture_distribution.probs
        return (cdf_x * mix_prob).sum(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)
        log_mix_prob = ember.log_softmax(self.mixture_distribution.logits, -1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        sample_shape = Size(sample_shape)
        with ember.no_grad():
            sample_len = len(sample_shape)
            batch_len = len(self.batch_shape)
            gather_dim = sample_len + batch_len
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)  # S + mixture batch
            comp_samples = self.component_distribution.sample(sample_shape)  # S + B + (K,) + E
            # index of shape S + B + (1,) + E (the mixture's batch may broadcast against B)
            pad = batch_len - len(self.mixture_distribution.batch_shape)
            mdbs = tuple(self.mixture_distribution.batch_shape)
            idx = mix_sample.reshape(tuple(sample_shape) + (1,) * pad + mdbs + (1,) * (1 + len(es)))
            idx = idx.expand(tuple(sample_shape) + tuple(self.batch_shape) + (1,) + es)
            samples = ember.gather(comp_samples, gather_dim, idx)
            return samples.squeeze(gather_dim)

    def __repr__(self) -> str:
        return (
            f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})"
        )
