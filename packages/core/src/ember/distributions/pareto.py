"""The Pareto (type I) distribution.

>>> import ember
>>> from ember.distributions import Pareto
>>> Pareto(ember.tensor([1.0]), ember.tensor([3.0])).mean.tolist()
[1.5]
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.exponential import Exponential
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, ExpTransform
from ember.distributions.utils import broadcast_all

__all__ = ["Pareto"]


class Pareto(TransformedDistribution):
    """Pareto distribution with minimum ``scale`` and tail index ``alpha``: scale * exp(E) for
    E ~ Exponential(alpha).

    >>> import ember
    >>> bool((Pareto(2.0, 1.5).sample((5,)) >= 2.0).all())
    True
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Tensor | float, alpha: Tensor | float, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Pareto:
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)  # type: ignore[return-value]

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)  # inf for alpha <= 1
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)  # inf for alpha <= 2
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.greater_than_eq(self.scale)

    def entropy(self) -> Tensor:
        return ember.log(self.scale / self.alpha) + (1 + self.alpha.reciprocal())
