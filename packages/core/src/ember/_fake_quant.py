"""Fake quantization for quantization-aware training (QAT): ``ember.fake_quantize_per_tensor_affine``
and ``ember.fake_quantize_per_channel_affine``, with PyTorch's signatures and semantics.

A float tensor goes through the quantize / dequantize round trip in float arithmetic,
``(clamp(round(x * (1 / scale)) + zero_point, quant_min, quant_max) - zero_point) * scale``
(rounding half to even, as ``std::nearbyint``), and stays float. The gradient is the
straight-through estimator: ``grad`` where the rounded value fell inside
``[quant_min, quant_max]``, 0 where it was clamped (no gradient for scale or zero_point, as in
PyTorch's functions of these names).

>>> import ember
>>> x = ember.tensor([-1.0, 0.26, 0.74, 3.0], requires_grad=True)
>>> y = ember.fake_quantize_per_tensor_affine(x, 0.5, 0, -2, 2)
>>> y.tolist()
[-1.0, 0.5, 0.5, 1.0]
>>> y.sum().backward()
>>> x.grad.tolist()
[1.0, 1.0, 1.0, 0.0]
"""

from __future__ import annotations

import math
import operator
from typing import Any

import ember
from ember import Tensor

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]


def _check_input(op: str, input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    if input.dtype not in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        raise RuntimeError(f"{op}: expected a floating-point input (float32, float64, float16 or "
                           f"bfloat16), got {input.dtype}")


def _check_range(op: str, quant_min: Any, quant_max: Any) -> tuple[int, int]:
    try:
        lo, hi = operator.index(quant_min), operator.index(quant_max)
    except TypeError:
        raise TypeError(f"{op}: quant_min and quant_max must be ints, got "
                        f"{type(quant_min).__name__} and {type(quant_max).__name__}") from None
    if lo > hi:
        raise RuntimeError(f"{op}: quant_min ({lo}) must be less than or equal to quant_max "
                           f"({hi})")
    return lo, hi


def _round_trip(x: Tensor, inv_scale: Tensor, scale: Tensor, zero_point: Tensor, lo: int,
                hi: int) -> Tensor:
    """The fake-quantized value with a straight-through gradient (masked where clamped)."""
    q = ember.round(x.detach() * inv_scale) + zero_point
    keep = (q >= lo) & (q <= hi)
    out = (q.clamp(lo, hi) - zero_point) * scale
    if not x.requires_grad:
        return out.to(x.dtype)
    # value: out; gradient: 1 where the value was not clamped, 0 elsewhere
    return out.to(x.dtype) + (x - x.detach()) * keep.to(x.dtype)


def fake_quantize_per_tensor_affine(input: Tensor, scale: Any, zero_point: Any, quant_min: int,
                                    quant_max: int) -> Tensor:
    """``input`` quantized to the integers ``[quant_min, quant_max]`` with one ``scale`` and
    ``zero_point`` (numbers or one-element tensors) and dequantized again, as float.

    >>> import ember
    >>> ember.fake_quantize_per_tensor_affine(ember.tensor([0.3, 9.0]), 0.25, 2, 0, 10).tolist()
    [0.25, 2.0]
    """
    op = "fake_quantize_per_tensor_affine"
    _check_input(op, input)
    lo, hi = _check_range(op, quant_min, quant_max)
    if isinstance(scale, Tensor):
        if scale.numel() != 1:
            raise RuntimeError(f"{op}: scale must be a number or a one-element tensor, got shape "
                               f"{tuple(scale.shape)}")
        scale = float(scale.item())
    if isinstance(zero_point, Tensor):
        if zero_point.numel() != 1:
            raise RuntimeError(f"{op}: zero_point must be a number or a one-element tensor, got "
                               f"shape {tuple(zero_point.shape)}")
        zero_point = zero_point.item()
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise RuntimeError(f"{op}: scale must be a positive finite number, got {scale}")
    if isinstance(zero_point, float) and not zero_point.is_integer():
        raise RuntimeError(f"{op}: zero_point must be an integer, got {zero_point}")
    zp = int(zero_point)
    if not lo <= zp <= hi:
        raise RuntimeError(f"{op}: zero_point ({zp}) must be between quant_min ({lo}) and "
                           f"quant_max ({hi})")
    # float32 arithmetic as PyTorch's kernel (inv_scale = 1.0f / scale) for float32 input
    dt = ember.float64 if input.dtype == ember.float64 else ember.float32
    s = ember.tensor(scale, dtype=dt)
    inv = ember.tensor(1.0, dtype=dt) / s
    x = input if input.dtype == dt else input.to(dt)
    out = _round_trip(x, inv, s, ember.tensor(float(zp), dtype=dt), lo, hi)
    return out if input.dtype == dt else out.to(input.dtype)


def fake_quantize_per_channel_affine(input: Tensor, scale: Tensor, zero_point: Tensor, axis: int,
                                     quant_min: int, quant_max: int) -> Tensor:
    """:func:`fake_quantize_per_tensor_affine` with a ``scale`` / ``zero_point`` per index of
    dim ``axis`` (1-D tensors of that dim's length; ``zero_point`` integer or float).

    >>> import ember
    >>> w = ember.tensor([[0.3, -0.3], [1.2, 2.0]])
    >>> ember.fake_quantize_per_channel_affine(w, ember.tensor([0.25, 1.0]),
    ...                                        ember.tensor([0, 0], dtype=ember.int32), 0,
    ...                                        -2, 2).tolist()
    [[0.25, -0.25], [1.0, 2.0]]
    """
    op = "fake_quantize_per_channel_affine"
    _check_input(op, input)
    lo, hi = _check_range(op, quant_min, quant_max)
    for name, t in (("scale", scale), ("zero_point", zero_point)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not "
                            f"{type(t).__name__}")
        if t.ndim != 1:
            raise RuntimeError(f"{op}: {name} must be a 1-D tensor, got shape {tuple(t.shape)}")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}") from None
    if not -input.ndim <= axis < max(input.ndim, 1):
        raise IndexError(f"{op}: axis {axis} is out of range for input of shape "
                         f"{tuple(input.shape)}")
    axis %= max(input.ndim, 1)
    n = input.shape[axis]
    if scale.numel() != n or zero_point.numel() != n:
        raise RuntimeError(f"{op}: expected scale and zero_point of length {n} (dim {axis} of "
                           f"input {tuple(input.shape)}), got {scale.numel()} and "
                           f"{zero_point.numel()}")
    if scale.numel() and not bool(((scale > 0) & scale.isfinite()).all()):
        raise RuntimeError(f"{op}: every scale must be a positive finite number")
    zpf = zero_point.detach().to(ember.float64)
    if zpf.numel() and (bool((zpf < lo).any()) or bool((zpf > hi).any())):
        raise RuntimeError(f"{op}: every zero_point must be between quant_min ({lo}) and "
                           f"quant_max ({hi}), got {zero_point.tolist()}")
    dt = ember.float64 if input.dtype == ember.float64 else ember.float32
    shape = [1] * input.ndim
    shape[axis] = n
    s = scale.detach().to(dt).reshape(shape)
    inv = 1.0 / s
    zp = zero_point.detach().to(dt)
    if zero_point.dtype.is_floating_point:
        zp = ember.round(zp)
    zp = zp.reshape(shape)
    x = input if input.dtype == dt else input.to(dt)
    out = _round_trip(x, inv, s, zp, lo, hi)
    return out if input.dtype == dt else out.to(input.dtype)
