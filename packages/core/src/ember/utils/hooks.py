"""``torch.utils.hooks``: ``RemovableHandle``, the handle hook registrations return.

>>> from collections import OrderedDict
>>> from ember.utils.hooks import RemovableHandle
>>> hooks = OrderedDict()  # weakly referenced: an OrderedDict, as modules keep their hooks
>>> h = RemovableHandle(hooks)
>>> hooks[h.id] = print
>>> h.remove(); len(hooks)
0
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

__all__ = ["RemovableHandle", "unserializable_hook",  # noqa: F822  (RemovableHandle: __getattr__)
           "warn_if_has_hooks"]


def unserializable_hook(f: Callable) -> Callable:
    """Marks ``f``, a tensor backward hook, as one that is not meant to be serialized:
    :func:`warn_if_has_hooks` stays quiet about it. Returns ``f``."""
    f.__torch_unserializable__ = True  # type: ignore[attr-defined]
    return f


def _tensor_hooks(tensor: Any) -> list:
    hooks = getattr(tensor, "_backward_hooks", None)
    if hooks:
        return list(hooks.values()) if isinstance(hooks, dict) else list(hooks)
    fns = getattr(tensor, "_leaf_hook_fns", None)
    if fns is None or not callable(fns):
        return []
    # (ember keeps the Python callables of a leaf's hooks; those of a non-leaf stay in its node)
    return [getattr(h, "_ember_user_hook", h) for h in fns()[0]]


def warn_if_has_hooks(tensor: Any) -> None:
    """Warns (UserWarning) for each backward hook of ``tensor`` that is not marked
    :func:`unserializable_hook`: serializing the tensor drops its hooks."""
    for hook in _tensor_hooks(tensor):
        if not hasattr(hook, "__torch_unserializable__"):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If this is "
                          "expected, you can decorate the function with "
                          "@torch.utils.hooks.unserializable_hook to suppress this warning",
                          stacklevel=2)


def __getattr__(name: str) -> Any:
    if name == "RemovableHandle":  # the nn package's class (one type for every hook handle)
        from ember.nn.modules.module import RemovableHandle

        return RemovableHandle
    raise AttributeError(f"module 'ember.utils.hooks' has no attribute {name!r}")
