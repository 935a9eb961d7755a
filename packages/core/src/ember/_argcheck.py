"""Clear errors for non-tensor arguments of the hand-written Python functions.

The functions written in Python (``ember.nn.functional``, ``ember.linalg``, ``ember.special``,
``ember.fft`` and the compat ops) use their tensor arguments directly, so a list, a number or
``None`` passed where a tensor is expected used to escape as an ``AttributeError`` from deep
inside (``'list' object has no attribute 'ndim'``). :func:`guard_module` wraps a module's public
functions so that such an ``AttributeError`` becomes the ``TypeError`` torch raises, naming the
function and the argument. Nothing is checked on the normal path: the wrapper only looks at the
arguments once an ``AttributeError`` has escaped, so correct calls pay one extra call frame.

>>> import ember
>>> try:
...     ember.nn.functional.normalize([1.0, 2.0])
... except TypeError as e:
...     print(e)
normalize(): argument 'input' must be Tensor, not list
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ember._C import Tensor

__all__ = ["guard", "guard_module"]


def _tensor_params(fn: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, bool]] | None:
    """fn's signature and, for each parameter annotated as a Tensor, whether None is allowed."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params: dict[str, bool] = {}
    for p in sig.parameters.values():
        ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__",
                                                                         "")
        parts = [a.strip() for a in str(ann).split("|")]
        if parts and parts[0] == "Tensor" and all(a in ("Tensor", "None") for a in parts):
            params[p.name] = "None" in parts or p.default is None
    return (sig, params) if params else None


def not_a_tensor(v: Any) -> str:
    """How "must be Tensor, not ..." names v's type: its name, qualified when another
    framework's type shares ember's (``torch.Tensor``), with the conversion to use."""
    t = type(v)
    if t.__name__ == "Tensor" and not isinstance(v, Tensor):
        return (f"{t.__module__}.{t.__qualname__} (another framework's tensor: convert it with "
                "ember.as_tensor(x), which shares its memory)")
    return t.__name__


def _bad_argument(name: str, info: tuple[inspect.Signature, dict[str, bool]], args: tuple,
                  kwargs: dict) -> TypeError | None:
    sig, params = info
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    for pname, optional in params.items():
        if pname not in bound.arguments:
            continue
        v = bound.arguments[pname]
        if isinstance(v, Tensor) or (v is None and optional):
            continue
        return TypeError(f"{name}(): argument '{pname}' must be Tensor, not {not_a_tensor(v)}")
    return None


def guard(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """fn, raising a TypeError that names the argument when an argument annotated ``Tensor``
    is not one and the call fails with an AttributeError (fn itself when it has no such
    argument)."""
    info = _tensor_params(fn)
    if info is None or getattr(fn, "__ember_guarded__", False):
        return fn
    label = name or fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AttributeError as e:
            err = _bad_argument(label, info, args, kwargs)
            if err is None:
                raise
            raise err from e

    wrapper.__ember_guarded__ = True  # type: ignore[attr-defined]
    return wrapper


def guard_module(namespace: dict[str, Any], names: Any = None) -> None:
    """Replaces the public plain functions of ember in ``namespace`` (a module's globals: its
    own functions and those it re-exports from other ember modules), or the listed ``names``,
    by their :func:`guard` wrappers."""
    for n in list(names if names is not None else namespace):
        fn = namespace.get(n)
        if n.startswith("_") or not inspect.isfunction(fn) or \
                not (fn.__module__ or "").startswith("ember"):
            continue
        namespace[n] = guard(fn)
