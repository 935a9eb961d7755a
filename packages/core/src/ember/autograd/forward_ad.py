"""Forward-mode automatic differentiation, as ``torch.autograd.forward_ad``.

Inside a ``dual_level``, ``make_dual(x, v)`` gives a tensor that carries the tangent ``v``; every
differentiable op applied to it computes the tangent of its result (a Jacobian-vector product),
which ``unpack_dual`` returns. Leaving the level drops all its tangents.

>>> import ember
>>> import ember.autograd.forward_ad as fwAD
>>> x = ember.tensor([1.0, 2.0])
>>> with fwAD.dual_level():
...     y = fwAD.make_dual(x, ember.tensor([1.0, 0.0])) ** 2
...     fwAD.unpack_dual(y).tangent.tolist()
[2.0, 0.0]

Ops without a tangent formula raise ``NotImplementedError`` when given a dual tensor (integer and
bool results, such as ``argmax`` or comparisons, simply carry no tangent). Only one level can be
live at a time, as in PyTorch.

Duals may be complex: holomorphic ops give ``t * f'(z)``, ``abs``/``angle``/``real``/``imag``
the real rates of change, ``conj`` the conjugate tangent, as ``torch.func.jvp``. Ops whose
tangents are not checked for complex tensors refuse them, naming the op.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from ember import _C
from ember._C import Tensor

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]


def enter_dual_level() -> int:
    """Enters a new dual level and returns its index (raises if one is already live).

    >>> import ember.autograd.forward_ad as fwAD
    >>> level = fwAD.enter_dual_level()
    >>> fwAD.exit_dual_level(level=level)
    """
    return _C._enter_dual_level()


def _live_level(fn: str) -> int:
    level = _C._current_dual_level()
    if level < 0:
        raise RuntimeError(f"{fn}: no dual level is live; enter one first "
                           "(with ember.autograd.forward_ad.dual_level(): ...)")
    return level


def exit_dual_level(*, level: int | None = None) -> None:
    """Exits the dual level ``level`` (default: the live one); every tangent of it is dropped."""
    _C._exit_dual_level(_live_level("exit_dual_level") if level is None else level)


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of ``tensor`` carrying ``tangent`` (same shape, dtype and device) at ``level``.

    The tangent is kept as is when its memory layout matches ``tensor``'s, copied otherwise.

    >>> import ember
    >>> import ember.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(ember.zeros(2), ember.ones(2))
    ...     fwAD.unpack_dual(d.exp()).tangent.tolist()
    [1.0, 1.0]
    """
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual: expected tensor and tangent to be Tensors, got "
                        f"{type(tensor).__name__} and {type(tangent).__name__}")
    if level is None:
        level = _C._current_dual_level()  # -1 when none: the C++ side explains
    return _C._make_dual(tensor, tangent, level)


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal (a view without the tangent) and the tangent
    (``None`` when the tensor has none at that level)."""

    primal: Tensor
    tangent: Tensor | None


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """Splits a dual tensor into ``(primal, tangent)``; ``tangent`` is ``None`` for a tensor
    without one (or when no level is live).

    >>> import ember
    >>> import ember.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     p, t = fwAD.unpack_dual(fwAD.make_dual(ember.zeros(2), ember.ones(2)) * 3)
    ...     t.tolist()
    [3.0, 3.0]
    """
    if level is None:
        level = _C._current_dual_level()
        if level < 0:
            return UnpackedDualTensor(tensor, None)
    primal, tangent = _C._unpack_dual(tensor, level)
    return UnpackedDualTensor(primal, tangent)


class dual_level(contextlib.ContextDecorator):
    """Context manager (or decorator) for a dual level: ``with dual_level(): ...``.

    Entering returns the level; leaving it drops every tangent created inside.

    >>> import ember
    >>> import ember.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     d = fwAD.make_dual(ember.ones(1), ember.ones(1))
    >>> fwAD.unpack_dual(d).tangent is None
    True
    """

    def __enter__(self) -> int:
        self._level = enter_dual_level()
        return self._level

    def __exit__(self, *exc) -> None:
        exit_dual_level(level=self._level)
