"""Gradients of convolutions with respect to their input or their weight (PyTorch's
``torch.nn.grad``), for code that writes its own backward passes.

A convolution is linear in its input and in its weight, so each gradient is the vector-Jacobian
product of one convolution, taken through autograd at a zero point of the right shape.

>>> import ember
>>> from ember.nn import grad
>>> x, w = ember.randn(1, 2, 5, 5), ember.randn(3, 2, 3, 3)
>>> go = ember.randn(1, 3, 3, 3)
>>> grad.conv2d_input(x.shape, w, go).shape, grad.conv2d_weight(x, w.shape, go).shape
(ember.Size([1, 2, 5, 5]), ember.Size([3, 2, 3, 3]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ember
from ember import Tensor

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _vjp(name: str, dims: int, input: Tensor, weight: Tensor, grad_output: Tensor,
         wrt: Tensor, conv_args: tuple) -> Tensor:
    from ember.nn import functional as F

    conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
    with ember.enable_grad():
        out = conv(input, weight, None, *conv_args)
        if tuple(out.shape) != tuple(grad_output.shape):
            raise RuntimeError(
                f"{name}: grad_output has shape {tuple(grad_output.shape)}, but the convolution "
                f"of an input of shape {tuple(input.shape)} with a weight of shape "
                f"{tuple(weight.shape)} (stride, padding, dilation, groups = {conv_args}) gives "
                f"{tuple(out.shape)}")
        (g,) = ember.autograd.grad(out, wrt, grad_output)
    return g


def _input_grad(dims: int) -> Any:
    name = f"conv{dims}d_input"

    def fn(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
        x = ember.zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device,
                        requires_grad=True)
        return _vjp(name, dims, x, weight.detach(), grad_output, x,
                    (stride, padding, dilation, groups))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The gradient of conv{dims}d with respect to its input (of size "
                  "``input_size``), given ``weight`` and ``grad_output``.")
    return fn


def _weight_grad(dims: int) -> Any:
    name = f"conv{dims}d_weight"

    def fn(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
        w = ember.zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device,
                        requires_grad=True)
        return _vjp(name, dims, input.detach(), w, grad_output, w,
                    (stride, padding, dilation, groups))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The gradient of conv{dims}d with respect to its weight (of size "
                  "``weight_size``), given ``input`` and ``grad_output``.")
    return fn


conv1d_input, conv2d_input, conv3d_input = (_input_grad(d) for d in (1, 2, 3))
conv1d_weight, conv2d_weight, conv3d_weight = (_weight_grad(d) for d in (1, 2, 3))
