"""``ember.compile``: PyTorch's ``torch.compile`` entry point. ember runs eagerly (its kernels
are already compiled C++), so ``compile`` returns a function unchanged, and a module wrapped as
PyTorch wraps it (an ``OptimizedModule`` whose ``_orig_mod`` is the model: its state_dict keys
get the ``_orig_mod.`` prefix), and says so once per process; scripts with ``compile=True`` run
as they are.

>>> import warnings, ember
>>> model = ember.nn.Linear(2, 2)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     ember.compile(model)._orig_mod is model
True
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any, Callable

__all__ = ["compile"]

_noted = False
_lock = threading.Lock()


def _note_once() -> None:
    global _noted
    with _lock:
        if _noted:
            return
        _noted = True
    warnings.warn("ember.compile: ember runs eagerly, so compile() returns the model/function "
                  "unchanged (this note is shown once)", UserWarning, stacklevel=3)


# PyTorch's modes (torch._inductor's list)
_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def compile(model: Callable | None = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Callable = "inductor", mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False) -> Any:
    """Returns a function unchanged and a module wrapped in an ``OptimizedModule`` (or, called
    without a model, a decorator that does), with a one-time note. ``disable=True`` returns the
    model itself. The keyword arguments are accepted and checked for type only.

    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     f = ember.compile(mode="max-autotune")(lambda x: x + 1)
    >>> f(1)
    2
    """
    if mode is not None and options is not None:
        raise RuntimeError("ember.compile: either mode or options can be given, not both")
    if mode is not None and mode not in _MODES:
        # a typo ("max_autotune") would otherwise pass silently
        raise RuntimeError(f"ember.compile: unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(_MODES)}")
    if model is None:
        def decorator(fn: Callable) -> Callable:
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                           options=options, disable=disable)

        return decorator
    if not callable(model):
        raise RuntimeError(f"ember.compile: expected a callable model or function, got "
                           f"{type(model).__name__}")
    if disable:
        return model
    _note_once()
    nn = sys.modules.get("ember.nn")  # a module instance means ember.nn is imported
    if nn is not None and isinstance(model, nn.Module):
        from ember.nn.modules._optimized import OptimizedModule

        return OptimizedModule(model)
    return model
