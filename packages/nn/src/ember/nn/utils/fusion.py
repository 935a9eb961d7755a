"""``torch.nn.utils.fusion``: folding an eval-mode batch norm into the convolution or linear
layer before it (the deployment step that removes the normalization's cost): with the BN's
running statistics fixed, ``bn(conv(x))`` is a convolution with rescaled weights and a shifted
bias.

>>> import ember
>>> conv, bn = ember.nn.Conv2d(2, 3, 1).eval(), ember.nn.BatchNorm2d(3).eval()
>>> x = ember.randn(1, 2, 4, 4)
>>> ember.allclose(fuse_conv_bn_eval(conv, bn)(x), bn(conv(x)), atol=1e-6)
True
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import ember
from ember import Tensor
from ember.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]

M = TypeVar("M")


def _bn_terms(bn_rm: Tensor, bn_rv: Tensor, bn_eps: float, bn_w: Tensor | None,
              bn_b: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    if bn_w is None:
        bn_w = ember.ones_like(bn_rm)
    if bn_b is None:
        bn_b = ember.zeros_like(bn_rm)
    return bn_w, bn_b, ember.rsqrt(bn_rv + bn_eps)


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution followed by a batch norm with running statistics
    ``bn_rm``/``bn_rv``: ``w * (gamma / sqrt(var + eps))`` per output channel (dim 1 of a
    transposed convolution's weight, else dim 0) and ``(b - mean) * gamma / sqrt(var + eps) +
    beta``. A missing conv bias counts as zeros, a missing gamma/beta as ones/zeros.

    >>> import ember
    >>> w, b = fuse_conv_bn_weights(ember.ones(2, 1, 1, 1), None, ember.zeros(2), ember.ones(2),
    ...                             0.0, None, None)
    >>> w.flatten().tolist(), b.tolist()
    ([1.0, 1.0], [0.0, 0.0])
    """
    ch = conv_w.shape[1 if transpose else 0] if conv_w.dim() > 1 else -1
    if conv_w.dim() < 3 or bn_rm.numel() != ch:
        # broadcasting would otherwise fold one statistic into every channel, or grow a
        # one-channel convolution into several: a layer that computes something else
        raise RuntimeError(
            f"fuse_conv_bn_weights: the convolution weight of shape {tuple(conv_w.shape)} has "
            f"{ch} output channels (dim {1 if transpose else 0}"
            f"{', transpose=True' if transpose else ''}) but the batch norm has "
            f"{bn_rm.numel()} running statistics; they must match")
    conv_weight_dtype = conv_w.dtype
    conv_bias_dtype = conv_b.dtype if conv_b is not None else conv_weight_dtype
    if conv_b is None:
        conv_b = ember.zeros_like(bn_rm)
    bn_w, bn_b, var_rsqrt = _bn_terms(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    shape = [1] * conv_w.dim()
    shape[1 if transpose else 0] = -1
    fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dtype=conv_weight_dtype)
    fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dtype=conv_bias_dtype)
    return (Parameter(fused_w.detach(), conv_w.requires_grad),
            Parameter(fused_b.detach(), conv_b.requires_grad))


def fuse_conv_bn_eval(conv: M, bn: Any, transpose: bool = False) -> M:
    """A copy of ``conv`` (an eval-mode Conv1d/2d/3d or, with ``transpose=True``, ConvTranspose)
    computing ``bn(conv(x))`` for the eval-mode batch norm ``bn``; the copy always has a bias.

    >>> import ember
    >>> conv = ember.nn.Conv2d(1, 2, 1, bias=False).eval()
    >>> fuse_conv_bn_eval(conv, ember.nn.BatchNorm2d(2).eval()).bias is not None
    True
    """
    if conv.training or bn.training:  # type: ignore[attr-defined]
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("fuse_conv_bn_eval: the batch norm must track running statistics "
                         "(track_running_stats=True)")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(  # type: ignore[attr-defined]
        fused.weight, fused.bias, bn.running_mean, bn.running_var,  # type: ignore[attr-defined]
        bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor | None,
                           bn_b: Tensor | None) -> tuple[Parameter, Parameter]:
    """The weight and bias of a linear layer followed by a batch norm over its outputs (see
    :func:`fuse_conv_bn_weights`).

    >>> import ember
    >>> w, b = fuse_linear_bn_weights(ember.eye(2), ember.ones(2), ember.ones(2), ember.ones(2),
    ...                               0.0, None, None)
    >>> b.tolist()
    [0.0, 0.0]
    """
    if linear_b is None:
        linear_b = ember.zeros_like(bn_rm)
    bn_w, bn_b, var_rsqrt = _bn_terms(bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    scale = bn_w * var_rsqrt
    fused_w = linear_w * scale.unsqueeze(-1)
    fused_b = (linear_b - bn_rm) * scale + bn_b
    return (Parameter(fused_w.detach(), linear_w.requires_grad),
            Parameter(fused_b.detach(), linear_b.requires_grad))


def fuse_linear_bn_eval(linear: M, bn: Any) -> M:
    """A copy of the eval-mode ``linear`` computing ``bn(linear(x))`` for the eval-mode
    BatchNorm1d ``bn`` (over the linear layer's outputs, or a single feature broadcast).

    >>> import ember
    >>> lin, bn = ember.nn.Linear(3, 2).eval(), ember.nn.BatchNorm1d(2).eval()
    >>> x = ember.randn(4, 3)
    >>> ember.allclose(fuse_linear_bn_eval(lin, bn)(x), bn(lin(x)), atol=1e-6)
    True
    """
    if linear.training or bn.training:  # type: ignore[attr-defined]
        raise AssertionError("Fusion only for eval!")
    out = linear.out_features  # type: ignore[attr-defined]
    if not (out == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or "
                             "bn.num_features must be 1")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("fuse_linear_bn_eval: the batch norm must track running statistics "
                         "(track_running_stats=True)")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(  # type: ignore[attr-defined]
        fused.weight, fused.bias, bn.running_mean, bn.running_var,  # type: ignore[attr-defined]
        bn.eps, bn.weight, bn.bias)
    return fused
