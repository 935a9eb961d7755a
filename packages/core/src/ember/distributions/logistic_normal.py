"""The LogisticNormal distribution: a Normal pushed onto the simplex by stick breaking.

>>> import ember
>>> from ember.distributions import LogisticNormal
>>> LogisticNormal(ember.zeros(2), ember.ones(2)).event_shape
ember.Size([3])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.independent import Independent
from ember.distributions.normal import Normal
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """StickBreakingTransform of Normal(loc, scale) draws over the last dimension (K - 1
    Normal coordinates give a point of the K-simplex).

    >>> import ember
    >>> x = LogisticNormal(ember.zeros(3), ember.ones(3)).sample()
    >>> round(x.sum().item(), 5)
    1.0
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True
    base_dist: Independent

    def __init__(self, loc: Tensor | float, scale: Tensor | float, validate_args: bool | None = None) -> None:
        base_dist: Any = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> LogisticNormal:
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale
