"""``ember.nn.functional``: the functional form of the layers, under PyTorch's names.

Most functions are thin wrappers over ember-core ops (``ops/nn.yaml``) that add PyTorch's
argument handling (ints or tuples, ``None`` defaults, legacy ``size_average``/``reduce``) and
checks with readable errors; a few (pad's reflect/replicate/circular modes, interpolate,
pixel_shuffle, several losses) are composites of existing differentiable ops.

>>> import ember
>>> import ember.nn.functional as F
>>> F.linear(ember.ones(2, 3), ember.ones(4, 3), ember.zeros(4)).tolist()
[[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings
from typing import Any, Callable, Sequence

import ember
from ember import Tensor, _argcheck
from ember._memory_format import _suggest as _suggest_memory_format
from ember.overrides import (  # noqa: F401  (as torch.nn.functional re-exports them)
    handle_torch_function,
    has_torch_function,
    has_torch_function_unary,
    has_torch_function_variadic,
)
from ember.sparse import SparseTensor as _SparseTensor

__all__ = [
    # activations
    "relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "prelu", "elu", "elu_", "selu",
    "selu_", "celu", "celu_", "gelu", "silu", "mish", "tanh", "sigmoid", "hardtanh",
    "hardtanh_", "rrelu", "hardsigmoid", "hardswish", "softplus", "softsign", "logsigmoid", "softmax", "gumbel_softmax",
    "log_softmax", "softmin", "glu", "threshold", "threshold_", "rrelu_", "tanhshrink", "softshrink", "hardshrink",
    # linear / conv
    "linear", "bilinear", "grouped_mm", "linear_cross_entropy", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "unfold", "fold",
    # pooling
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
    # normalization
    "batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "normalize",
    "local_response_norm",
    # dropout
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    # sparse
    "embedding", "embedding_bag", "one_hot",
    # shape
    "pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    # distance
    "cosine_similarity", "pairwise_distance", "pdist",
    # losses
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "hinge_embedding_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "ctc_loss",
    # attention
    "scaled_dot_product_attention", "multi_head_attention_forward",
    # sampling (ember.nn._sampling)
    "affine_grid", "grid_sample", "max_unpool1d", "max_unpool2d", "max_unpool3d",
]

_C = ember._C
_addmm = _C.addmm  # the binding itself: linear's own __torch_function__ check has run already


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``target`` without growing it."""
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _tuple(v: Any, n: int, name: str, op: str) -> list[int]:
    """An int or a length-n sequence of ints as a list of n ints."""
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    try:
        vs = list(v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got "
                        f"{type(v).__name__} {v!r}") from None
    if len(vs) == 1 and n > 1:
        vs = vs * n
    if len(vs) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in vs):
        # (a RuntimeError, as PyTorch's length checks of these arguments)
        raise RuntimeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return vs


def _require_tensors(op: str, **args: Any) -> None:
    """A TypeError naming op and the argument when one of args is not a Tensor (None included)."""
    for name, value in args.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be a Tensor, not "
                            f"{_argcheck.not_a_tensor(value)}")


def _into_out(op: str, input: Tensor, out: Any, compute: Callable[[], Tensor]) -> Tensor:
    """compute(), or, with out=, its result written into ``out``: as torch's activations that
    take out= (gelu, softplus, logsigmoid, hardshrink, softshrink), out must have the result's
    exact dtype and nothing may require grad (out= is not differentiable)."""
    if out is None:
        return compute()
    if not isinstance(out, Tensor):
        raise TypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if ember.is_grad_enabled() and (getattr(input, "requires_grad", False) or out.requires_grad):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    res = compute()
    _C._prepare_out(out, res, op, True)
    return out.copy_(res)


def _check_dim(op: str, input: Tensor, dims: Sequence[int], what: str) -> None:
    _require_tensors(op, input=input)
    if input.ndim not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        raise RuntimeError(
            f"{op}: expected {want} input ({what}), got {input.ndim}-D input of shape "
            f"{_shape(input)}"
        )


# ---- activations ------------------------------------------------------------------------------
def _inplace_result(input: Tensor, out: Tensor) -> Tensor:
    """Writes out into input (for ``inplace=True`` where the core has no in-place kernel: rrelu
    in training, the dropouts)."""
    input.copy_(out)
    return input


def _inplace_source(input: Tensor, inplace: bool) -> Tensor:
    """What an ``inplace=True`` activation whose backward needs its input computes from: a copy
    of the input when autograd records the op (the write into input would otherwise invalidate
    the saved input, as the original value PyTorch keeps for such in-place ops), else the input
    itself."""
    if inplace and input.requires_grad and ember.is_grad_enabled():
        return input.clone()
    return input


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(0, x)``.

    >>> import ember
    >>> relu(ember.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    _require_tensors("relu", input=input)
    return input.relu_() if inplace else input.relu()


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    _require_tensors("relu_", input=input)
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(0, x), 6)``.

    >>> import ember
    >>> relu6(ember.tensor([-1.0, 7.0])).tolist()
    [0.0, 6.0]
    """
    _require_tensors("relu6", input=input)
    if _is_integral(input):
        return _integer_hardtanh("relu6", input, 0, 6, inplace)
    return input.relu6_() if inplace else _C.relu6(input)  # relu6_: hardtanh's kernel into input


def _is_integral(t: Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex()


def _integer_hardtanh(op: str, input: Tensor, lo: float, hi: float, inplace: bool) -> Tensor:
    """hardtanh / relu6 of an integer tensor, as PyTorch's: a clamp to the bounds converted to
    the integer type (truncated); bool inputs are refused."""
    if input.dtype == ember.bool:
        raise RuntimeError(f"{op}: Bool inputs not supported for hardtanh")
    try:
        lo_i, hi_i = int(lo), int(hi)
    except (OverflowError, ValueError):  # an infinite or NaN bound
        raise RuntimeError(f"{op}: min_val ({lo}) and max_val ({hi}) cannot be converted to "
                           f"the integer type {input.dtype} of the input") from None
    if input.dtype == ember.uint8 and min(lo_i, hi_i) < 0:  # (-1 would wrap to 255: x -> 1)
        raise RuntimeError(f"{op}: cannot do hardtanh on an unsigned type with negative limits "
                           f"(min_val {lo}, max_val {hi})")
    return input.clamp_(lo_i, hi_i) if inplace else input.clamp(lo_i, hi_i)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` for x > 0, else ``negative_slope * x``.

    >>> import ember
    >>> leaky_relu(ember.tensor([-2.0, 2.0]), 0.5).tolist()
    [-1.0, 2.0]
    """
    _require_tensors("leaky_relu", input=input)
    if inplace:  # one kernel writing into input; its backward reads the result
        return input.leaky_relu_(negative_slope)
    return _C.leaky_relu(input, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu` (with autograd, ``negative_slope`` must be >= 0: the
    backward is computed from the result, as PyTorch's).

    >>> import ember
    >>> x = ember.tensor([-2.0, 2.0])
    >>> leaky_relu_(x, 0.5) is x, x.tolist()
    (True, [-1.0, 2.0])
    """
    _require_tensors("leaky_relu_", input=input)
    return input.leaky_relu_(negative_slope)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` for x > 0, else ``weight * x``; weight has 1 or C (= input.shape[1], 1 for input of
    fewer than 2 dims) elements.

    >>> import ember
    >>> prelu(ember.tensor([-2.0, 2.0]), ember.tensor([0.25])).tolist()
    [-0.5, 2.0]
    """
    _require_tensors("prelu", input=input, weight=weight)
    n = weight.numel()
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: weight must be 0-D or 1-D, got shape {_shape(weight)}")
    if n != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1  # (a 1-D input is one channel)
        if n != channels:
            where = "dim 1" if input.ndim >= 2 else "an input of fewer than 2 dims is one channel"
            raise RuntimeError(
                f"prelu: weight has {n} elements but the input of shape {_shape(input)} has "
                f"{channels} channels ({where}); expected 1 or {channels} weights"
            )
        if input.ndim >= 2:
            weight = weight.reshape([n] + [1] * (input.ndim - 2))
    else:
        weight = weight.reshape(())
    return ember.where(input > 0, input, input * weight)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` for x > 0, else ``alpha * (exp(x) - 1)``.

    >>> import ember
    >>> elu(ember.tensor([0.0, 1.0])).tolist()
    [0.0, 1.0]
    """
    _require_tensors("elu", input=input)
    return input.elu_(alpha) if inplace else _C.elu(input, alpha)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu` (with autograd, ``alpha`` must be >= 0: the backward is computed
    from the result, as PyTorch's).

    >>> import ember
    >>> x = ember.tensor([0.0, 1.0])
    >>> elu_(x) is x, x.tolist()
    (True, [0.0, 1.0])
    """
    _require_tensors("elu_", input=input)
    return input.elu_(alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with PyTorch's fixed self-normalizing constants.

    >>> import ember
    >>> round(selu(ember.tensor([1.0])).item(), 4)
    1.0507
    """
    _require_tensors("selu", input=input)
    return input.selu_() if inplace else _C.selu(input)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    _require_tensors("selu_", input=input)
    return input.selu_()


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    >>> import ember
    >>> celu(ember.tensor([2.0])).tolist()
    [2.0]
    """
    if alpha == 0:
        # RuntimeError, as PyTorch's "ZeroDivisionError: alpha cannot be 0 for CELU"
        raise RuntimeError("celu: alpha must not be 0 (it divides the input)")
    _require_tensors("celu", input=input)
    return input.celu_(alpha) if inplace else _C.celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def gelu(input: Tensor, *, approximate: str = "none", out: Tensor | None = None) -> Tensor:
    """``x * Phi(x)``; ``approximate='tanh'`` uses the tanh approximation. ``out=`` takes a
    tensor of the input's dtype, as PyTorch's.

    >>> import ember
    >>> gelu(ember.tensor([0.0])).tolist()
    [0.0]
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _into_out("gelu", input, out, lambda: _C.gelu(input, approximate=approximate))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``.

    >>> import ember
    >>> silu(ember.tensor([0.0])).tolist()
    [0.0]
    """
    _require_tensors("silu", input=input)
    if input.is_complex():  # torch takes complex x too
        r = input * input.sigmoid()
        return input.copy_(r) if inplace else r
    return input.silu_() if inplace else _C.silu(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``.

    >>> import ember
    >>> mish(ember.tensor([0.0])).tolist()
    [0.0]
    """
    _require_tensors("mish", input=input)
    return input.mish_() if inplace else _C.mish(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent.

    >>> import ember
    >>> tanh(ember.tensor([0.0])).tolist()
    [0.0]
    """
    return input.tanh()


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``.

    >>> import ember
    >>> sigmoid(ember.tensor([0.0])).tolist()
    [0.5]
    """
    return input.sigmoid()


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``clamp(x, min_val, max_val)``.

    >>> import ember
    >>> hardtanh(ember.tensor([-3.0, 0.5, 3.0])).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min_val > max_val:  # (a NaN bound passes, as in PyTorch)
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    return _hardtanh("hardtanh", input, min_val, max_val, inplace)


def _hardtanh(op: str, input: Tensor, min_val: float, max_val: float, inplace: bool) -> Tensor:
    _require_tensors(op, input=input)
    if _is_integral(input):
        return _integer_hardtanh(op, input, min_val, max_val, inplace)
    if not min_val <= max_val:  # a NaN bound (or hardtanh_'s crossed bounds): clamp's values
        return input.clamp_(min_val, max_val) if inplace else input.clamp(min_val, max_val)
    return input.hardtanh_(min_val, max_val) if inplace else _C.hardtanh(input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`; like PyTorch's, it takes crossed bounds (max_val wins)."""
    return _hardtanh("hardtanh_", input, min_val, max_val, True)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``clamp(x / 6 + 1/2, 0, 1)``.

    >>> import ember
    >>> hardsigmoid(ember.tensor([0.0])).tolist()
    [0.5]
    """
    _require_tensors("hardsigmoid", input=input)
    return input.hardsigmoid_() if inplace else _C.hardsigmoid(input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * hardsigmoid(x)``.

    >>> import ember
    >>> hardswish(ember.tensor([3.0])).tolist()
    [3.0]
    """
    _require_tensors("hardswish", input=input)
    return input.hardswish_() if inplace else _C.hardswish(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0, *,
             out: Tensor | None = None) -> Tensor:
    """``log(1 + exp(beta * x)) / beta`` (linear above threshold). ``out=`` takes a tensor of
    the input's dtype, as PyTorch's.

    >>> import ember
    >>> round(softplus(ember.tensor([0.0])).item(), 4)
    0.6931
    """
    return _into_out("softplus", input, out, lambda: _C.softplus(input, beta, threshold))


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``.

    >>> import ember
    >>> softsign(ember.tensor([1.0])).tolist()
    [0.5]
    """
    _require_tensors("softsign", input=input)
    if input.dtype == ember.bool:  # (PyTorch's |x| has no bool kernel)
        raise ember.DtypeNotImplementedError("softsign: not implemented for dtype bool")
    if not (input.is_floating_point() or input.is_complex()):  # integers promote, as in torch
        input = input.to(ember.get_default_dtype())
    if input.is_complex():  # torch's x / (1 + |x|) takes complex x too
        return input / (input.abs() + 1)
    return _C.softsign(input)


def logsigmoid(input: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``log(sigmoid(x))`` computed stably. ``out=`` takes a tensor of the input's dtype, as
    PyTorch's.

    >>> import ember
    >>> round(logsigmoid(ember.tensor([0.0])).item(), 4)
    -0.6931
    """
    return _into_out("logsigmoid", input, out, lambda: _C.logsigmoid(input))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where x > threshold, else ``value``.

    >>> import ember
    >>> threshold(ember.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
    [-1.0, 2.0]
    """
    _require_tensors("threshold", input=input)
    return input.threshold_(threshold, value) if inplace else _C.threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return globals()["threshold"](input, threshold, value, inplace=True)

def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``.

    >>> import ember
    >>> tanhshrink(ember.tensor([0.0])).tolist()
    [0.0]
    """
    return input - input.tanh()


def softshrink(input: Tensor, lambd: float = 0.5, *, out: Tensor | None = None) -> Tensor:
    """``x - lambd`` above lambd, ``x + lambd`` below -lambd, else 0. ``out=`` takes a tensor
    of the input's dtype, as PyTorch's.

    >>> import ember
    >>> softshrink(ember.tensor([1.0, 0.2, -1.0])).tolist()
    [0.5, 0.0, -0.5]
    """
    if not input.is_floating_point():
        raise ember.DtypeNotImplementedError(
            f"softshrink: expected a floating-point input, got {input.dtype}")
    top = ember.finfo(input.dtype).max
    if not 0 <= lambd <= top:  # (NaN too; RuntimeError, as PyTorch's)
        raise RuntimeError(f"softshrink: lambd must be in [0, {top}] for input dtype "
                           f"{input.dtype}, got {lambd}")
    # x * 0 inside the band: a signed zero, and NaN passes through as in torch
    return _into_out("softshrink", input, out, lambda: ember.where(
        input > lambd, input - lambd, ember.where(input < -lambd, input + lambd, input * 0)))


def hardshrink(input: Tensor, lambd: float = 0.5, *, out: Tensor | None = None) -> Tensor:
    """``x`` where |x| > lambd, else 0. ``out=`` takes a tensor of the input's dtype, as
    PyTorch's.

    >>> import ember
    >>> hardshrink(ember.tensor([1.0, 0.2])).tolist()
    [1.0, 0.0]
    """
    _require_tensors("hardshrink", input=input)
    if not input.is_floating_point():  # PyTorch's kernel is floating only (complex x was kept
        raise ember.DtypeNotImplementedError(  # whole where |x| > lambd)
            f"hardshrink: not implemented for dtype {input.dtype}")
    # zero exactly inside [-lambd, lambd], so NaN passes through as in torch
    return _into_out("hardshrink", input, out,
                     lambda: ember.where(input.abs() <= lambd, ember.zeros_like(input), input))


def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``exp(x) / sum(exp(x))`` along dim (dtype casts the input first).

    >>> import ember
    >>> softmax(ember.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return _C.softmax(input, dim, dtype)


def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``log(softmax(x))`` along dim, computed stably.

    >>> import ember
    >>> round(log_softmax(ember.tensor([0.0, 0.0]), dim=0)[0].item(), 4)
    -0.6931
    """
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return _C.log_softmax(input, dim, dtype)


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A sample from the Gumbel-softmax (concrete) distribution over ``dim``:
    ``softmax((logits + g) / tau)`` with standard Gumbel noise ``g`` from the default
    generator. ``hard=True`` returns the one-hot of the argmax in the forward pass and the soft
    sample's gradient in the backward pass (straight-through). ``eps`` is unused, as in PyTorch.

    >>> import ember
    >>> y = gumbel_softmax(ember.zeros(2, 4), tau=0.5, hard=True)
    >>> y.sum(-1).tolist(), sorted(set(y.flatten().tolist()))
    ([1.0, 1.0], [0.0, 1.0])
    """
    if not isinstance(logits, Tensor):
        raise TypeError(f"gumbel_softmax: logits must be a Tensor, got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise TypeError(f"gumbel_softmax: logits must be floating point, got {logits.dtype}")
    # (PyTorch takes any tau: a negative one favours the least likely class)
    # -log(Exp(1)) is standard Gumbel
    gumbels = -ember.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = ember.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def softmin(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """``softmax(-x)`` along dim.

    >>> import ember
    >>> softmin(ember.tensor([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _C.softmax(-input, dim, None)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: negative slopes drawn from U(lower, upper) per element when
    training, their mean ``(lower + upper) / 2`` otherwise.

    >>> import ember
    >>> rrelu(ember.tensor([-1.0, 2.0]), 0.5, 0.5).tolist()
    [-0.5, 2.0]
    """
    # RuntimeError as PyTorch's (and NaN or infinite bounds are refused too)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise RuntimeError(f"rrelu: lower ({lower}) and upper ({upper}) must be finite")
    if lower > upper:
        raise RuntimeError(f"rrelu: lower ({lower}) must not exceed upper ({upper})")
    if not training:  # the mean slope: leaky_relu (in place: one kernel writing into input)
        if inplace:
            return input.leaky_relu_((lower + upper) / 2)
        return _C.leaky_relu(input, (lower + upper) / 2)
    source, input = input, _inplace_source(input, inplace)
    slope = ember.empty(list(_shape(input)), dtype=input.dtype).uniform_(lower, upper)
    out = ember.where(input >= 0, input, input * slope)
    return _inplace_result(source, out) if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)

def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` where a, b are the halves of input along dim.

    >>> import ember
    >>> glu(ember.tensor([2.0, 0.0])).tolist()
    [1.0]
    """
    _require_tensors("glu", input=input)
    if input.ndim == 0:
        raise RuntimeError("glu: does not support 0-D (scalar) input")
    if not -input.ndim <= dim < input.ndim:  # (was a bare "tuple index out of range")
        raise IndexError(f"glu: dim {dim} is out of range for input of shape {_shape(input)} "
                         f"(expected to be in range of [{-input.ndim}, {input.ndim - 1}])")
    n = input.shape[dim]
    if n % 2 != 0:
        raise RuntimeError(
            f"glu: halving dimension {dim} of input {_shape(input)} must have an even size, got {n}"
        )
    if not input.is_floating_point():  # (integers and complex: PyTorch's kernel has none)
        raise ember.DtypeNotImplementedError(f"glu: not implemented for dtype {input.dtype}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def normalize(
    input: Tensor, p: float = 2.0, dim: int | Sequence[int] | None = 1, eps: float = 1e-12,
    out: Tensor | None = None
) -> Tensor:
    """``x / max(||x||_p, eps)`` along dim (an int, a tuple / list of dims normalized
    together, or None for all of them, as in PyTorch).

    >>> import ember
    >>> normalize(ember.tensor([[3.0, 4.0]], dtype=ember.float64)).tolist()
    [[0.6, 0.8]]
    >>> normalize(ember.tensor([[3.0], [4.0]], dtype=ember.float64), dim=(0, 1)).tolist()
    [[0.6], [0.8]]
    """
    dims = None if dim is None else list(dim) if isinstance(dim, (tuple, list)) else [dim]
    if dims is not None and not all(isinstance(d, numbers.Integral) for d in dims):
        bad = next(d for d in dims if not isinstance(d, numbers.Integral))
        raise TypeError(f"normalize(): argument 'dim' must be an int or a tuple of ints, not "
                        f"{type(bad).__name__}")
    denom = input.norm(_float_number(p), dims, True).clamp(min=_float_number(eps)).expand_as(input)
    res = input / denom
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"normalize(): argument 'out' must be Tensor, not "
                            f"{type(out).__name__}")
        if ember.is_grad_enabled() and (res.requires_grad or out.requires_grad):
            # out= is not differentiable (torch's refusal comes from its div(out=))
            raise RuntimeError("normalize(): functions with out=... arguments don't support "
                               "automatic differentiation, but one of the arguments requires "
                               "grad.")
        _C._prepare_out(out, res, "normalize")
        out.copy_(res)
        return out
    return res


def _sparse_linear(input: Tensor, weight: Any, bias: Tensor | None) -> Tensor:
    """linear with a sparse (COO / CSR / CSC / BSR / BSC) weight: the sparse-dense product
    weight @ input^T over the flattened leading dims, as torch accepts."""
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"linear: expected input of shape (*, {weight.shape[1] if weight.ndim == 2 else '?'})"
            f" for a 2-D sparse weight, got input {_shape(input)} and weight {_shape(weight)}"
        )
    lead = tuple(input.shape[:-1])
    flat = input.reshape(math.prod(lead), weight.shape[1])
    out = (weight @ flat.t()).t()
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, weight.shape[0])


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: weight (out_features, in_features), input (*, in_features).

    >>> import ember
    >>> linear(ember.ones(3), ember.ones(2, 3)).tolist()
    [3.0, 3.0]
    """
    if isinstance(weight, _SparseTensor):
        return _sparse_linear(input, weight, bias)
    if bias is not None:
        # The common call, (N, in) input with a bias of its dtype, in one addmm and without the
        # checks below (they cost as much as the product at small sizes); any error it raises
        # is raised again by the checked path, which names linear and the shapes.
        try:
            if input.ndim == 2 and bias.dtype == input.dtype:
                return _addmm(bias, input, weight.t())
        except (RuntimeError, TypeError, AttributeError, ValueError):
            pass
    _require_tensors("linear", input=input, weight=weight)
    if weight.ndim not in (1, 2):
        raise RuntimeError(
            f"linear: weight must be 1-D or 2-D (out_features, in_features), got shape {_shape(weight)}"
        )
    in_features = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != in_features:
        raise RuntimeError(
            f"linear: expected input of shape (*, {in_features}) for weight of shape "
            f"{_shape(weight)}, got input of shape {_shape(input)}"
        )
    if bias is not None:
        # torch adds the bias by broadcasting: (out,), (), (1, out) or (N, out) for (N, in) input
        expected = (weight.shape[0],) if weight.ndim == 2 else ()
        out_shape = (*input.shape[:-1], *expected)
        if not _broadcasts_to(_shape(bias), out_shape):
            raise RuntimeError(
                f"linear: expected bias of shape {expected} (or one that broadcasts to the output "
                f"shape {out_shape}) for weight of shape {_shape(weight)}, got {_shape(bias)}"
            )
    if input.ndim >= 2 and weight.ndim == 2:
        # one 2-D product over all leading dims, so that the weight's gradient is one product too
        # (not a batched product summed over the batch); with a bias, one addmm: the bias is
        # added before the product's single rounding (as PyTorch does; a 16-bit result rounded
        # twice would differ in the last bit)
        lead = tuple(input.shape[:-1])
        flat = input.reshape(math.prod(lead), in_features) if input.ndim > 2 else input
        # (a bias of more dims than (out,) broadcasts against the unflattened result below)
        if bias is not None and bias.dtype == flat.dtype and (input.ndim == 2 or bias.ndim <= 1):
            out = ember.addmm(bias, flat, weight.t())
            bias = None
        else:
            out = ember.mm(flat, weight.t())  # mm, as in PyTorch: dispatch modes count an mm
        if input.ndim > 2:
            out = out.reshape(*lead, weight.shape[0])
    else:
        out = input.matmul(weight.t() if weight.ndim == 2 else weight)
    if bias is not None:
        # added in place in PyTorch (output.add_(bias)): the result keeps the product's dtype,
        # a 0-d float32 bias does not make a float16 linear float32
        summed = out + bias
        out = summed if summed.dtype == out.dtype else summed.to(out.dtype)
    return out


def _group_ends(offs: Tensor | None, length: int, what: str) -> list[tuple[int, int]]:
    if offs is None:
        raise ValueError(f"grouped_mm: offs is required when {what} is jagged (a 2-D operand)")
    if not isinstance(offs, Tensor) or offs.ndim != 1 or offs.dtype != ember.int32:
        raise ValueError(f"grouped_mm: offs must be a 1-D int32 tensor, got "
                         f"{getattr(offs, 'dtype', type(offs).__name__)} with shape "
                         f"{tuple(getattr(offs, 'shape', ()))}")
    ends = [int(e) for e in offs.tolist()]
    start, spans = 0, []
    for e in ends:
        if e < start or e > length:
            raise ValueError(f"grouped_mm: offs {ends} must increase and stay within the "
                             f"{length} of the jagged dimension ({what})")
        spans.append((start, e))
        start = e
    return spans


def grouped_mm(mat_a: Tensor, mat_b: Tensor, *, offs: Tensor | None = None,
               bias: Tensor | None = None, out_dtype: ember.dtype | None = None) -> Tensor:
    """A matrix product per group with jagged group sizes (mixture-of-experts layers).

    2-D ``mat_a`` (T, K) with 3-D ``mat_b`` (G, K, N): rows ``offs[i-1]:offs[i]`` of mat_a times
    ``mat_b[i]`` (rows past ``offs[-1]`` are 0); 3-D with 3-D: a batched product; 2-D (M, K)
    with 2-D (K, N): ``K`` split by offs, giving (G, M, N); 3-D (G, M, K) with 2-D (K, N):
    ``N`` split by offs, giving (M, N). Differentiable (a product per group).

    >>> import ember
    >>> a, b = ember.ones(3, 2), ember.ones(2, 2, 4)
    >>> grouped_mm(a, b, offs=ember.tensor([1, 3], dtype=ember.int32)).shape
    ember.Size([3, 4])
    """
    if mat_a.ndim not in (2, 3) or mat_b.ndim not in (2, 3):
        raise ValueError(f"grouped_mm: mat_a and mat_b must be 2-D or 3-D, got "
                         f"{tuple(mat_a.shape)} and {tuple(mat_b.shape)}")
    if mat_a.dtype != mat_b.dtype:
        raise ValueError(f"grouped_mm: mat_a and mat_b must share a dtype, got {mat_a.dtype} "
                         f"and {mat_b.dtype}")
    k_a, k_b = mat_a.shape[-1], mat_b.shape[-2]
    if mat_a.ndim == 3 and mat_b.ndim == 3:
        if offs is not None:
            raise ValueError("grouped_mm: offs must be None when both operands are 3-D")
        if mat_a.shape[0] != mat_b.shape[0] or k_a != k_b:
            raise ValueError(f"grouped_mm: 3-D operands {tuple(mat_a.shape)} and "
                             f"{tuple(mat_b.shape)} need the same groups and inner size")
        parts = [mat_a.bmm(mat_b)]
        out = parts[0]
    elif mat_a.ndim == 2 and mat_b.ndim == 3:
        if k_a != k_b:
            raise ValueError(f"grouped_mm: mat_a {tuple(mat_a.shape)} and mat_b "
                             f"{tuple(mat_b.shape)} differ in the inner size")
        spans = _group_ends(offs, mat_a.shape[0], "mat_a's rows")
        if len(spans) != mat_b.shape[0]:
            raise ValueError(f"grouped_mm: {len(spans)} offsets for {mat_b.shape[0]} groups")
        pieces = [mat_a[s:e].matmul(mat_b[i]) for i, (s, e) in enumerate(spans)]
        tail = mat_a.shape[0] - (spans[-1][1] if spans else 0)
        pieces.append(mat_a.new_zeros(tail, mat_b.shape[-1]))
        out = ember.cat(pieces, 0)
    elif mat_a.ndim == 2:
        if k_a != k_b:
            raise ValueError(f"grouped_mm: mat_a {tuple(mat_a.shape)} and mat_b "
                             f"{tuple(mat_b.shape)} differ in the inner size")
        spans = _group_ends(offs, k_a, "the inner dimension")
        out = ember.stack([mat_a[:, s:e].matmul(mat_b[s:e]) for s, e in spans], 0)
    else:
        if k_a != k_b:
            raise ValueError(f"grouped_mm: mat_a {tuple(mat_a.shape)} and mat_b "
                             f"{tuple(mat_b.shape)} differ in the inner size")
        spans = _group_ends(offs, mat_b.shape[-1], "mat_b's columns")
        if len(spans) != mat_a.shape[0]:
            raise ValueError(f"grouped_mm: {len(spans)} offsets for {mat_a.shape[0]} groups")
        out = ember.cat([mat_a[i].matmul(mat_b[:, s:e]) for i, (s, e) in enumerate(spans)], 1)
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.to(out_dtype)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``.

    >>> import ember
    >>> bilinear(ember.ones(1, 2), ember.ones(1, 3), ember.ones(4, 2, 3)).tolist()
    [[6.0, 6.0, 6.0, 6.0]]
    """
    if weight.ndim != 3:
        raise RuntimeError(
            f"bilinear: weight must be 3-D (out_features, in1_features, in2_features), got shape "
            f"{_shape(weight)}"
        )
    out_f, in1, in2 = weight.shape
    if input1.ndim == 0 or input1.shape[-1] != in1:
        raise RuntimeError(
            f"bilinear: expected input1 of shape (*, {in1}) for weight of shape {_shape(weight)}, "
            f"got {_shape(input1)}"
        )
    if input2.ndim == 0 or input2.shape[-1] != in2:
        raise RuntimeError(
            f"bilinear: expected input2 of shape (*, {in2}) for weight of shape {_shape(weight)}, "
            f"got {_shape(input2)}"
        )
    if _shape(input1)[:-1] != _shape(input2)[:-1]:
        raise RuntimeError(
            f"bilinear: input1 {_shape(input1)} and input2 {_shape(input2)} must have the same "
            "leading (batch) dimensions"
        )
    if bias is not None and _shape(bias) != (out_f,):
        raise RuntimeError(f"bilinear: expected bias of shape ({out_f},), got {_shape(bias)}")
    lead = _shape(input1)[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    # x1 @ W as one matmul over (in1) -> (n, out, in2), then contract in2 against x2
    t = x1.matmul(weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    out = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, out_f)


# ---- convolution ------------------------------------------------------------------------------
def _conv(op: str, nd: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
          padding: Any, dilation: Any, groups: int) -> Tensor:
    _check_dim(op, input, (nd + 1, nd + 2), f"(N, C, *{nd} spatial dims) or unbatched")
    _require_tensors(op, weight=weight)
    if weight.ndim != nd + 2:
        raise RuntimeError(
            f"{op}: weight must be {nd + 2}-D (out_channels, in_channels / groups, *kernel), got "
            f"shape {_shape(weight)}"
        )
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            # RuntimeError as torch's functional form (its modules raise ValueError)
            raise RuntimeError(f"{op}: padding must be 'same', 'valid' or ints, got {padding!r}")
        if padding == "same" and any(s != 1 for s in stride):
            raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions")
    else:
        padding = _tuple(padding, nd, "padding", op)
    real_op = getattr(_C, op)
    return _complex_conv(op, lambda x, w, b: real_op(x, w, b, stride, padding, dilation, groups),
                         input, weight, bias)


def _complex_conv(op: str, conv: Any, input: Tensor, weight: Tensor,
                  bias: Tensor | None) -> Tensor:
    """``conv(x, w, b)`` for real tensors; a complex convolution (as PyTorch has it) by the
    product rule (xr + i xi) * (wr + i wi) over four real convolutions, bias split alike."""
    if not any(t is not None and t.is_complex() for t in (input, weight, bias)):
        return conv(input, weight, bias)
    if input.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise RuntimeError(
            f"{op}: input, weight and bias must have the same dtype, got {input.dtype}, "
            f"{weight.dtype}" + ("" if bias is None else f" and {bias.dtype}"))
    xr, xi, wr, wi = input.real, input.imag, weight.real, weight.imag
    re = conv(xr, wr, None if bias is None else bias.real) - conv(xi, wi, None)
    im = conv(xr, wi, None if bias is None else bias.imag) + conv(xi, wr, None)
    return _C.complex(re, im)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution of (N, C_in, L) or (C_in, L) input with weight (C_out, C_in/groups, k).

    >>> import ember
    >>> conv1d(ember.ones(1, 1, 4), ember.ones(1, 1, 2)).tolist()
    [[[2.0, 2.0, 2.0]]]
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution of (N, C_in, H, W) or (C_in, H, W) input.

    >>> import ember
    >>> conv2d(ember.ones(1, 1, 3, 3), ember.ones(1, 1, 2, 2)).shape
    ember.Size([1, 1, 2, 2])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-D convolution of (N, C_in, D, H, W) or (C_in, D, H, W) input.

    >>> import ember
    >>> conv3d(ember.ones(1, 1, 2, 2, 2), ember.ones(1, 1, 2, 2, 2)).tolist()
    [[[[[8.0]]]]]
    """
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_t(op: str, nd: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
            padding: Any, output_padding: Any, groups: int, dilation: Any) -> Tensor:
    _check_dim(op, input, (nd + 1, nd + 2), f"(N, C, *{nd} spatial dims)")
    _require_tensors(op, weight=weight)
    if weight.ndim != nd + 2:
        raise RuntimeError(
            f"{op}: weight must be {nd + 2}-D (in_channels, out_channels / groups, *kernel), got "
            f"shape {_shape(weight)}"
        )
    args = (_tuple(stride, nd, "stride", op), _tuple(padding, nd, "padding", op),
            _tuple(output_padding, nd, "output_padding", op), groups,
            _tuple(dilation, nd, "dilation", op))
    real_op = getattr(_C, op)
    return _complex_conv(op, lambda x, w, b: real_op(x, w, b, *args), input, weight, bias)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """1-D transposed convolution; weight (C_in, C_out/groups, k).

    >>> import ember
    >>> conv_transpose1d(ember.ones(1, 1, 2), ember.ones(1, 1, 2)).tolist()
    [[[1.0, 2.0, 1.0]]]
    """
    return _conv_t("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """2-D transposed convolution; weight (C_in, C_out/groups, kh, kw).

    >>> import ember
    >>> conv_transpose2d(ember.ones(1, 1, 2, 2), ember.ones(1, 1, 2, 2)).shape
    ember.Size([1, 1, 3, 3])
    """
    return _conv_t("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """3-D transposed convolution of (N, C_in, D, H, W) or (C_in, D, H, W) input; weight
    (C_in, C_out/groups, kd, kh, kw).

    >>> import ember
    >>> conv_transpose3d(ember.ones(1, 1, 2, 2, 2), ember.ones(1, 1, 2, 2, 2)).shape
    ember.Size([1, 1, 3, 3, 3])
    """
    return _conv_t("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding,
                   groups, dilation)


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """Sliding local blocks of (N, C, H, W) input as columns (N, C * kh * kw, L).

    >>> import ember
    >>> unfold(ember.ones(1, 1, 3, 3), 2).shape
    ember.Size([1, 4, 4])
    """
    _check_dim("unfold", input, (3, 4), "(N, C, H, W) or (C, H, W)")
    t = lambda v, n: _tuple(v, 2, n, "unfold")  # noqa: E731
    return _C.im2col(input, t(kernel_size, "kernel_size"), t(dilation, "dilation"),
                     t(padding, "padding"), t(stride, "stride"))


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """Sums columns (N, C * kh * kw, L) back into (N, C, *output_size); the adjoint of unfold.

    >>> import ember
    >>> fold(ember.ones(1, 4, 4), (3, 3), 2)[0, 0].tolist()
    [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    _check_dim("fold", input, (2, 3), "(N, C * prod(kernel_size), L) or unbatched")
    t = lambda v, n: _tuple(v, 2, n, "fold")  # noqa: E731
    return _C.col2im(input, t(output_size, "output_size"), t(kernel_size, "kernel_size"),
                     t(dilation, "dilation"), t(padding, "padding"), t(stride, "stride"))


# ---- pooling ----------------------------------------------------------------------------------
def _pool_args(op: str, nd: int, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any = 1) -> tuple[list[int], list[int], list[int], list[int]]:
    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else _tuple(
        stride, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    d = _tuple(dilation, nd, "dilation", op)
    for kk, pp in zip(k, p):
        if pp > kk // 2:
            raise RuntimeError(
                f"{op}: padding {p} should be at most half of the kernel size {k}"
            )
    return k, s, p, d


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`max_pool1d` returning ``(output, indices)``."""
    _check_dim("max_pool1d", input, (2, 3), "(N, C, L) or (C, L)")
    k, s, p, d = _pool_args("max_pool1d", 1, kernel_size, stride, padding, dilation)
    return _C.max_pool1d_with_indices(input, k, s, p, d, ceil_mode)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over L of (N, C, L) input.

    >>> import ember
    >>> max_pool1d(ember.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    out, idx = max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`max_pool2d` returning ``(output, indices)`` (flat ``h * W + w`` positions)."""
    _check_dim("max_pool2d", input, (3, 4), "(N, C, H, W) or (C, H, W)")
    k, s, p, d = _pool_args("max_pool2d", 2, kernel_size, stride, padding, dilation)
    return _C.max_pool2d_with_indices(input, k, s, p, d, ceil_mode)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (H, W) of (N, C, H, W) input.

    >>> import ember
    >>> max_pool2d(ember.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    out, idx = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`max_pool3d` returning ``(output, indices)`` (flat ``(d * H + h) * W + w``
    positions)."""
    _check_dim("max_pool3d", input, (4, 5), "(N, C, D, H, W) or (C, D, H, W)")
    k, s, p, d = _pool_args("max_pool3d", 3, kernel_size, stride, padding, dilation)
    return _C.max_pool3d_with_indices(input, k, s, p, d, ceil_mode)


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (D, H, W) of (N, C, D, H, W) or (C, D, H, W) input.

    >>> import ember
    >>> max_pool3d(ember.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
    [[[[[7.0]]]]]
    """
    out, idx = max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (out, idx) if return_indices else out


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over L of (N, C, L) input.

    >>> import ember
    >>> avg_pool1d(ember.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[2.0, 1.0]]]
    """
    _check_dim("avg_pool1d", input, (2, 3), "(N, C, L) or (C, L)")
    k, s, p, _ = _pool_args("avg_pool1d", 1, kernel_size, stride, padding)
    return _C.avg_pool1d(input, k, s, p, ceil_mode, count_include_pad)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Average pooling over (H, W) of (N, C, H, W) input.

    >>> import ember
    >>> avg_pool2d(ember.ones(1, 1, 4, 4), 2).shape
    ember.Size([1, 1, 2, 2])
    """
    _check_dim("avg_pool2d", input, (3, 4), "(N, C, H, W) or (C, H, W)")
    k, s, p, _ = _pool_args("avg_pool2d", 2, kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d: divisor_override must not be 0")  # PyTorch's class
    return _C.avg_pool2d(input, k, s, p, ceil_mode, count_include_pad, divisor_override)


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Average pooling over (D, H, W) of (N, C, D, H, W) or (C, D, H, W) input.

    >>> import ember
    >>> avg_pool3d(ember.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
    [[[[[3.5]]]]]
    """
    _check_dim("avg_pool3d", input, (4, 5), "(N, C, D, H, W) or (C, D, H, W)")
    k, s, p, _ = _pool_args("avg_pool3d", 3, kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool3d: divisor_override must not be 0")  # PyTorch's class
    return _C.avg_pool3d(input, k, s, p, ceil_mode, count_include_pad, divisor_override)


def _lp_kernel_arity(kernel_size: Any, n: int, op: str) -> None:
    """PyTorch unpacks lp_pool2d/3d's kernel_size in Python: a sequence of another length is
    its unpacking ValueError (one value too), before the pooling's own RuntimeError checks."""
    if isinstance(kernel_size, (list, tuple)) and len(kernel_size) != n:
        raise ValueError(f"{op}: kernel_size must be an int or a tuple of {n} ints, got "
                         f"{kernel_size!r}")


def _lp_pool_inf(input: Tensor, norm_type: Any, kernel_size: Any, stride: Any, ceil_mode: bool,
                 max_pool: Callable[..., Any]) -> Tensor | None:
    """The infinite norms, as PyTorch: the max of |x| over each window (p = inf), the min of
    |x| (p = -inf); (sum x^p)^(1/p) gave inf^0 = 1 (and 0^0 = 1). None for a finite p."""
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)) or \
            not math.isinf(norm_type):
        return None
    if norm_type > 0:
        return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``(sum over each window of x^p)^(1/p)`` over L.

    >>> import ember
    >>> lp_pool1d(ember.tensor([[[3.0, 4.0]]]), 2, 2).tolist()
    [[[5.0]]]
    """
    k = _tuple(kernel_size, 1, "kernel_size", "lp_pool1d")
    inf = _lp_pool_inf(input, norm_type, kernel_size, stride, ceil_mode, max_pool1d)
    if inf is not None:
        return inf
    out = avg_pool1d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k[0]).pow(1.0 / norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``(sum over each window of x^p)^(1/p)`` over (H, W).

    >>> import ember
    >>> lp_pool2d(ember.ones(1, 1, 2, 2), 1, 2).tolist()
    [[[[4.0]]]]
    """
    _lp_kernel_arity(kernel_size, 2, "lp_pool2d")
    k = _tuple(kernel_size, 2, "kernel_size", "lp_pool2d")
    inf = _lp_pool_inf(input, norm_type, kernel_size, stride, ceil_mode, max_pool2d)
    if inf is not None:
        return inf
    out = avg_pool2d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k[0] * k[1]).pow(1.0 / norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Tensor:
    """``(sum over each window of x^p)^(1/p)`` over (D, H, W).

    >>> import ember
    >>> lp_pool3d(ember.ones(1, 1, 2, 2, 2), 1, 2).tolist()
    [[[[[8.0]]]]]
    """
    _lp_kernel_arity(kernel_size, 3, "lp_pool3d")
    k = _tuple(kernel_size, 3, "kernel_size", "lp_pool3d")
    inf = _lp_pool_inf(input, norm_type, kernel_size, stride, ceil_mode, max_pool3d)
    if inf is not None:
        return inf
    out = avg_pool3d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu()).mul(k[0] * k[1] * k[2]).pow(1.0 / norm_type)


def _adaptive_size(op: str, input: Tensor, output_size: Any, nd: int) -> list[int]:
    if isinstance(output_size, int) or output_size is None:
        output_size = [output_size] * nd
    sizes = list(output_size)
    if len(sizes) != nd:
        raise RuntimeError(f"{op}: output_size must be an int or {nd} values, got {output_size!r}")
    spatial = _shape(input)[-nd:]
    out = [spatial[i] if v is None else v for i, v in enumerate(sizes)]
    if any((not isinstance(v, int)) or v < 0 for v in out):
        raise RuntimeError(f"{op}: output_size must hold non-negative ints or None, got "
                           f"{output_size!r}")
    return out


def _check_adaptive_nonempty(op: str, input: Tensor, nd: int, spatial_only: bool) -> None:
    """The core's check of an adaptive pool's input (the 0-size output path skips the core):
    PyTorch refuses empty non-batch dims (for adaptive_avg_pool1d/2d only the spatial ones)."""
    shape = _shape(input)
    first = len(shape) - nd if spatial_only else 1
    for d in range(first, len(shape)):
        if shape[d] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(shape)} with dimension "
                               f"{d} being empty")


def _adaptive_empty(input: Tensor, out: list[int], indices: bool) -> Any:
    """The result of an adaptive pool with a 0 output size (torch accepts it): an empty
    (N, C, *out) tensor, a view of the input so that it keeps dtype, device and autograd."""
    if indices and not input.is_floating_point():  # max's own check (torch skips avg's here)
        dt = str(input.dtype).split(".")[-1]
        raise ember.DtypeNotImplementedError(
            f"adaptive_max_pool: expected a floating-point input, got {dt}")
    shape = _shape(input)[:input.ndim - len(out)] + tuple(out)
    d = input.ndim - len(out) + out.index(0)
    values = input.narrow(d, 0, 0).reshape(shape)
    if not indices:
        return values
    return values, ember.zeros(shape, dtype=ember.int64, device=input.device)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, L) input to length output_size.

    >>> import ember
    >>> adaptive_avg_pool1d(ember.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 1).tolist()
    [[[1.5]]]
    """
    _check_dim("adaptive_avg_pool1d", input, (2, 3), "(N, C, L) or (C, L)")
    size = _adaptive_size("adaptive_avg_pool1d", input, output_size, 1)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_avg_pool1d", input, 1, True)
        return _adaptive_empty(input, size, False)
    return _C.adaptive_avg_pool1d(input, size)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, H, W) input to output_size (None keeps that input size).

    >>> import ember
    >>> adaptive_avg_pool2d(ember.ones(1, 1, 5, 7), (2, None)).shape
    ember.Size([1, 1, 2, 7])
    """
    _check_dim("adaptive_avg_pool2d", input, (3, 4), "(N, C, H, W) or (C, H, W)")
    size = _adaptive_size("adaptive_avg_pool2d", input, output_size, 2)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_avg_pool2d", input, 2, True)
        return _adaptive_empty(input, size, False)
    return _C.adaptive_avg_pool2d(input, size)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, D, H, W) input to output_size (None keeps that input size).

    >>> import ember
    >>> adaptive_avg_pool3d(ember.ones(1, 1, 4, 5, 7), (2, None, 3)).shape
    ember.Size([1, 1, 2, 5, 3])
    """
    _check_dim("adaptive_avg_pool3d", input, (4, 5), "(N, C, D, H, W) or (C, D, H, W)")
    size = _adaptive_size("adaptive_avg_pool3d", input, output_size, 3)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_avg_pool3d", input, 3, False)
        return _adaptive_empty(input, size, False)
    return _C.adaptive_avg_pool3d(input, size)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` returning ``(output, indices)``."""
    _check_dim("adaptive_max_pool1d", input, (2, 3), "(N, C, L) or (C, L)")
    size = _adaptive_size("adaptive_max_pool1d", input, output_size, 1)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_max_pool1d", input, 1, False)
        return _adaptive_empty(input, size, True)
    return _C.adaptive_max_pool1d(input, size)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of (N, C, L) input to length output_size.

    >>> import ember
    >>> adaptive_max_pool1d(ember.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    out, idx = adaptive_max_pool1d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` returning ``(output, indices)``."""
    _check_dim("adaptive_max_pool2d", input, (3, 4), "(N, C, H, W) or (C, H, W)")
    size = _adaptive_size("adaptive_max_pool2d", input, output_size, 2)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_max_pool2d", input, 2, False)
        return _adaptive_empty(input, size, True)
    return _C.adaptive_max_pool2d(input, size)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of (N, C, H, W) input to output_size.

    >>> import ember
    >>> adaptive_max_pool2d(ember.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
    [[[[15.0]]]]
    """
    out, idx = adaptive_max_pool2d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,
                                     return_indices: bool = True) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool3d` returning ``(output, indices)``."""
    _check_dim("adaptive_max_pool3d", input, (4, 5), "(N, C, D, H, W) or (C, D, H, W)")
    size = _adaptive_size("adaptive_max_pool3d", input, output_size, 3)
    if 0 in size:
        _check_adaptive_nonempty("adaptive_max_pool3d", input, 3, False)
        return _adaptive_empty(input, size, True)
    return _C.adaptive_max_pool3d(input, size)


def _fractional_max_pool(nd: int, input: Tensor, kernel_size: Any, output_size: Any,
                         output_ratio: Any, _random_samples: Tensor | None
                         ) -> tuple[Tensor, Tensor]:
    op = f"fractional_max_pool{nd}d"
    names = "(N, C, H, W) or (C, H, W)" if nd == 2 else "(N, C, D, H, W) or (C, D, H, W)"
    _check_dim(op, input, (nd + 1, nd + 2), names)
    k = _tuple(kernel_size, nd, "kernel_size", op)
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{op} requires specifying either an output_size or an "
                             "output_ratio")
        ratios = [output_ratio] * nd if isinstance(output_ratio, (int, float)) \
            else list(output_ratio)
        if len(ratios) == 1:
            ratios = ratios * nd
        if len(ratios) != nd or not all(isinstance(r, (int, float)) and 0 < r <= 1
                                        for r in ratios):
            raise ValueError(f"{op}: output_ratio must be a number or a tuple of {nd} numbers "
                             f"in (0, 1], got {output_ratio!r}")
        spatial = _shape(input)[-nd:]
        size = [int(spatial[i] * float(ratios[i])) for i in range(nd)]
    else:
        size = _tuple(output_size, nd, "output_size", op)
    if _random_samples is None:
        batch = 1 if input.ndim == nd + 1 else input.shape[0]
        _random_samples = ember.rand(batch, input.shape[-nd - 1], nd, dtype=input.dtype,
                                     device=input.device)
    elif not isinstance(_random_samples, Tensor):
        raise TypeError(f"{op}: _random_samples must be a Tensor, got "
                        f"{type(_random_samples).__name__}")
    return _C._fractional_max_pool(input, k, size, _random_samples)


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool2d` returning ``(output, indices)`` (flat ``h * W + w``)."""
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool2d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:
    """Fractional max pooling (Graham, 2014) of (N, C, H, W) or (C, H, W) input: ``output_size``
    (or ``output_ratio`` times the input size) windows of ``kernel_size``, whose starts step
    pseudo-randomly by 1 or 2-ish positions. ``_random_samples`` (N, C, 2) in [0, 1), of the
    input's dtype, fixes the windows (ordered (W, H) as in PyTorch); by default drawn with
    ``ember.rand``.

    >>> import ember
    >>> x = ember.arange(16.0).reshape(1, 1, 4, 4)
    >>> fractional_max_pool2d(x, 2, output_size=2, _random_samples=ember.zeros(1, 1, 2)).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    out, idx = _fractional_max_pool(2, input, kernel_size, output_size, output_ratio,
                                    _random_samples)
    return (out, idx) if return_indices else out


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size: Any, output_size: Any = None,
                                       output_ratio: Any = None, return_indices: bool = False,
                                       _random_samples: Tensor | None = None
                                       ) -> tuple[Tensor, Tensor]:
    """:func:`fractional_max_pool3d` returning ``(output, indices)`` (flat
    ``(d * H + h) * W + w``)."""
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio,
                                _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size: Any, output_size: Any = None,
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Tensor | None = None) -> Any:
    """Fractional max pooling of (N, C, D, H, W) or (C, D, H, W) input (see
    :func:`fractional_max_pool2d`); ``_random_samples`` is (N, C, 3), ordered (D, H, W).

    >>> import ember
    >>> x = ember.arange(8.0).reshape(1, 1, 2, 2, 2)
    >>> fractional_max_pool3d(x, 1, output_size=1, _random_samples=ember.zeros(1, 1, 3)).item()
    7.0
    """
    out, idx = _fractional_max_pool(3, input, kernel_size, output_size, output_ratio,
                                    _random_samples)
    return (out, idx) if return_indices else out


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling of (N, C, D, H, W) input to output_size (None keeps that input size).

    >>> import ember
    >>> adaptive_max_pool3d(ember.arange(8.0).reshape(1, 1, 2, 2, 2), 1).tolist()
    [[[[[7.0]]]]]
    """
    out, idx = adaptive_max_pool3d_with_indices(input, output_size)
    return (out, idx) if return_indices else out


# ---- normalization ----------------------------------------------------------------------------
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization of (N, C, *) input over every dim but 1.

    In training the batch statistics are used and running_mean / running_var (if given) are
    updated in place with ``momentum``; otherwise the running statistics are used.

    >>> import ember
    >>> x = ember.tensor([[1.0], [3.0]])
    >>> [round(v, 4) for v in batch_norm(x, None, None, training=True).flatten().tolist()]
    [-1.0, 1.0]
    """
    if input.ndim < 2:
        raise RuntimeError(
            f"batch_norm: expected input of shape (N, C, *) with at least 2 dims, got shape "
            f"{_shape(input)}"
        )
    if not eps >= 0:  # (a negative eps made every output NaN; torch refuses it too)
        raise ValueError(f"batch_norm: eps must be non-negative, but got {eps}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(
                f"batch_norm: {name} of shape {_shape(t)} does not match the {c} channels of "
                f"input {_shape(input)}"
            )
    if training and input.numel() == 0:
        # an empty batch (a data-parallel rank or a detection head that got no samples): an
        # empty result that still reaches weight and bias (zero gradients), running statistics
        # untouched, as in PyTorch; only a single value per channel has no variance
        return _empty_batch_norm(input, weight, bias)
    if training:
        per_channel = input.numel() // c if c else 0
        if per_channel <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"size {_shape(input)}"
            )
    elif running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var are required when not training")
    return _C.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


def _empty_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """batch_norm's result for an input without elements: a new empty tensor of the input's
    shape and dtype, connected to input, weight and bias so that backward gives them (zero)
    gradients."""
    shape = [1, input.shape[1]] + [1] * (input.ndim - 2)
    out = input.clone()
    if weight is not None:
        out = out * weight.to(out.dtype).reshape(shape)
    if bias is not None:
        out = out + bias.to(out.dtype).reshape(shape)
    return out


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalizes over the trailing normalized_shape dims.

    >>> import ember
    >>> [round(v, 4) for v in layer_norm(ember.tensor([[1.0, 3.0]]), (2,)).flatten().tolist()]
    [-1.0, 1.0]
    """
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if not ns:  # every input "ends with" (); the kernel's check would blame the input
        raise RuntimeError(f"layer_norm: expected normalized_shape to be at least 1-dimensional, "
                           f"i.e., containing at least one element, but got normalized_shape "
                           f"= {ns}")
    if input.ndim < len(ns) or list(_shape(input)[input.ndim - len(ns):]) != ns:
        raise RuntimeError(
            f"layer_norm: expected input with shape (*, {', '.join(map(str, ns))}) for "
            f"normalized_shape {tuple(ns)}, got input of shape {_shape(input)}"
        )
    return _C.layer_norm(input, ns, weight, bias, eps)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing normalized_shape dims.

    >>> import ember
    >>> [round(v, 4) for v in rms_norm(ember.tensor([[1.0, 1.0]]), (2,)).flatten().tolist()]
    [1.0, 1.0]
    """
    ns = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if not ns:  # every input "ends with" (); the kernel's check would blame the input
        raise RuntimeError(f"rms_norm: expected normalized_shape to be at least 1-dimensional, "
                           f"i.e., containing at least one element, but got normalized_shape "
                           f"= {ns}")
    if input.ndim < len(ns) or list(_shape(input)[input.ndim - len(ns):]) != ns:
        raise RuntimeError(
            f"rms_norm: expected input with shape (*, {', '.join(map(str, ns))}) for "
            f"normalized_shape {tuple(ns)}, got input of shape {_shape(input)}"
        )
    return _C.rms_norm(input, ns, weight, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Group normalization of (N, C, *) input with C divisible by num_groups.

    >>> import ember
    >>> [round(v, 4) for v in group_norm(ember.tensor([[[1.0, 3.0]]]), 1).flatten().tolist()]
    [-1.0, 1.0]
    """
    if input.ndim < 2:
        raise RuntimeError(
            f"group_norm: expected input of shape (N, C, *), got shape {_shape(input)}"
        )
    if num_groups <= 0 or input.shape[1] % num_groups != 0:
        raise RuntimeError(
            f"group_norm: expected the {input.shape[1]} channels of input {_shape(input)} to be "
            f"divisible by num_groups={num_groups}"
        )
    return _C.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalizes each (sample, channel) plane of (N, C, *) input.

    >>> import ember
    >>> [round(v, 4) for v in instance_norm(ember.tensor([[[1.0, 3.0]]])).flatten().tolist()]
    [-1.0, 1.0]
    """
    if input.ndim == 2 and not use_input_stats:  # (N, C) with running stats: PyTorch takes it
        return instance_norm(input.unsqueeze(-1), running_mean, running_var, weight, bias, False,
                             momentum, eps).squeeze(-1)
    if input.ndim < 3:  # (ValueError with batch statistics: no spatial element, as PyTorch)
        raise (ValueError if use_input_stats else RuntimeError)(
            f"instance_norm: expected input of shape (N, C, *spatial), got shape {_shape(input)}"
        )
    if use_input_stats:
        spatial = math.prod(_shape(input)[2:])  # (not numel / (N C): N or C may be 0)
        if spatial <= 1:
            raise ValueError(
                f"instance_norm: expected more than 1 spatial element when training, got input "
                f"size {_shape(input)}"
            )
    return _C.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                            momentum, eps)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Normalizes each channel by the squares of its ``size`` neighbouring channels.

    >>> import ember
    >>> local_response_norm(ember.ones(1, 2, 2), 2).shape
    ember.Size([1, 2, 2])
    """
    if input.ndim < 3:
        raise ValueError(
            f"local_response_norm: expected 3-D or higher input, got shape {_shape(input)}"
        )
    if not (input.is_floating_point() or input.is_complex()):
        input = input.to(ember.get_default_dtype())  # an integer input normalizes to floats
    if input.numel() == 0:
        return input.clone()
    sq = (input * input).unsqueeze(1)  # (N, 1, C, *)
    lead = _shape(sq)
    sq3 = sq.reshape(lead[0], 1, lead[2], math.prod(lead[3:]))
    sq3 = pad(sq3, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(sq3, (size, 1), stride=1).reshape(_shape(input))
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


def _validate_p(op: str, p: float) -> None:
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: dropout probability must be a float, got "
                        f"{type(p).__name__}") from None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


# ---- dropout ----------------------------------------------------------------------------------
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p) when training.

    >>> import ember
    >>> dropout(ember.ones(3), 0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    _validate_p("dropout", p)
    if input.numel() == 0:  # torch returns an empty input itself (an integer one too)
        return input
    out = _C.dropout(input, p, training)
    return _inplace_result(input, out) if inplace and training else out


def _feature_mask(op: str, x: Tensor, p: float, training: bool) -> Tensor:
    """feature_dropout of x; an integer x that a real mask would scale is refused (the scaled
    values are not integers; PyTorch refuses too), eval mode, p == 0 and p == 1 pass."""
    if training and 0 < p < 1 and not (x.is_floating_point() or x.is_complex()):
        raise ember.DtypeNotImplementedError(
            f"{op}: expected a floating-point input when training, got {x.dtype}")
    return _C.feature_dropout(x, p, training)


def _feature_dropout(op: str, nd: int, input: Tensor, p: float, training: bool,
                     inplace: bool) -> Tensor:
    _validate_p(op, p)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(
            f"{op}: expected {nd + 1}-D or {nd + 2}-D input (N, C, *{nd} spatial dims), got "
            f"shape {_shape(input)}"
        )
    batched = input.ndim == nd + 2
    if input.numel() == 0:  # torch returns an empty input itself (an integer one too)
        return input
    x = input if batched else input.unsqueeze(0)
    out = _feature_mask(op, x, p, training)
    if not batched:
        out = out.squeeze(0)
    return _inplace_result(input, out) if inplace and training else out


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of (N, C, L) input.

    >>> import ember
    >>> dropout1d(ember.ones(1, 2, 3), training=False).shape
    ember.Size([1, 2, 3])
    """
    return _feature_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of (N, C, H, W) input.

    PyTorch's historical rules hold for other shapes: a 3-D input is read as (N, C, L) (one
    mask entry per (n, c)), and 2-D or 5-D+ inputs are accepted with a deprecation warning,
    masked along their first two dims.

    >>> import ember
    >>> dropout2d(ember.ones(1, 2, 3, 3), training=False).shape
    ember.Size([1, 2, 3, 3])
    """
    if input.ndim == 4:
        return _feature_dropout("dropout2d", 2, input, p, training, inplace)
    _validate_p("dropout2d", p)
    if input.ndim < 2:
        warnings.warn(f"dropout2d: a {input.ndim}-D input is deprecated (PyTorch will raise in a "
                      f"future release); dropout2d expects (N, C, H, W) input", UserWarning,
                      stacklevel=2)
        # PyTorch's order: nothing to mask (eval mode, p == 0, no elements) returns the input,
        # p == 1 zeroes it, and only a real mask needs the (N, C) dims
        if not training or p == 0 or input.numel() == 0:
            return input
        if p == 1:
            return input.mul_(0) if inplace else input * 0
        raise RuntimeError(f"dropout2d: feature dropout requires at least 2 dimensions in the "
                           f"input, got shape {_shape(input)}")
    if input.ndim == 3:
        warnings.warn("dropout2d: a 3-D input is read as (N, C, L), channel-wise 1-D dropout, as "
                      "PyTorch does today (use dropout1d for that, or add the batch dim to an "
                      "(C, H, W) input)", UserWarning, stacklevel=2)
    else:
        warnings.warn(f"dropout2d: a {input.ndim}-D input is deprecated (PyTorch will raise in a "
                      f"future release); dropout2d expects (N, C, H, W) input. Its first two dims "
                      f"are masked as (N, C)", UserWarning, stacklevel=2)
    if input.numel() == 0:  # torch returns an empty input itself (an integer one too)
        return input
    out = _feature_mask("dropout2d", input, p, training)
    return _inplace_result(input, out) if inplace and training else out


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of (N, C, D, H, W) input.

    Other shapes are accepted with PyTorch's deprecation warning and read as unbatched: one mask
    entry per index of their first dim.

    >>> import ember
    >>> dropout3d(ember.ones(1, 2, 1, 3, 3), training=False).shape
    ember.Size([1, 2, 1, 3, 3])
    """
    if input.ndim in (4, 5):
        return _feature_dropout("dropout3d", 3, input, p, training, inplace)
    _validate_p("dropout3d", p)
    warnings.warn(f"dropout3d: a {input.ndim}-D input is deprecated (PyTorch will raise in a "
                  f"future release); dropout3d expects (N, C, D, H, W) or (C, D, H, W) input. It "
                  f"is read as unbatched, masked along its first dim (use dropout instead)",
                  UserWarning, stacklevel=2)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        out = input * 0
    elif input.ndim == 0:
        raise RuntimeError("dropout3d: feature dropout requires at least 2 dimensions in the "
                           "input, got shape () (read as unbatched (1,))")
    else:
        out = _feature_mask("dropout3d", input.unsqueeze(0), p, training).squeeze(0)
    return _inplace_result(input, out) if inplace else out


_SELU_ALPHA_SCALE = 1.7580993408473766  # selu's alpha * scale: the value selu tends to at -inf


def _alpha_dropout(op: str, input: Tensor, p: float, training: bool, mask_shape: Sequence[int],
                   inplace: bool) -> Tensor:
    _validate_p(op, p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0.0
        return _inplace_result(input, out) if inplace else out
    keep = ember.full(list(mask_shape), 1 - p, dtype=input.dtype).bernoulli()
    # dropped units take selu's negative saturation value; a and b restore mean 0 / variance 1
    a = 1.0 / math.sqrt((_SELU_ALPHA_SCALE**2 * p + 1) * (1 - p))
    b = _SELU_ALPHA_SCALE * a * p
    out = input * (keep * a) + ((keep - 1) * (_SELU_ALPHA_SCALE * a) + b)
    return _inplace_result(input, out) if inplace else out


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps the self-normalizing property of SELU networks.

    >>> import ember
    >>> alpha_dropout(ember.ones(3), 0.5).tolist()
    [1.0, 1.0, 1.0]
    """
    return _alpha_dropout("alpha_dropout", input, p, training, _shape(input), inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels of (N, C, *) input.

    >>> import ember
    >>> feature_alpha_dropout(ember.ones(1, 2, 3), 0.5).shape
    ember.Size([1, 2, 3])
    """
    # as torch: no shape check when nothing is dropped (not training, p 0 or 1, empty input)
    if input.ndim < 2 and training and 0 < p < 1 and input.numel() > 0:
        raise RuntimeError(f"feature_alpha_dropout: expected (N, C, *) input, got {_shape(input)}")
    shape = list(_shape(input)[:2]) + [1] * (input.ndim - 2)
    return _alpha_dropout("feature_alpha_dropout", input, p, training, shape, inplace)


# ---- embedding --------------------------------------------------------------------------------
def _padding_idx(op: str, padding_idx: int | None, num: int) -> int:
    if padding_idx is None:
        return -1  # the core's "no padding row"
    if not -num <= padding_idx < num:
        raise ValueError(
            f"{op}: padding_idx must be within [-{num}, {num}) for {num} embeddings, got "
            f"{padding_idx}"
        )
    return padding_idx + num if padding_idx < 0 else padding_idx


def _check_indices(op: str, input: Tensor, num: int, values: bool = True) -> None:
    if input.dtype not in (ember.int64, ember.int32):
        raise RuntimeError(
            f"{op}: expected integer (int64 or int32) indices, got dtype {input.dtype}"
        )
    # A check of values (a sync point on a GPU; two reductions): meta tensors have none, and ops
    # whose kernels check their indices themselves skip it (values=False).
    if values and input.numel() and input.device.type != "meta" and (
        int(input.min().item()) < 0 or int(input.max().item()) >= num
    ):
        raise IndexError(
            f"{op}: index out of range: indices must lie in [0, {num}) for a table of {num} "
            f"rows, got values in [{int(input.min().item())}, {int(input.max().item())}]"
        )


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescales (in place, outside autograd) the referenced rows whose norm exceeds max_norm."""
    with ember.no_grad():
        # (int64 rows: index_copy_ takes no int32 index, and int32 indices are valid here)
        rows = input.reshape(-1).unique().long()
        sel = weight.index_select(0, rows)
        norms = sel.norm(norm_type, [1], True)
        scale = ember.where(norms > max_norm, max_norm / (norms + 1e-7), ember.ones_like(norms))
        weight.index_copy_(0, rows, sel * scale)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight (num_embeddings, dim) at the integer indices input (any shape).

    >>> import ember
    >>> embedding(ember.tensor([1, 0]), ember.tensor([[0.0, 1.0], [2.0, 3.0]])).tolist()
    [[2.0, 3.0], [0.0, 1.0]]
    """
    if weight.ndim != 2:
        raise RuntimeError(
            f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape "
            f"{_shape(weight)}"
        )
    num = weight.shape[0]
    # the embedding kernels check the values, but max_norm's renorm reads the rows first
    _check_indices("embedding", input, num, values=max_norm is not None)
    pidx = _padding_idx("embedding", padding_idx, num)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse:  # weight.grad becomes a sparse COO tensor (ember.sparse)
        return ember.sparse.embedding_sparse(weight, input, pidx, scale_grad_by_freq)
    return _C.embedding(weight, input, pidx, scale_grad_by_freq, sparse)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxes of bags of embedding rows.

    input is (B, L) (B bags of L indices, offsets None) or 1-D with ``offsets`` marking where
    each bag starts.

    >>> import ember
    >>> w = ember.tensor([[1.0], [3.0]])
    >>> embedding_bag(ember.tensor([[0, 1]]), w).tolist()
    [[2.0]]
    """
    if weight.ndim != 2:
        raise RuntimeError(
            f"embedding_bag: weight must be 2-D (num_embeddings, embedding_dim), got shape "
            f"{_shape(weight)}"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None when input is 2-D")
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets is required when input is 1-D")
        if offsets.ndim != 1:
            raise ValueError(f"embedding_bag: offsets must be 1-D, got shape {_shape(offsets)}")
        if isinstance(offsets, Tensor) and offsets.dtype != input.dtype:
            # indices and offsets of two dtypes meet in their promoted dtype, as torch's (int8
            # indices with int64 offsets are int64 indices)
            common = ember.promote_types(input.dtype, offsets.dtype)
            input, offsets = input.to(common), offsets.to(common)
        if offsets.dtype not in (ember.int64, ember.int32):
            raise RuntimeError(
                f"embedding_bag: expected offsets of dtype int64 or int32, got {offsets.dtype}"
            )
        if offsets.numel() and int(offsets[0].item()) != 0:
            raise RuntimeError(
                f"embedding_bag: offsets[0] has to be 0, i.e., the first bag has to start at "
                f"position 0 of input; got {int(offsets[0].item())}"
            )
        if include_last_offset and offsets.numel() > 1 and \
                int(offsets[-1].item()) != input.numel():
            # the last offset closes the last bag; short of the end, PyTorch's own kernels
            # disagree on where that bag ends (sum stops there, max runs on): refused
            raise RuntimeError(
                f"embedding_bag: with include_last_offset=True the last offset must be the "
                f"number of indices ({input.numel()}), got {int(offsets[-1].item())}"
            )
    else:
        raise ValueError(
            f"embedding_bag: input must be 1-D or 2-D, got shape {_shape(input)}"
        )
    if per_sample_weights is not None:
        if _shape(per_sample_weights) != _shape(input):  # checked first, as torch
            raise ValueError(
                f"embedding_bag: per_sample_weights {_shape(per_sample_weights)} must have the "
                f"shape of input {_shape(input)}"
            )
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights is only supported for mode='sum', got {mode!r}"
            )
    if mode == "max" and sparse:
        raise ValueError("embedding_bag: max mode does not support sparse weights")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by the "
                         "frequency")
    if mode == "max" and input.numel() == 0:
        mode = "sum"  # every bag is empty: zeros, still connected to weight (as torch's)
    num = weight.shape[0]
    _check_indices("embedding_bag", input, num)
    pidx = _padding_idx("embedding_bag", padding_idx, num)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if scale_grad_by_freq:
        return _embedding_bag_by_rows(input, weight, offsets, mode, sparse, per_sample_weights,
                                      include_last_offset, pidx)
    if sparse:  # weight.grad becomes a sparse COO tensor (ember.sparse)
        return ember.sparse.embedding_bag_sparse(weight, input, offsets, mode,
                                                 per_sample_weights, include_last_offset, pidx)
    return _C.embedding_bag(weight, input, offsets, mode, per_sample_weights,
                            include_last_offset, pidx)


def _embedding_bag_by_rows(input: Tensor, weight: Tensor, offsets: Tensor | None, mode: str,
                           sparse: bool, per_sample_weights: Tensor | None,
                           include_last_offset: bool, pidx: int) -> Tensor:
    """embedding_bag (sum / mean) as looked-up rows summed per bag: the lookup through
    :func:`embedding` scales each row's gradient by 1 / its frequency in the mini-batch
    (``scale_grad_by_freq``), which the fused bag kernel does not."""
    flat = input.reshape(-1)
    if input.ndim == 2:
        bags, per = input.shape
        bag_of = ember.arange(bags).repeat_interleave(per)
    else:
        ends = offsets if include_last_offset else ember.cat(
            [offsets, ember.tensor([flat.numel()], dtype=offsets.dtype)])
        bags = ends.numel() - 1
        bag_of = ember.arange(bags).repeat_interleave(ember.diff(ends.long()))
    rows = embedding(flat, weight, padding_idx=None if pidx < 0 else pidx,
                     scale_grad_by_freq=True, sparse=sparse)
    kept = (flat != pidx).to(rows.dtype) if pidx >= 0 else ember.ones(flat.numel(),
                                                                       dtype=rows.dtype)
    if pidx >= 0:  # padding entries take no part in their bag
        rows = rows * kept.unsqueeze(1)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(rows.dtype)
    out = ember.zeros(bags, weight.shape[1], dtype=rows.dtype).index_add(0, bag_of, rows)
    if mode == "mean":
        n = ember.zeros(bags, dtype=rows.dtype).index_add(0, bag_of, kept)
        out = out / n.clamp(min=1).unsqueeze(1)
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with a trailing dim of num_classes (max + 1 when -1).

    >>> import ember
    >>> one_hot(ember.tensor([0, 2])).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    _require_tensors("one_hot", tensor=tensor)
    if isinstance(num_classes, bool):
        raise TypeError("one_hot(): num_classes must be an int, got bool")
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TypeError(f"one_hot(): num_classes must be an int, got "
                        f"{type(num_classes).__name__} {num_classes!r}") from None
    if num_classes < -1:
        raise RuntimeError(f"one_hot: num_classes must be -1 (inferred) or non-negative, got "
                           f"{num_classes}")
    if tensor.dtype != ember.int64:  # (int32 too: PyTorch takes int64 class indices only)
        raise RuntimeError(f"one_hot: is only applicable to an index tensor of dtype int64, got "
                           f"{tensor.dtype}")
    t = tensor.long()
    if t.numel() and int(t.min().item()) < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    if num_classes == -1:
        if t.numel() == 0:
            raise RuntimeError("one_hot: cannot infer num_classes from an empty tensor")
        num_classes = int(t.max().item()) + 1
    elif t.numel() and int(t.max().item()) >= num_classes:
        raise RuntimeError(
            f"one_hot: class values must be smaller than num_classes={num_classes}, got "
            f"{int(t.max().item())}"
        )
    out = ember.zeros(list(_shape(t)) + [num_classes], dtype=ember.int64)
    return out.scatter_(-1, t.unsqueeze(-1), 1)


# ---- padding, resampling, pixel shuffle -------------------------------------------------------
def _take(x: Tensor, dim: int, index: list[int]) -> Tensor:
    """``x.index_select(dim, index)`` routed through embedding, whose gradient exists in the
    core (index_select has none yet): dim moves to the front and the rest flattens into rows."""
    idx = ember.tensor(index, dtype=ember.int64)
    if x.ndim == 1:
        return _C.embedding(x.unsqueeze(1), idx, -1, False, False).reshape(len(index))
    front = x.transpose(0, dim) if dim != 0 else x
    rest = list(_shape(front))[1:]
    rows = _C.embedding(front.reshape(front.shape[0], -1), idx, -1, False, False)
    out = rows.reshape([len(index)] + rest)
    return out.transpose(0, dim) if dim != 0 else out


def _select_along(x: Tensor, dim: int, cols: list[list[tuple[int, float]]]) -> Tensor:
    """``y[..., o, ...] = sum_k w * x[..., i_k, ...]`` along dim for cols[o] = [(i_k, w), ...].

    A product with a small (in, out) matrix: exact for one-hot columns and differentiable
    through matmul alone (used where in and out are small, e.g. classes x labels).
    """
    size = x.shape[dim]
    m = [[0.0] * len(cols) for _ in range(size)]
    for o, terms in enumerate(cols):
        for i, w in terms:
            m[i][o] += w
    mat = ember.tensor(m, dtype=x.dtype).reshape(size, len(cols))
    last = x.ndim - 1
    moved = x.transpose(dim, last) if dim != last else x
    out = moved.matmul(mat)
    return out.transpose(dim, last) if dim != last else out


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Pads the last ``len(pad) // 2`` dims: pad = (last_left, last_right, prev_left, ...).

    Modes: 'constant' (value, negative pads crop), 'reflect', 'replicate', 'circular'.

    >>> import ember
    >>> pad(ember.tensor([[1.0, 2.0]]), (1, 1)).tolist()
    [[0.0, 1.0, 2.0, 0.0]]
    >>> pad(ember.tensor([[[1.0, 2.0, 3.0]]]), (2, 0), mode="reflect").tolist()
    [[[3.0, 2.0, 1.0, 2.0, 3.0]]]
    """
    if isinstance(pad, (Tensor, str)) or not hasattr(pad, "__iter__"):
        raise TypeError(f"pad(): argument 'pad' must be a tuple of ints, not "
                        f"{type(pad).__name__}")
    ints = []
    for i, p in enumerate(pad):
        try:  # ints only, as PyTorch (int() would silently truncate a float pad)
            if isinstance(p, bool):
                raise TypeError
            ints.append(operator.index(p))
        except TypeError:
            raise TypeError(f"pad(): argument 'pad' must be a tuple of ints, but found element "
                            f"of type {type(p).__name__} at pos {i}") from None
    pad = ints
    if len(pad) % 2 != 0 or len(pad) // 2 > input.ndim:
        raise RuntimeError(  # torch's class
            f"pad: padding length must be even and at most 2 * input.ndim "
            f"(= {2 * input.ndim}), got {len(pad)} for input of shape {_shape(input)}"
        )
    if mode == "constant":
        if (value is not None and not input.dtype.is_floating_point and not input.is_complex()
                and input.dtype != ember.bool):
            info = ember.iinfo(input.dtype)
            # the value is a float (as torch's): compared in double, refused rather than wrapped
            if not float(info.min) <= float(value) <= float(info.max):
                raise RuntimeError(f"pad: value {value} cannot be converted to type "
                                   f"{input.dtype} without overflow")
        return ember.pad(input, pad, "constant", 0.0 if value is None else float(value))
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}"
        )
    if value is not None and value != 0:
        raise RuntimeError(f"pad: padding mode {mode!r} doesn't take in value argument")
    n = len(pad) // 2
    if input.ndim < n + 1:  # PyTorch's rule: the padded dims plus a channel (or batch) dim
        raise NotImplementedError(  # as for too many dims (PyTorch's class)
            f"pad: {mode} padding of {n} dims needs a {n + 1}-D or {n + 2}-D input, got shape "
            f"{_shape(input)}"
        )
    shape = _shape(input)
    for k in range(n):
        d = input.ndim - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if mode == "reflect" and (lo >= shape[d] or hi >= shape[d]):
            raise RuntimeError(
                f"pad: reflect padding ({lo}, {hi}) must be smaller than the size {shape[d]} of "
                f"dim {d} of input {shape}"
            )
        if mode == "circular" and (lo > shape[d] or hi > shape[d]):
            raise RuntimeError(
                f"pad: circular padding ({lo}, {hi}) can wrap at most once around dim {d} of "
                f"size {shape[d]}"
            )
    # one C++ pass: every output element reads its source through a per-dim index map
    return ember.pad(input, pad, mode, None)


_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resamples the spatial dims of (N, C, *spatial) input to ``size`` or by ``scale_factor``.

    Modes 'nearest', 'nearest-exact', 'linear' (3-D), 'bilinear' and 'bicubic' (4-D),
    'trilinear' (5-D), 'area' (adaptive average pooling); ``align_corners`` as PyTorch;
    ``antialias=True`` (bilinear and bicubic) widens the filter when downsampling, as PIL and
    PyTorch do. With
    ``scale_factor`` (and ``recompute_scale_factor`` not True) the kernels step through the input
    by 1 / scale_factor, as PyTorch's do; the upsample_* C++ ops do the work.

    >>> import ember
    >>> interpolate(ember.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    """
    _require_tensors("interpolate", input=input)
    # NotImplementedError for input dims the mode does not handle, as torch raises
    if input.ndim < 3 or input.ndim > 5:
        raise NotImplementedError(
            f"interpolate: expected (N, C, *spatial) input with 1-3 spatial dims, got shape "
            f"{_shape(input)}"
        )
    nd = input.ndim - 2
    if mode not in ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear",
                    "area"):
        raise NotImplementedError(
            f"interpolate: mode {mode!r} is not supported (nearest, nearest-exact, linear, "
            "bilinear, bicubic, trilinear, area)"
        )
    if mode in _INTERP_DIMS and _INTERP_DIMS[mode] != nd:
        raise NotImplementedError(
            f"interpolate: mode {mode!r} expects {_INTERP_DIMS[mode] + 2}-D input, got shape "
            f"{_shape(input)}"
        )
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError(
                "interpolate: align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
        align_corners = False
    elif align_corners is None:
        align_corners = False
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError("interpolate: anti-alias option is restricted to bilinear and bicubic "
                         f"modes and requires a 4-D tensor as input, got mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: exactly one of size and scale_factor must be given")
    in_sizes = list(_shape(input)[2:])
    scales: list[float | None]
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size."
            )
        if isinstance(size, (list, tuple)) and len(size) != nd:  # (one int is every dim's)
            raise ValueError(f"interpolate: size must have {nd} values (one per spatial dim) for "
                             f"input {_shape(input)}, got {list(size)}")
        out_sizes = _tuple(size, nd, "size", "interpolate")
        scales = [None] * nd
    else:
        sf = [float(scale_factor)] * nd if isinstance(scale_factor, (int, float)) else [
            float(s) for s in scale_factor]
        if len(sf) != nd:
            raise ValueError(
                f"interpolate: scale_factor must have {nd} values for input {_shape(input)}, got "
                f"{scale_factor!r}"
            )
        if not all(math.isfinite(s) for s in sf):
            raise RuntimeError(f"interpolate: scale_factor must be finite, got {scale_factor!r} "
                             f"for input {_shape(input)}")
        out_sizes = [int(math.floor(i * s)) for i, s in zip(in_sizes, sf)]
        scales = [None] * nd if recompute_scale_factor else list(sf)
    if any(o <= 0 for o in out_sizes):
        raise RuntimeError(f"interpolate: output size {out_sizes} must be positive (input "
                           f"{_shape(input)})")
    if any(o >= 2**63 for o in out_sizes):
        # a huge size or finite scale_factor would otherwise fail to convert to int64 in the
        # kernel's binding, without naming interpolate (the classes are PyTorch's)
        exc = TypeError if scale_factor is None else RuntimeError
        raise exc(f"interpolate: output size {out_sizes} of input {_shape(input)} "
                  f"(scale_factor {scale_factor!r}) does not fit in int64")
    if mode == "area":
        if nd == 1:
            return adaptive_avg_pool1d(input, out_sizes)
        if nd == 2:
            return adaptive_avg_pool2d(input, out_sizes)
        raise NotImplementedError("interpolate: mode='area' supports 3-D and 4-D input")
    if mode == "nearest":
        return _UPSAMPLE_NEAREST[nd](input, out_sizes, *scales)
    if mode == "nearest-exact":
        return _UPSAMPLE_NEAREST_EXACT[nd](input, out_sizes, *scales)
    if input.dtype is _C.uint8 and mode in ("bilinear", "bicubic"):
        return _interpolate_uint8(input, out_sizes, scales, mode, bool(align_corners), antialias)
    if antialias:
        return _interpolate_aa(input, out_sizes, scales, mode, bool(align_corners))
    op = _C.upsample_bicubic2d if mode == "bicubic" else _UPSAMPLE_LINEAR[nd]
    return op(input, out_sizes, bool(align_corners), *scales)


def _interpolate_uint8(input: Tensor, out_sizes: list[int], scales: list[float | None],
                       mode: str, align_corners: bool, antialias: bool) -> Tensor:
    """Bilinear / bicubic resize of a uint8 image batch, as PyTorch's uint8 kernel: separable,
    along the width then the height, each pass rounded and clamped to 0..255 (in float32 here:
    within 1, rarely 2, of PyTorch's fixed-point weights)."""
    x = input.to(_C.float32)
    h_in = _shape(input)[2]
    for sizes, sc in (([h_in, out_sizes[1]], [None, scales[1]]),
                      (list(out_sizes), [scales[0], None])):
        if antialias:
            x = _interpolate_aa(x, sizes, sc, mode, align_corners)
        else:
            op = _C.upsample_bicubic2d if mode == "bicubic" else _UPSAMPLE_LINEAR[2]
            x = op(x, sizes, align_corners, *sc)
        x = x.round().clamp(0, 255)
    return x.to(_C.uint8)


def _aa_weights(in_size: int, out_size: int, scale: float | None, bicubic: bool,
                align_corners: bool) -> Any:
    """The (out_size, in_size) resampling matrix of antialiased interpolation along one dim
    (the separable filter of PIL's resize, which PyTorch's antialias mode follows): when
    downsampling by s > 1 the triangle (bilinear) or Keys cubic (a = -0.5) filter is stretched
    s times, so every input pixel under it contributes; each row is normalized to sum 1."""
    import numpy as np

    if align_corners:
        ratio = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else in_size / out_size
    interp = 4.0 if bicubic else 2.0
    support = interp / 2 * ratio if ratio >= 1.0 else interp / 2
    inv = 1.0 / ratio if ratio >= 1.0 else 1.0

    def filt(x: Any) -> Any:
        x = np.abs(x)
        if not bicubic:
            return np.maximum(0.0, 1.0 - x)
        a = -0.5
        return np.where(x < 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                        np.where(x < 2.0, (((x - 5) * x + 8) * x - 4) * a, 0.0))

    w = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = ratio * (i + 0.5)  # align_corners changes only the ratio
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        taps = filt((np.arange(lo, hi) - center + 0.5) * inv)
        total = taps.sum()
        w[i, lo:hi] = taps / total if total != 0 else taps
    return w


def _interpolate_aa(input: Tensor, out_sizes: list, scales: list, mode: str,
                    align_corners: bool) -> Tensor:
    """Antialiased bilinear/bicubic resize of (N, C, H, W) input: the image multiplied by one
    resampling matrix per spatial dim (differentiable through the matmuls)."""
    if not input.is_floating_point():
        raise NotImplementedError(f"interpolate: antialias=True is not implemented for "
                                  f"{input.dtype} input (convert to a floating dtype first)")
    bicubic = mode == "bicubic"
    h, w = _shape(input)[2:]
    wh = ember.from_numpy(_aa_weights(h, out_sizes[0], scales[0], bicubic, align_corners))
    ww = ember.from_numpy(_aa_weights(w, out_sizes[1], scales[1], bicubic, align_corners))
    wh = wh.to(dtype=input.dtype, device=input.device)
    ww = ww.to(dtype=input.dtype, device=input.device)
    out = ember.matmul(ember.matmul(wh, input), ww.t())
    # (a channels-last input gives a channels-last result, as PyTorch's)
    return out.contiguous(memory_format=ember.channels_last) if _channels_last(input) else out


_UPSAMPLE_NEAREST = {1: _C.upsample_nearest1d, 2: _C.upsample_nearest2d,
                     3: _C.upsample_nearest3d}
_UPSAMPLE_NEAREST_EXACT = {1: _C._upsample_nearest_exact1d, 2: _C._upsample_nearest_exact2d,
                           3: _C._upsample_nearest_exact3d}
_UPSAMPLE_LINEAR = {1: _C.upsample_linear1d, 2: _C.upsample_bilinear2d,
                    3: _C.upsample_trilinear3d}


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """:func:`interpolate` with mode='nearest'."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """:func:`interpolate` with mode='bilinear' and align_corners=True."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _channels_last(input: Tensor) -> bool:
    """Whether input is laid out channels-last (PyTorch's suggest_memory_format), which the
    layout-keeping ops here (pixel_shuffle, channel_shuffle, ...) give their result too."""
    return _suggest_memory_format(input) is not ember.contiguous_format


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r).

    >>> import ember
    >>> pixel_shuffle(ember.ones(1, 4, 2, 2), 2).shape
    ember.Size([1, 1, 4, 4])
    """
    r = upscale_factor
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_shuffle: expected input with at least 3 dims (*, C, H, W), got shape "
            f"{_shape(input)}"
        )
    *lead, c, h, w = _shape(input)
    if r <= 0:  # (was "must be divisible by upscale_factor^2 = 4" for -2)
        raise RuntimeError(f"pixel_shuffle: expects a positive upscale_factor, but got {r}")
    if c % (r * r) != 0:
        raise RuntimeError(
            f"pixel_shuffle: the {c} channels of input {_shape(input)} must be divisible by "
            f"upscale_factor^2 = {r * r}"
        )
    oc = c // (r * r)
    nl = len(lead)
    if input.ndim == 4 and _channels_last(input):
        # shuffled as (N, H, W, C), which is input's memory: one copy, and a channels-last result
        # as PyTorch's
        n = lead[0]
        x = input.permute(0, 2, 3, 1).reshape(n, h, w, oc, r, r).permute(0, 1, 4, 2, 5, 3)
        return x.reshape(n, h * r, w * r, oc).permute(0, 3, 1, 2)
    x = input.reshape(*lead, oc, r, r, h, w)
    perm = list(range(nl)) + [nl, nl + 3, nl + 1, nl + 4, nl + 2]
    return x.permute(*perm).reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W); the inverse of :func:`pixel_shuffle`.

    >>> import ember
    >>> pixel_unshuffle(ember.ones(1, 1, 4, 4), 2).shape
    ember.Size([1, 4, 2, 2])
    """
    r = downscale_factor
    if input.ndim < 3:
        raise RuntimeError(
            f"pixel_unshuffle: expected input with at least 3 dims (*, C, H, W), got shape "
            f"{_shape(input)}"
        )
    *lead, c, h, w = _shape(input)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle: expects a positive downscale_factor, but got {r}")
    if h % r != 0 or w % r != 0:
        raise RuntimeError(
            f"pixel_unshuffle: height {h} and width {w} of input {_shape(input)} must be "
            f"divisible by downscale_factor={r}"
        )
    nl = len(lead)
    if input.ndim == 4 and _channels_last(input):  # as pixel_shuffle: over input's (N, H, W, C) memory
        n = lead[0]
        x = input.permute(0, 2, 3, 1).reshape(n, h // r, r, w // r, r, c)
        x = x.permute(0, 1, 3, 5, 2, 4).reshape(n, h // r, w // r, c * r * r)
        return x.permute(0, 3, 1, 2)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    perm = list(range(nl)) + [nl, nl + 2, nl + 4, nl + 1, nl + 3]
    return x.permute(*perm).reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) with its C channels, seen as ``groups`` groups of C / groups, interleaved:
    channel ``g * (C / groups) + k`` moves to ``k * groups + g`` (ShuffleNet).

    >>> import ember
    >>> channel_shuffle(ember.arange(4.0).reshape(1, 4, 1), 2).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle: expected an input of at least 3 dims (N, C, *), "
                           f"got shape {_shape(input)}")
    if isinstance(groups, bool) or not isinstance(groups, int):
        raise TypeError(f"channel_shuffle: groups must be an int, got {type(groups).__name__}")
    if groups <= 0:
        raise RuntimeError(f"channel_shuffle: groups must be positive, got {groups}")
    n, c, *rest = _shape(input)
    if c % groups != 0:
        raise RuntimeError(f"channel_shuffle: number of channels ({c}) must be divisible by "
                           f"groups ({groups})")
    if _channels_last(input):  # over input's (N, *, C) memory: a channels-last result
        nd = input.ndim
        x = input.permute(0, *range(2, nd), 1).reshape(n, *rest, groups, c // groups)
        x = x.transpose(-1, -2).reshape(n, *rest, c)
        return x.permute(0, nd - 1, *range(1, nd - 1))
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


native_channel_shuffle = channel_shuffle

def _broadcast_shape(op: str, s1: tuple[int, ...], s2: tuple[int, ...]) -> list[int]:
    n = max(len(s1), len(s2))
    a, b = (1,) * (n - len(s1)) + s1, (1,) * (n - len(s2)) + s2
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"{op}: shapes {s1} and {s2} are not broadcastable")
        out.append(y if x == 1 else x)
    return out


# ---- distances --------------------------------------------------------------------------------
def _float_number(v: Any) -> Any:
    """A float argument given as a Python int, as a float: an int past int64 (2**63) would not
    convert to the ops' Scalar, where torch's float parameter takes it."""
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``<x1, x2> / (max(||x1||, eps) * max(||x2||, eps))`` along dim (inputs broadcast).

    >>> import ember
    >>> cosine_similarity(ember.tensor([[1.0, 0.0]]), ember.tensor([[1.0, 1.0]])).tolist()
    [0.7071067690849304]
    """
    shape = _broadcast_shape("cosine_similarity", _shape(x1), _shape(x2))
    a, b = x1.expand(tuple(shape)), x2.expand(tuple(shape))  # expand (not broadcast_tensors) has a derivative
    dt = ember.result_type(x1, x2)
    if not dt.is_floating_point:  # complex too: the product was bilinear, not <conj(x1), x2>
        raise RuntimeError(f"cosine_similarity: expected common dtype to be floating point, yet "
                           f"common dtype is {dt}")
    a, b, eps = a.to(dt), b.to(dt), _float_number(eps)  # (a uint8 x1 with a float16 x2: float16)
    if not eps >= 0:  # (NaN too, as PyTorch)
        raise RuntimeError(f"cosine_similarity: eps must be non-negative, got: {eps}")
    na = a.norm(2, [dim], True).clamp(min=eps)
    nb = b.norm(2, [dim], True).clamp(min=eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim.

    >>> import ember
    >>> round(pairwise_distance(ember.tensor([[3.0, 0.0]]), ember.tensor([[0.0, 4.0]]))
    ...       .item(), 3)
    5.0
    """
    nd = max(x1.ndim, x2.ndim)
    p, eps = _float_number(p), _float_number(eps)
    # two 0-d inputs: the norm of the one difference over its (implicit) last dim, as torch
    return (x1 - x2 + eps).norm(p, [max(nd - 1, 0)], keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """p-norm distances between all pairs of rows of a 2-D input (upper triangle, row-major).

    >>> import ember
    >>> pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0]])).tolist()
    [5.0]
    """
    _require_tensors("pdist", input=input)
    if input.ndim != 2:
        raise RuntimeError(f"pdist: expected 2-D input, got shape {_shape(input)}")
    if not input.is_floating_point():  # (checked before the shape's shortcuts, as PyTorch)
        raise RuntimeError(f"pdist only supports floating-point dtypes, got {input.dtype}")
    if not float(p) >= 0:
        raise RuntimeError(f"pdist only supports non-negative p values, got {p}")
    n = input.shape[0]
    if n < 2:  # no pairs: an empty result of the input's dtype (and graph)
        return input.reshape(n * input.shape[1])[:0]
    if input.dtype in (ember.float16, ember.bfloat16):
        raise NotImplementedError(f"pdist: not implemented for {input.dtype} (as torch)")
    ii = [i for i in range(n) for _ in range(i + 1, n)]
    jj = [j for i in range(n) for j in range(i + 1, n)]
    a, b = _take(input, 0, ii), _take(input, 0, jj)
    return (a - b).norm(_float_number(p), [1], False)


# ---- losses -----------------------------------------------------------------------------------
def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """Maps the deprecated size_average / reduce flags onto a reduction string."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(
        "size_average and reduce args will be deprecated, please use reduction instead.",
        stacklevel=3,
    )
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _reduce(op: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction (none|mean|sum)")


def _weighted_mean_loss(op: str, input: Tensor, loss: Tensor, weight: Tensor,
                        reduction: str) -> Tensor:
    """``loss * weight`` reduced as torch's weighted ``mse_loss`` / ``l1_loss``: 'mean' is the
    weighted mean ``sum(weight * loss) / sum(weight)``; weight has input's shape."""
    _require_tensors(op, weight=weight)
    if _shape(weight) != _shape(input):
        raise ValueError(f"{op}: weight of shape {_shape(weight)} must have the input's shape "
                         f"{_shape(input)}")
    weighted = loss * weight
    if reduction == "mean":
        return weighted.sum() / weight.sum()
    return _reduce(op, weighted, reduction)


def _check_reduction(op: str, reduction: str, extra: tuple[str, ...] = ()) -> None:
    if reduction not in ("none", "mean", "sum") + extra:
        raise ValueError(
            f"{op}: {reduction!r} is not a valid value for reduction "
            f"({'|'.join(('none', 'mean', 'sum') + extra)})"
        )


def _check_same_size(op: str, input: Tensor, target: Tensor, strict: bool = False) -> None:
    if _shape(input) == _shape(target):
        return
    if strict:
        raise ValueError(
            f"{op}: using a target size {_shape(target)} that is different to the input size "
            f"{_shape(input)} is not supported; make sure they have the same size"
        )
    warnings.warn(
        f"{op}: using a target size ({_shape(target)}) that is different to the input size "
        f"({_shape(input)}). This will likely lead to incorrect results due to broadcasting. "
        "Please ensure they have the same size.",
        stacklevel=3,
    )


def _regression_operands(input: Tensor, target: Tensor, bool_target: bool = True,
                         promote: bool = True) -> tuple[Tensor, Tensor]:
    """torch's pointwise regression losses broadcast input and target before they promote, so a
    0-d operand's dtype counts in full (a float32 input with a 0-d float64 target gives a
    float64 loss; huber_loss keeps the input's dtype); and a bool target promotes like a number
    (not for l1_loss, as in torch); so does a bool input with a floating target, unless the loss
    keeps the input's dtype (huber_loss, ``promote=False``)."""
    if bool_target and target.dtype == ember.bool and input.is_floating_point():
        target = target.to(input.dtype)
    if bool_target and promote and input.dtype == ember.bool and target.is_floating_point():
        input = input.to(target.dtype)
    if promote and input.dtype != target.dtype and input.ndim != target.ndim and 0 in (input.ndim, target.ndim):
        dt = ember.promote_types(input.dtype, target.dtype)
        input, target = input.to(dt), target.to(dt)
    return input, target


def _check_floating_loss(op: str, input: Tensor, target: Tensor, keeps_input_dtype: bool = False) -> None:
    """PyTorch's squared / smooth losses have floating kernels only: integers, bool and complex
    are refused (complex input gave d^2 instead of |d|^2: a silently meaningless loss). A loss
    that keeps the input's dtype (huber_loss) refuses an integer input with a floating target and
    a floating input with a complex target, as torch (a RuntimeError: the cast)."""
    if not (isinstance(input, Tensor) and isinstance(target, Tensor)):
        return
    common = ember.promote_types(input.dtype, target.dtype)
    if keeps_input_dtype and input.is_floating_point() != common.is_floating_point:
        raise RuntimeError(f"{op}: result type {common} can't be cast to the desired output type "
                           f"{input.dtype}")
    if not common.is_floating_point:
        raise ember.DtypeNotImplementedError(f"{op}: not implemented for dtype {common}")


def _check_class_target(op: str, input: Tensor, target: Tensor) -> Tensor:
    """Checks class-index targets with PyTorch's exception classes: ValueError for a 0-D input or
    a batch size that differs from the input's, RuntimeError for other shape mismatches. Returns
    the target, a size-1 target of a 1-D input made 0-D (as torch accepts it)."""
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dim (C), got a 0-D tensor")
    if target.dtype.is_floating_point and op == "cross_entropy":
        return target
    shape_in, shape_t = _shape(input), _shape(target)
    if input.ndim == 1:
        _check_class_target_dtype(input, target)
        if target.ndim == 0:
            return target
        if target.ndim == 1:
            if shape_t[0] != 1:
                raise ValueError(f"{op}: for 1D input, 1D target must have size 1, but got target "
                                 f"size: {shape_t[0]}")
            return target.reshape(())
        raise RuntimeError(f"{op}: 0D or 1D target tensor expected, multi-target not supported "
                           f"(input of shape {shape_in}, target of shape {shape_t})")
    want = shape_in[:1] + shape_in[2:]
    if shape_t != want:
        batch = shape_t[0] if target.ndim >= 1 else 0
        if batch != shape_in[0]:
            raise ValueError(f"{op}: expected input batch_size ({shape_in[0]}) to match target "
                             f"batch_size ({batch})")
        raise RuntimeError(
            f"{op}: expected target of shape {want} (class indices) for input of shape "
            f"{shape_in}, got {shape_t}"
        )
    _check_class_target_dtype(input, target)
    return target


_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
                     "uint8": "Byte", "bool": "Bool", "float16": "Half", "bfloat16": "BFloat16",
                     "float32": "Float", "float64": "Double", "uint16": "UInt16",
                     "uint32": "UInt32", "uint64": "UInt64", "complex64": "ComplexFloat",
                     "complex128": "ComplexDouble"}


def _check_class_target_dtype(input: Tensor, target: Tensor) -> None:
    """Class indices as PyTorch's nll_loss takes them, with its messages: int64, or uint8 for an
    input of at most 2 dims (its (N, C, d1, ...) kernel takes int64 only)."""
    dt = target.dtype
    if dt is _C.int64 or (dt is _C.uint8 and input.ndim <= 2):
        return
    name = str(dt).rsplit(".", 1)[-1]
    if dt is _C.uint8:
        raise RuntimeError("expected scalar type Long but found Byte")
    raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                       f"{_TORCH_TYPE_NAMES.get(name, name)}")


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1, or 0 for unbatched input) then nll_loss; target holds
    class indices or class probabilities (same shape as input).

    >>> import ember
    >>> round(cross_entropy(ember.zeros(1, 2), ember.tensor([0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"cross_entropy: label_smoothing must lie in [0, 1], got {label_smoothing}")
    if target.dtype.is_floating_point and _shape(target) != _shape(input):
        raise RuntimeError(
            f"cross_entropy: class-probability target must have the shape of input "
            f"{_shape(input)}, got {_shape(target)}"
        )
    target = _check_class_target("cross_entropy", input, target)
    return _C.cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing)


def linear_cross_entropy(input: Tensor, linear_weight: Tensor, target: Tensor, *,
                         linear_bias: Tensor | None = None, weight: Tensor | None = None,
                         reduction: str = "mean", ignore_index: int | None = None,
                         label_smoothing: float = 0.0, options: Any = None) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``: the loss of a
    classifier head in one call. ``linear_weight`` is ``(C, in_features)`` or
    ``(C, d_1, ..., d_K, in_features)`` for a K-dimensional loss over batched input
    ``(N, in_features)`` (logits ``(N, C, d_1, ..., d_K)``); ``ignore_index=None`` means -100.
    ``options`` (a :class:`~ember.nn.LinearCrossEntropyOptions`) selects torch's chunked path,
    which gives the same values; ember always computes the reference definition.

    >>> import ember
    >>> x, w = ember.ones(2, 3), ember.zeros(4, 3)
    >>> round(linear_cross_entropy(x, w, ember.tensor([0, 3])).item(), 4)
    1.3863
    """
    from ember.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"linear_cross_entropy: options must be a LinearCrossEntropyOptions or None, "
                        f"got {type(options).__name__}")
    _check_reduction("linear_cross_entropy", reduction)
    if linear_weight.dim() < 2:
        raise RuntimeError(f"linear_cross_entropy: linear_weight must be (C, in_features) or "
                           f"(C, d_1, ..., d_K, in_features), got shape {_shape(linear_weight)}")
    out_shape = _shape(linear_weight)[:-1]
    if len(out_shape) > 1 and input.dim() != 2:
        raise RuntimeError(f"linear_cross_entropy: a multi-dimensional linear_weight {_shape(linear_weight)} "
                           f"needs batched input (N, in_features), got {_shape(input)}")
    bias = None
    if linear_bias is not None:
        if _shape(linear_bias) not in (out_shape, (math.prod(out_shape),)):
            raise RuntimeError(f"linear_cross_entropy: linear_bias must have shape {out_shape}, "
                               f"got {_shape(linear_bias)}")
        bias = linear_bias.reshape(-1)
    logits = linear(input, linear_weight.reshape(-1, linear_weight.shape[-1]), bias)
    if len(out_shape) > 1:
        logits = logits.reshape(input.shape[0], *out_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index,
                         label_smoothing=label_smoothing)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of log-probabilities input (N, C, *) at class indices target.

    >>> import ember
    >>> nll_loss(ember.tensor([[-1.0, -2.0]]), ember.tensor([1])).item()
    2.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    target = _check_class_target("nll_loss", input, target)
    return _C.nll_loss(input, target, weight, reduction, ignore_index)


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean squared error ``(input - target)^2``.

    >>> import ember
    >>> mse_loss(ember.tensor([1.0, 3.0]), ember.tensor([0.0, 0.0])).item()
    5.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("mse_loss", reduction)
    _check_same_size("mse_loss", input, target)
    _check_floating_loss("mse_loss", input, target)
    input, target = _regression_operands(input, target)
    if weight is not None:
        return _weighted_mean_loss("mse_loss", input, (input - target).pow(2), weight, reduction)
    return _C.mse_loss(input, target, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean absolute error ``|input - target|``.

    >>> import ember
    >>> l1_loss(ember.tensor([1.0, -3.0]), ember.tensor([0.0, 0.0])).item()
    2.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("l1_loss", reduction)
    _check_same_size("l1_loss", input, target)
    input, target = _regression_operands(input, target, bool_target=False)
    if weight is not None:
        return _weighted_mean_loss("l1_loss", input, (input - target).abs(), weight, reduction)
    return _C.l1_loss(input, target, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` where |d| < beta, else ``|d| - beta / 2``.

    >>> import ember
    >>> smooth_l1_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="sum").item()
    2.625
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("smooth_l1_loss", reduction)
    if not beta >= 0:  # (NaN too)
        raise RuntimeError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _check_same_size("smooth_l1_loss", input, target)
    _check_floating_loss("smooth_l1_loss", input, target)
    input, target = _regression_operands(input, target)
    return _C.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 d^2`` where |d| < delta, else ``delta * (|d| - delta / 2)``.

    >>> import ember
    >>> huber_loss(ember.tensor([0.5, 3.0]), ember.zeros(2), reduction="sum").item()
    2.625
    """
    _check_reduction("huber_loss", reduction)
    if delta <= 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}")
    _check_same_size("huber_loss", input, target)
    _check_floating_loss("huber_loss", input, target, keeps_input_dtype=True)
    input, target = _regression_operands(input, target, promote=False)
    if weight is not None:  # (torch's weighted huber_loss: 'mean' is the plain mean)
        _require_tensors("huber_loss", weight=weight)
        if _shape(weight) != _shape(input):
            raise ValueError(f"huber_loss: weight of shape {_shape(weight)} must have the "
                             f"input's shape {_shape(input)}")
        return _reduce("huber_loss", _C.huber_loss(input, target, "none", delta) * weight, reduction)
    return _C.huber_loss(input, target, reduction, delta)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-w (t log p + (1 - t) log(1 - p))`` for probabilities p = input (each log clamped at
    -100, ``log(1 - p)`` taken as ``log1p(-p)``, as torch). ``weight`` gets no gradient: one
    that requires grad is an error while grad mode is on.

    >>> import ember
    >>> round(binary_cross_entropy(ember.tensor([0.5]), ember.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy", reduction)
    _check_same_size("binary_cross_entropy", input, target, strict=True)
    if weight is not None and weight.requires_grad and ember.is_grad_enabled():
        # as torch: the loss has no derivative for its weight (pass weight.detach())
        raise RuntimeError("The function 'binary_cross_entropy' is not differentiable with respect "
                           "to argument 'weight'. This input cannot have requires_grad True.")
    return _C.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: bool | None = None, reduce: bool | None = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """:func:`binary_cross_entropy` of ``sigmoid(input)``, computed stably.

    >>> import ember
    >>> round(binary_cross_entropy_with_logits(ember.tensor([0.0]), ember.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    _check_same_size("binary_cross_entropy_with_logits", input, target, strict=True)
    return _C.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence ``target * (log target - input)`` for log-probabilities input.

    reduction='batchmean' divides the sum by the batch size (the mathematically right mean).

    >>> import ember
    >>> kl_div(ember.tensor([0.0]), ember.tensor([1.0]), reduction="sum").item()
    0.0
    """
    legacy = size_average is not None or reduce is not None
    red = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("kl_div", red, ("batchmean",))
    if red == "mean" and not legacy:
        warnings.warn(
            "kl_div: reduction='mean' divides the total loss by both the batch size and the "
            "support size; 'batchmean' divides only by the batch size, which is the KL "
            "divergence's definition",
            stacklevel=2,
        )
    if not (input.is_floating_point() or input.is_complex()) or \
            not (target.is_floating_point() or target.is_complex()):
        raise RuntimeError(f"kl_div: integral inputs are not supported (input {input.dtype}, "
                           f"target {target.dtype})")
    if input.is_complex() or target.is_complex():  # (as ember.kl_div and PyTorch)
        raise RuntimeError("kl_div: Complex inputs not supported.")
    out = _C.kl_div(input, target, red, log_target=log_target)
    if legacy and reduction == "batchmean" and input.ndim != 0:
        # PyTorch's rule: the legacy flags pick the reduction, and a 'batchmean' given next to
        # them still divides that by the batch size
        out = out / input.shape[0]
    return out


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of target under Poisson(rate), rate = exp(input) or input.

    >>> import ember
    >>> poisson_nll_loss(ember.tensor([0.0]), ember.tensor([1.0])).item()
    1.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("poisson_nll_loss", reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        # Stirling's approximation of log(target!), only where target > 1
        t = target
        safe = ember.where(t > 1, t, ember.ones_like(t))
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        # added in place in torch: an integer target's float32 term keeps the loss's dtype
        loss = (loss + ember.where(t > 1, stirling, ember.zeros_like(stirling))).to(loss.dtype)
    return _reduce("poisson_nll_loss", loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``0.5 (log(var) + (input - target)^2 / var)`` (+ 0.5 log(2 pi) with full).

    var has the input's shape, or one dim fewer (homoscedastic over the last dim), or the
    input's number of dims with exactly one dim of size 1 where the input's differs (shared over
    that dim, e.g. (N, 1, H, W) for an (N, C, H, W) input); it is clamped to eps without blocking
    its gradient.

    >>> import ember
    >>> gaussian_nll_loss(ember.tensor([1.0]), ember.tensor([1.0]), ember.tensor([1.0])).item()
    0.0
    """
    _check_reduction("gaussian_nll_loss", reduction)
    # PyTorch's messages, word for word: programs print and match them
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = ember.full_like(input, float(var))
    elif var.device.type != "meta" and bool((var < 0).any().item()):
        raise ValueError("var has negative entry/entries")
    in_shape, var_shape = _shape(input), _shape(var)
    if var_shape != in_shape:
        if in_shape[:-1] == var_shape:
            var = var.unsqueeze(-1)
        elif not (len(in_shape) == len(var_shape)
                  and sum(v for i, v in zip(in_shape, var_shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    # clamp the value but let the gradient through unchanged (as PyTorch does)
    with ember.no_grad():
        bump = var.clamp(min=eps) - var
    v = var + bump
    loss = 0.5 * (v.log() + (input - target).pow(2) / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce("gaussian_nll_loss", loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1.

    >>> import ember
    >>> x = ember.tensor([[1.0, 0.0]])
    >>> round(cosine_embedding_loss(x, x, ember.tensor([1.0])).item(), 4)
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cosine_embedding_loss", reduction)
    if input1.ndim not in (1, 2) or input1.ndim != input2.ndim:  # (their shapes broadcast)
        raise RuntimeError(
            f"cosine_embedding_loss: expected input1 and input2 both 1-D or both 2-D, "
            f"got {_shape(input1)} and {_shape(input2)}"
        )
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(
            f"cosine_embedding_loss: a {input1.ndim}-D input ({_shape(input1)}) takes a "
            f"{input1.ndim - 1}-D target, got target of shape {_shape(target)}"
        )
    d = input1.ndim - 1
    eps = 1e-12
    prod = (input1 * input2).sum(d)
    m1 = (input1 * input1).sum(d) + eps
    m2 = (input2 * input2).sum(d) + eps
    cos = prod / (m1 * m2).sqrt()
    zeros = ember.zeros_like(cos)
    pos = ember.where(target == 1, 1 - cos, zeros)
    neg = ember.where(target == -1, (cos - margin).clamp(min=0), zeros)
    return _reduce("cosine_embedding_loss", pos + neg, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``.

    >>> import ember
    >>> margin_ranking_loss(ember.tensor([1.0]), ember.tensor([2.0]), ember.tensor([1.0])).item()
    1.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("margin_ranking_loss", reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(
            f"margin_ranking_loss: input1 {_shape(input1)}, input2 {_shape(input2)} and target "
            f"{_shape(target)} must have the same number of dims"
        )
    return _reduce("margin_ranking_loss",
                   (-target * (input1 - input2) + margin).clamp(min=0), reduction)


def _check_triplet_margin(op: str, margin: float) -> None:
    if not margin > 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with d the pairwise p-norm distance.

    >>> import ember
    >>> a = ember.tensor([[0.0, 0.0]])
    >>> triplet_margin_loss(a, a, a + 10).item()
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("triplet_margin_loss", reduction)
    _check_triplet_margin("triplet_margin_loss", margin)
    # any rank, as torch (the distances reduce the last dim), but the same for all three
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(
            f"triplet_margin_loss: anchor {_shape(anchor)}, positive {_shape(positive)} and "
            f"negative {_shape(negative)} must have the same number of dimensions"
        )
    d_ap = pairwise_distance(anchor, positive, p, eps)
    d_an = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_pn = pairwise_distance(positive, negative, p, eps)
        d_an = ember.minimum(d_an, d_pn)
    return _reduce("triplet_margin_loss", (margin + d_ap - d_an).clamp(min=0), reduction)


def _distance(dist: Any, a: Tensor, b: Tensor) -> Tensor:
    d = dist(a, b)
    if not isinstance(d, Tensor):  # a number would fail later at .clamp, naming neither
        raise TypeError(f"triplet_margin_with_distance_loss: distance_function must return a "
                        f"Tensor of distances, got {type(d).__name__}")
    return d


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with a custom distance (pairwise_distance by default).

    >>> import ember
    >>> a = ember.tensor([[0.0, 0.0]])
    >>> triplet_margin_with_distance_loss(a, a, a + 10).item()
    0.0
    """
    _check_reduction("triplet_margin_with_distance_loss", reduction)
    _check_triplet_margin("triplet_margin_with_distance_loss", margin)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            f"triplet_margin_with_distance_loss: the anchor, positive and negative tensors are "
            f"expected to have the same number of dimensions, got anchor {_shape(anchor)}, "
            f"positive {_shape(positive)} and negative {_shape(negative)}"
        )
    dist = distance_function if distance_function is not None else pairwise_distance
    d_ap = _distance(dist, anchor, positive)
    d_an = _distance(dist, anchor, negative)
    if swap:
        d_an = ember.minimum(d_an, _distance(dist, positive, negative))
    return _reduce("triplet_margin_with_distance_loss", (margin + d_ap - d_an).clamp(min=0),
                   reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1.

    >>> import ember
    >>> hinge_embedding_loss(ember.tensor([0.3, 0.3]), ember.tensor([1.0, -1.0])).item()
    0.5
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("hinge_embedding_loss", reduction)
    zeros = ember.zeros_like(input)
    # (a bool margin is a number here, as in PyTorch: True - x, not a bool tensor's rsub)
    margin_clamp = ((float(margin) if isinstance(margin, bool) else margin) - input).clamp(min=0)
    out_margin = ember.where(target != 1, margin_clamp, zeros)
    out_self = ember.where(target != -1, input, zeros)
    return _reduce("hinge_embedding_loss", out_margin + out_self, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))``.

    >>> import ember
    >>> round(soft_margin_loss(ember.tensor([0.0]), ember.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("soft_margin_loss", reduction)
    if input.is_floating_point() and (target.is_floating_point() or target.dtype == ember.bool) \
            and target.dtype != input.dtype:
        target = target.to(input.dtype)  # as torch: the loss has the input's dtype
    # -(target * input), not -target * input: negating an unsigned target first wraps (255 -> 1)
    return _reduce("soft_margin_loss", softplus(-(target * input)), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Per-class binary cross entropy of sigmoid(input), averaged over the classes.

    >>> import ember
    >>> round(multilabel_soft_margin_loss(ember.zeros(1, 2), ember.ones(1, 2)).item(), 4)
    0.6931
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_soft_margin_loss", reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) / input.shape[-1]
    return _reduce("multilabel_soft_margin_loss", loss, reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: ``sum_{i != y} max(0, margin - x[y] + x[i])^p / C``.

    >>> import ember
    >>> multi_margin_loss(ember.tensor([[0.0, 2.0]]), ember.tensor([1])).item()
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multi_margin_loss: expected a 1-D or 2-D input, got shape "
                           f"{_shape(input)}")
    if target.dtype != ember.int64:
        raise RuntimeError(f"multi_margin_loss: expected target of dtype int64 (class "
                           f"indices), got {target.dtype}")
    n = input.shape[0] if input.ndim == 2 else 1
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(
            f"multi_margin_loss: target tensor should be 1-D with size equal to the number of "
            f"input samples ({n}), got target of shape {_shape(target)} for input of shape "
            f"{_shape(input)}"
        )
    x = input if input.ndim == 2 else input.reshape(1, -1)
    t = target.reshape(-1, 1).long()
    c = x.shape[1]
    if t.numel() and ((t < 0).any().item() or (t >= c).any().item()):
        bad = t[(t < 0) | (t >= c)][0].item()
        raise RuntimeError(f"multi_margin_loss: target {bad} is out of range for input of shape "
                           f"{_shape(input)} (class indices must lie in [0, {c}))")
    is_y = ember.zeros(list(_shape(x)), dtype=x.dtype).scatter_(1, t, 1.0)
    xy = (x * is_y).sum(1, keepdim=True)
    # PyTorch's kernel adds a term only where it is > 0: no gradient at an exact tie (clamp
    # would pass one)
    z = ember.relu(margin - xy + x)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * is_y.matmul(weight.to(x.dtype).reshape(c, 1))
    not_y = 1 - is_y
    loss = (z * not_y).sum(1) / c
    if input.ndim != 2:
        loss = loss.reshape(())
    return _reduce("multi_margin_loss", loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss; target holds class indices, ended by the first -1.

    >>> import ember
    >>> multilabel_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]),
    ...                        ember.tensor([[3, 0, -1, 1]])).item()
    0.8500000238418579
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction("multilabel_margin_loss", reduction)
    # PyTorch's checks: a non-empty vector, a matrix of non-empty rows (an empty batch is
    # fine) or a 0-dim input; int64 targets of the input's shape, every entry in [-1, C)
    if not (input.ndim == 0 or (input.ndim in (1, 2) and input.shape[-1] != 0)):
        raise RuntimeError(f"multilabel_margin_loss: expected a non-empty vector or matrix with "
                           f"optional 0-dim batch size, got input of shape {_shape(input)}")
    if target.dtype != ember.int64:
        raise RuntimeError(f"multilabel_margin_loss: expected target of dtype int64 (class "
                           f"indices), got {target.dtype}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    c = x.shape[1]
    if (_shape(target) != _shape(input) if input.ndim == 2
            else target.ndim > 1 or target.numel() != c):
        raise RuntimeError(f"multilabel_margin_loss: inconsistent target size: "
                           f"{_shape(target)} for input of size: {_shape(input)}")
    t = target.reshape(x.shape[0], c)  # (not -1: an empty batch has no row length)
    rows = t.tolist()
    for row in rows:
        for v in row:
            if not -1 <= v < c:  # every entry, also after the terminating -1 (as PyTorch)
                raise RuntimeError(f"multilabel_margin_loss: target class {v} is out of range "
                                   f"for {c} classes (expected class indices in [-1, {c}))")
    is_target = [[0.0] * c for _ in range(x.shape[0])]
    for r, row in enumerate(rows):
        for v in row:
            if v < 0:
                break
            is_target[r][v] = 1.0
    mask = ember.tensor(is_target, dtype=x.dtype).reshape(x.shape[0], c)
    # pairs (j a target class, i not one): max(0, 1 - x[j] + x[i])
    hinge = ember.relu(1 - x.unsqueeze(2) + x.unsqueeze(1))  # no gradient at a tie, as PyTorch
    pair = mask.unsqueeze(2) * (1 - mask).unsqueeze(1)
    loss = (hinge * pair).sum(2).sum(1) / c
    if input.ndim != 2:
        loss = loss.reshape(())
    return _reduce("multilabel_margin_loss", loss, reduction)


def _ctc_check_lengths(tshape: tuple, il: list, tl: list, tlen: int) -> None:
    """Checks ctc_loss's lengths against the targets and the input as PyTorch does, with its
    messages: every target length is at least 0 and the targets hold them all (their sum for
    concatenated 1-D targets, the longest one per row for a (N, S) batch); every input length
    lies in [0, T]."""
    def fail(what: str) -> None:
        raise RuntimeError(f"ctc_loss: {what} (while checking arguments for ctc_loss)")

    def at_least_zero(name: str, vals: list) -> None:
        for v in vals:
            if v < 0:
                fail(f"Expected {name} to have value at least 0, but got value {v}")

    n = len(tl)
    if len(tshape) == 1:
        at_least_zero("target_lengths", tl)
        if tshape[0] != sum(tl):
            fail(f"Expected tensor to have size {sum(tl)} at dimension 0, but got size "
                 f"{tshape[0]} for argument #2 'targets'")
    elif len(tshape) == 2:
        if tshape[0] != n:
            fail(f"Expected tensor to have size {n} at dimension 0, but got size {tshape[0]} for "
                 "argument #2 'targets'")
        at_least_zero("target_lengths", tl)
        longest = max(tl, default=0)
        if tshape[1] < longest:
            fail(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                 f"{tshape[1]} for argument #2 'targets'")
    else:
        fail(f"Expected targets to be 1-D (concatenated) or 2-D (N, S), got shape {list(tshape)}")
    at_least_zero("input_lengths", il)
    for v in il:
        if v > tlen:
            fail(f"Expected input_lengths to have value at most {tlen}, but got value {v}")


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss of log_probs (T, N, C) (or (T, C)).

    The forward (alpha) recursion over the extended label sequence runs in log space as a
    composite of differentiable ops, one time step at a time; 'mean' divides each sample's loss
    by its target length before averaging, as PyTorch does. The gradient is the true gradient
    with respect to log_probs (PyTorch's kernel returns the one with respect to the logits of a
    log_softmax instead; the two agree on the logits' gradient).

    >>> import ember
    >>> lp = ember.zeros(1, 1, 2).log_softmax(2)
    >>> round(ctc_loss(lp, ember.tensor([[1]]), [1], [1]).item(), 4)
    0.6931
    """
    _check_reduction("ctc_loss", reduction)
    _require_tensors("ctc_loss", log_probs=log_probs, targets=targets)
    batched = log_probs.ndim == 3
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(
            f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape {_shape(log_probs)}"
        )
    if log_probs.numel() == 0:
        raise RuntimeError(f"ctc_loss: log_probs tensor must not be empty, got shape "
                           f"{_shape(log_probs)} (T, N, C)")
    lp = log_probs if batched else log_probs.unsqueeze(1)
    tlen, n, c = _shape(lp)
    il = input_lengths.tolist() if isinstance(input_lengths, Tensor) else list(input_lengths)
    tl = target_lengths.tolist() if isinstance(target_lengths, Tensor) else list(target_lengths)
    if not batched:
        il = [il] if isinstance(il, int) else il
        tl = [tl] if isinstance(tl, int) else tl
        targets = targets.reshape(1, -1) if targets.ndim == 1 and len(tl) == 1 else targets
    if len(il) != n:
        raise RuntimeError(f"ctc_loss: input_lengths must be of size batch_size ({n}), got {len(il)}")
    if len(tl) != n:
        raise RuntimeError(
            f"ctc_loss: target_lengths must be of size batch_size ({n}), got {len(tl)}")
    _ctc_check_lengths(_shape(targets), il, tl, tlen)
    if isinstance(blank, bool) or not isinstance(blank, int) or not 0 <= blank < c:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {c}) (the classes of "
                           f"log_probs {_shape(log_probs)}), got {blank!r}")
    if targets.dtype.is_floating_point or targets.dtype.is_complex or targets.dtype == ember.bool:
        raise RuntimeError(f"ctc_loss: targets must be an integer tensor, got {targets.dtype}")
    tg = targets.long().tolist()
    # a huge finite "log 0": with -inf, logsumexp over unreachable states has NaN gradients
    neg_inf = -1e30
    # a log-probability of -inf (a masked class) is that "log 0" too: -inf - -inf in the
    # recursion would turn the loss into NaN instead of inf (or 0 with zero_infinity)
    lp = lp.clamp(min=neg_inf)
    losses = []
    offset = 0
    for b in range(n):
        if targets.ndim == 2:
            lab = tg[b][: tl[b]]
        else:
            lab = tg[offset: offset + tl[b]]
            offset += tl[b]
        bad = [v for v in lab if not 0 <= v < c]
        if bad:
            raise RuntimeError(f"ctc_loss: target labels must lie in [0, {c}) (the classes of "
                               f"log_probs {_shape(log_probs)}), got {bad[0]} in sample {b}")
        if il[b] == 0:
            # no time steps: only the empty target has an alignment (probability 1); the
            # recursion below would start from step 0, which this sample does not have.
            # narrow(0, 0, 0).sum() is a zero that keeps the loss on log_probs' graph
            fill = 0.0 if not lab or zero_infinity else math.inf
            losses.append(lp.narrow(0, 0, 0).sum().reshape(1) + fill)
            continue
        ext = [blank]
        for v in lab:
            ext += [v, blank]
        s = len(ext)
        # emissions of the extended labels at every step: a (C, S) one-hot product
        sel = _select_along(lp, 2, [[(v, 1.0)] for v in ext])  # (T, N, S)
        em = sel.split(1, 1)[b].reshape(tlen, s).split(1, 0)
        # transitions from s-2 are allowed where the label differs from the one two back
        skip = ember.tensor([i >= 2 and ext[i] != blank and ext[i] != ext[i - 2]
                             for i in range(s)])
        ninf = ember.full([s], neg_inf, dtype=lp.dtype)
        init = ember.tensor([0.0 if i < 2 else neg_inf for i in range(s)], dtype=lp.dtype)
        alpha = em[0].reshape(s) + init
        for t in range(1, il[b]):
            prev1 = ember.cat([ninf.split([1, s - 1])[0], alpha.split([s - 1, 1])[0]])
            if s > 2:
                prev2 = ember.cat([ninf.split([2, s - 2])[0], alpha.split([s - 2, 2])[0]])
                prev2 = ember.where(skip, prev2, ninf)
            else:
                prev2 = ninf
            both = ember.cat([alpha.unsqueeze(0), prev1.unsqueeze(0), prev2.unsqueeze(0)])
            alpha = both.logsumexp(0) + em[t].reshape(s)
        tail = alpha.split([s - 2, 2])[1] if s >= 2 else alpha
        nll = -tail.logsumexp(0)
        if nll.item() > 1e29:  # no alignment of the target fits the input: infinite loss
            fill = 0.0 if zero_infinity else math.inf
            nll = ember.where(nll > 1e29, ember.full_like(nll, fill), nll)
        losses.append(nll.reshape(1))
    loss = ember.cat(losses)
    if reduction == "mean":
        lens = ember.tensor([max(v, 1) for v in tl], dtype=loss.dtype)
        return (loss / lens).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.reshape(())


# ---- attention --------------------------------------------------------------------------------
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v``; a bool mask marks the positions that attend.

    >>> import ember
    >>> q = ember.ones(1, 2, 4)
    >>> scaled_dot_product_attention(q, q, q).shape
    ember.Size([1, 2, 4])
    """
    _require_tensors("scaled_dot_product_attention", query=query, key=key, value=value)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(
            f"scaled_dot_product_attention: query {_shape(query)}, key {_shape(key)} and value "
            f"{_shape(value)} must be at least 2-D (..., L, E)"
        )
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(
            f"scaled_dot_product_attention: query {_shape(query)} and key {_shape(key)} must "
            "share the embedding (last) dim"
        )
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(
            f"scaled_dot_product_attention: key {_shape(key)} and value {_shape(value)} must "
            "share the sequence (second to last) dim"
        )
    if is_causal and attn_mask is not None:
        raise RuntimeError(
            "scaled_dot_product_attention: explicit attn_mask should not be set when "
            "is_causal=True"
        )
    if attn_mask is not None and not (attn_mask.dtype == _C.bool
                                      or attn_mask.dtype.is_floating_point):
        raise RuntimeError(
            f"scaled_dot_product_attention: expected attn_mask dtype to be bool (True = take "
            f"part) or floating point (added to the scores), got {attn_mask.dtype} (shape "
            f"{_shape(attn_mask)}) for query of dtype {query.dtype}"
        )
    if attn_mask is not None and attn_mask.ndim:
        # checked here, or the kernel's add names neither the op nor the mask
        lq, sk = query.shape[-2], key.shape[-2]
        if attn_mask.shape[-1] not in (1, sk) or (attn_mask.ndim > 1
                                                    and attn_mask.shape[-2] not in (1, lq)):
            raise RuntimeError(
                f"scaled_dot_product_attention: attn_mask of shape {_shape(attn_mask)} does not "
                f"broadcast to the attention scores (..., L={lq}, S={sk}) of query "
                f"{_shape(query)} and key {_shape(key)}"
            )
    if (enable_gqa and min(query.ndim, key.ndim, value.ndim) >= 3
            and key.shape[-3] != value.shape[-3]):
        # key and value may each have their own number of heads dividing the query's: both are
        # repeated up to the query's heads here (the kernel takes one shared kv-head count)
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk and hv and hq % hk == 0 and hq % hv == 0:
            key = key.repeat_interleave(hq // hk, dim=-3)
            value = value.repeat_interleave(hq // hv, dim=-3)
        else:
            raise RuntimeError(
                f"scaled_dot_product_attention: with enable_gqa the number of query heads "
                f"({hq}) must be a multiple of the key heads ({hk}) and of the value heads "
                f"({hv}); query {_shape(query)}, key {_shape(key)}, value {_shape(value)}"
            )
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                           scale=scale, enable_gqa=enable_gqa)



def multi_head_attention_forward(
    query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
    bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
    out_proj_bias: Tensor | None, training: bool = True, key_padding_mask: Tensor | None = None,
    need_weights: bool = True, attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None, static_v: Tensor | None = None,
    average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """``nn.MultiheadAttention``'s computation with the weights passed in (sequence-first
    (L, N, E) inputs, or unbatched (L, E)), as PyTorch's function of the same name, which code
    such as CLIP's attention pooling calls directly.

    >>> import ember
    >>> x = ember.randn(5, 2, 4)
    >>> out, w = multi_head_attention_forward(x, x, x, 4, 2, ember.randn(12, 4), ember.zeros(12),
    ...     None, None, False, 0.0, ember.eye(4), ember.zeros(4))
    >>> tuple(out.shape), tuple(w.shape)
    ((5, 2, 4), (2, 5, 5))
    """
    from ember.nn.modules.attention import _attention

    if query.shape[-1] != embed_dim_to_check:
        raise RuntimeError(f"multi_head_attention_forward: was expecting embedding dimension of "
                           f"{embed_dim_to_check}, but got {query.shape[-1]}")
    if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads <= 0:
        raise ValueError(f"multi_head_attention_forward: num_heads must be a positive int, got "
                         f"{num_heads!r}")
    if embed_dim_to_check % num_heads:
        raise RuntimeError(f"multi_head_attention_forward: embed_dim {embed_dim_to_check} not "
                           f"divisible by num_heads {num_heads}")
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not "
                                  "supported by ember")
    E = embed_dim_to_check
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise RuntimeError("multi_head_attention_forward: use_separate_proj_weight is True "
                               "but q_proj_weight, k_proj_weight or v_proj_weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise RuntimeError("multi_head_attention_forward: use_separate_proj_weight is False "
                               "but in_proj_weight is None")
        wq, wk, wv = in_proj_weight[:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:]
    if (bias_k is None) != (bias_v is None):
        raise RuntimeError("multi_head_attention_forward: bias_k and bias_v must be given "
                           "together")
    return _attention(query, key, value, num_heads, wq, wk, wv, in_proj_bias, bias_k, bias_v,
                      add_zero_attn, dropout_p if training else 0.0,
                      lambda x: linear(x, out_proj_weight, out_proj_bias), key_padding_mask,
                      need_weights, attn_mask, average_attn_weights, is_causal, False,
                      "multi_head_attention_forward")

from ember.nn._sampling import (  # noqa: E402  (composites over the ops above)
    affine_grid,
    grid_sample,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)

# A non-tensor argument gives a TypeError naming it (not an AttributeError from inside).
_argcheck.guard_module(globals())
# Every public function here takes part in __torch_function__ (ember.overrides).
ember.overrides._install_module(globals(), __name__)


from ember.nn import grad  # noqa: E402,F401  (torch.nn.functional.grad is torch.nn.grad)
