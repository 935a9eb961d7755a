"""Gradient clipping by total norm or by value.

>>> import ember
>>> from ember.nn.utils import clip_grad_norm_
>>> p = ember.nn.Parameter(ember.zeros(2))
>>> p.grad = ember.tensor([3.0, 4.0])
>>> clip_grad_norm_([p], max_norm=1.0).item()
5.0
>>> [round(v, 4) for v in p.grad.tolist()]
[0.6, 0.8]
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Iterable

import ember
from ember import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _as_list(tensors: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(
    tensors: Tensor | Iterable[Tensor],
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type``-norm of all tensors together (as if concatenated into one vector)."""
    ts = _as_list(tensors)
    norm_type = float(norm_type)
    if not ts:
        return ember.tensor(0.0)
    for i, t in enumerate(ts):
        # e.g. a .grad that is None: named, not an AttributeError (sparse gradients are not
        # Tensor instances but have a norm)
        if not (isinstance(t, Tensor) or hasattr(t, "norm")):
            raise RuntimeError(f"get_total_norm: expected Tensors, but tensors[{i}] is "
                               f"{type(t).__name__} (pass the gradients that are defined)")
    with ember.no_grad():  # one grad-mode switch, not a detach() per tensor
        norms = [t.norm(norm_type) for t in ts]
        # the promoted dtype, as PyTorch's stack gives: casting to the first norm's dtype would
        # overflow a float32 gradient's norm to inf in a float16-first model and zero every
        # gradient
        dtype = functools.reduce(ember.promote_types, {n.dtype for n in norms})
        device = norms[0].device
        # (converted only where needed: a .to() per norm costs as much as the norm of a small
        # gradient)
        stacked = ember.stack([n if n.dtype == dtype and n.device == device
                               else n.to(device=device, dtype=dtype) for n in norms])
        total = stacked.norm(norm_type)
    if error_if_nonfinite and not bool(ember.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite "
            f"({total.item()}), so it cannot be clipped. Pass error_if_nonfinite=False to scale "
            "the gradients by the non-finite norm anyway"
        )
    return total


def clip_grads_with_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    total_norm: Tensor,
    foreach: bool | None = None,
) -> None:
    """Scales the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    grads = _grads(parameters)
    if not grads:
        return
    denom = total_norm + 1e-6
    # full_like(...).div_: ``float / Tensor`` rounds the number to float32 in ember today
    coef = ember.full_like(denom, float(max_norm)).div_(denom).clamp(max=1.0)
    with ember.no_grad():
        coefs: dict = {}  # coef in each gradient dtype, converted once per dtype
        for g in grads:
            c = coefs.get(g.dtype)
            if c is None:
                c = coefs[g.dtype] = coef.to(g.dtype)
            g.mul_(c)


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Rescales the gradients in place so that their total norm is at most ``max_norm``.

    Returns the total norm before clipping. ``norm_type`` may be ``math.inf``.
    """
    try:
        norm_type = float(norm_type)
    except (TypeError, ValueError):
        raise ValueError(f"clip_grad_norm_: norm_type must be a number (2.0, 1.0, math.inf, "
                         f"...), got {norm_type!r}") from None
    params = _as_list(parameters)
    grads = _grads(params)
    if not grads:
        return ember.tensor(0.0)
    if math.isnan(float(max_norm)):
        raise ValueError("clip_grad_norm_: max_norm is NaN")
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_norm(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The old name of :func:`clip_grad_norm_` (deprecated, as in PyTorch; warns once per call
    site).

    >>> import warnings, ember
    >>> w = ember.nn.Parameter(ember.ones(2))
    >>> w.grad = ember.full((2,), 3.0)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     round(ember.nn.utils.clip_grad_norm([w], 1.0).item(), 4)
    4.2426
    """
    warnings.warn(
        "ember.nn.utils.clip_grad_norm is now deprecated in favor of "
        "ember.nn.utils.clip_grad_norm_.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamps every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with ember.no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
