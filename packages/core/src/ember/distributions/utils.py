"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits, lazy properties.

>>> import ember
>>> from ember.distributions.utils import broadcast_all, probs_to_logits
>>> loc, scale = broadcast_all(ember.zeros(3), 1.0)
>>> tuple(scale.shape)
(3,)
>>> round(probs_to_logits(ember.tensor([0.5]), is_binary=True).item(), 6)
0.0
"""

from __future__ import annotations

import functools
from numbers import Number
from typing import Any, Callable, Sequence

import ember
from ember import Tensor

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "sum_rightmost",
]


def broadcast_all(*values: Tensor | Number) -> tuple[Tensor, ...]:
    """Turns numbers into tensors (dtype and device of the first tensor argument, else the
    default dtype) and broadcasts everything to one shape (``()`` when all are numbers, so a
    distribution can take its batch shape from a result).

    >>> import ember
    >>> a, b = broadcast_all(ember.ones(2, 1, dtype=ember.float64), 3)
    >>> tuple(b.shape), b.dtype
    ((2, 1), ember.float64)
    """
    like = None
    for v in values:
        if isinstance(v, Tensor):
            like = v
            break
        if not isinstance(v, Number):
            raise ValueError(
                "Input arguments must all be instances of numbers.Number or ember.Tensor, "
                f"but got {type(v).__name__}"
            )
    for v in values:
        if not isinstance(v, (Tensor, Number)):
            raise ValueError(
                "Input arguments must all be instances of numbers.Number or ember.Tensor, "
                f"but got {type(v).__name__}"
            )
    if like is None:
        dtype, device = ember.get_default_dtype(), None
    else:
        dtype, device = like.dtype, like.device
    tensors = [
        v if isinstance(v, Tensor) else ember.tensor(float(v), dtype=dtype, device=device) for v in values
    ]
    shape = tuple(ember.broadcast_shapes(*(tuple(t.shape) for t in tensors)))
    # Tensors that already have the shape are returned as they are (so ``d.loc is loc``).
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in tensors)


def _clamp_by_zero(x: Tensor) -> Tensor:
    """max(x, 0) whose gradient at exactly 0 is 1/2 (clamp alone passes 1 there), so that the
    stable softplus below has softplus'(0) = sigmoid(0) = 1/2."""
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _stable_softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)) without overflow, with the exact gradient sigmoid(x) everywhere (0
    included: abs(x) has gradient 0 there and _clamp_by_zero supplies the 1/2).

    >>> import ember
    >>> x = ember.zeros(1, requires_grad=True)
    >>> _stable_softplus(x).sum().backward()
    >>> x.grad
    tensor([0.5000])
    """
    return _clamp_by_zero(x) + ember.log1p(ember.exp(-ember.abs(x)))


def _standard_normal(shape: Sequence[int], dtype: Any, device: Any) -> Tensor:
    """Standard normal draws of the given shape (never part of an autograd graph)."""
    with ember.no_grad():
        return ember.randn(tuple(shape), dtype=dtype, device=device)


def sum_rightmost(value: Tensor | float, dim: int) -> Tensor | float:
    """Sums the rightmost ``dim`` dimensions of ``value`` (numbers are returned as they are).

    >>> import ember
    >>> tuple(sum_rightmost(ember.ones(2, 3, 4), 2).shape)
    (2,)
    """
    if dim == 0 or not isinstance(value, Tensor):
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


_sum_rightmost = sum_rightmost


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Logits to probabilities: the sigmoid for a binary variable, else the softmax over the
    last dimension.

    >>> import ember
    >>> logits_to_probs(ember.tensor([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """
    if is_binary:
        return ember.sigmoid(logits)
    return ember.softmax(logits, -1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Keeps probabilities inside [eps, 1 - eps] of their dtype, so their logs stay finite.

    >>> import ember
    >>> clamp_probs(ember.tensor([0.0, 1.0], dtype=ember.float64)).tolist()[0] > 0
    True
    """
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities to logits: log-odds for a binary variable, else log-probabilities
    (clamped away from 0 and 1 first).

    >>> import ember
    >>> round(probs_to_logits(ember.tensor([0.5, 0.5]))[0].item(), 4)
    -0.6931
    """
    p = clamp_probs(probs)
    if is_binary:
        return ember.log(p) - ember.log1p(-p)
    return ember.log(p)


class lazy_property:  # noqa: N801  (torch's name)
    """A property computed on first access and then stored on the instance (with autograd on,
    so a lazily derived parameter stays differentiable).

    >>> class A:
    ...     @lazy_property
    ...     def x(self):
    ...         return 3
    >>> A().x
    3
    """

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)  # type: ignore[arg-type]

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
