"""The Chi-squared distribution: Gamma(df / 2, 1 / 2).

>>> import ember
>>> from ember.distributions import Chi2
>>> Chi2(ember.tensor([3.0])).mean.tolist()
[3.0]
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Gamma
from ember.distributions.utils import broadcast_all

__all__ = ["Chi2"]


class Chi2(Gamma):
    """Chi-squared distribution with ``df`` degrees of freedom (reparameterized like Gamma).

    >>> import ember
    >>> Chi2(4.0).variance.item()
    8.0
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Tensor | float, validate_args: bool | None = None) -> None:
        (df_t,) = broadcast_all(df)
        super().__init__(0.5 * df_t if isinstance(df, Tensor) else 0.5 * float(df), 0.5, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Distribution | None = None) -> Chi2:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)  # type: ignore[return-value]

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
