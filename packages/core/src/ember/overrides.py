"""``torch.overrides``: the ``__torch_function__`` protocol.

A Tensor subclass, or any class, that defines the classmethod
``__torch_function__(cls, func, types, args=(), kwargs=None)`` is handed every ember function,
Tensor method, operator, property read and ``nn.functional`` call that one of its instances is
an argument of (also inside a tuple or list argument, such as ``ember.cat``'s). A
:class:`TorchFunctionMode` sees every such call made inside its ``with`` block.

Plain tensors pay one type test per argument: the public functions are C wrappers
(``ember._C._tf_wrap``) that forward at once unless an argument's type defines
``__torch_function__`` (``nn.Parameter`` opts out with ``_disabled_torch_function_impl``) or a
mode is entered.

>>> import ember
>>> class Logged(ember.Tensor):
...     calls = []
...     @classmethod
...     def __torch_function__(cls, func, types, args=(), kwargs=None):
...         cls.calls.append(func.__name__)
...         return super().__torch_function__(func, types, args, kwargs)
>>> x = ember.ones(2).as_subclass(Logged)
>>> y = ember.add(x, 1).mul(2)
>>> type(y).__name__, Logged.calls
('Logged', ['add', 'mul'])
"""

from __future__ import annotations

import functools
import importlib
import sys
import types as _types
from typing import Any, Callable, Iterable

from ember import _C
from ember._C import Tensor
from ember._legacy import _tensor_init, _tensor_new  # the bindings themselves

__all__ = [
    "TorchFunctionMode", "get_default_nowrap_functions", "get_ignored_functions",
    "get_overridable_functions",
    "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "is_tensor_like", "is_tensor_method_or_property",
    "resolve_name", "wrap_torch_function",
]

has_torch_function: Callable[[Iterable[Any]], bool] = _C._has_torch_function
has_torch_function_unary: Callable[[Any], bool] = _C._has_torch_function_unary
has_torch_function_variadic: Callable[..., bool] = _C._has_torch_function_variadic


def is_tensor_like(inp: Any) -> bool:
    """Whether ``inp`` is an ember.Tensor (or subclass) or an object with ``__torch_function__``.

    >>> import ember
    >>> ember.overrides.is_tensor_like(ember.ones(1)), ember.overrides.is_tensor_like(1.0)
    (True, False)
    """
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def resolve_name(f: Callable) -> str | None:
    """``"module.qualname"`` of an overridable function (``"ember.add"``, ``"ember.Tensor.add"``).

    >>> import ember
    >>> ember.overrides.resolve_name(ember.add), ember.overrides.resolve_name(ember.Tensor.add)
    ('ember.add', 'ember.Tensor.add')
    """
    module = getattr(f, "_tf_home", None) or getattr(f, "__module__", None)
    qualname = getattr(f, "__qualname__", None)
    if module is None or qualname is None:
        return None
    return f"{module}.{qualname}"


def _types_of(overloaded: list) -> tuple:
    return tuple(type(a) for a in overloaded)


class _NoImplementation(TypeError):
    """Every __torch_function__ returned NotImplemented."""


# Binary operators: when no __torch_function__ takes them, Python tries the reflected one.
_BINARY_OPERATORS = frozenset(
    f"__{p}{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
                              "and", "or", "xor", "lshift", "rshift", "eq", "ne", "lt", "le",
                              "gt", "ge", "div")
    for p in ("", "r", "i"))


def _no_implementation(public_api: Callable, overloaded: list) -> TypeError:
    name = resolve_name(public_api) or repr(public_api)
    kinds = "".join(
        f"\n  - {'tensor subclass' if isinstance(a, Tensor) else 'tensor-like'} {type(a)}"
        for a in overloaded
    )
    return _NoImplementation(
        f"Multiple dispatch failed for '{name}'; all __torch_function__ handlers returned "
        f"NotImplemented (no implementation found for '{name}'):{kinds or ' (a mode)'}"
    )


def _handle(public_api: Callable, overloaded: list, args: tuple, kwargs: dict) -> Any:
    types = _types_of(overloaded)
    if _C._is_torch_function_mode_enabled():
        mode = _C._pop_torch_function_stack()  # the mode's own calls go to the modes below it
        try:
            result = mode.__torch_function__(public_api, types, args, kwargs)
        finally:
            _C._push_on_torch_function_stack(mode)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = arg.__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    raise _no_implementation(public_api, overloaded)


def _foreign(arg: Any) -> bool:
    """A PyTorch tensor: its __torch_function__ serves torch's functions (given an ember function
    it would call it again with the same arguments, without end), so ember ignores it and the
    function refuses the argument as it does any other foreign object."""
    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    # (sys.modules["torch"] may be ember itself: a program that aliases ember as torch)
    return isinstance(tensor_type, type) and tensor_type is not Tensor and isinstance(
        arg, tensor_type)


# nn.functional functions that PyTorch writes in Python: their handle_torch_function call passes
# the required parameters by position and every parameter that has a default by keyword, so a
# __torch_function__ handler (a mode, a subclass, an FX tracer) sees F.relu(x) as
# F.relu(x, inplace=False). The same calls reach ember's handlers in that form.
_F_PYTHON = frozenset({
    "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "affine_grid", "alpha_dropout", "batch_norm",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "celu", "cosine_embedding_loss",
    "cross_entropy", "ctc_loss", "dropout", "dropout1d", "dropout2d", "dropout3d", "elu",
    "embedding", "embedding_bag", "feature_alpha_dropout", "fold", "fractional_max_pool2d",
    "fractional_max_pool3d", "gaussian_nll_loss", "glu", "grid_sample", "group_norm",
    "gumbel_softmax", "hardsigmoid", "hardswish", "hardtanh", "hinge_embedding_loss",
    "huber_loss", "instance_norm", "interpolate", "kl_div", "l1_loss", "layer_norm",
    "leaky_relu", "local_response_norm", "log_softmax", "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "margin_ranking_loss", "max_pool1d", "max_pool2d", "max_pool3d", "max_unpool1d",
    "max_unpool2d", "max_unpool3d", "mish", "mse_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "nll_loss", "normalize", "pad",
    "poisson_nll_loss", "relu", "relu6", "rms_norm", "rrelu", "selu", "silu", "smooth_l1_loss",
    "soft_margin_loss", "softmax", "softmin", "softsign", "tanhshrink", "threshold",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "unfold",
})
# where PyTorch's keywords are not "every parameter with a default, in signature order"
_F_KEYWORDS = {"l1_loss": ("size_average", "reduce", "reduction")}
_F_CALLS: dict[Any, Any] = {}  # wrapper -> (signature, positional names, keyword names) or None


def _canonical_call(public_api: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """args / kwargs of an nn.functional call in the form PyTorch hands its handlers."""
    spec = _F_CALLS[public_api]
    if spec is None:
        return args, kwargs
    sig, positional, keywords = spec
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs  # let the function itself report the bad call
    bound.apply_defaults()
    values = bound.arguments
    extra = {k: v for k, v in kwargs.items() if k not in positional and k not in keywords}
    return (tuple(values[n] for n in positional),
            {**{n: values[n] for n in keywords if n in values}, **extra})


def _f_spec(name: str, fn: Callable) -> Any:
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    positional = tuple(p.name for p in params if p.default is p.empty and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    keywords = _F_KEYWORDS.get(name) or tuple(p.name for p in params if p.default is not p.empty)
    return sig, positional, keywords


def _dispatch(public_api: Callable, original: Callable, overloaded: list, args: tuple,
              kwargs: dict) -> Any:
    """Where the C wrappers send a call that an argument or a mode overrides."""
    if overloaded and "torch" in sys.modules:
        overloaded = [a for a in overloaded if not _foreign(a)]
    if not overloaded and not _C._is_torch_function_mode_enabled():
        return original(*args, **kwargs)
    if public_api in _F_CALLS:
        args, kwargs = _canonical_call(public_api, args, kwargs)
    if getattr(original, "__name__", None) in _BINARY_OPERATORS:
        try:
            return _handle(public_api, overloaded, args, kwargs)
        except _NoImplementation:
            return NotImplemented
    return _handle(public_api, overloaded, args, kwargs)


def handle_torch_function(public_api: Callable, relevant_args: Iterable[Any], *args: Any,
                          **kwargs: Any) -> Any:
    """Calls the ``__torch_function__`` of the modes and then of ``relevant_args`` for
    ``public_api(*args, **kwargs)``, for functions written in Python that take part in the
    protocol (call it when :func:`has_torch_function` says so). Raises TypeError when every
    implementation returns NotImplemented.

    >>> import ember
    >>> from ember.overrides import has_torch_function, handle_torch_function
    >>> def double(x):
    ...     if has_torch_function((x,)):
    ...         return handle_torch_function(double, (x,), x)
    ...     return x * 2
    >>> class Half:
    ...     @classmethod
    ...     def __torch_function__(cls, func, types, args=(), kwargs=None):
    ...         return f"{func.__name__} of Half"
    >>> double(Half())
    'double of Half'
    """
    overloaded = _C._get_overloaded_args(relevant_args) if _C._is_torch_function_enabled() else []
    return _handle(public_api, overloaded, args, kwargs)


def wrap_torch_function(dispatcher: Callable) -> Callable[[Callable], Callable]:
    """Decorator: the function takes part in the protocol; ``dispatcher(*args, **kwargs)``
    returns its relevant arguments.

    >>> import ember
    >>> @ember.overrides.wrap_torch_function(lambda x: (x,))
    ... def twice(x):
    ...     return x * 2
    >>> twice(ember.ones(1)).tolist()
    [2.0]
    """

    def decorator(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)

        return wrapped

    return decorator


# ---- modes --------------------------------------------------------------------------------------
class TorchFunctionMode:
    """A block that sees every overridable call: subclass it and define
    ``__torch_function__(self, func, types, args=(), kwargs=None)``. Calls made inside the
    handler go to the modes entered before it (or run as usual). Modes are per thread.

    >>> import ember
    >>> class Count(ember.overrides.TorchFunctionMode):
    ...     def __init__(self):
    ...         self.names = []
    ...     def __torch_function__(self, func, types, args=(), kwargs=None):
    ...         self.names.append(func.__name__)
    ...         return func(*args, **(kwargs or {}))
    >>> with Count() as mode:
    ...     _ = ember.ones(2).add(1).sum()
    >>> mode.names
    ['ones', 'add', 'sum']
    """

    def __torch_function__(self, func: Callable, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__} must define __torch_function__(self, func, types, args, kwargs)"
        )

    def __enter__(self) -> TorchFunctionMode:
        _C._push_on_torch_function_stack(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if _C._len_torch_function_stack() == 0:
            raise RuntimeError(f"{type(self).__name__}.__exit__: no TorchFunctionMode is entered")
        top = _C._pop_torch_function_stack()
        if top is not self:
            _C._push_on_torch_function_stack(top)
            raise RuntimeError(
                f"{type(self).__name__}.__exit__: modes must be exited in the reverse order "
                f"they were entered (the innermost is a {type(top).__name__})"
            )

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> TorchFunctionMode:
        """Deprecated spelling of ``with cls(*args, **kwargs):``."""
        return cls(*args, **kwargs)


def _get_current_function_mode_stack() -> list:
    """The modes entered on this thread, outermost first."""
    return [_C._get_function_stack_at(i) for i in range(_C._len_torch_function_stack())]


# ---- the default implementation of Tensor subclasses ------------------------------------------
def _alias_as(cls: type, t: Tensor) -> Tensor:
    """A cls instance over t's data without calling cls.__init__ (like PyTorch's as_subclass)."""
    obj = _tensor_new(cls)
    _tensor_init(obj, t)
    return obj


def _make_subclass(cls: type, data: Tensor, require_grad: bool = False, *,
                   dispatch_sizes_strides_policy: str | None = None, dispatch_device: bool = False,
                   dispatch_layout: bool = False, device_for_backend_keys: Any = None) -> Tensor:
    """``Tensor._make_subclass(cls, data, require_grad=False)``: a cls instance over data's
    memory and version counter (a leaf, no history; ``requires_grad`` is ``require_grad``), for
    a subclass's ``__new__``; cls.__init__ is not called by it (Python calls it after
    ``__new__`` as usual). The dispatch keywords are accepted and ignored.

    >>> import ember
    >>> class Tagged(ember.Tensor):
    ...     def __new__(cls, data, tag):
    ...         t = ember.Tensor._make_subclass(cls, data)
    ...         t.tag = tag
    ...         return t
    >>> t = Tagged(ember.ones(2), "w")
    >>> type(t + 1).__name__, t.tag
    ('Tagged', 'w')
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor "
                        "is not possible. Make sure your class inherits from Tensor.")
    if not isinstance(data, Tensor):
        raise TypeError(f"_make_subclass(): argument 'data' (position 2) must be Tensor, not "
                        f"{type(data).__name__}")
    obj = _alias_as(cls, data)  # the binding detaches: a leaf sharing data's version counter
    if require_grad:
        if not (data.dtype.is_floating_point or data.dtype.is_complex):
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        with _C.DisableTorchFunctionSubclass():
            Tensor.requires_grad_(obj, True)
    return obj


def _make_wrapper_subclass(cls: type, size: Any, strides: Any = None, storage_offset: int | None = None,
                           memory_format: Any = None, dtype: Any = None, layout: Any = None,
                           device: Any = None, pin_memory: bool = False, requires_grad: bool = False,
                           dispatch_sizes_strides_policy: str | None = None,
                           dispatch_device: bool = False, dispatch_layout: bool = False,
                           _extra_dispatch_keys: Any = None, storage_size: int | None = None) -> Tensor:
    """``Tensor._make_wrapper_subclass(cls, size, ...)``: a cls instance with metadata only
    (sizes, strides, dtype, device, requires_grad) and no data of its own, for a subclass
    that defines ``__torch_dispatch__`` (every op on it goes there; it typically holds the
    real data in attributes, such as an inner tensor). Autograd records history on it as on
    any tensor. It has no memory of its own (reading its values raises), and ``.device``
    answers ``device``.

    >>> import ember
    >>> class Wrapper(ember.Tensor):
    ...     @staticmethod
    ...     def __new__(cls, inner):
    ...         t = ember.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype,
    ...                                                 device=inner.device)
    ...         t.inner = inner
    ...         return t
    ...     @classmethod
    ...     def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
    ...         raw = [a.inner if isinstance(a, Wrapper) else a for a in args]
    ...         return Wrapper(func(*raw, **(kwargs or {})))
    >>> w = Wrapper(ember.ones(2)) * 3
    >>> type(w).__name__, w.shape, w.device.type, w.inner.tolist()
    ('Wrapper', ember.Size([2]), 'cpu', [3.0, 3.0])
    """
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"_make_wrapper_subclass(): cls must be a subclass of ember.Tensor, got {cls!r}")
    import ember

    sizes = tuple(int(s) for s in size)
    dtype = dtype if dtype is not None else ember.get_default_dtype()
    if strides is None:  # contiguous
        strides, step = [], 1
        for n in reversed(sizes):
            strides.append(step)
            step *= max(n, 1)
        strides.reverse()
    where = ember.device(device) if device is not None else ember.device("cpu")
    # no memory, the real device: C++ composites make their temporaries there, and kernels
    # never run on it (core/storageless.h)
    base = _C._make_storageless(list(sizes), [int(s) for s in strides], int(storage_offset or 0),
                                dtype, where)
    with _C.DisableTorchFunctionSubclass():
        obj = _alias_as(cls, base)
        obj._ember_wrapper_device = ember.device(device) if device is not None else ember.device("cpu")
        if requires_grad:
            obj.requires_grad_(True)
    _wrapper_class(cls)
    return obj


def _wrapper_device(self: Tensor) -> Any:
    d = self.__dict__.get("_ember_wrapper_device")
    return d if d is not None else _TENSOR_DEVICE.__get__(self, type(self))


def _wrapper_repr(self: Tensor, *, tensor_contents: Any = None) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
    grad = ", requires_grad=True" if self.requires_grad else ""
    return (f"{type(self).__name__}({inner + ', ' if inner else ''}size={tuple(self.shape)}, "
            f"dtype={self.dtype}, device='{self.device}'{grad})")


_WRAPPER_CLASSES: set[type] = set()
_TENSOR_DEVICE: Any = None


def _wrapper_class(cls: type) -> None:
    """A wrapper subclass reports its instances' own device and has a generic repr (unless
    it defines them)."""
    global _TENSOR_DEVICE
    if cls in _WRAPPER_CLASSES:
        return
    _WRAPPER_CLASSES.add(cls)
    if _TENSOR_DEVICE is None:
        _TENSOR_DEVICE = vars(Tensor)["device"]
    below = [k for k in cls.__mro__ if k is not Tensor and issubclass(k, Tensor)]
    if not any("device" in vars(k) for k in below):
        cls.device = property(_wrapper_device)
    if not any("__repr__" in vars(k) for k in below):
        cls.__repr__ = _wrapper_repr
        if not any("__str__" in vars(k) for k in below):
            cls.__str__ = _wrapper_repr


def _tensor_init_subclass(cls: type, **kwargs: Any) -> None:
    from ember.utils import _python_dispatch

    _python_dispatch._note_subclass(cls)
    super(Tensor, cls).__init_subclass__(**kwargs)


_set_disabled = _C._set_torch_function_disabled_level
_disabled_level = _C._torch_function_disabled_level


def _convert(ret: Any, cls: type) -> Any:
    """Results of a subclass's op as cls instances (tensors in tuples and lists too)."""
    if cls is Tensor:
        return ret
    if isinstance(ret, Tensor):
        if isinstance(ret, cls):
            return ret
        if not ret.requires_grad or not _C.is_grad_enabled():
            return _alias_as(cls, ret)  # Tensor.as_subclass without its checks
        return ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)) and any(
        isinstance(r, Tensor) and not isinstance(r, cls) for r in ret
    ):
        items = [_convert(r, cls) for r in ret]
        return type(ret)(*items) if hasattr(ret, "_fields") else type(ret)(items)
    return ret


_NOWRAP: set = set()  # getters whose results stay as they are (Tensor.grad, Tensor._base)


def _from_real_torch(func: Any) -> bool:
    """Whether ``func`` belongs to the real PyTorch package (not to ember)."""
    owner = getattr(func, "__objclass__", None)
    mod = getattr(func, "__module__", None) or getattr(owner, "__module__", None) or ""
    return mod == "torch" or mod.startswith("torch.")


def _tensor_torch_function(cls: type, func: Callable, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
    """The default: run ``func`` on the plain tensors and return tensors as ``cls`` (when every
    overriding type is a base of ``cls``, else NotImplemented)."""
    if kwargs is None:
        kwargs = {}
    for t in types:
        if not issubclass(cls, t):
            return NotImplemented
    if _from_real_torch(func):
        # PyTorch itself asks (an ember tensor met a torch op or a torch tensor): running func
        # would only ask again, forever; the two libraries' tensors do not mix
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
        raise TypeError(
            f"{name}: got an ember tensor in a PyTorch operation; ember and torch tensors do "
            f"not mix (convert one side, e.g. ember.from_dlpack(t) or t.numpy())"
        )
    previous = _set_disabled(max(1, _disabled_level()))  # DisableTorchFunctionSubclass
    try:
        ret = func(*args, **kwargs)
        if func in _NOWRAP:
            return ret
        return _convert(ret, cls)
    finally:
        _set_disabled(previous)


# ---- what goes through the wrappers ---------------------------------------------------------------
# Top-level names that take no tensor or must stay direct (PyTorch ignores these too).
_IGNORED_NAMES = frozenset({
    "tensor", "as_tensor", "from_numpy", "from_dlpack", "frombuffer", "is_tensor", "is_storage",
    "manual_seed", "seed", "initial_seed", "set_printoptions", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "is_grad_enabled", "is_inference_mode_enabled", "typename", "compile", "load", "save",
    "can_cast", "promote_types", "is_autocast_enabled",
    # the protocol's own helpers, re-exported by ember.nn.functional as by PyTorch's
    "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic",
})
_TENSOR_SKIP = frozenset({
    "__init__", "__new__", "__torch_function__", "__getattribute__", "__getattr__",
    "__setattr__", "__delattr__", "__dir__", "__class__", "__init_subclass__",
    "__subclasshook__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
    "__hash__", "__deepcopy__", "__copy__", "__sizeof__", "__weakref__", "__dict__",
    "__module__", "__doc__", "as_subclass", "__del__", "__instancecheck__",
})
_WRAPPER_TYPES = (_C._TorchFunctionWrapper, _C._TorchFunctionMethod)
_OVERRIDABLE: dict[Any, list[Callable]] = {}
_IGNORED: set = set()


def _name(w: Any, name: str, qualname: str, home: str) -> Any:
    w.__name__ = name
    w.__qualname__ = qualname
    w._tf_home = home  # where it is found: resolve_name, pickling
    return w


def _resolve(home: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(home)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _reduce(w: Any) -> Any:
    """Wrappers pickle by reference (their module and name), as functions do."""
    return (_resolve, (w._tf_home, w.__qualname__))


# Operators whose func is the named method, as in PyTorch (``a + b`` gives Tensor.add).
_OPERATOR_FUNCS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
    "__itruediv__": "div_", "__mod__": "remainder", "__pow__": "pow", "__matmul__": "matmul",
    "__neg__": "neg", "__abs__": "abs", "__ne__": "ne", "__lt__": "lt", "__gt__": "gt",
    "__le__": "le", "__ge__": "ge",
}


def _wrap_namespace(namespace: dict, module_name: str, key: Any) -> None:
    """Puts the public functions of a module namespace behind the protocol."""
    found = _OVERRIDABLE.setdefault(key, [])
    for attr, obj in list(namespace.items()):
        if attr.startswith("_") and attr != "_assert":
            continue
        if isinstance(obj, _WRAPPER_TYPES):
            continue
        if attr in _IGNORED_NAMES:
            _IGNORED.add(obj)
            continue
        if isinstance(obj, _types.BuiltinFunctionType):
            w = _C._tf_wrap(obj, False)
        elif isinstance(obj, _types.FunctionType):
            w = _C._tf_wrap(obj, True)
        else:
            continue
        namespace[attr] = _name(w, attr, attr, module_name)
        found.append(w)
        if module_name == "ember.nn.functional" and attr in _F_PYTHON:
            _F_CALLS[w] = _f_spec(attr, obj)


def _wrap_tensor() -> None:
    found = _OVERRIDABLE.setdefault(Tensor, [])
    operators = []
    fast: dict[str, Any] = {}  # property name -> the wrapper of its getter
    for attr, obj in list(vars(Tensor).items()):
        if attr in _TENSOR_SKIP or attr.startswith("_pybind11"):
            continue
        if isinstance(obj, _types.FunctionType) or type(obj).__name__ == "instancemethod":
            if attr in _OPERATOR_FUNCS:
                operators.append((attr, obj))
                continue
            fn = obj if isinstance(obj, _types.FunctionType) else obj.__func__
            w = _name(_C._tf_wrap(fn, True), attr, f"Tensor.{attr}", "ember")
            setattr(Tensor, attr, w)
            found.append(w)
        elif isinstance(obj, property) and obj.fget is not None and not isinstance(
            obj.fget, _WRAPPER_TYPES
        ):
            getter = _name(_C._tf_wrap(obj.fget, False), "__get__", f"Tensor.{attr}.__get__",
                           "ember")
            setattr(Tensor, attr, property(getter, obj.fset, obj.fdel, obj.__doc__))
            found.append(getter)
            fast[attr] = getter
            if attr in ("grad", "_base", "_grad"):
                _NOWRAP.add(getter)
    for attr, obj in operators:  # after the methods they name
        fn = obj if isinstance(obj, _types.FunctionType) else obj.__func__
        public = vars(Tensor).get(_OPERATOR_FUNCS[attr])
        w = _C._tf_wrap(fn, True, public if isinstance(public, _WRAPPER_TYPES) else None)
        setattr(Tensor, attr, _name(w, attr, f"Tensor.{attr}", "ember"))
        found.append(w)
    # The hottest reads (shape, ndim, dtype, device, requires_grad, ...) become C getset
    # descriptors that check the protocol themselves and call these same wrappers when a
    # subclass or a mode overrides them.
    _C._tf_fast_properties(fast)


def _install(ember_namespace: dict) -> None:
    """Called once at the end of ``import ember``."""
    if "__torch_function__" not in vars(Tensor):
        Tensor.__torch_function__ = classmethod(_tensor_torch_function)
        Tensor._make_subclass = staticmethod(_make_subclass)
        Tensor._make_wrapper_subclass = staticmethod(_make_wrapper_subclass)
        Tensor.__init_subclass__ = classmethod(_tensor_init_subclass)
        _wrap_tensor()
        _wrap_namespace(ember_namespace, "ember", sys.modules["ember"])
    _C._tf_set_dispatch(_dispatch, _reduce)


def _install_module(namespace: dict, module_name: str) -> None:
    """The same for a Python module of functions (``ember.nn.functional``)."""
    _wrap_namespace(namespace, module_name, sys.modules.get(module_name, module_name))


def get_ignored_functions() -> set[Callable]:
    """Public functions that do not take part in the protocol (factories without tensor
    arguments, global switches).

    >>> import ember
    >>> ember.is_tensor in ember.overrides.get_ignored_functions()
    True
    """
    return set(_IGNORED)


def get_default_nowrap_functions() -> set[Callable]:
    """Functions whose results ``Tensor.__torch_function__`` returns as they are (not as the
    subclass): the getters of ``Tensor.grad`` and ``Tensor._base``.

    >>> import ember
    >>> len(ember.overrides.get_default_nowrap_functions()) >= 1
    True
    """
    return set(_NOWRAP)


def get_overridable_functions() -> dict[Any, list[Callable]]:
    """The functions that take part in the protocol, by namespace (``ember``, ``ember.Tensor``
    — methods, operators and property getters — and ``ember.nn.functional`` once imported).

    >>> import ember
    >>> ember.add in ember.overrides.get_overridable_functions()[ember]
    True
    """
    return {k: list(v) for k, v in _OVERRIDABLE.items()}


def is_tensor_method_or_property(func: Callable) -> bool:
    """Whether ``func`` is a Tensor method or property getter (its first argument is the tensor).

    >>> import ember
    >>> ember.overrides.is_tensor_method_or_property(ember.Tensor.add)
    True
    """
    return func in _OVERRIDABLE.get(Tensor, ()) or func is Tensor.__torch_function__
