"""Fused quantization-aware-training modules (``ember.ao.nn.intrinsic.qat``).

``ConvBn2d`` / ``ConvBnReLU2d`` simulate the batch norm folded into the convolution weight, as
PyTorch's do: the weight scaled by ``gamma / sqrt(running_var + eps)`` is fake-quantized, the
convolution's output scaled back, and the batch norm (updating its statistics in training)
applied on top, so the gradients match the float model's while the forward sees the
quantization of the folded weight that inference will use.

>>> import ember
>>> from ember.ao.nn.intrinsic.qat import ConvBnReLU2d
>>> from ember.ao.quantization import get_default_qat_qconfig
>>> m = ConvBnReLU2d(1, 2, 3, qconfig=get_default_qat_qconfig("x86"))
>>> m(ember.randn(2, 1, 5, 5)).shape
ember.Size([2, 2, 3, 3])
"""

from __future__ import annotations

from typing import Any

import ember
import ember.nn.functional as F
from ember import Tensor, nn
from ember.ao.nn import intrinsic as nni
from ember.ao.nn import qat as nnqat

__all__ = ["ConvBn1d", "ConvBnReLU1d", "ConvReLU1d", "ConvBn2d", "ConvBnReLU2d", "ConvReLU2d",
           "LinearReLU", "freeze_bn_stats", "update_bn_stats"]


class _ConvBnNd:
    """Conv + BatchNorm for QAT, with the batch norm folded into the fake-quantized weight
    (shared by ConvBn1d and ConvBn2d)."""

    _FLOAT_MODULE: Any = None
    _FLOAT_CONV: Any = None
    _BN: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool | None = None,
                 padding_mode: str = "zeros", eps: float = 1e-05, momentum: float = 0.1,
                 freeze_bn: bool = False, qconfig: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,  # type: ignore
                         padding=padding, dilation=dilation, groups=groups, bias=False,
                         padding_mode=padding_mode)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = self._BN(out_channels, eps, momentum, True, True)
        self.weight_fake_quant = qconfig.weight()
        if bias:
            self.bias = nn.Parameter(ember.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_bn_parameters()
        if self.training:
            if freeze_bn:
                self.freeze_bn_stats()
            else:
                self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_bn_parameters(self) -> None:
        self.bn.reset_running_stats()
        nn.init.uniform_(self.bn.weight)
        nn.init.zeros_(self.bn.bias)
        if self.bias is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / fan_in ** 0.5
            nn.init.uniform_(self.bias, -bound, bound)

    def update_bn_stats(self) -> Any:
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self) -> Any:
        self.freeze_bn = True
        self.bn.training = False
        return self

    def _forward(self, input: Tensor) -> Tensor:
        if self.bn.running_var is None:
            raise AssertionError(f"{type(self).__name__}: the batch norm must track running "
                                 "statistics")
        running_std = ember.sqrt(self.bn.running_var + self.bn.eps)
        scale_factor = self.bn.weight / running_std
        weight_shape = [1] * self.weight.dim()
        weight_shape[0] = -1
        bias_shape = [1] * self.weight.dim()
        bias_shape[1] = -1
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(weight_shape))
        # a zero bias in the convolution: the real one is added after scaling back
        zero_bias = ember.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(bias_shape)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(bias_shape)
        return self.bn(conv_orig)

    def forward(self, input: Tensor) -> Tensor:
        return self._forward(input)

    def train(self, mode: bool = True) -> Any:
        # the batch norm keeps its frozen (eval) mode while its statistics are frozen
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self

    @classmethod
    def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> Any:
        """The QAT module sharing the parameters and statistics of a fused ``mod``."""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}, got {type(mod).__name__}")
        qconfig = getattr(mod, "qconfig", None)
        if qconfig is None:
            raise AssertionError("Input float module must have a valid qconfig")
        conv, bn = mod[0], mod[1]
        out = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                  conv.padding, conv.dilation, conv.groups, conv.bias is not None,
                  conv.padding_mode, bn.eps, bn.momentum, False, qconfig)
        out.weight = conv.weight
        out.bias = conv.bias
        out.bn.weight = bn.weight
        out.bn.bias = bn.bias
        out.bn.running_mean = bn.running_mean
        out.bn.running_var = bn.running_var
        out.bn.num_batches_tracked = bn.num_batches_tracked
        return out

    def to_float(self) -> nn.Module:
        conv = self._FLOAT_CONV(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                         self.padding, self.dilation, self.groups, self.bias is not None,
                         self.padding_mode)
        conv.weight = nn.Parameter(self.weight.detach())
        if self.bias is not None:
            conv.bias = nn.Parameter(self.bias.detach())
        from ember.nn.utils.fusion import fuse_conv_bn_eval

        return fuse_conv_bn_eval(conv.eval(), self.bn.eval())


class ConvBn1d(_ConvBnNd, nn.Conv1d):
    """Conv1d + BatchNorm1d for QAT."""

    _FLOAT_MODULE: Any = nni.ConvBn1d
    _FLOAT_CONV: Any = nn.Conv1d
    _BN: Any = nn.BatchNorm1d


class ConvBn2d(_ConvBnNd, nn.Conv2d):
    """Conv2d + BatchNorm2d for QAT."""

    _FLOAT_MODULE: Any = nni.ConvBn2d
    _FLOAT_CONV: Any = nn.Conv2d
    _BN: Any = nn.BatchNorm2d


class ConvBnReLU1d(ConvBn1d):
    """Conv1d + BatchNorm1d + ReLU for QAT."""

    _FLOAT_MODULE: Any = nni.ConvBnReLU1d

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(self._forward(input))


class ConvBnReLU2d(ConvBn2d):
    """Conv2d + BatchNorm2d + ReLU for QAT."""

    _FLOAT_MODULE: Any = nni.ConvBnReLU2d

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(self._forward(input))


class ConvReLU1d(nnqat.Conv1d):
    """Conv1d + ReLU for QAT."""

    _FLOAT_MODULE: Any = nni.ConvReLU1d

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias))


class ConvReLU2d(nnqat.Conv2d):
    """Conv2d + ReLU for QAT."""

    _FLOAT_MODULE: Any = nni.ConvReLU2d

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias))


class LinearReLU(nnqat.Linear):
    """Linear + ReLU for QAT."""

    _FLOAT_MODULE: Any = nni.LinearReLU

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(F.linear(input, self.weight_fake_quant(self.weight), self.bias))


def update_bn_stats(mod: nn.Module) -> None:
    """Let the batch norm of a QAT ConvBn module update its statistics again."""
    if isinstance(mod, _ConvBnNd):
        mod.update_bn_stats()


def freeze_bn_stats(mod: nn.Module) -> None:
    """Freeze the batch-norm statistics of a QAT ConvBn module (``model.apply(...)``)."""
    if isinstance(mod, _ConvBnNd):
        mod.freeze_bn_stats()
