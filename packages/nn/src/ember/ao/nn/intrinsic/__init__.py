"""Fused float modules (``ember.ao.nn.intrinsic``): sequences such as conv + batch norm + relu
that quantization treats as one op. ``fuse_modules`` makes them; they compute exactly as their
parts in sequence.

>>> import ember
>>> from ember.ao.nn.intrinsic import LinearReLU
>>> m = LinearReLU(ember.nn.Linear(2, 2), ember.nn.ReLU())
>>> bool((m(ember.randn(3, 2)) >= 0).all())
True
"""

from __future__ import annotations

from typing import Any

from ember import nn

__all__ = ["_FusedModule", "ConvReLU1d", "ConvReLU2d", "LinearReLU", "ConvBn1d", "ConvBn2d",
           "ConvBnReLU1d", "ConvBnReLU2d", "BNReLU2d", "LinearBn1d"]


class _FusedModule(nn.Sequential):
    """Base of the fused modules: a Sequential of the fused parts."""


def _check(name: str, mods: tuple[Any, ...], types: tuple[type, ...]) -> None:
    if len(mods) != len(types) or not all(type(m) is t for m, t in zip(mods, types)):
        got = ", ".join(type(m).__name__ for m in mods)
        want = ", ".join(t.__name__ for t in types)
        raise AssertionError(f"Incorrect types for input modules of {name}: expected "
                             f"({want}), got ({got})")


class ConvReLU1d(_FusedModule):
    """Conv1d followed by ReLU."""

    def __init__(self, conv: nn.Module, relu: nn.Module) -> None:
        _check("ConvReLU1d", (conv, relu), (nn.Conv1d, nn.ReLU))
        super().__init__(conv, relu)


class ConvReLU2d(_FusedModule):
    """Conv2d followed by ReLU."""

    def __init__(self, conv: nn.Module, relu: nn.Module) -> None:
        _check("ConvReLU2d", (conv, relu), (nn.Conv2d, nn.ReLU))
        super().__init__(conv, relu)


class LinearReLU(_FusedModule):
    """Linear followed by ReLU."""

    def __init__(self, linear: nn.Module, relu: nn.Module) -> None:
        _check("LinearReLU", (linear, relu), (nn.Linear, nn.ReLU))
        super().__init__(linear, relu)


class ConvBn1d(_FusedModule):
    """Conv1d followed by BatchNorm1d."""

    def __init__(self, conv: nn.Module, bn: nn.Module) -> None:
        _check("ConvBn1d", (conv, bn), (nn.Conv1d, nn.BatchNorm1d))
        super().__init__(conv, bn)


class ConvBn2d(_FusedModule):
    """Conv2d followed by BatchNorm2d."""

    def __init__(self, conv: nn.Module, bn: nn.Module) -> None:
        _check("ConvBn2d", (conv, bn), (nn.Conv2d, nn.BatchNorm2d))
        super().__init__(conv, bn)


class ConvBnReLU1d(_FusedModule):
    """Conv1d, BatchNorm1d and ReLU."""

    def __init__(self, conv: nn.Module, bn: nn.Module, relu: nn.Module) -> None:
        _check("ConvBnReLU1d", (conv, bn, relu), (nn.Conv1d, nn.BatchNorm1d, nn.ReLU))
        super().__init__(conv, bn, relu)


class ConvBnReLU2d(_FusedModule):
    """Conv2d, BatchNorm2d and ReLU."""

    def __init__(self, conv: nn.Module, bn: nn.Module, relu: nn.Module) -> None:
        _check("ConvBnReLU2d", (conv, bn, relu), (nn.Conv2d, nn.BatchNorm2d, nn.ReLU))
        super().__init__(conv, bn, relu)


class BNReLU2d(_FusedModule):
    """BatchNorm2d followed by ReLU."""

    def __init__(self, batch_norm: nn.Module, relu: nn.Module) -> None:
        _check("BNReLU2d", (batch_norm, relu), (nn.BatchNorm2d, nn.ReLU))
        super().__init__(batch_norm, relu)


class LinearBn1d(_FusedModule):
    """Linear followed by BatchNorm1d."""

    def __init__(self, linear: nn.Module, bn: nn.Module) -> None:
        _check("LinearBn1d", (linear, bn), (nn.Linear, nn.BatchNorm1d))
        super().__init__(linear, bn)


from ember.ao.nn.intrinsic import qat, quantized  # noqa: E402,F401
