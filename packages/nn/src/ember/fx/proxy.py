"""``torch.fx.proxy``: the stand-in values that record operations into a graph while a program
is traced.

Every operation on a :class:`Proxy` adds a node: operators give ``call_function`` nodes of
``operator.*``, attribute reads give ``getattr`` nodes, method calls give ``call_method`` nodes,
and ember functions called with a proxy argument (``ember.relu(p)``) reach
:meth:`Proxy.__torch_function__` and give ``call_function`` nodes of the function.

>>> import ember
>>> from ember.fx import Graph, Proxy
>>> g = Graph()
>>> x = Proxy(g.placeholder("x"))
>>> y = ember.relu(x * 2).sum(dim=1)
>>> [(n.op, n.name) for n in g.nodes]
[('placeholder', 'x'), ('call_function', 'mul'), ('call_function', 'relu'), ('call_method', 'sum_1')]
"""

from __future__ import annotations

import dis
import inspect
import operator
import traceback
from typing import Any, Callable, Iterator

from ember.fx.graph import Graph
from ember.fx.node import Argument, Node, Target, map_aggregate

__all__ = ["Attribute", "GraphAppendingTracer", "ParameterProxy", "Proxy", "TraceError",
           "TracerBase"]


class TraceError(ValueError):
    """Raised when a traced program does something a graph cannot record (control flow that
    depends on a traced value, iteration over a value of unknown length)."""


class TracerBase:
    """What a :class:`Proxy` needs from its tracer: a graph to add nodes to and the rules that
    turn Python values into node arguments."""

    graph: Graph
    record_stack_traces: bool = False

    def create_node(self, kind: str, target: Target, args: tuple, kwargs: dict,
                    name: str | None = None, type_expr: Any = None) -> Node:
        """Adds one node to ``self.graph``."""
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> Proxy:
        """The proxy standing for ``node``'s value."""
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Target, args: tuple, kwargs: dict,
                     name: str | None = None, type_expr: Any = None,
                     proxy_factory_fn: Callable[[Node], Proxy] | None = None) -> Proxy:
        """Adds a node whose arguments are ``args`` / ``kwargs`` (proxies become their nodes)
        and returns its proxy."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple) or not isinstance(kwargs_, dict):
            raise TypeError(f"create_proxy({kind}, {target!r}): args must be a tuple and kwargs "
                            "a dict")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        if self.record_stack_traces:
            frames = [f for f in traceback.extract_stack()[:-1]
                      if "/ember/fx/" not in f.filename.replace("\\", "/")]
            node.stack_trace = "".join(traceback.format_list(frames[-1:]))
        return proxy_factory_fn(node) if proxy_factory_fn is not None else self.proxy(node)

    def create_arg(self, a: Any) -> Argument:
        """Turns a value into a node argument: proxies become their nodes, containers are
        mapped, other values stay constants."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, dict):
            out = {}
            for k, v in a.items():
                key = self.create_arg(k)
                if isinstance(key, Node):
                    raise TraceError(f"Keys of a dict argument cannot be traced values ({k})")
                out[key] = self.create_arg(v)
            return out
        if isinstance(a, (tuple, list, slice)):
            return map_aggregate(a, self.create_arg) if not isinstance(a, slice) else slice(
                self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        return a

    def to_bool(self, obj: Proxy) -> bool:
        """Called when a traced value is used as a truth value: a graph cannot branch."""
        raise TraceError(
            f"symbolically traced variables cannot be used as inputs to control flow (the value "
            f"of node '{obj.node.name}', {obj.node.format_node()}, was used in an if/while/"
            "and/or/not or converted to bool); make the branch depend on concrete_args, or "
            "move it into a function registered with ember.fx.wrap or a leaf module")

    def iter(self, obj: Proxy) -> Iterator:
        """Called when a traced value is iterated outside of tuple unpacking."""
        raise TraceError(
            f"Proxy object cannot be iterated: the length of node '{obj.node.name}' is unknown "
            "while tracing (tuple unpacking `a, b = x` works; loops over a traced value do not)")

    def keys(self, obj: Proxy) -> Any:
        """Called for ``**proxy``: records ``obj.keys()``."""
        return Attribute(obj, "keys")()


class GraphAppendingTracer(TracerBase):
    """A tracer that only appends to ``graph`` (for proxies made outside of tracing, and for
    :class:`~ember.fx.Transformer`)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.root = None
        self.tensor_attrs: dict = {}


class Proxy:
    """The traced value of a node (see the module docstring). ``Proxy(node)`` makes one for a
    node of any graph, appending new nodes to that graph."""

    def __init__(self, node: Node, tracer: TracerBase | None = None) -> None:
        self.tracer = tracer if tracer is not None else GraphAppendingTracer(node.graph)
        self.node = node

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> Attribute:
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(f"'Proxy' object has no attribute {k!r}")
        return Attribute(self, k)

    def __getstate__(self) -> dict:
        return self.__dict__

    def __setstate__(self, state: dict) -> None:
        self.__dict__ = state

    def __deepcopy__(self, memo: dict) -> Proxy:
        raise TraceError(f"a traced value ({self}) cannot be deep-copied while tracing")

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __iter__(self) -> Iterator[Proxy]:
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None:
            for inst in dis.get_instructions(caller.f_code):
                if inst.offset == caller.f_lasti:
                    if inst.opname == "UNPACK_SEQUENCE":  # `a, b = proxy` calls iter() here
                        return iter([self[i] for i in range(inst.argval)])
                    break
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        raise RuntimeError(
            f"'len' is not supported in symbolic tracing by default (node '{self.node.name}'); "
            "call ember.fx.wrap('len') at module scope to record len() calls")

    def __index__(self) -> int:
        raise TraceError(
            f"a traced value (node '{self.node.name}') cannot be used as a Python integer "
            "(range(), list index, ember factory size) while tracing")

    def keys(self) -> Any:
        """``**proxy`` support: records ``keys()``."""
        return self.tracer.keys(self)

    @classmethod
    def __torch_function__(cls, orig_method: Callable, types: tuple, args: tuple = (),
                           kwargs: dict | None = None) -> Proxy:
        kwargs = kwargs or {}
        tracers: dict[Any, None] = {}

        def find(a: Any) -> None:
            if isinstance(a, Proxy):
                tracers.setdefault(a.tracer)

        map_aggregate(args, find)
        map_aggregate(kwargs, find)
        if len(tracers) > 1:
            raise RuntimeError(
                f"Found multiple different tracers {list(tracers)} while tracing "
                f"{orig_method.__name__}")
        if not tracers:
            raise TraceError(f"{orig_method.__name__}: no traced value among the arguments")
        tracer = next(iter(tracers))
        from ember.overrides import is_tensor_method_or_property

        if is_tensor_method_or_property(orig_method):
            name = orig_method.__name__
            if name == "__get__":  # a property read: Tensor.shape.__get__
                return tracer.create_proxy(
                    "call_function", getattr, (args[0], orig_method.__qualname__.split(".")[1]),
                    {})
            return tracer.create_proxy("call_method", name, args, kwargs)
        return tracer.create_proxy("call_function", orig_method, args, kwargs)


class Attribute(Proxy):
    """``proxy.name``: a ``getattr`` node, made when first used as a value (a call on it
    records a ``call_method`` instead)."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


class ParameterProxy(Proxy):
    """A parameter read while tracing with ``param_shapes_constant``: its shape queries give
    the parameter's actual values (so code may branch on them); everything else is traced."""

    def __init__(self, tracer: TracerBase, node: Node, name: str, param: Any) -> None:
        super().__init__(node, tracer)
        self.param = param
        self.name = name

    def __repr__(self) -> str:
        return f"ParameterProxy({self.name})"

    @property
    def shape(self) -> Any:
        return self.param.shape

    @property
    def ndim(self) -> int:
        return self.param.ndim

    def size(self, dim: int | None = None) -> Any:
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self) -> int:
        return self.param.dim()

    def numel(self) -> int:
        return self.param.numel()

    def nelement(self) -> int:
        return self.param.nelement()


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift",
           "and_", "or_", "xor")
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_UNARY = ("neg", "pos", "invert", "abs")


def _install_magic() -> None:
    def forward_op(fn: Callable) -> Callable:
        def impl(self: Proxy, *args: Any) -> Proxy:
            return self.tracer.create_proxy("call_function", fn, (self, *args), {})
        return impl

    def reflected_op(fn: Callable) -> Callable:
        def impl(self: Proxy, rhs: Any) -> Proxy:
            return self.tracer.create_proxy("call_function", fn, (rhs, self), {})
        return impl

    for name in _BINARY:
        fn = getattr(operator, name)
        dunder = name.rstrip("_")
        setattr(Proxy, f"__{dunder}__", forward_op(fn))
        setattr(Proxy, f"__r{dunder}__", reflected_op(fn))
    for name in (*_COMPARE, *_UNARY, "getitem", "setitem"):
        setattr(Proxy, f"__{name}__", forward_op(getattr(operator, name)))


# Set after the class body, so that defining __eq__ leaves proxies hashing by identity.
_install_magic()
