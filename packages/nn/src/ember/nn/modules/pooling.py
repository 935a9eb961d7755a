"""Pooling layers: max, average, adaptive and power-average pooling.

>>> import ember
>>> ember.nn.MaxPool2d(2)(ember.zeros(1, 1, 4, 4)).shape
ember.Size([1, 1, 2, 2])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = [
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d",
    "MaxUnpool2d", "MaxUnpool3d", "FractionalMaxPool2d", "FractionalMaxPool3d",
]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max pooling over L of (N, C, L) input.

    >>> import ember
    >>> ember.nn.MaxPool1d(2)
    MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    def forward(self, input: Tensor) -> Any:
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """Max pooling over (H, W) of (N, C, H, W) input.

    >>> import ember
    >>> ember.nn.MaxPool2d(3, stride=2)
    MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    def forward(self, input: Tensor) -> Any:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """Max pooling over (D, H, W) of (N, C, D, H, W) or (C, D, H, W) input.

    >>> import ember
    >>> ember.nn.MaxPool3d(3, stride=2)
    MaxPool3d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)
    >>> ember.nn.MaxPool3d(2)(ember.zeros(1, 2, 4, 4, 4)).shape
    ember.Size([1, 2, 2, 2, 2])
    """

    def forward(self, input: Tensor) -> Any:
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class _MaxUnpoolNd(Module):
    _nd = 0

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        tup = lambda v: (v,) * self._nd if isinstance(v, int) else tuple(v)  # noqa: E731
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride if stride is not None else kernel_size)
        self.padding = tup(padding)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        fn = getattr(F, f"max_unpool{self._nd}d")
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d (its ``return_indices=True`` indices).

    >>> import ember
    >>> ember.nn.MaxUnpool1d(2)
    MaxUnpool1d(kernel_size=(2,), stride=(2,), padding=(0,))
    """

    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d (its ``return_indices=True`` indices).

    >>> import ember
    >>> ember.nn.MaxUnpool2d(2, stride=2)
    MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    """

    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d (its ``return_indices=True`` indices).

    >>> import ember
    >>> ember.nn.MaxUnpool3d(2)
    MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))
    """

    _nd = 3


class AvgPool1d(Module):
    """Average pooling over L of (N, C, L) input.

    >>> import ember
    >>> ember.nn.AvgPool1d(2)
    AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        one = lambda v: (v,) if isinstance(v, int) else tuple(v)  # noqa: E731
        self.kernel_size = one(kernel_size)
        self.stride = one(stride if stride is not None else kernel_size)
        self.padding = one(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    """The arguments and repr AvgPool2d and AvgPool3d share."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Average pooling over (H, W) of (N, C, H, W) input.

    >>> import ember
    >>> ember.nn.AvgPool2d(2)
    AvgPool2d(kernel_size=2, stride=2, padding=0)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool3d(_AvgPoolNd):
    """Average pooling over (D, H, W) of (N, C, D, H, W) or (C, D, H, W) input.

    >>> import ember
    >>> ember.nn.AvgPool3d(2)
    AvgPool3d(kernel_size=2, stride=2, padding=0)
    >>> ember.nn.AvgPool3d(2)(ember.ones(1, 1, 4, 4, 4)).shape
    ember.Size([1, 1, 2, 2, 2])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptivePool(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average pooling of (N, C, L) input to a fixed length.

    >>> import ember
    >>> ember.nn.AdaptiveAvgPool1d(3)
    AdaptiveAvgPool1d(output_size=3)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling of (N, C, H, W) input to a fixed size (None keeps that input size).

    >>> import ember
    >>> ember.nn.AdaptiveAvgPool2d((1, 1))(ember.ones(2, 3, 5, 5)).shape
    ember.Size([2, 3, 1, 1])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) input to a fixed size (None keeps
    that input size).

    >>> import ember
    >>> ember.nn.AdaptiveAvgPool3d((1, None, 2))(ember.ones(2, 3, 4, 5, 6)).shape
    ember.Size([2, 3, 1, 5, 2])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(input, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max pooling of (N, C, L) input to a fixed length.

    >>> import ember
    >>> ember.nn.AdaptiveMaxPool1d(2)
    AdaptiveMaxPool1d(output_size=2)
    """

    def forward(self, input: Tensor) -> Any:
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max pooling of (N, C, H, W) input to a fixed size.

    >>> import ember
    >>> ember.nn.AdaptiveMaxPool2d(1)(ember.ones(1, 2, 3, 3)).shape
    ember.Size([1, 2, 1, 1])
    """

    def forward(self, input: Tensor) -> Any:
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to a fixed size.

    >>> import ember
    >>> ember.nn.AdaptiveMaxPool3d(1)(ember.ones(1, 2, 3, 3, 3)).shape
    ember.Size([1, 2, 1, 1, 1])
    """

    def forward(self, input: Tensor) -> Any:
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Tensor | None = None) -> None:
        super().__init__()
        nd, name = self._nd, type(self).__name__

        def as_tuple(v: Any) -> tuple:
            return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd

        self.kernel_size = as_tuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = as_tuple(output_size) if output_size is not None else None
        self.output_ratio = as_tuple(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        f = F.fractional_max_pool2d if self._nd == 2 else F.fractional_max_pool3d
        return f(input, self.kernel_size, self.output_size, self.output_ratio,
                 self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) input to ``output_size`` or
    ``output_ratio`` (in (0, 1)) of the input size; a ``_random_samples`` buffer (N, C, 2) fixes
    the windows, else each call draws them.

    >>> import ember
    >>> ember.nn.FractionalMaxPool2d(2, output_ratio=0.5)(ember.ones(1, 2, 8, 8)).shape
    ember.Size([1, 2, 4, 4])
    """

    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, D, H, W) or (C, D, H, W) input (see
    :class:`FractionalMaxPool2d`); ``_random_samples`` is (N, C, 3).

    >>> import ember
    >>> ember.nn.FractionalMaxPool3d(2, output_size=3)(ember.ones(1, 1, 6, 6, 6)).shape
    ember.Size([1, 1, 3, 3, 3])
    """

    _nd = 3


class _LPPool(Module):
    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """Power-average pooling over L.

    >>> import ember
    >>> ember.nn.LPPool1d(2, 3)
    LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPool):
    """Power-average pooling over (H, W).

    >>> import ember
    >>> ember.nn.LPPool2d(2, 2)(ember.ones(1, 1, 2, 2)).tolist()
    [[[[2.0]]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(_LPPool):
    """Power-average pooling over (D, H, W).

    >>> import ember
    >>> ember.nn.LPPool3d(2, 2)(ember.ones(1, 1, 2, 2, 2)).flatten().tolist()
    [2.8284270763397217]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool3d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
