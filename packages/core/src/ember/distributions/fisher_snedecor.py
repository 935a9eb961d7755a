"""The Fisher-Snedecor (F) distribution: (X1 / df1) / (X2 / df2) for independent chi-squared
X1, X2 with df1 and df2 degrees of freedom.

>>> import ember
>>> from ember.distributions import FisherSnedecor
>>> FisherSnedecor(ember.tensor(3.0), ember.tensor(6.0)).mean.item()
1.5
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Size, Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.utils import broadcast_all

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """F distribution with ``df1`` and ``df2`` degrees of freedom (reparameterized through
    two Gamma draws).

    >>> import ember
    >>> d = FisherSnedecor(ember.tensor([4.0]), ember.tensor([10.0]))
    >>> round(d.log_prob(ember.tensor([1.0])).exp().item(), 4)
    0.4553
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Tensor | float, df2: Tensor | float,
                 validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1 * 0.5)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2 * 0.5)
        batch_shape = Size() if isinstance(df1, (int, float)) and isinstance(df2, (int, float)) \
            else self.df1.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> FisherSnedecor:
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        df2 = self.df2.clone()
        df2[df2 <= 2] = math.nan
        return df2 / (df2 - 2)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        mode[self.df1 <= 2] = math.nan
        return mode

    @property
    def variance(self) -> Tensor:
        df2 = self.df2.clone()
        df2[df2 <= 4] = math.nan
        return (2 * df2.pow(2) * (self.df1 + df2 - 2)
                / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = Size(sample_shape)
        # X1 / df1 and X2 / df2 are Gamma(df / 2, df / 2): their ratio, kept off 0 and inf
        x1 = self._gamma1.rsample(shape).view(tuple(self._extended_shape(shape)))
        x2 = self._gamma2.rsample(shape).view(tuple(self._extended_shape(shape)))
        tiny = ember.finfo(x2.dtype).tiny
        x2 = x2.clamp(min=tiny)
        return (x1 / x2).clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        norm = ember.lgamma(half1 + half2) - ember.lgamma(half1) - ember.lgamma(half2)
        return (norm + half1 * ember.log(ratio) + (half1 - 1) * ember.log(value)
                - (half1 + half2) * ember.log1p(ratio * value))
