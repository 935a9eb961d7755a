"""PixelShuffle and PixelUnshuffle: trade channels for spatial resolution.

>>> import ember
>>> ember.nn.PixelShuffle(2)(ember.zeros(1, 8, 3, 3)).shape
ember.Size([1, 2, 6, 6])
"""

from __future__ import annotations

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r).

    >>> import ember
    >>> ember.nn.PixelShuffle(3)
    PixelShuffle(upscale_factor=3)
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W).

    >>> import ember
    >>> ember.nn.PixelUnshuffle(2)
    PixelUnshuffle(downscale_factor=2)
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
