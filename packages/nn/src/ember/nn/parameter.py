"""``Parameter``: a tensor that a ``Module`` registers as one of its learnable weights.

ember's ``Tensor`` is a C++ class without a Python-level constructor, so a Parameter cannot be a
Python subclass of it yet. A Parameter is therefore an ordinary ``ember.Tensor`` (a detached alias
of the data that requires grad) that ember remembers: ``isinstance(t, Parameter)`` is true exactly
for tensors made by ``Parameter(...)``, for as long as that Python object lives.

>>> import ember
>>> from ember.nn import Parameter
>>> w = Parameter(ember.zeros(2, 3))
>>> isinstance(w, Parameter), w.requires_grad, w.is_leaf
(True, True, True)
>>> isinstance(ember.zeros(2), Parameter)
False
"""

from __future__ import annotations

import weakref
from typing import Any

import ember
from ember import Tensor

# id(tensor) -> weak reference to it; the reference's callback drops the entry when it dies.
_registry: dict[int, weakref.ref] = {}


def _forget(key: int, ref: weakref.ref) -> None:
    if _registry.get(key) is ref:
        del _registry[key]


def _mark(t: Tensor) -> Tensor:
    key = id(t)
    _registry[key] = weakref.ref(t, lambda r, k=key: _forget(k, r))
    return t


def is_parameter(obj: Any) -> bool:
    """Whether ``obj`` is a tensor created by ``Parameter(...)``."""
    ref = _registry.get(id(obj))
    return ref is not None and ref() is obj


class _ParameterMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return is_parameter(obj)


class Parameter(metaclass=_ParameterMeta):
    """A learnable tensor: ``Parameter(data, requires_grad=True)``.

    Shares ``data``'s memory (like ``data.detach()``), is a leaf, and requires grad unless told
    otherwise. Assigning one to a ``Module`` attribute registers it as a parameter.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.ones(2), requires_grad=False)
    >>> p.requires_grad
    False
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Any:
        if data is None:
            data = ember.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(
                f"Parameter(): expected data to be an ember.Tensor, got {type(data).__name__}"
            )
        if requires_grad and not (data.is_floating_point()):
            raise RuntimeError(
                f"Parameter(): only floating point tensors can require gradients, got dtype "
                f"{data.dtype}; pass requires_grad=False for other dtypes"
            )
        t = data.detach()
        t.requires_grad_(requires_grad)
        return _mark(t)


def _copy_parameter(p: Tensor, memo: dict | None = None) -> Tensor:
    """A new Parameter with a copy of p's data, requires_grad and grad (for deepcopy)."""
    with ember.no_grad():
        new = Parameter(p.detach().clone(), p.requires_grad)
        if p.grad is not None:
            new.grad = p.grad.detach().clone()
    return new
