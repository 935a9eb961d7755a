"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d.

>>> import ember
>>> conv = ember.nn.Conv2d(3, 8, 3, padding=1)
>>> conv(ember.zeros(2, 3, 5, 5)).shape
ember.Size([2, 8, 5, 5])
"""

from __future__ import annotations

import math
from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.lazy import LazyModuleMixin
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter, UninitializedParameter

__all__ = [
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(v: Any, n: int, name: str, cls: str) -> tuple[int, ...]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    t = tuple(v)
    if len(t) != n or not all(isinstance(x, int) for x in t):
        raise ValueError(f"{cls}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return t


class _ConvNd(Module):
    _nd = 0
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any,
                 padding: Any, dilation: Any, groups: int, bias: bool, padding_mode: str,
                 output_padding: Any = 0, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        cls = type(self).__name__
        nd = self._nd
        if groups <= 0:
            raise ValueError(f"{cls}: groups must be a positive integer, got {groups}")
        if in_channels % groups != 0:
            raise ValueError(f"{cls}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"{cls}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"{cls}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size", cls)
        self.stride = _ntuple(stride, nd, "stride", cls)
        self.dilation = _ntuple(dilation, nd, "dilation", cls)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{cls}: padding must be 'same', 'valid' or ints, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{cls}: padding='same' is not supported for strided convolutions")
            self.padding: Any = padding
        else:
            self.padding = _ntuple(padding, nd, "padding", cls)
        self.output_padding = _ntuple(output_padding, nd, "output_padding", cls)
        self.transposed = self._transposed
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad order (last dim first) of the padding a non-zeros padding_mode applies itself
        if isinstance(self.padding, str):
            if self.padding == "same":
                total = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
                rev = []
                for t in reversed(total):
                    rev += [t // 2, t - t // 2]
            else:
                rev = [0, 0] * nd
        else:
            rev = []
            for p in reversed(self.padding):
                rev += [p, p]
        self._reversed_padding_repeated_twice = rev
        if self._transposed:
            wshape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            wshape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(ember.empty(*wshape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(ember.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """kaiming_uniform_(a=sqrt(5)) weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        fn = getattr(F, f"conv{self._nd}d")
        if self.padding_mode != "zeros":
            mode = self.padding_mode
            return fn(F.pad(input, self._reversed_padding_repeated_twice, mode=mode), weight, bias,
                      self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class _Conv(_ConvNd):
    """The public constructor that Conv1d/2d/3d share (their _nd differs)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) input.

    >>> import ember
    >>> ember.nn.Conv1d(4, 6, 3, stride=2)
    Conv1d(4, 6, kernel_size=(3,), stride=(2,))
    """

    _nd = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) input.

    >>> import ember
    >>> ember.nn.Conv2d(3, 8, 3, padding=1, bias=False)
    Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)
    """

    _nd = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) input.

    >>> import ember
    >>> ember.nn.Conv3d(1, 2, 2)
    Conv3d(1, 2, kernel_size=(2, 2, 2), stride=(1, 1, 1))
    """

    _nd = 3


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(
                f"{type(self).__name__}: only 'zeros' padding_mode is supported, got "
                f"{padding_mode!r}"
            )
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be ints, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device, dtype)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        fn = getattr(F, f"conv_transpose{self._nd}d")
        return fn(input, self.weight, self.bias, self.stride, self.padding,
                  self._output_padding(input, output_size), self.groups, self.dilation)

    def _output_padding(self, input: Tensor, output_size: Any) -> list[int]:
        if output_size is None:
            return list(self.output_padding)
        nd = self._nd
        want = list(output_size)[-nd:]
        if len(want) != nd:
            raise ValueError(
                f"{type(self).__name__}: output_size must have {nd} or {nd + 2} elements, got "
                f"{output_size!r}"
            )
        spatial = list(input.shape)[-nd:]
        res = []
        for d in range(nd):
            base = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            extra = want[d] - base
            # As torch's modules: output_size reaches stride - 1 past the smallest size (the
            # functional form also accepts output_padding below the dilation).
            if not 0 <= extra < self.stride[d]:
                raise ValueError(
                    f"{type(self).__name__}: requested output size {want} is not reachable "
                    f"from input {tuple(input.shape)} (dim {d}: between {base} and "
                    f"{base + self.stride[d] - 1})"
                )
            res.append(extra)
        return res


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution; weight (C_in, C_out / groups, k).

    >>> import ember
    >>> ember.nn.ConvTranspose1d(2, 3, 3, stride=2)(ember.zeros(1, 2, 4)).shape
    ember.Size([1, 3, 9])
    """

    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution; weight (C_in, C_out / groups, kh, kw).

    >>> import ember
    >>> ember.nn.ConvTranspose2d(2, 3, 2, stride=2)(ember.zeros(1, 2, 4, 4)).shape
    ember.Size([1, 3, 8, 8])
    """

    _nd = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution of (N, C_in, D, H, W) or (C_in, D, H, W) input; weight
    (C_in, C_out / groups, kd, kh, kw). ``forward(input, output_size)`` picks the output_padding
    that reaches output_size.

    >>> import ember
    >>> up = ember.nn.ConvTranspose3d(2, 3, 2, stride=2)
    >>> up(ember.zeros(1, 2, 2, 4, 4)).shape
    ember.Size([1, 3, 4, 8, 8])
    >>> up(ember.zeros(1, 2, 2, 4, 4), output_size=(5, 9, 8)).shape
    ember.Size([1, 3, 5, 9, 8])
    """

    _nd = 3


class _LazyConvMixin(LazyModuleMixin):
    """in_channels from the first input (dim 1 of a batched input, dim 0 of an unbatched one)."""

    in_channels: int
    out_channels: int
    groups: int
    kernel_size: tuple[int, ...]
    transposed: bool
    _nd: int

    def _make_lazy(self: Any, out_channels: int, bias: bool, device: Any, dtype: Any) -> None:
        if out_channels % self.groups != 0:
            raise ValueError(
                f"{type(self).__name__}: out_channels ({out_channels}) must be divisible by "
                f"groups ({self.groups})"
            )
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self: Any) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self: Any, input: Tensor) -> int:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(
                f"{type(self).__name__}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) "
                f"input, got input of shape {tuple(input.shape)}"
            )
        return int(input.shape[1] if input.ndim == nd + 2 else input.shape[0])

    def initialize_parameters(self: Any, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Materializes weight and bias from the input's channels; initialized like the eager
        convolution's."""
        if not self.has_uninitialized_params():
            if self.in_channels == 0:  # materialized by load_state_dict
                w = self.weight.shape
                self.in_channels = int(w[0] if self.transposed else w[1] * self.groups)
            return
        in_channels = self._get_in_channels(input)
        if in_channels % self.groups != 0:
            raise ValueError(
                f"{type(self).__name__}: the input's {in_channels} channels (shape "
                f"{tuple(input.shape)}) must be divisible by groups ({self.groups})"
            )
        self.in_channels = in_channels
        g = self.groups
        if self.transposed:
            shape = (in_channels, self.out_channels // g, *self.kernel_size)
        else:
            shape = (self.out_channels, in_channels // g, *self.kernel_size)
        with ember.no_grad():
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class _LazyConv(_LazyConvMixin):
    """The constructor LazyConv1d/2d/3d share: Conv's arguments less in_channels."""

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device=device, dtype=dtype)
        self._make_lazy(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    """The constructor LazyConvTranspose1d/2d/3d share: ConvTranspose's arguments less
    in_channels."""

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        self._make_lazy(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A ``Conv1d`` whose ``in_channels`` comes from its first input.

    >>> import ember
    >>> conv = ember.nn.LazyConv1d(4, 3)
    >>> conv(ember.ones(2, 5, 8)).shape
    ember.Size([2, 4, 6])
    >>> conv
    Conv1d(5, 4, kernel_size=(3,), stride=(1,))
    """

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A ``Conv2d`` whose ``in_channels`` comes from its first input.

    >>> import ember
    >>> ember.nn.LazyConv2d(8, 3, padding=1)(ember.ones(1, 3, 5, 5)).shape
    ember.Size([1, 8, 5, 5])
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A ``Conv3d`` whose ``in_channels`` comes from its first input."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ``ConvTranspose1d`` whose ``in_channels`` comes from its first input."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ``ConvTranspose2d`` whose ``in_channels`` comes from its first input.

    >>> import ember
    >>> ember.nn.LazyConvTranspose2d(3, 2, stride=2)(ember.ones(1, 2, 4, 4)).shape
    ember.Size([1, 3, 8, 8])
    """

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ``ConvTranspose3d`` whose ``in_channels`` comes from its first input.

    >>> import ember
    >>> ember.nn.LazyConvTranspose3d(3, 2, stride=2)(ember.ones(1, 2, 2, 2, 2)).shape
    ember.Size([1, 3, 4, 4, 4])
    """

    cls_to_become = ConvTranspose3d
