"""``ember.compiler``: ``torch.compiler``'s entry points for code that guards on or steers the
graph compiler. ember runs eagerly (see :func:`ember.compile`): nothing is ever being compiled,
and the decorators that tell the compiler to skip or trust a function leave it as it is.

>>> import ember
>>> ember.compiler.is_compiling()
False
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["compile", "is_compiling", "is_dynamo_compiling", "disable", "reset",
           "allow_in_graph", "assume_constant_result", "cudagraph_mark_step_begin"]


def compile(*args: Any, **kwargs: Any) -> Any:
    """:func:`ember.compile`."""
    from ember._compile import compile as _compile

    return _compile(*args, **kwargs)


def is_compiling() -> bool:
    """False: ember code is never traced by a graph compiler."""
    return False


def is_dynamo_compiling() -> bool:
    """False, as :func:`is_compiling`."""
    return False


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None
            ) -> Any:
    """Excludes ``fn`` from compilation: here, ``fn`` itself (usable bare or called)."""
    if fn is None:
        return lambda f: f
    return fn


def reset() -> None:
    """Clears compilation caches: ember has none."""


def allow_in_graph(fn: Callable) -> Callable:
    """``fn`` itself."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    """``fn`` itself."""
    return fn


def cudagraph_mark_step_begin() -> None:
    """No effect (no CUDA graphs)."""
