"""Normalization layers: LayerNorm, GroupNorm, RMSNorm, InstanceNorm1d/2d/3d,
LocalResponseNorm, CrossMapLRN2d.

>>> import ember
>>> ember.nn.LayerNorm(4)(ember.randn(2, 4)).shape
ember.Size([2, 4])
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.batchnorm import _NormBase
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = [
    "LayerNorm", "GroupNorm", "RMSNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LocalResponseNorm", "CrossMapLRN2d",
]


def _shape_tuple(normalized_shape: Any) -> tuple[int, ...]:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


def _affine_params(m: Module, shape: tuple[int, ...], affine: bool, bias: bool, dtype: Any,
                   device: Any) -> None:
    """Registers m.weight and m.bias of ``shape`` (None when not affine / without bias) and
    initializes them as LayerNorm and GroupNorm do."""
    kw = {"dtype": dtype, "device": device}
    m.register_parameter("weight", Parameter(ember.empty(tuple(shape), **kw)) if affine else None)
    m.register_parameter("bias", Parameter(ember.empty(tuple(shape), **kw)) if affine and bias else None)
    _reset_affine(m)


def _reset_affine(m: Module) -> None:
    """weight 1, bias 0."""
    if m.weight is not None:
        init.ones_(m.weight)
    if m.bias is not None:
        init.zeros_(m.bias)


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dims, with per-element affine.

    >>> import ember
    >>> ember.nn.LayerNorm((3, 4), elementwise_affine=False)
    LayerNorm((3, 4), eps=1e-05, elementwise_affine=False, bias=False)
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_params(self, self.normalized_shape, elementwise_affine, bias, dtype, device)

    reset_parameters = _reset_affine

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims.

    >>> import ember
    >>> ember.nn.RMSNorm(4)
    RMSNorm((4,), eps=None, elementwise_affine=True)
    """

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ember.empty(tuple(self.normalized_shape), dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """weight 1."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Group norm of (N, C, *) input with per-channel affine.

    >>> import ember
    >>> ember.nn.GroupNorm(2, 4)
    GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_params(self, (num_channels,), affine, bias, dtype, device)

    reset_parameters = _reset_affine

    def forward(self, input: Tensor) -> Tensor:
        # RuntimeError, as torch; without affine parameters torch normalizes any channel count
        # that num_groups divides (group_norm checks that)
        if input.ndim < 2 or (input.shape[1] != self.num_channels
                              and (self.weight is not None or self.bias is not None)):
            raise RuntimeError(
                f"GroupNorm: expected input of shape (N, {self.num_channels}, *), got "
                f"{tuple(input.shape)}"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_NormBase):
    _nd = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(
                f"{self._get_name()}: expected {nd + 1}D (unbatched) or {nd + 2}D input, got "
                f"{input.ndim}D input of shape {tuple(input.shape)}"
            )
        batched = input.ndim == nd + 2
        x = input if batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"{self._get_name()}: expected input's size at dim=1 to match num_features "
                    f"({self.num_features}), but got input of shape {tuple(input.shape)}"
                )
        use_input_stats = self.training or not self.track_running_stats
        # momentum=None is no cumulative average here (unlike BatchNorm): PyTorch passes 0.0,
        # so the running statistics stay as they are
        out = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
            self.momentum if self.momentum is not None else 0.0, self.eps,
        )
        return out if batched else out.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or (C, L) input.

    >>> import ember
    >>> ember.nn.InstanceNorm1d(3)
    InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
    """

    _nd = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or (C, H, W) input.

    >>> import ember
    >>> ember.nn.InstanceNorm2d(3, affine=True)(ember.randn(2, 3, 4, 4)).shape
    ember.Size([2, 3, 4, 4])
    """

    _nd = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W) or (C, D, H, W) input.

    >>> import ember
    >>> ember.nn.InstanceNorm3d(1)(ember.randn(1, 1, 2, 2, 2)).shape
    ember.Size([1, 1, 2, 2, 2])
    """

    _nd = 3


class _ResponseNorm(Module):
    """The hyperparameters and repr shared by LocalResponseNorm and CrossMapLRN2d."""

    def __init__(self, size: int, alpha: float, beta: float, k: float) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LocalResponseNorm(_ResponseNorm):
    """Normalizes each channel by its neighbours' squares.

    >>> import ember
    >>> ember.nn.LocalResponseNorm(2)
    LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__(size, alpha, beta, k)

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)


def _cross_map_windows(channels: int, size: int) -> list[list[int]]:
    """The channels whose squares scale each channel in CrossMapLRN2d (the legacy Lua layer
    that PyTorch keeps): channel 0 sums the first (size - 1) // 2 + 1 channels, and each next
    channel's window slides one channel up; the window's lower edge stops short of channel 0,
    which stays in every window (PyTorch's output has it so)."""
    pre = (size - 1) // 2 + 1
    current = set(range(min(pre, channels)))
    windows = [sorted(current)]
    for c in range(1, channels):
        if c < channels - pre + 1:
            current.add(c + pre - 1)
        if c > pre:
            current.discard(c - pre)
        windows.append(sorted(current))
    return windows


class CrossMapLRN2d(_ResponseNorm):
    """Local response normalization across channels of 4-D input, as the legacy layer computes
    it: ``x * (k + alpha / size * s) ** -beta`` where ``s`` sums the squares over each channel's
    window (see :func:`_cross_map_windows`; unlike :class:`LocalResponseNorm`, channel 0 stays
    in every window). The forward equals PyTorch's; the gradient is the exact derivative of it
    (PyTorch's hand-written backward assumes centred windows and fails for ``size=1``).

    >>> import ember
    >>> ember.nn.CrossMapLRN2d(3)
    CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__(size, alpha, beta, k)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        channels = input.shape[1]
        member = ember.zeros(channels, channels, dtype=input.dtype, device=input.device)
        for c, window in enumerate(_cross_map_windows(channels, self.size)):
            member[c, window] = 1
        sums = ember.einsum("nchw,dc->ndhw", input * input, member)
        return input * (self.k + self.alpha / self.size * sums).pow(-self.beta)
