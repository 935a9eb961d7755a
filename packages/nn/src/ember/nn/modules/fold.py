"""Fold and Unfold: sliding local blocks to columns and back.

>>> import ember
>>> ember.nn.Unfold(kernel_size=2)(ember.zeros(1, 3, 4, 4)).shape
ember.Size([1, 12, 9])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["Fold", "Unfold"]


class Unfold(Module):
    """(N, C, H, W) -> (N, C * prod(kernel_size), L) columns of sliding blocks.

    >>> import ember
    >>> ember.nn.Unfold(3, padding=1)
    Unfold(kernel_size=3, dilation=1, padding=1, stride=1)
    """

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Sums columns (N, C * prod(kernel_size), L) back into (N, C, *output_size).

    >>> import ember
    >>> ember.nn.Fold((4, 4), 2)(ember.ones(1, 4, 9)).shape
    ember.Size([1, 1, 4, 4])
    """

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
