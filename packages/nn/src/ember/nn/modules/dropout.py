"""Dropout layers (active in training mode only).

>>> import ember
>>> ember.nn.Dropout(0.2).eval()(ember.ones(3)).tolist()
[1.0, 1.0, 1.0]
"""

from __future__ import annotations

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(
                f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p}"
            )
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes elements with probability p, scaling the rest by 1 / (1 - p).

    >>> import ember
    >>> ember.nn.Dropout()
    Dropout(p=0.5, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) input.

    >>> import ember
    >>> ember.nn.Dropout1d(0.1)
    Dropout1d(p=0.1, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) input.

    >>> import ember
    >>> ember.nn.Dropout2d(0.1)
    Dropout2d(p=0.1, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) input.

    >>> import ember
    >>> ember.nn.Dropout3d(0.1)
    Dropout3d(p=0.1, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's zero mean and unit variance.

    >>> import ember
    >>> ember.nn.AlphaDropout(0.2)
    AlphaDropout(p=0.2, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels.

    >>> import ember
    >>> ember.nn.FeatureAlphaDropout(0.2)
    FeatureAlphaDropout(p=0.2, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training)
