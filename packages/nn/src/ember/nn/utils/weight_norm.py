"""Weight normalization through a forward pre-hook (the original API; see also
``ember.nn.utils.parametrizations.weight_norm``).

``weight_norm(module, name, dim)`` replaces the parameter ``name`` by a magnitude ``name_g``
and a direction ``name_v``; before every forward the weight is recomputed as
``name_g * name_v / ||name_v||``, the norm taken over every dimension but ``dim``
(``dim=None``: over the whole tensor).

>>> import ember, warnings
>>> from ember.nn.utils import weight_norm, remove_weight_norm
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", FutureWarning)  # deprecated, as in PyTorch
...     m = weight_norm(ember.nn.Linear(20, 40), name="weight")
>>> tuple(m.weight_g.shape), tuple(m.weight_v.shape)
((40, 1), (40, 20))
>>> m = remove_weight_norm(m)
>>> sorted(n for n, _ in m.named_parameters())
['bias', 'weight']
"""

from __future__ import annotations

import warnings
from typing import Any

import ember
from ember import Tensor
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils._weight_hook import attach_checks

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def _norm_except_dim(v: Tensor, pow: float, dim: int) -> Tensor:
    """The ``pow``-norm of ``v`` over every dimension but ``dim``, keeping ``v``'s rank
    (``dim == -1``: the norm of the whole tensor, a 0-d tensor)."""
    if dim == -1:
        return v.norm(pow)
    if dim < 0:
        dim += v.ndim
    if not 0 <= dim < v.ndim:
        raise IndexError(
            f"weight norm: dim {dim} is out of range for a weight of shape {tuple(v.shape)}"
        )
    others = tuple(d for d in range(v.ndim) if d != dim)
    if not others:  # a 1-D weight normalized along its only dimension: each entry alone
        return v.abs()
    return v.norm(pow, dim=others, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    return v * (g / _norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    name: str
    dim: int

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        warnings.warn(
            "ember.nn.utils.weight_norm is deprecated in favor of "
            "ember.nn.utils.parametrizations.weight_norm.",
            FutureWarning,
            stacklevel=3,
        )
        fn, weight = attach_checks(
            module, name, WeightNorm, lambda: WeightNorm(name, dim), "weight_norm", "weight"
        )
        del module._parameters[name]
        with ember.no_grad():
            g = _norm_except_dim(weight.detach(), 2, fn.dim)
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrizes ``module.<name>`` as ``<name>_g * <name>_v / ||<name>_v||`` (new
    parameters ``<name>_g``, ``<name>_v``; the norm over all dims but ``dim``, or the whole
    tensor with ``dim=None``). Returns the module. Deprecated, as in PyTorch, in favor of
    ``parametrizations.weight_norm``."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undoes ``weight_norm``: ``<name>`` is a plain parameter again (with the current
    normalized value)."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
