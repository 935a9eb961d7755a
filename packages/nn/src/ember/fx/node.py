"""``torch.fx.node``: one operation of a :class:`~ember.fx.Graph`.

A node is one of six kinds (its ``op``): ``placeholder`` (an input of ``forward``), ``get_attr``
(a parameter, buffer or attribute of the module), ``call_function``, ``call_method``,
``call_module`` and ``output`` (the value returned). Its ``args`` and ``kwargs`` hold other nodes
and constants; every node knows its ``users`` (the nodes whose arguments name it).

>>> import ember
>>> from ember.fx import Graph
>>> g = Graph()
>>> x = g.placeholder("x")
>>> y = g.call_function(ember.relu, (x,))
>>> _ = g.output(y)
>>> y.op, y.name, list(x.users), y.all_input_nodes
('call_function', 'relu', [relu], [x])
"""

from __future__ import annotations

import builtins
import operator
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ember.fx.graph import Graph

__all__ = ["Argument", "Node", "Target", "has_side_effect", "map_aggregate", "map_arg"]

Target = Any  # a callable (call_function) or a string (the other kinds)
Argument = Any  # a node, a constant, or a tuple / list / dict / slice of arguments

_OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

# Functions a graph keeps even when nothing uses their result (eliminate_dead_code).
_side_effectful_functions: set[Callable] = {operator.setitem, builtins.setattr, builtins.print}


def has_side_effect(fn: Callable) -> Callable:
    """Marks ``fn`` as side-effectful: dead-code elimination keeps its calls. Returns ``fn``.

    >>> from ember.fx import has_side_effect
    >>> @has_side_effect
    ... def log(x):
    ...     print(x)
    >>> log.__name__
    'log'
    """
    _side_effectful_functions.add(fn)
    return fn


def _type_repr(obj: Any) -> str:
    if isinstance(obj, type):
        return obj.__name__ if obj.__module__ == "builtins" else f"{obj.__module__}.{obj.__qualname__}"
    return repr(obj)


def _qualified_name(func: Callable) -> str:
    """``module.qualname`` of a function (``ember.relu``, ``operator.add``, ``getattr``)."""
    if getattr(builtins, getattr(func, "__name__", ""), None) is func:
        return f"builtins.{func.__name__}"
    module = getattr(func, "_tf_home", None) or getattr(func, "__module__", None)
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    if module == "_operator":
        module = "operator"
    return f"{module}.{name}" if module else name


def map_aggregate(a: Argument, fn: Callable[[Argument], Argument]) -> Argument:
    """Applies ``fn`` to every leaf of ``a`` (through tuples, lists, dicts and slices), keeping
    the containers' types.

    >>> from ember.fx.node import map_aggregate
    >>> map_aggregate((1, [2, {"k": 3}]), lambda v: v * 10)
    (10, [20, {'k': 30}])
    """
    if isinstance(a, tuple):
        mapped = tuple(map_aggregate(e, fn) for e in a)
        return type(a)(*mapped) if hasattr(a, "_fields") else mapped
    if isinstance(a, list):
        return [map_aggregate(e, fn) for e in a]
    if isinstance(a, dict):
        return {k: map_aggregate(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_aggregate(a.start, fn), map_aggregate(a.stop, fn),
                     map_aggregate(a.step, fn))
    return fn(a)


def map_arg(a: Argument, fn: Callable[[Node], Argument]) -> Argument:
    """Applies ``fn`` to every :class:`Node` inside ``a`` (constants stay as they are).

    >>> from ember.fx import Graph
    >>> from ember.fx.node import map_arg
    >>> g = Graph()
    >>> x = g.placeholder("x")
    >>> map_arg((x, 2), lambda n: n.name)
    ('x', 2)
    """
    return map_aggregate(a, lambda v: fn(v) if isinstance(v, Node) else v)


def _collect_nodes(a: Argument, into: dict) -> None:
    map_arg(a, lambda n: into.setdefault(n, None))


def _format_arg(arg: Any, max_list_len: float = float("inf")) -> str:
    if isinstance(arg, Node):
        return "%" + arg.name
    if isinstance(arg, tuple) and not hasattr(arg, "_fields"):
        items = ", ".join(_format_arg(a) for i, a in enumerate(arg) if i < max_list_len)
        more = "" if len(arg) <= max_list_len else f", ...[total_len={len(arg)}]"
        return f"({items}{',' if len(arg) == 1 else ''}{more})"
    if isinstance(arg, list):
        items = ", ".join(_format_arg(a) for i, a in enumerate(arg) if i < max_list_len)
        more = "" if len(arg) <= max_list_len else f", ...[total_len={len(arg)}]"
        return f"[{items}{more}]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    return str(arg)


class Node:
    """One operation of a graph (see the module docstring). Nodes are made by
    :meth:`Graph.create_node` and its shorthands, never directly.

    ``meta`` is a free dict for passes (``ShapeProp`` stores ``tensor_meta`` there).

    >>> import ember
    >>> from ember.fx import Graph
    >>> g = Graph()
    >>> x = g.placeholder("x")
    >>> s = g.call_method("sum", (x,), {"dim": 1})
    >>> s.format_node()
    '%sum_1 : [num_users=0] = call_method[target=sum](args = (%x,), kwargs = {dim: 1})'
    """

    def __init__(self, graph: Graph, name: str, op: str, target: Target, args: tuple,
                 kwargs: dict, return_type: Any = None) -> None:
        if op not in _OPCODES:
            raise ValueError(f"Node: op must be one of {_OPCODES}, got {op!r}")
        if op == "call_function":
            if not callable(target):
                raise ValueError(
                    f"Node {name}: call_function's target must be callable, got {target!r}")
        elif not isinstance(target, str):
            raise ValueError(f"Node {name}: {op}'s target must be a string, got {target!r}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = return_type
        self.meta: dict[str, Any] = {}
        self.users: dict[Node, None] = {}
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._prev: Node = self
        self._next: Node = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    # ---- arguments ----------------------------------------------------------------------------
    @property
    def args(self) -> tuple:
        """The positional arguments; assigning them updates the users of the nodes involved."""
        return self._args

    @args.setter
    def args(self, a: tuple) -> None:
        self._update_args_kwargs(tuple(a), self._kwargs)

    @property
    def kwargs(self) -> dict:
        """The keyword arguments; assigning them updates the users of the nodes involved."""
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k: dict) -> None:
        self._update_args_kwargs(self._args, dict(k))

    def update_arg(self, idx: int, arg: Argument) -> None:
        """Sets positional argument ``idx`` to ``arg``."""
        args = list(self._args)
        args[idx] = arg
        self.args = tuple(args)

    def insert_arg(self, idx: int, arg: Argument) -> None:
        """Inserts ``arg`` as positional argument ``idx``."""
        if not 0 <= idx <= len(self._args):
            raise IndexError(
                f"Node {self.name}: insert_arg index {idx} is outside 0..{len(self._args)}")
        self.args = (*self._args[:idx], arg, *self._args[idx:])

    def update_kwarg(self, key: str, arg: Argument) -> None:
        """Sets keyword argument ``key`` to ``arg``."""
        kwargs = dict(self._kwargs)
        kwargs[key] = arg
        self.kwargs = kwargs

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args = map_arg(args, self._check_arg)
        self._kwargs = map_arg(kwargs, self._check_arg)
        found: dict[Node, None] = {}
        _collect_nodes(self._args, found)
        _collect_nodes(self._kwargs, found)
        self._input_nodes = found
        for n in found:
            n.users.setdefault(self)

    def _check_arg(self, n: Node) -> Node:
        if n.graph is not self.graph:
            raise ValueError(
                f"Node {self.name}: argument {n.name} belongs to another graph; copy it with "
                "Graph.node_copy first")
        if n._erased:
            raise ValueError(f"Node {self.name}: argument {n.name} was erased from the graph")
        return n

    @property
    def all_input_nodes(self) -> list[Node]:
        """The distinct nodes among ``args`` and ``kwargs``, in the order they appear."""
        return list(self._input_nodes)

    # ---- neighbours ---------------------------------------------------------------------------
    @property
    def next(self) -> Node:
        """The node after this one (the graph's root sentinel after the last)."""
        return self._next

    @property
    def prev(self) -> Node:
        """The node before this one."""
        return self._prev

    def _unlink(self) -> None:
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    def prepend(self, x: Node) -> None:
        """Moves (or inserts) node ``x`` right before this one.

        >>> import ember
        >>> from ember.fx import Graph
        >>> g = Graph()
        >>> a = g.placeholder("a"); b = g.placeholder("b")
        >>> a.prepend(b)
        >>> [n.name for n in g.nodes]
        ['b', 'a']
        """
        if x is self:
            raise ValueError(f"Node {self.name}: cannot prepend a node to itself")
        if x.graph is not self.graph:
            raise ValueError(f"Node {self.name}: {x.name} belongs to another graph")
        if x._erased or self._erased:
            raise ValueError(f"Node {self.name}: cannot move {x.name}: a node was erased")
        if x._next is not x:
            x._unlink()
        p = self._prev
        p._next, x._prev = x, p
        x._next, self._prev = self, x

    def append(self, x: Node) -> None:
        """Moves (or inserts) node ``x`` right after this one."""
        if self._next is not x:
            self._next.prepend(x)

    # ---- rewriting ----------------------------------------------------------------------------
    def replace_all_uses_with(self, replace_with: Node,
                              delete_user_cb: Callable[[Node], bool] = lambda user: True, *,
                              propagate_meta: bool = False) -> list[Node]:
        """Makes every user of this node use ``replace_with`` instead (those for which
        ``delete_user_cb(user)`` is true). Returns the users changed.

        >>> import ember
        >>> from ember.fx import Graph
        >>> g = Graph()
        >>> x = g.placeholder("x")
        >>> r = g.call_function(ember.relu, (x,))
        >>> out = g.output(r)
        >>> with g.inserting_after(r):
        ...     s = g.call_function(ember.sigmoid, (x,))
        >>> r.replace_all_uses_with(s)
        [output]
        >>> out.args
        (sigmoid,)
        """
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        changed = []
        for user in list(self.users):
            if user is replace_with or not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old_input: Node, new_input: Node) -> None:
        """Replaces every occurrence of ``old_input`` among this node's arguments."""

        def swap(n: Node) -> Node:
            return new_input if n is old_input else n

        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def is_impure(self) -> bool:
        """Whether the node has effects beyond its value (inputs, the output, in-place methods,
        side-effectful functions, impure modules): dead-code elimination keeps it."""
        if self.op in ("placeholder", "output"):
            return True
        if self.op == "call_function":
            name = getattr(self.target, "__name__", "")
            return self.target in _side_effectful_functions or (
                name.endswith("_") and not name.endswith("__"))
        if self.op == "call_method":
            return self.target.endswith("_") and not self.target.endswith("__")
        if self.op == "call_module":
            root = self.graph.owning_module
            if root is not None:
                try:
                    mod = root.get_submodule(self.target)
                except AttributeError:
                    return False
                return bool(getattr(mod, "_is_impure", False))
        return False

    # ---- printing -----------------------------------------------------------------------------
    @property
    def stack_trace(self) -> str | None:
        """Where the node was traced from, when the tracer recorded it."""
        return self.meta.get("stack_trace")

    @stack_trace.setter
    def stack_trace(self, trace: str | None) -> None:
        self.meta["stack_trace"] = trace

    def _pretty_target(self) -> str:
        if self.op == "call_function":
            return _qualified_name(self.target)
        return str(self.target)

    def format_node(self, placeholder_names: list[str] | None = None,
                    maybe_return_typename: list[str] | None = None) -> str | None:
        """The node as one line of :meth:`Graph.__str__` (``placeholder_names``, when given,
        collects placeholders instead of printing them)."""
        if self.op == "placeholder":
            if placeholder_names is not None:
                default = f"={self.args[0]!r}" if self.args else ""
                placeholder_names.append(f"{self.target}{default}")
                return None
            typ = f": {_type_repr(self.type)}" if self.type is not None else ""
            default = f"={self.args[0]!r}" if self.args else ""
            return (f"%{self.name} : [num_users={len(self.users)}]{typ} = "
                    f"placeholder[target={self.target}]{'(default' + default + ')' if default else ''}")
        if self.op == "output":
            if self.type is not None and maybe_return_typename is not None:
                maybe_return_typename[0] = f" -> {_type_repr(self.type)}"
            return f"return {_format_arg(self.args[0]).replace('%', '')}" if self.args else "return None"
        typ = f": {_type_repr(self.type)}" if self.type is not None else ""
        if self.op == "get_attr":
            return f"%{self.name} : [num_users={len(self.users)}]{typ} = get_attr[target={self.target}]"
        return (f"%{self.name} : [num_users={len(self.users)}]{typ} = "
                f"{self.op}[target={self._pretty_target()}](args = {_format_arg(self.args)}, "
                f"kwargs = {_format_arg(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name
