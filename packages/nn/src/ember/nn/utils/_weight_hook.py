"""What the hook-based ``spectral_norm`` and ``weight_norm`` share when they attach their
forward pre-hook to a module's parameter.

>>> import ember
>>> from ember.nn.utils._weight_hook import attach_checks
>>> from ember.nn.utils.spectral_norm import SpectralNorm
>>> m = ember.nn.Linear(2, 3)
>>> fn, w = attach_checks(m, "weight", SpectralNorm, SpectralNorm, "spectral_norm", "spectral")
>>> fn.name, tuple(w.shape)
('weight', (3, 2))
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter, is_lazy

__all__ = ["attach_checks"]

H = TypeVar("H")


def attach_checks(
    module: Module, name: str, hook_cls: type, make: Callable[[], H], api: str, kind: str
) -> tuple[H, Parameter]:
    """Refuses a second ``hook_cls`` hook on ``module.<name>``, builds the hook with ``make()``
    and returns it with the (initialized) parameter ``<name>``; ``api`` names the function in
    errors, ``kind`` the normalization ("spectral", "weight")."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, hook_cls) and hook.name == name:
            raise RuntimeError(f"Cannot register two {api} hooks on the same parameter {name}")
    fn = make()
    weight: Any = module._parameters.get(name)
    if weight is None:
        raise ValueError(
            f"{api}: {module._get_name()} has no parameter '{name}' (its parameters: "
            f"{sorted(k for k, p in module._parameters.items() if p is not None)})"
        )
    if is_lazy(weight):
        raise ValueError(
            f"The module passed to `{hook_cls.__name__}` can't have uninitialized parameters. "
            f"Make sure to run the dummy forward before applying {kind} normalization"
        )
    return fn, weight
