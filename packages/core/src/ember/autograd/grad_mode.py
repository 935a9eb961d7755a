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
import inspect
import threading
from typing import Any, Callable

from ember import _C


def _wrap_generator(ctx_factory: Callable[[], Any], gen_fn: Callable) -> Callable:
    """A generator function whose every resumption runs inside a fresh context."""

    @functools.wraps(gen_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gen = gen_fn(*args, **kwargs)
        try:
            with ctx_factory():
                item = gen.send(None)
            while True:
                try:
                    sent = yield item
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException as exc:  # thrown in: pass it on inside the context
                    with ctx_factory():
                        item = gen.throw(exc)
                else:
                    with ctx_factory():
                        item = gen.send(sent)
        except StopIteration as stop:
            return stop.value

    return wrapper


class _GradModeContext:
    """Base: a context manager that is also a decorator (fresh state per call, generator
    functions included)."""

    def __call__(self, fn: Callable) -> Callable:
        if inspect.isclass(fn):
            raise RuntimeError(f"{type(self).__name__} can't decorate a class; decorate its "
                               "methods instead")
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(self.clone, fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    _args: tuple = ()

    def clone(self) -> "_GradModeContext":
        """A fresh context manager with the same settings."""
        return self.__class__(*self._args)

    def __enter__(self) -> None:
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode())

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self._prev)

    def _mode(self) -> bool:
        raise NotImplementedError


class _NoParamContext(_GradModeContext):
    """A context that takes no settings, so that it also decorates bare: ``@no_grad`` as well
    as ``@no_grad()``."""

    def __new__(cls, orig_func: Callable | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func: Callable | None = None) -> None:
        pass


class no_grad(_NoParamContext):
    """Disables gradient recording inside the block or decorated function (``@no_grad`` or
    ``@no_grad()``).

    >>> import ember
    >>> with ember.no_grad():
    ...     y = ember.ones(2, requires_grad=True) * 2
    >>> y.requires_grad
    False
    """

    def _mode(self) -> bool:
        return False


class enable_grad(_NoParamContext):
    """Enables gradient recording (inside a no_grad block, say)."""

    def _mode(self) -> bool:
        return True


class inference_mode(_GradModeContext):
    """Inference mode: gradient recording off, and ``is_inference_mode_enabled()`` true;
    ``inference_mode(False)`` turns both back on inside an inference block, as in PyTorch.
    Decorates bare (``@inference_mode``) or called. Tensors made inside are inference tensors
    (``Tensor.is_inference()``; views of them too): outside inference mode autograd refuses to
    save them for backward or to see them updated in place (clone one to get a normal tensor).

    >>> import ember
    >>> with ember.inference_mode():
    ...     y = ember.ones(2) * 2
    ...     ember.is_inference_mode_enabled(), ember.is_grad_enabled()
    (True, False)
    >>> y.is_inference(), y.clone().is_inference()
    (True, False)
    """

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # @inference_mode on a function

    def __init__(self, mode: bool = True) -> None:
        self._args = (mode,)
        self._on = mode

    def __enter__(self) -> None:
        self._prev_inference = is_inference_mode_enabled()
        _C._set_inference_mode_enabled(self._on)
        super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        _C._set_inference_mode_enabled(self._prev_inference)

    def _mode(self) -> bool:
        return not self._on


def is_inference_mode_enabled() -> bool:
    """Whether inference_mode is on for this thread.

    >>> import ember
    >>> ember.is_inference_mode_enabled()
    False
    """
    return _C._is_inference_mode_enabled()


class set_grad_enabled(_GradModeContext):
    """Sets grad mode on or off; effective immediately, and restored when used as a context."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):  # as PyTorch: set_grad_enabled(None) is no "off"
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not "
                            f"{type(mode).__name__}")
        self._args = (mode,)
        self._prev = _C.is_grad_enabled()
        self._mode_value = bool(mode)
        _C._set_grad_enabled(self._mode_value)

    def __call__(self, fn: Callable) -> Callable:
        # as a decorator the mode applies inside the function only, not from here on
        _C._set_grad_enabled(self._prev)
        return super().__call__(fn)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self._prev)

    def _mode(self) -> bool:
        return self._mode_value


def is_grad_enabled() -> bool:
    """Whether gradients are recorded on this thread."""
    return _C.is_grad_enabled()


# Whether backward may use worker threads. Thread-local, as in PyTorch. Ember's engine always
# runs backward on the calling thread, so the switch is recorded (and reported by
# is_multithreading_enabled) but has nothing to turn off.
_multithreading = threading.local()


def is_multithreading_enabled() -> bool:
    """Whether multithreaded backward is enabled on this thread (True unless turned off with
    :class:`set_multithreading_enabled`).

    >>> import ember
    >>> ember.autograd.is_multithreading_enabled()
    True
    """
    return getattr(_multithreading, "on", True)


class set_multithreading_enabled(_GradModeContext):
    """Enables or disables multithreaded backward, as a function (effective at once) or a
    context manager / decorator (restored on exit); thread-local. Ember's engine runs every
    backward on the calling thread whatever the setting (what PyTorch does with ``False``), so
    results never depend on it.

    >>> import ember
    >>> with ember.autograd.set_multithreading_enabled(False):
    ...     ember.autograd.is_multithreading_enabled()
    False
    """

    def __init__(self, mode: bool) -> None:
        self._args = (mode,)
        self._prev = is_multithreading_enabled()
        self._mode_value = bool(mode)
        _multithreading.on = self._mode_value

    def __call__(self, fn: Callable) -> Callable:
        # as a decorator the mode applies inside the function only (PyTorch also leaves it set
        # from the decoration on, an accident set_grad_enabled avoids; ember avoids it here too)
        _multithreading.on = self._prev
        return super().__call__(fn)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _multithreading.on = self._prev

    def _mode(self) -> bool:
        return self._mode_value
