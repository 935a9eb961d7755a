"""Grad modes: context managers and decorators that switch gradient recording (thread-local).

>>> import ember
>>> x = ember.ones(2, requires_grad=True)
>>> with ember.no_grad():
...     y = x * 2
>>> y.requires_grad
False
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ember import _C


class _GradModeContext:
    """Base: a context manager that is also a decorator (fresh state per call)."""

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(*self._args):
                return fn(*args, **kwargs)

        return wrapper

    _args: tuple = ()

    def __enter__(self) -> None:
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode())

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self._prev)

    def _mode(self) -> bool:
        raise NotImplementedError


class no_grad(_GradModeContext):
    """Disables gradient recording inside the block or decorated function."""

    def _mode(self) -> bool:
        return False


class enable_grad(_GradModeContext):
    """Enables gradient recording (inside a no_grad block, say)."""

    def _mode(self) -> bool:
        return True


class inference_mode(_GradModeContext):
    """Like no_grad (ember has no separate inference tensors yet)."""

    def __init__(self, mode: bool = True) -> None:
        self._args = (mode,)
        self._on = mode

    def _mode(self) -> bool:
        return not self._on and _C.is_grad_enabled()


class set_grad_enabled(_GradModeContext):
    """Sets grad mode on or off; effective immediately, and restored when used as a context."""

    def __init__(self, mode: bool) -> None:
        self._args = (mode,)
        self._prev = _C.is_grad_enabled()
        self._mode_value = bool(mode)
        _C._set_grad_enabled(self._mode_value)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self._prev)

    def _mode(self) -> bool:
        return self._mode_value


def is_grad_enabled() -> bool:
    """Whether gradients are recorded on this thread."""
    return _C.is_grad_enabled()
