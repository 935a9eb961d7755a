"""Upsample, UpsamplingNearest2d and UpsamplingBilinear2d.

>>> import ember
>>> ember.nn.Upsample(scale_factor=2)(ember.zeros(1, 1, 2, 2)).shape
ember.Size([1, 1, 4, 4])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resamples (N, C, *spatial) input to ``size`` or by ``scale_factor`` (see F.interpolate).

    >>> import ember
    >>> ember.nn.Upsample(scale_factor=2.0, mode="bilinear")
    Upsample(scale_factor=2.0, mode='bilinear')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else (
            tuple(float(f) for f in scale_factor) if scale_factor is not None else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W) input.

    >>> import ember
    >>> ember.nn.UpsamplingNearest2d(scale_factor=2)
    UpsamplingNearest2d(scale_factor=2.0, mode='nearest')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) input with align_corners=True.

    >>> import ember
    >>> ember.nn.UpsamplingBilinear2d(size=(4, 4))
    UpsamplingBilinear2d(size=(4, 4), mode='bilinear')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
