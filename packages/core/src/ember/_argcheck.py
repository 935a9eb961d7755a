"""Clear errors for non-tensor arguments of the hand-written Python functions.

The functions written in Python (``ember.nn.functional``, ``ember.linalg``, ``ember.special``,
``ember.fft`` and the compat ops) use their tensor arguments directly, so a list, a number or
``None`` passed where a tensor is expected used to escape as an ``AttributeError`` from deep
inside (``'list' object has no attribute 'ndim'``), and a bool or a float passed for an int
failed later with whatever the code found wrong next. :func:`guard_module` wraps a module's
public functions so that a failing call whose ``Tensor``, ``int`` or ``float`` argument has a
type torch's parser rejects raises the ``TypeError`` torch raises first, naming the function and
the argument. Nothing is checked on the normal path: the wrapper only looks at the arguments once
an error has escaped, so correct calls pay one extra call frame.

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

__all__ = ["guard", "guard_module", "method_args"]


# annotation parts (besides None) -> the kind of argument torch's parser reads there
_KINDS = {frozenset({"Tensor"}): "Tensor", frozenset({"int"}): "int",
          frozenset({"float"}): "float", frozenset({"float", "int"}): "float"}


def _typed_params(fn: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, tuple[str, bool]]] | None:
    """fn's signature and, for each parameter annotated as a Tensor, an int or a float (alone or
    with None), that kind and whether None is allowed."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params: dict[str, tuple[str, bool]] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__",
                                                                         "")
        parts = {a.strip() for a in str(ann).split("|")}
        kind = _KINDS.get(frozenset(parts - {"None"}))
        if kind:
            params[p.name] = (kind, "None" in parts or p.default is None)
    return (sig, params) if params else None


def _fits(kind: str, v: Any) -> bool:
    """Whether torch could take v for an argument of this kind. Loose on purpose: only what it
    never takes fails (a bool or a float for an int, a str for a number; a sequence for a float;
    torch's Python-level functions take a sequence for many an int, as a kernel size)."""
    if kind == "Tensor":
        return isinstance(v, Tensor)
    if isinstance(v, (str, bytes, dict, set, complex)) or v is None:
        return False
    t = type(v).__name__
    if kind == "int":
        return not isinstance(v, (bool, float)) and t not in ("bool", "bool_") and \
            not t.startswith("float")
    return not isinstance(v, (list, tuple))


def not_a_tensor(v: Any) -> str:
    """How "must be Tensor, not ..." names v's type: its name, qualified when another
    framework's type shares ember's (``torch.Tensor``), with the conversion to use."""
    t = type(v)
    if t.__name__ == "Tensor" and not isinstance(v, Tensor):
        return (f"{t.__module__}.{t.__qualname__} (another framework's tensor: convert it with "
                "ember.as_tensor(x), which shares its memory)")
    return t.__name__


def _bad_argument(name: str, info: tuple[inspect.Signature, dict[str, tuple[str, bool]]],
                  args: tuple, kwargs: dict) -> TypeError | None:
    sig, params = info
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    for pname, (kind, optional) in params.items():
        if pname not in bound.arguments:
            continue
        v = bound.arguments[pname]
        if (v is None and optional) or _fits(kind, v):
            continue
        given = not_a_tensor(v) if kind == "Tensor" else type(v).__name__
        return TypeError(f"{name}(): argument '{pname}' must be {kind}, not {given}")
    return None


def guard(fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """fn, raising a TypeError that names the argument when an argument annotated ``Tensor``,
    ``int`` or ``float`` is of a type torch's parser rejects there (a list for a Tensor, a bool
    or a float for an int, a str for a float) and the call fails (fn itself when it has no such
    argument): torch checks the types before anything else, so its error is that TypeError
    whatever ember's code would have found wrong later."""
    info = _typed_params(fn)
    if info is None or getattr(fn, "__ember_guarded__", False):
        return fn
    label = name or fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        # (not a ValueError: torch's own Python functions check their values -- a reduction
        # name, a probability -- before handing the arguments to its parser)
        except (AttributeError, RuntimeError, IndexError, NotImplementedError) as e:
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


def _number_fits(kind: str, v: Any) -> bool:
    """Whether PyTorch's parser takes v for a float / int / Generator argument of a method."""
    if kind == "Generator":
        from ember._C import Generator

        return v is None or isinstance(v, Generator)
    if isinstance(v, Tensor):
        return v.numel() == 1 and (kind == "float" or not v.is_floating_point())
    if isinstance(v, (str, bytes, complex)) or v is None or not hasattr(v, "__float__"):
        return False
    return kind == "float" or hasattr(v, "__index__")


def _method_arg_error(name: str, stub: Callable[..., Any], kinds: dict[str, str],
                      args: tuple, kwargs: dict) -> TypeError | None:
    """The TypeError PyTorch raises for these arguments of the method ``name`` (its signature
    is stub's, without self; kinds: a parameter's expected "float", "int" or "Generator"), or
    None when it would take them."""
    try:
        bound = inspect.signature(stub).bind(*args, **kwargs)
    except TypeError:
        try:  # Python's own wording, which is PyTorch's: "normal_() takes from 0 to 2 ..."
            stub(*args, **kwargs)
        except TypeError as e:
            return TypeError(str(e))
        return None
    positional = list(inspect.signature(stub).parameters)[:len(args)]
    for pname, v in bound.arguments.items():
        kind = kinds.get(pname)
        if kind is None or _number_fits(kind, v):
            continue
        shown = pname.rstrip("_")  # from_: PyTorch's 'from'
        where = f" (position {positional.index(pname) + 1})" if pname in positional else ""
        expected = "ember.Generator" if kind == "Generator" else kind
        return TypeError(f"{name}(): argument '{shown}'{where} must be {expected}, not "
                         f"{type(v).__name__}")
    return None


def method_args(name: str, stub: Callable[..., Any], kinds: dict[str, str]
                ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorates the Python implementation of the Tensor method ``name`` so that a call with
    arguments PyTorch's parser refuses raises its TypeError (``uniform_() takes from 0 to 2
    positional arguments but 3 were given``; ``normal_(): argument 'mean' (position 1) must be
    float, not str``) rather than whatever the implementation ran into. ``stub`` has the
    method's signature without self; ``kinds`` maps parameters to "float", "int" or
    "Generator". Checked only once a TypeError escapes: correct calls pay one call frame.

    >>> import ember
    >>> try:
    ...     ember.ones(2).normal_(0.0, 1.0, 3)
    ... except TypeError as e:
    ...     print(e)
    normal_() takes from 0 to 2 positional arguments but 3 were given
    """
    stub.__name__ = stub.__qualname__ = name

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except TypeError as e:
                err = _method_arg_error(name, stub, kinds, args, kwargs)
                if err is None:
                    raise
                raise err from e

        method.__name__ = method.__qualname__ = name
        return method

    return decorate
