"""Fused quantized modules (``ember.ao.nn.intrinsic.quantized``): a quantized Linear / Conv2d
whose requantized output is clamped at its zero point (ReLU) in the same step."""

from __future__ import annotations

from ember.ao.nn import quantized as nnq

__all__ = ["LinearReLU", "ConvReLU1d", "ConvReLU2d", "BNReLU2d"]


class LinearReLU(nnq.Linear):
    """Quantized Linear + ReLU."""

    _RELU = True


class ConvReLU2d(nnq.Conv2d):
    """Quantized Conv2d + ReLU (also what a QAT ConvBnReLU2d becomes)."""

    _RELU = True


class BNReLU2d(nnq.BatchNorm2d):
    """Quantized BatchNorm2d + ReLU."""

    _RELU = True


class ConvReLU1d(nnq.Conv1d):
    """Quantized Conv1d + ReLU (also what a QAT ConvBnReLU1d becomes)."""

    _RELU = True
