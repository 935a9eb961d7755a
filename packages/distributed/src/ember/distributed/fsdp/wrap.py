"""Which submodules FullyShardedDataParallel wraps as units of their own
(torch.distributed.fsdp.wrap).

An auto-wrap policy is called as ``policy(module=m, recurse=..., nonwrapped_numel=n)``: with
``recurse=True`` it says whether to look into ``m``'s children, with ``recurse=False`` whether
to wrap ``m`` itself, ``n`` being the number of ``m``'s parameters not yet in a wrapped unit.
``ModuleWrapPolicy`` and ``CustomPolicy`` objects are accepted too. ``enable_wrap`` / ``wrap``
wrap modules by hand with shared arguments.

>>> import functools
>>> from ember import nn

from .flat_param import is_flattened
>>> from ember.distributed.fsdp.wrap import size_based_auto_wrap_policy
>>> policy = functools.partial(size_based_auto_wrap_policy, min_num_params=100)
>>> policy(module=nn.Linear(10, 10), recurse=False, nonwrapped_numel=110)
True
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterable, Iterator

from ember import nn

from .flat_param import is_flattened

__all__ = [
    "CustomPolicy", "ModuleWrapPolicy", "always_wrap_policy", "enable_wrap",
    "lambda_auto_wrap_policy", "size_based_auto_wrap_policy", "transformer_auto_wrap_policy",
    "wrap",
]

# Modules whose insides are never wrapped apart / that are never units themselves (PyTorch's
# defaults for the size-based policy).
FORCE_LEAF_MODULES = {nn.MultiheadAttention}
EXCLUDE_WRAP_MODULES = {nn.ModuleList, nn.ModuleDict}


def always_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
    """Wraps every submodule."""
    return True


def _module_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int,
                        module_classes: Iterable[type]) -> bool:
    return True if recurse else isinstance(module, tuple(module_classes))


def transformer_auto_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int,
                                 transformer_layer_cls: Iterable[type]) -> bool:
    """Wraps every instance of the classes in ``transformer_layer_cls``; bind it with
    ``functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})``."""
    return _module_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls)


def lambda_auto_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int,
                            lambda_fn: Callable[[nn.Module], bool]) -> bool:
    """Wraps the submodules for which ``lambda_fn(module)`` is true."""
    return True if recurse else bool(lambda_fn(module))


def size_based_auto_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int,
                                min_num_params: int = int(1e8),
                                force_leaf_modules: set[type] | None = None,
                                exclude_wrap_modules: set[type] | None = None) -> bool:
    """Wraps a submodule once it holds at least ``min_num_params`` parameters not wrapped
    deeper; never looks into ``force_leaf_modules`` nor wraps ``exclude_wrap_modules``."""
    force_leaf = FORCE_LEAF_MODULES if force_leaf_modules is None else force_leaf_modules
    exclude = EXCLUDE_WRAP_MODULES if exclude_wrap_modules is None else exclude_wrap_modules
    if recurse:
        return not isinstance(module, tuple(force_leaf))
    return nonwrapped_numel >= min_num_params and not isinstance(module, tuple(exclude))


# PyTorch exposes the defaults as attributes of the policy.
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = FORCE_LEAF_MODULES  # type: ignore[attr-defined]
size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = EXCLUDE_WRAP_MODULES  # type: ignore[attr-defined]


class ModuleWrapPolicy:
    """Wraps every submodule that is an instance of one of ``module_classes``.

    >>> from ember import nn

from .flat_param import is_flattened
    >>> ModuleWrapPolicy({nn.Linear})(nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
    True
    """

    def __init__(self, module_classes: Iterable[type]) -> None:
        self._module_classes = set(module_classes)

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int = -1,
                 *args: Any, **kwargs: Any) -> bool:
        return _module_wrap_policy(module, recurse, nonwrapped_numel, self._module_classes)

    def __repr__(self) -> str:
        names = ", ".join(sorted(c.__name__ for c in self._module_classes))
        return f"ModuleWrapPolicy({{{names}}})"


class CustomPolicy:
    """``lambda_fn(module)`` returns False (not wrapped), True (wrapped with the root's
    arguments) or a dict of arguments overriding the root's for that unit."""

    def __init__(self, lambda_fn: Callable[[nn.Module], bool | dict[str, Any]]) -> None:
        self._lambda_fn = lambda_fn

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int = -1,
                 *args: Any, **kwargs: Any) -> bool | dict[str, Any]:
        return True if recurse else self._lambda_fn(module)


def _recursive_wrap(module: nn.Module, policy: Callable, wrapper_cls: type,
                    ignored_mods: set[nn.Module], ignored_ids: set[int], /,
                    only_wrap_children: bool = False, **kwargs: Any) -> tuple[nn.Module, int]:
    """Wraps ``module``'s subtree bottom-up as ``policy`` says; returns the (possibly wrapped)
    module and the number of parameters now inside wrapped units."""
    if isinstance(module, wrapper_cls) or module in ignored_mods:
        return module, 0
    numel = sum(p.numel() for p in module.parameters()
                if id(p) not in ignored_ids and not is_flattened(p))
    if not policy(module=module, recurse=True, nonwrapped_numel=numel):
        return module, 0
    wrapped = 0
    for name, child in list(module.named_children()):
        if child in ignored_mods:
            continue
        new_child, n = _recursive_wrap(child, policy, wrapper_cls, ignored_mods, ignored_ids,
                                       **kwargs)
        if new_child is not child:
            setattr(module, name, new_child)
        wrapped += n
    if only_wrap_children:
        return module, wrapped
    decision = policy(module=module, recurse=False, nonwrapped_numel=numel - wrapped)
    if decision:
        overrides = decision if isinstance(decision, dict) else {}
        return wrapper_cls(module, **{**kwargs, **overrides}), numel
    return module, wrapped


class _WrapConfig(threading.local):
    def __init__(self) -> None:
        self.active = False
        self.wrapper_cls: Any = None
        self.kwargs: dict[str, Any] = {}


_config = _WrapConfig()


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls: Any, **wrapper_kwargs: Any) -> Iterator[None]:
    """Within it, ``wrap(module)`` returns ``wrapper_cls(module, **wrapper_kwargs)``.

    >>> from ember import nn

from .flat_param import is_flattened
    >>> with enable_wrap(wrapper_cls=lambda m, **kw: ("wrapped", m)):
    ...     wrap(nn.Identity())[0]
    'wrapped'
    """
    if _config.active:
        raise NotImplementedError("You are already within an autowrap context and we currently "
                                  "do not supported nested autowrap.")
    _config.active, _config.wrapper_cls, _config.kwargs = True, wrapper_cls, dict(wrapper_kwargs)
    try:
        yield
    finally:
        _config.active, _config.wrapper_cls, _config.kwargs = False, None, {}


def wrap(module: nn.Module, **wrap_overrides: Any) -> nn.Module:
    """``module`` wrapped with ``enable_wrap``'s class and arguments (``wrap_overrides`` take
    precedence); outside ``enable_wrap`` the module itself."""
    if not _config.active:
        return module
    return _config.wrapper_cls(module, **{**_config.kwargs, **wrap_overrides})
