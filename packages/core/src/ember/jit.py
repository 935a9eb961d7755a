"""``ember.jit``: ``torch.jit``'s names with the semantics PyTorch has when its JIT is disabled
(``PYTORCH_JIT=0``): ember runs eagerly, so ``script`` and ``trace`` return the function or
module they are given (trace runs it once on the example inputs, as a check; a module gains
the ``m.save(path)`` deployment scripts call on a ScriptModule), the decorators
(``ignore``, ``unused``, ``export``, ``interface``) leave what they decorate as it is,
``is_scripting()`` / ``is_tracing()`` are False, and ``save`` / ``load`` store the eager object
with :func:`ember.save` (a file for ember, not a TorchScript archive). Programs that script or
trace a model for speed or deployment thus run unchanged.

>>> import ember
>>> @ember.jit.script
... def double(x):
...     return x * 2
>>> double(ember.tensor([1.0])).tolist(), ember.jit.is_scripting()
([2.0], False)
"""

from __future__ import annotations

import builtins
import contextlib
import types
import typing
import warnings
from typing import Any, Callable, Final, Iterator  # noqa: F401  (ember.jit.Final, as torch.jit.Final)

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "interface",
           "is_scripting", "is_tracing", "annotate", "save", "load", "freeze",
           "optimize_for_inference", "fork", "wait", "Final", "ScriptModule",
           "ScriptFunction", "Attribute", "enable_onednn_fusion", "set_fusion_strategy",
           "script_if_tracing", "script_method", "onednn_fusion_enabled", "optimized_execution",
           "fuser", "strict_fusion", "TracerWarning", "ScriptWarning", "isinstance"]

_noted = [False]


def _note_once(what: str) -> None:
    if not _noted[0]:
        _noted[0] = True
        warnings.warn(f"ember.jit.{what}: ember has no TorchScript compiler; the model runs "
                      "eagerly, as PyTorch does with PYTORCH_JIT=0", UserWarning, stacklevel=3)


class ScriptModule:
    """Stands for ``torch.jit.ScriptModule`` in isinstance checks; ember's ``script`` returns
    the eager module, which is never an instance."""


class ScriptFunction:
    """Stands for ``torch.jit.ScriptFunction`` in isinstance checks (never an instance)."""


def script(obj: Any = None, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """The function, module or class itself (eager execution).

    >>> import ember
    >>> m = ember.nn.Linear(2, 2)
    >>> ember.jit.script(m) is m
    True
    """
    if obj is None:
        return script
    if not callable(obj):  # PyTorch scripts functions, modules and classes only
        raise TypeError(f"ember.jit.script: expected a function, module or class, got "
                        f"{type(obj).__name__}")
    return _with_script_methods(obj)


def _save_module(mod: Any, f: Any, _extra_files: dict | None = None) -> None:
    save(mod, f, _extra_files)


def _with_script_methods(obj: Any) -> Any:
    """A scripted or traced module is the module itself, given the one ScriptModule method
    deployment scripts call on it, ``m.save(path)`` (unless the module defines its own
    ``save``). A ``partial``, not a bound method, so the module still pickles."""
    import functools

    import ember

    nn = getattr(ember, "nn", None)
    if nn is not None and isinstance(obj, nn.Module) and not hasattr(obj, "save"):
        obj.__dict__["save"] = functools.partial(_save_module, obj)
    return obj


def trace(func: Any, example_inputs: Any = None, optimize: Any = None,
          check_trace: bool = True, check_inputs: Any = None, check_tolerance: float = 1e-5,
          strict: bool = True, _force_outplace: bool = False,
          _module_class: Any = None, _compilation_unit: Any = None,
          example_kwarg_inputs: dict | None = None, _store_inputs: bool = True) -> Any:
    """The function or module itself, after one call on the example inputs (so a trace of
    something that cannot run fails here, as in PyTorch).

    >>> import ember
    >>> f = ember.jit.trace(lambda x: x + 1, (ember.ones(1),))
    >>> f(ember.zeros(1)).tolist()
    [1.0]
    """
    if example_inputs is None and example_kwarg_inputs is None:
        raise RuntimeError("trace: example_inputs (or example_kwarg_inputs) is required")
    import ember

    if isinstance(example_inputs, list):  # PyTorch takes a list of inputs like a tuple
        example_inputs = tuple(example_inputs)
    args = example_inputs if isinstance(example_inputs, tuple) else (
        () if example_inputs is None else (example_inputs,))
    with ember.no_grad():
        func(*args, **(example_kwarg_inputs or {}))
    return _with_script_methods(func)


def trace_module(mod: Any, inputs: dict, *args: Any, **kwargs: Any) -> Any:
    """The module itself, after calling each named method on its example inputs."""
    import ember

    with ember.no_grad():
        for name, example in inputs.items():
            getattr(mod, name)(*(example if isinstance(example, tuple) else (example,)))
    return _with_script_methods(mod)


def _identity_decorator(fn: Any = None, **kwargs: Any) -> Any:
    if fn is None or isinstance(fn, bool):
        return lambda f: f
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """Marks a function for the compiler to leave in Python: here, the function itself."""
    return _identity_decorator(drop)


def unused(fn: Callable) -> Callable:
    """Marks a method the compiler should not compile: here, the method itself."""
    return fn


def export(fn: Callable) -> Callable:
    """Marks a method as a compilation entry point: here, the method itself."""
    return fn


def interface(obj: Any) -> Any:
    """Marks a class as an interface type: here, the class itself."""
    return obj


def is_scripting() -> bool:
    """False: ember code always runs in Python."""
    return False


def is_tracing() -> bool:
    """False: ember never traces."""
    return False


def annotate(the_type: Any, the_value: Any) -> Any:
    """The value (a type hint for the compiler)."""
    return the_value


class Attribute:
    """``torch.jit.Attribute(value, type)``: the value itself."""

    def __new__(cls, value: Any, type: Any = None) -> Any:  # noqa: A002
        return value


def save(m: Any, f: Any, _extra_files: dict | None = None) -> None:
    """Saves the (eager) module or function with :func:`ember.save`; :func:`load` reads it
    back."""
    import ember

    _note_once("save")
    ember.save(m, f)


def load(f: Any, map_location: Any = None, _extra_files: dict | None = None) -> Any:
    """Loads what :func:`save` wrote (the whole eager object)."""
    import ember

    return ember.load(f, map_location=map_location, weights_only=False)


def freeze(mod: Any, preserved_attrs: Any = None, optimize_numerics: bool = True) -> Any:
    """The module itself (in eval mode, which freezing requires in PyTorch)."""
    if getattr(mod, "training", False):
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    return mod


def optimize_for_inference(mod: Any, other_methods: Any = None) -> Any:
    """The module itself, in eval mode."""
    return mod.eval() if hasattr(mod, "eval") else mod


class _Future:
    def __init__(self, value: Any) -> None:
        self._value = value

    def wait(self) -> Any:
        return self._value

    def value(self) -> Any:
        return self._value

    def done(self) -> bool:
        return True


def fork(func: Callable, *args: Any, **kwargs: Any) -> _Future:
    """Runs ``func`` now and returns a completed future (``wait`` gives its result)."""
    return _Future(func(*args, **kwargs))


def wait(future: _Future) -> Any:
    """The result of a :func:`fork`."""
    return future.wait()


def enable_onednn_fusion(enabled: bool) -> None:
    """No effect (no fuser)."""


def set_fusion_strategy(strategy: Any) -> list:
    """No effect (no fuser); returns the previous strategy, empty."""
    return []


def script_if_tracing(fn: Callable) -> Callable:
    """Compiles ``fn`` when it is first called during tracing; ember never traces
    (:func:`is_tracing` is False), so ``fn`` runs eagerly: it is returned unchanged."""
    return fn


def script_method(fn: Callable) -> Callable:
    """Marks a ScriptModule method for compilation: here, the method itself."""
    return fn


def onednn_fusion_enabled() -> bool:
    """False: ember has no fuser."""
    return False


@contextlib.contextmanager
def optimized_execution(should_optimize: bool) -> Iterator[None]:
    """Toggles the JIT's graph optimizations inside the block: no effect here (no JIT)."""
    yield


@contextlib.contextmanager
def fuser(name: str) -> Iterator[None]:
    """Picks the JIT fuser inside the block (``"fuser0"`` .. ``"fuser3"``, ``"none"``): no effect
    here (no JIT); an unknown name raises as in PyTorch."""
    if name not in ("fuser0", "fuser1", "fuser2", "fuser3", "none"):
        raise Exception(f"unrecognized fuser option (name: {name})")  # torch raises a bare Exception
    yield


class strict_fusion:
    """Asserts, inside the block, that the JIT fused every node: nothing to check here; as in
    PyTorch outside scripting it warns that it only works in script mode."""

    def __init__(self) -> None:
        warnings.warn("Only works in script mode", stacklevel=2)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        pass


class TracerWarning(Warning):
    """The warning category of tracing problems (``warnings.filterwarnings("ignore",
    category=ember.jit.TracerWarning)`` works as with torch); ember never emits it."""

    @staticmethod
    def ignore_lib_warnings() -> None:
        warnings.filterwarnings("ignore", category=TracerWarning, module="ember.(?!jit)")


class ScriptWarning(Warning):
    """The warning category of scripting problems; ember never emits it."""


def _jit_isinstance(obj: Any, target_type: Any) -> bool:
    """``torch.jit.isinstance``: ``isinstance`` for the typing forms TorchScript refines on
    (``List[int]``, ``Dict[str, Tensor]``, ``Tuple[...]``, ``Optional[...]``, ``Union[...]``),
    checking every element. An empty container matches any element type (with PyTorch's
    warning that the inner type is unknown); a bare ``list`` / ``dict`` / ``tuple`` is refused."""
    origin = typing.get_origin(target_type)
    args = typing.get_args(target_type)
    if origin is None:
        if target_type in (list, dict, tuple) or target_type in (typing.List, typing.Dict,
                                                                 typing.Tuple):
            name = getattr(target_type, "__name__", None) or getattr(target_type, "_name", "list")
            name = name.lower()
            raise RuntimeError(f"Attempted to use {name} without a contained type. Please add "
                               f"a contained type, e.g. {name}[int]")
        if target_type is None or target_type is type(None):
            return obj is None
        return builtins.isinstance(obj, target_type)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return any(_jit_isinstance(obj, a) for a in args)
    if origin in (list, dict, tuple) and not args:
        raise RuntimeError(f"Attempted to use {origin.__name__} without a contained type. "
                           f"Please add a contained type, e.g. {origin.__name__}[int]")
    if not builtins.isinstance(obj, origin):
        return False
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_jit_isinstance(x, args[0]) for x in obj)
        return len(obj) == len(args) and all(_jit_isinstance(x, a) for x, a in zip(obj, args))
    if not obj:
        warnings.warn("The inner type of a container is lost when calling torch.jit.isinstance "
                      "in eager mode. For example, List[int] would become list and therefore "
                      "falsely return True for List[float] or List[str].", stacklevel=2)
        return True
    if origin is list:
        return all(_jit_isinstance(x, args[0]) for x in obj)
    if origin is dict:
        return all(_jit_isinstance(k, args[0]) and _jit_isinstance(v, args[1])
                   for k, v in obj.items())
    return True


_jit_isinstance.__name__ = _jit_isinstance.__qualname__ = "isinstance"


def __getattr__(name: str) -> Any:
    # ember.jit.isinstance without shadowing the builtin inside this module
    if name == "isinstance":
        return _jit_isinstance
    raise AttributeError(f"module 'ember.jit' has no attribute {name!r}")
