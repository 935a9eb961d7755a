"""Quantization-aware-training modules (``ember.ao.nn.qat``): Linear and Conv2d whose weight
goes through the QConfig's weight fake quantize module on every forward. ``prepare_qat``
swaps them in for the float modules (sharing their parameters).

>>> import ember
>>> from ember.ao.nn.qat import Linear
>>> from ember.ao.quantization import get_default_qat_qconfig
>>> m = Linear(3, 2, qconfig=get_default_qat_qconfig("x86"))
>>> m(ember.ones(1, 3)).shape
ember.Size([1, 2])
"""

from __future__ import annotations

from typing import Any

import ember.nn.functional as F
from ember import Tensor, nn

__all__ = ["Linear", "Conv1d", "Conv2d"]


def _need_qconfig(cls: type, mod: nn.Module) -> Any:
    qconfig = getattr(mod, "qconfig", None)
    if qconfig is None:
        raise AssertionError(f"{cls.__name__}.from_float: the input float module must have "
                             "qconfig defined")
    return qconfig


class Linear(nn.Linear):
    """A Linear layer with fake-quantized weight, for QAT."""

    _FLOAT_MODULE: Any = nn.Linear

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 qconfig: Any = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Linear:
        """The QAT module sharing ``mod``'s parameters (``mod`` a Linear or a fused
        LinearReLU with a qconfig)."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}, got {type(mod).__name__}")
        qconfig = _need_qconfig(cls, mod)
        from ember.ao.nn.intrinsic import LinearReLU

        if isinstance(mod, LinearReLU):
            mod = mod[0]
        out = cls(mod.in_features, mod.out_features, bias=mod.bias is not None, qconfig=qconfig)
        out.weight = mod.weight
        out.bias = mod.bias
        return out

    def to_float(self) -> nn.Linear:
        lin = nn.Linear(self.in_features, self.out_features, self.bias is not None)
        lin.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            lin.bias = nn.Parameter(self.bias.detach())
        return lin


class _ConvNd:
    """The QAT convolution's parts shared by Conv1d and Conv2d."""

    _FLOAT_MODULE: Any = None
    _FLOAT_CONV: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", qconfig: Any = None, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,  # type: ignore
                         padding=padding, dilation=dilation, groups=groups, bias=bias,
                         padding_mode=padding_mode, device=device, dtype=dtype)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight_fake_quant(self.weight),  # type: ignore
                                  self.bias)

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Any:
        """The QAT module sharing ``mod``'s parameters (``mod`` a Conv1d / Conv2d or a fused
        ConvReLU with a qconfig)."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}, got {type(mod).__name__}")
        qconfig = _need_qconfig(cls, mod)
        from ember.ao.nn.intrinsic import _FusedModule

        if isinstance(mod, _FusedModule):
            mod = mod[0]
        out = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride,
                  padding=mod.padding, dilation=mod.dilation, groups=mod.groups,
                  bias=mod.bias is not None, padding_mode=mod.padding_mode, qconfig=qconfig)
        out.weight = mod.weight
        out.bias = mod.bias
        return out

    def to_float(self) -> Any:
        conv = self._FLOAT_CONV(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                         self.padding, self.dilation, self.groups, self.bias is not None,
                         self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        return conv


class Conv1d(_ConvNd, nn.Conv1d):
    """A Conv1d layer with fake-quantized weight, for QAT."""

    _FLOAT_MODULE: Any = nn.Conv1d
    _FLOAT_CONV: Any = nn.Conv1d


class Conv2d(_ConvNd, nn.Conv2d):
    """A Conv2d layer with fake-quantized weight, for QAT."""

    _FLOAT_MODULE: Any = nn.Conv2d
    _FLOAT_CONV: Any = nn.Conv2d
