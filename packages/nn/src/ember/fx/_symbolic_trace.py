"""``torch.fx._symbolic_trace``: :class:`Tracer`, :func:`symbolic_trace` and :func:`wrap`.

Tracing runs ``forward`` once with :class:`~ember.fx.Proxy` inputs and records what it does.
Submodules from ``ember.nn`` (``Linear``, ``Conv2d``, ``BatchNorm2d``, ...) stay single
``call_module`` nodes (leaf modules); other modules are traced through. Parameters and buffers
read as attributes become ``get_attr`` nodes.

>>> import ember
>>> from ember import nn
>>> from ember.fx import symbolic_trace
>>> class MLP(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)
...     def forward(self, x):
...         return self.fc2(ember.relu(self.fc1(x)))
>>> gm = symbolic_trace(MLP())
>>> [(n.op, n.name) for n in gm.graph.nodes]
[('placeholder', 'x'), ('call_module', 'fc1'), ('call_function', 'relu'), ('call_module', 'fc2'), ('output', 'output')]
"""

from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import types
from typing import Any, Callable

import ember
from ember.fx.graph import Graph
from ember.fx.node import Argument, _side_effectful_functions
from ember.fx.proxy import ParameterProxy, Proxy, TraceError, TracerBase

__all__ = ["PH", "Tracer", "symbolic_trace", "wrap"]


class _PH:
    """A ``concrete_args`` value that keeps the input traced (a placeholder)."""

    def __repr__(self) -> str:
        return "PH"


PH = _PH()
_side_effectful_functions.add(ember._assert)

# wrap(): (globals dict of the module that called wrap, name) pairs, patched while tracing.
_wrapped_fns_to_patch: dict[tuple[int, str], tuple[dict, str]] = {}


def wrap(fn_or_name: str | Callable) -> str | Callable:
    """Keeps calls of a module-level function as ``call_function`` nodes instead of tracing
    through it (for functions with control flow, or builtins such as ``len``). Call it at the
    top level of the module that uses the function; returns its argument.

    >>> import ember
    >>> import ember.fx
    >>> def flip_if_negative(x):
    ...     return x if bool(x.sum() > 0) else -x
    >>> _ = ember.fx.wrap("flip_if_negative")  # or @ember.fx.wrap on the definition
    >>> def f(x):
    ...     return flip_if_negative(x) + 1
    >>> gm = ember.fx.symbolic_trace(f)
    >>> [n.op for n in gm.graph.nodes]
    ['placeholder', 'call_function', 'call_function', 'output']
    >>> gm(ember.tensor([-2.0])).tolist()
    [3.0]
    """
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise TypeError(
            f"wrap: expected a function or a function's name, got {type(fn_or_name).__name__}")
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    if name == "<lambda>":
        raise ValueError("wrap: a lambda has no name to patch; define it with def")
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    if caller is None:
        raise RuntimeError("wrap: cannot find the calling module")
    if caller.f_code.co_name != "<module>" and caller.f_globals is not caller.f_locals:
        raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped_fns_to_patch[(id(caller.f_globals), name)] = (caller.f_globals, name)
    return fn_or_name


def _find_proxy(*objs: Any) -> Proxy | None:
    found: list[Proxy] = []

    def look(a: Any) -> Any:
        if isinstance(a, Proxy) and not found:
            found.append(a)
        return a

    from ember.fx.node import map_aggregate

    map_aggregate(objs, look)
    return found[0] if found else None


def _leaf_function(orig: Callable) -> Callable:
    @functools.wraps(orig)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_function", orig, args, kwargs)
        return orig(*args, **kwargs)

    wrapped.__fx_original__ = orig  # type: ignore[attr-defined]
    return wrapped


def _flatten_signature(fn: Callable) -> tuple[Callable, tuple[str, ...]]:
    """A copy of ``fn`` that takes its ``*args`` / ``**kwargs`` (and keyword-only arguments)
    as plain positional ones; returns it and the names of its arguments in order."""
    if not isinstance(fn, types.FunctionType):
        raise NotImplementedError(
            f"symbolic_trace: cannot trace *args / **kwargs of {fn!r} (not a Python function)")
    code = fn.__code__
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    n = (code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
         + bool(code.co_flags & inspect.CO_VARKEYWORDS))
    flat_code = code.replace(co_argcount=n, co_kwonlyargcount=0, co_flags=flags)
    flat = types.FunctionType(flat_code, fn.__globals__, fn.__name__, None, fn.__closure__)
    return flat, code.co_varnames[:n]


class _Patcher:
    """Sets attributes for the duration of a trace and puts the originals back."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        had = name in vars(obj) if not isinstance(obj, dict) else name in obj
        old = (vars(obj) if not isinstance(obj, dict) else obj).get(name)
        if isinstance(obj, dict):
            obj[name] = value

            def undo() -> None:
                if had:
                    obj[name] = old
                else:
                    obj.pop(name, None)
        else:
            setattr(obj, name, value)

            def undo() -> None:
                if had:
                    setattr(obj, name, old)
                else:
                    delattr(obj, name)
        self._undo.append(undo)

    def restore(self) -> None:
        while self._undo:
            self._undo.pop()()


class Tracer(TracerBase):
    """Turns a module's ``forward`` (or a function) into a :class:`~ember.fx.Graph`.
    Subclass it to change which modules stay leaves (:meth:`is_leaf_module`) or how values
    become node arguments (:meth:`create_arg`).

    With ``param_shapes_constant``, the shape of a parameter (``shape``, ``size()``,
    ``dim()``, ``ndim``, ``numel()``, ``nelement()``) is read as a constant instead of being
    recorded.

    ``autowrap_modules``' public functions (``math`` by default) and ``autowrap_functions``
    are recorded as ``call_function`` nodes when called with a traced value.

    >>> import ember
    >>> from ember.fx import Tracer
    >>> def f(x):
    ...     return x.view(-1) + 1
    >>> g = Tracer().trace(f)
    >>> [n.op for n in g.nodes]
    ['placeholder', 'call_method', 'call_function', 'output']
    """

    def __init__(self, autowrap_modules: tuple = (math,), autowrap_functions: tuple = (),
                 param_shapes_constant: bool = False) -> None:
        self._autowrap_modules = tuple(autowrap_modules)
        self._autowrap_functions = tuple(autowrap_functions)
        self.param_shapes_constant = param_shapes_constant
        self.proxy_buffer_attributes = False
        self.graph = Graph(tracer_cls=type(self))
        self.root: ember.nn.Module | None = None
        self.tensor_attrs: dict[int, str] = {}
        self.submodule_paths: dict[int, str] | None = None
        self._param_names: dict[int, str] = {}
        self._buffer_names: dict[int, str] = {}
        self._constants = 0

    # ---- policy -----------------------------------------------------------------------------------
    def is_leaf_module(self, m: ember.nn.Module, module_qualified_name: str) -> bool:
        """Whether ``m`` is recorded as one ``call_module`` node: the modules of ``ember.nn``
        (but not ``Sequential``) are; user modules are traced through."""
        module = type(m).__module__ or ""
        return (module.startswith("ember.nn") or module.startswith("ember.ao.nn")) and not (
            isinstance(m, ember.nn.Sequential))

    def path_of_module(self, mod: ember.nn.Module) -> str:
        """The qualified name of ``mod`` inside the traced root."""
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(id(mod))
            if path is not None:
                return path
        if self.root is not None:
            for name, m in self.root.named_modules():
                if m is mod:
                    return name
        raise NameError(f"module {type(mod).__name__} is not installed as a submodule of the "
                        "traced module")

    def call_module(self, m: ember.nn.Module, forward: Callable, args: tuple,
                    kwargs: dict) -> Any:
        """Called for every submodule call while tracing: records a ``call_module`` node for a
        leaf, runs ``forward`` (tracing through it) otherwise."""
        qualname = self.path_of_module(m)
        if not self.is_leaf_module(m, qualname):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qualname, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict) -> Any:
        """Called for module attributes read while tracing: parameters become ``get_attr``
        proxies, and so do buffers when ``proxy_buffer_attributes`` is set (by default a buffer
        stays a tensor, recorded as a ``get_attr`` node where an operation uses it)."""
        names = None
        if isinstance(attr_val, ember.nn.Parameter):
            names = self._param_names
        elif self.proxy_buffer_attributes and isinstance(attr_val, ember.Tensor):
            names = self._buffer_names
        if names is None or id(attr_val) not in names:
            return attr_val
        qualname = names[id(attr_val)]
        if qualname not in parameter_proxy_cache:
            factory = None
            if self.param_shapes_constant and isinstance(attr_val, ember.nn.Parameter):
                def factory(node: Any) -> Proxy:
                    return ParameterProxy(self, node, qualname, attr_val)
            parameter_proxy_cache[qualname] = self.create_proxy(
                "get_attr", qualname, (), {}, proxy_factory_fn=factory)
        return parameter_proxy_cache[qualname]

    def create_arg(self, a: Any) -> Argument:
        """As :meth:`TracerBase.create_arg`; tensors become ``get_attr`` nodes of the
        attribute that holds them (constants made in ``forward`` are stored on the root as
        ``_tensor_constant<i>``). Modules cannot be arguments."""
        if isinstance(a, ember.nn.Module):
            raise NotImplementedError(
                f"argument of type {type(a).__name__}: a module cannot be an argument of a "
                "traced call (call it instead)")
        if isinstance(a, ember.Tensor) and not isinstance(a, Proxy):
            for names in (self._param_names, self._buffer_names):
                if id(a) in names:
                    return self.create_node("get_attr", names[id(a)], (), {})
            if id(a) in self.tensor_attrs:
                return self.create_node("get_attr", self.tensor_attrs[id(a)], (), {})
            if self.root is None:
                raise TraceError("a constant tensor cannot be recorded without a root module")
            name = f"_tensor_constant{self._constants}"
            while hasattr(self.root, name):
                self._constants += 1
                name = f"_tensor_constant{self._constants}"
            self._constants += 1
            setattr(self.root, name, a)
            self.tensor_attrs[id(a)] = name
            return self.create_node("get_attr", name, (), {})
        return super().create_arg(a)

    # ---- tracing ----------------------------------------------------------------------------------
    def _collect_attrs(self, root: ember.nn.Module) -> None:
        self._param_names, self._buffer_names = {}, {}
        for n, p in root.named_parameters(remove_duplicate=False):
            self._param_names.setdefault(id(p), n)  # a shared parameter: its first name
        for n, b in root.named_buffers(remove_duplicate=False):
            if b is not None:
                self._buffer_names.setdefault(id(b), n)
        self.tensor_attrs = {}
        self.submodule_paths = {}
        for prefix, mod in root.named_modules(remove_duplicate=False):
            self.submodule_paths.setdefault(id(mod), prefix)
            for k, v in vars(mod).items():
                if isinstance(v, ember.Tensor) and not isinstance(v, ember.nn.Parameter):
                    self.tensor_attrs.setdefault(id(v), f"{prefix}.{k}" if prefix else k)

    def _placeholders(self, fn: Callable, is_module: bool,
                      concrete_args: dict[str, Any] | None) -> tuple[list, dict[str, Any]]:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if is_module:
            params = params[1:]
        concrete_args = dict(concrete_args or {})
        unknown = set(concrete_args) - {p.name for p in params}
        if unknown:
            raise TypeError(f"symbolic_trace: concrete_args names {sorted(unknown)}, which are not "
                            f"arguments of {getattr(fn, '__qualname__', fn)}")
        values: dict[str, Any] = {}  # the value each argument is traced with
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                stars = "*" if p.kind == p.VAR_POSITIONAL else "**"
                values[p.name] = self.create_proxy("placeholder", stars + p.name, (), {})
                continue
            if p.name in concrete_args and concrete_args[p.name] is not PH:
                value = concrete_args[p.name]
                node = self.create_node("placeholder", p.name, (value,), {})
                if value is None or isinstance(value, (bool, int, float, str)):
                    check = (operator.is_ if value is None else operator.eq)
                    cond = self.create_node("call_function", check, (node, value), {})
                    self.create_node(
                        "call_function", ember._assert,
                        (cond, f"{p.name} has been specialized to have value {value!r} but got "
                               "another value"), {})
                values[p.name] = value
                continue
            default = () if p.default is p.empty else (p.default,)
            values[p.name] = self.create_proxy("placeholder", p.name, default, {})
        return [p for p in params], values

    def trace(self, root: ember.nn.Module | Callable,
              concrete_args: dict[str, Any] | None = None) -> Graph:
        """Traces ``root`` (a module's ``forward`` or a function) and returns the graph.
        ``concrete_args`` fixes some inputs to values (their branches are taken as traced;
        the generated code checks that callers pass the same value)."""
        if isinstance(root, ember.nn.Module):
            self.root = root
            fn = type(root).forward
            is_module = True
        elif callable(root):
            self.root = ember.nn.Module()
            fn = root
            is_module = False
        else:
            raise TypeError(
                f"symbolic_trace: expected an nn.Module or a function, got {type(root).__name__}")
        self.graph = Graph(tracer_cls=type(self))
        self._constants = 0
        self._collect_attrs(self.root)
        fn_globals = getattr(inspect.unwrap(fn), "__globals__", {})
        patcher = _Patcher()
        try:
            params, values = self._placeholders(fn, is_module, concrete_args)
            head = [root] if is_module else []
            self._patch(patcher, fn_globals)
            if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
                # *args / **kwargs are each one traced value: call a copy of the function whose
                # arguments are all plain positional ones, in the order the code stores them.
                flat, order = _flatten_signature(fn)
                result = flat(*head, *(values[name] for name in order[len(head):]))
            else:
                result = fn(*head, *(values[p.name] for p in params if p.kind != p.KEYWORD_ONLY),
                            **{p.name: values[p.name] for p in params
                               if p.kind == p.KEYWORD_ONLY})
            self.create_node("output", "output", (self.create_arg(result),), {})
        finally:
            patcher.restore()
            self.submodule_paths = None
        return self.graph

    def _patch(self, patcher: _Patcher, fn_globals: dict) -> None:
        module_cls = ember.nn.Module
        orig_call = module_cls.__call__
        orig_getattr = module_cls.__getattr__
        cache: dict[str, Proxy] = {}
        tracer = self

        def module_call(mod: ember.nn.Module, *args: Any, **kwargs: Any) -> Any:
            def forward(*a: Any, **k: Any) -> Any:
                return orig_call(mod, *a, **k)

            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr(mod: ember.nn.Module, attr: str) -> Any:
            return tracer.getattr(attr, orig_getattr(mod, attr), cache)

        patcher.setattr(module_cls, "__call__", module_call)
        patcher.setattr(module_cls, "__getattr__", module_getattr)
        targets = list(_wrapped_fns_to_patch.values())
        targets += [(fn_globals, name) for _, name in targets if name in fn_globals]
        for g, name in targets:
            if name in g:
                orig = g[name]
            elif name in builtins.__dict__:
                orig = builtins.__dict__[name]
            else:
                continue
            if getattr(orig, "__fx_original__", None) is None:
                patcher.setattr(g, name, _leaf_function(orig))
        autowrap_ids = {id(f) for f in self._autowrap_functions}
        for m in self._autowrap_modules:
            for k, v in vars(m).items():
                if not k.startswith("_") and callable(v) and not isinstance(v, type):
                    autowrap_ids.add(id(v))
                    patcher.setattr(m, k, _leaf_function(v))
        for k, v in list(fn_globals.items()):
            if id(v) in autowrap_ids:
                patcher.setattr(fn_globals, k, _leaf_function(v))


def symbolic_trace(root: ember.nn.Module | Callable,
                   concrete_args: dict[str, Any] | None = None) -> Any:
    """Traces ``root`` and returns a :class:`~ember.fx.GraphModule` that runs the recorded
    graph (see :class:`Tracer`).

    >>> import ember
    >>> from ember.fx import symbolic_trace
    >>> def f(x, y):
    ...     return ember.relu(x) @ y.t()
    >>> gm = symbolic_trace(f)
    >>> print(gm.code.strip())
    def forward(self, x, y):
        relu = ember.relu(x);  x = None
        t = y.t();  y = None
        matmul = relu @ t;  relu = t = None
        return matmul
    """
    from ember.fx.graph_module import GraphModule

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, ember.nn.Module) else root.__name__
    return GraphModule(tracer.root, graph, name)

