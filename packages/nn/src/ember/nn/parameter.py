"""``Parameter``: a tensor that a ``Module`` registers as one of its learnable weights.

A Parameter is a Python subclass of ``ember.Tensor``: an alias of the data (shared memory and
version counter, no autograd history) that is a leaf and requires grad.

>>> import ember
>>> from ember.nn import Parameter
>>> w = Parameter(ember.zeros(2, 3))
>>> isinstance(w, Parameter), isinstance(w, ember.Tensor), w.requires_grad, w.is_leaf
(True, True, True, True)
>>> isinstance(ember.zeros(2), Parameter)
False
"""

from __future__ import annotations

from typing import Any

import ember
from ember import Tensor


def is_parameter(obj: Any) -> bool:
    """Whether ``obj`` is a Parameter."""
    return isinstance(obj, Parameter)


class Parameter(Tensor):
    """A learnable tensor: ``Parameter(data, requires_grad=True)``.

    Shares ``data``'s memory (like ``data.detach()``), is a leaf, and requires grad unless told
    otherwise. Assigning one to a ``Module`` attribute registers it as a parameter.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.ones(2), requires_grad=False)
    >>> p.requires_grad
    False
    """

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        if data is None:
            data = ember.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(): expected data to be an ember.Tensor, got {type(data).__name__}"
            )
        if requires_grad and not data.is_floating_point():
            raise RuntimeError(
                f"Parameter(): only floating point tensors can require gradients, got dtype "
                f"{data.dtype}; pass requires_grad=False for other dtypes"
            )
        super().__init__(data)
        self.requires_grad_(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) not in memo:
            memo[id(self)] = _copy_parameter(self)
        return memo[id(self)]

    def __reduce_ex__(self, protocol: int):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


def _copy_parameter(p: Tensor, memo: dict | None = None) -> Tensor:
    """A new Parameter with a copy of p's data, requires_grad and grad (for deepcopy)."""
    with ember.no_grad():
        new = Parameter(p.detach().clone(), p.requires_grad)
        if p.grad is not None:
            new.grad = p.grad.detach().clone()
    return new
