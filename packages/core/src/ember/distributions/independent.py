"""Independent: reinterprets batch dimensions of a distribution as event dimensions.

>>> import ember
>>> from ember.distributions import Independent, Normal
>>> d = Independent(Normal(ember.zeros(3, 2), ember.ones(3, 2)), 1)
>>> d.batch_shape, d.event_shape
(ember.Size([3]), ember.Size([2]))
"""

from __future__ import annotations

from typing import Any

from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import _sum_rightmost

__all__ = ["Independent"]


class Independent(Distribution):
    """Treats the rightmost ``reinterpreted_batch_ndims`` batch dimensions of
    ``base_distribution`` as part of the event: log_prob and entropy sum over them.

    >>> import ember
    >>> from ember.distributions import Normal
    >>> d = Independent(Normal(ember.zeros(2), ember.ones(2)), 1)
    >>> d.log_prob(ember.zeros(2)).shape
    ember.Size([])
    """

    arg_constraints: dict[str, constraints.Constraint] = {}

    def __init__(
        self, base_distribution: Distribution, reinterpreted_batch_ndims: int, validate_args: bool | None = None
    ) -> None:
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}"
            )
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        batch_shape = shape[: len(shape) - event_dim]
        event_shape = shape[len(shape) - event_dim :]
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Independent:
        new = self._expand_params(Independent, batch_shape, _instance)
        new.base_dist = self.base_dist.expand(
            tuple(batch_shape) + tuple(self.event_shape[: self.reinterpreted_batch_ndims])
        )
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        return new

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self) -> bool:  # type: ignore[override]
        if self.reinterpreted_batch_ndims > 0:
            return False
        return self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self) -> constraints.Constraint:
        result = self.base_dist.support
        assert result is not None
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Tensor) -> Tensor:
        log_prob = self.base_dist.log_prob(value)
        return _sum_rightmost(log_prob, self.reinterpreted_batch_ndims)

    def entropy(self) -> Tensor:
        entropy = self.base_dist.entropy()
        return _sum_rightmost(entropy, self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.base_dist}, {self.reinterpreted_batch_ndims})"
