"""``torch.fx.graph``: an ordered list of :class:`~ember.fx.Node` and its Python code.

>>> import ember
>>> from ember.fx import Graph
>>> g = Graph()
>>> x = g.placeholder("x")
>>> y = g.call_function(ember.relu, (x,))
>>> z = g.call_method("sum", (y,), {"dim": 1})
>>> _ = g.output(z)
>>> print(g.python_code("self").src.strip())
def forward(self, x):
    relu = ember.relu(x);  x = None
    sum_1 = relu.sum(dim = 1);  relu = None
    return sum_1
"""

from __future__ import annotations

import builtins
import copy
import importlib
import inspect
import keyword
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ember.fx.node import Argument, Node, Target, _format_arg, map_aggregate, map_arg

__all__ = ["Graph", "PythonCode"]

_MAGIC_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.lshift: "<<", operator.rshift: ">>", operator.and_: "&", operator.or_: "|",
    operator.xor: "^", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
    operator.le: "<=", operator.gt: ">", operator.ge: ">=",
}
_MAGIC_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}

# Top-level modules whose functions the generated code names by their dotted path.
_IMPORTABLE = ("ember", "operator", "math", "builtins")
_RESERVED = {"self", "ember", "operator", "math", "builtins", "torch", "inf", "nan"}


def _snake_case(s: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s).lower()


class _Namespace:
    """Hands out unique, valid Python identifiers (``add``, ``add_1``, ...)."""

    _bad_chars = re.compile(r"[^0-9a-zA-Z_]+")
    _suffix = re.compile(r"(.*)_(\d+)$")

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._base_count: dict[str, int] = {}

    def illegal(self, name: str) -> bool:
        return keyword.iskeyword(name) or name in builtins.__dict__ or name in _RESERVED

    def create_name(self, candidate: str) -> str:
        candidate = self._bad_chars.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        match = self._suffix.match(candidate)
        if match is None:
            base, num = candidate, None
        else:
            base, num = match.group(1), int(match.group(2))
        candidate = base if num is None else f"{base}_{num}"
        count = num if num else self._base_count.get(base, 0)
        while candidate in self._used or self.illegal(candidate):
            count += 1
            candidate = f"{base}_{count}"
        self._used.add(candidate)
        self._base_count[base] = count
        return candidate

    def reserve(self, name: str) -> None:
        self._used.add(name)


@dataclass
class PythonCode:
    """The generated ``forward``: its source and the globals it runs with."""

    src: str
    globals: dict[str, Any] = field(default_factory=dict)


class _NodeList:
    def __init__(self, graph: Graph, reverse: bool = False) -> None:
        self._graph = graph
        self._reverse = reverse

    def __len__(self) -> int:
        return self._graph._len

    def __iter__(self) -> Iterator[Node]:
        root = self._graph._root
        cur = root._prev if self._reverse else root._next
        while cur is not root:
            nxt = cur._prev if self._reverse else cur._next
            if not cur._erased:
                yield cur
            cur = nxt

    def __reversed__(self) -> Iterator[Node]:
        return iter(_NodeList(self._graph, not self._reverse))

    def __repr__(self) -> str:
        return repr(list(self))


class _InsertPoint:
    """Where new nodes go until the ``with`` block (if any) ends."""

    def __init__(self, graph: Graph, insert: Callable[[Node], None]) -> None:
        self.graph = graph
        self.orig_insert, graph._insert = graph._insert, insert

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        self.graph._insert = self.orig_insert


class _NodeRef:
    """A node named inside a pickled graph's arguments."""

    def __init__(self, name: str) -> None:
        self.name = name


class _DeviceRef:
    """An ``ember.device`` argument inside a pickled graph (devices do not pickle)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec


def _resolve_path(path: str) -> Any:
    parts = path.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


def _attr_path(base: str, target: str) -> str:
    out = base
    for part in target.split("."):
        out = f"{out}.{part}" if part.isidentifier() and not keyword.iskeyword(part) else (
            f'getattr({out}, "{part}")')
    return out


class Graph:
    """The operations of a traced program, in order (see :mod:`ember.fx.node` for the kinds).

    ``owning_module`` is the :class:`~ember.fx.GraphModule` that runs it (``None`` for a free
    graph). New nodes go at the end unless :meth:`inserting_before` / :meth:`inserting_after`
    say otherwise.

    >>> import ember
    >>> from ember.fx import Graph
    >>> g = Graph()
    >>> a, b = g.placeholder("a"), g.placeholder("b")
    >>> _ = g.output(g.call_function(ember.add, (a, b)))
    >>> print(g)
    graph():
        %a : [num_users=1] = placeholder[target=a]
        %b : [num_users=1] = placeholder[target=b]
        %add : [num_users=1] = call_function[target=ember.add](args = (%a, %b), kwargs = {})
        return add
    """

    def __init__(self, owning_module: Any = None, tracer_cls: type | None = None) -> None:
        root = object.__new__(Node)
        root.graph, root.name, root.op, root.target = self, "_root", "root", ""
        root._prev = root._next = root
        root._erased, root.users, root._input_nodes, root.meta = False, {}, {}, {}
        self._root = root
        self._len = 0
        self._namespace = _Namespace()
        self._insert: Callable[[Node], None] = root.prepend
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls

    @property
    def nodes(self) -> _NodeList:
        """The nodes in order (iterable, ``len``, ``reversed``)."""
        return _NodeList(self)

    def find_nodes(self, *, op: str, target: Target = None) -> list[Node]:
        """The nodes of kind ``op`` (and with ``target``, when given)."""
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    def output_node(self) -> Node:
        """The output node (the last node). Raises RuntimeError when the graph has none."""
        last = self._root._prev
        if last is self._root or last.op != "output":
            raise RuntimeError("Graph.output_node: the graph has no output node at its end")
        return last

    # ---- making nodes ---------------------------------------------------------------------------
    def _target_to_str(self, target: Target) -> str:
        if isinstance(target, str):
            if target.startswith("__") and target.endswith("__") and len(target) > 4:
                target = target[2:-2]
            return _snake_case(target)
        return _snake_case(getattr(target, "__name__", None) or type(target).__name__)

    def create_node(self, op: str, target: Target, args: tuple | None = None,
                    kwargs: dict | None = None, name: str | None = None,
                    type_expr: Any = None) -> Node:
        """Adds a node at the insert point (the shorthands below call it).

        >>> import ember
        >>> from ember.fx import Graph
        >>> g = Graph()
        >>> g.create_node("placeholder", "x").name
        'x'
        """
        args = () if args is None else args
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(args, tuple):
            raise TypeError(f"Graph.create_node: args must be a tuple, got {type(args).__name__}")
        if not isinstance(kwargs, dict):
            raise TypeError(
                f"Graph.create_node: kwargs must be a dict, got {type(kwargs).__name__}")
        candidate = name if name is not None else self._target_to_str(target)
        node = Node(self, self._namespace.create_name(candidate), op, target, args, kwargs,
                    type_expr)
        self._insert(node)
        self._len += 1
        return node

    def placeholder(self, name: str, type_expr: Any = None,
                    default_value: Any = inspect.Signature.empty) -> Node:
        """An input of ``forward`` named ``name`` (with ``default_value``, when given)."""
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        """Reads ``qualified_name`` (``"conv.weight"``) from the owning module."""
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Calls the submodule ``module_name`` of the owning module."""
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None,
                    kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Calls method ``method_name`` of ``args[0]``."""
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None,
                      kwargs: dict | None = None, type_expr: Any = None) -> Node:
        """Calls ``the_function``."""
        return self.create_node("call_function", the_function, args, kwargs,
                                type_expr=type_expr)

    def output(self, result: Argument, type_expr: Any = None) -> Node:
        """What ``forward`` returns."""
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def inserting_before(self, n: Node | None = None) -> _InsertPoint:
        """New nodes go right before ``n`` (at the start when ``n`` is None); use as a ``with``
        block to restore the insert point afterwards."""
        if n is None:
            return self.inserting_after(self._root)
        self._check_own(n, "inserting_before")
        return _InsertPoint(self, n.prepend)

    def inserting_after(self, n: Node | None = None) -> _InsertPoint:
        """New nodes go after ``n``, in the order they are made (at the end when ``n`` is
        None)."""
        if n is None:
            return self.inserting_before(self._root)
        if n is not self._root:
            self._check_own(n, "inserting_after")
        cursor = [n]

        def insert(x: Node) -> None:
            cursor[0].append(x)
            cursor[0] = x

        return _InsertPoint(self, insert)

    def _check_own(self, n: Node, what: str) -> None:
        if not isinstance(n, Node) or n.graph is not self or n._erased:
            raise ValueError(f"Graph.{what}: {n!r} is not a node of this graph")

    def erase_node(self, to_erase: Node) -> None:
        """Removes a node that nothing uses any more."""
        self._check_own(to_erase, "erase_node")
        if to_erase.users:
            raise RuntimeError(
                f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} users in "
                f"the graph: {list(to_erase.users)}!")
        to_erase._update_args_kwargs((), {})
        to_erase._unlink()  # its own links stay, so that a walk over the nodes goes on
        to_erase._erased = True
        self._len -= 1

    # ---- copying ----------------------------------------------------------------------------------
    def node_copy(self, node: Node, arg_transform: Callable[[Node], Argument] = lambda x: x) -> Node:
        """Copies ``node`` (of any graph) into this one, mapping its input nodes with
        ``arg_transform``."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        result = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        result.meta = copy.copy(node.meta)
        return result

    def graph_copy(self, g: Graph, val_map: dict, return_output_node: bool = False) -> Any:
        """Copies every node of ``g`` into this graph (``val_map`` maps ``g``'s nodes to this
        graph's, and is filled in). Returns the value ``g`` outputs, mapped."""
        for node in g.nodes:
            if node in val_map:
                continue
            if node.op == "output":
                rv = map_arg(node.args[0], lambda n: val_map[n]) if node.args else None
                return (rv, node) if return_output_node else rv
            val_map[node] = self.node_copy(node, lambda n: val_map[n])
        return None

    def __deepcopy__(self, memo: dict | None = None) -> Graph:
        memo = {} if memo is None else memo
        g = Graph(tracer_cls=self._tracer_cls)
        result = g.graph_copy(self, memo, return_output_node=True)
        if result is not None:
            rv, out = result
            new_out = g.output(rv, type_expr=out.type)
            new_out.meta = copy.copy(out.meta)
        return g

    def __getstate__(self) -> dict:
        import ember

        def ref(v: Any) -> Any:
            if isinstance(v, Node):
                return _NodeRef(v.name)
            return _DeviceRef(str(v)) if isinstance(v, ember.device) else v

        nodes = [(n.name, n.op, n.target, map_aggregate(n.args, ref),
                  map_aggregate(n.kwargs, ref), n.type, n.meta) for n in self.nodes]
        return {"nodes": nodes, "tracer_cls": self._tracer_cls}

    def __setstate__(self, state: dict) -> None:
        Graph.__init__(self, tracer_cls=state["tracer_cls"])
        env: dict[str, Node] = {}

        def unref(a: Any) -> Any:
            import ember

            def one(v: Any) -> Any:
                if isinstance(v, _NodeRef):
                    return env[v.name]
                return ember.device(v.spec) if isinstance(v, _DeviceRef) else v

            return map_aggregate(a, one)

        for name, op, target, args, kwargs, typ, meta in state["nodes"]:
            n = self.create_node(op, target, unref(args), unref(kwargs), name, typ)
            n.meta = meta
            env[name] = n

    # ---- passes -----------------------------------------------------------------------------------
    def eliminate_dead_code(self, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
        """Erases the nodes whose results nothing uses and that have no effects (see
        :meth:`Node.is_impure`). Returns whether it changed the graph.

        >>> import ember
        >>> from ember.fx import Graph
        >>> g = Graph()
        >>> x = g.placeholder("x")
        >>> _ = g.call_function(ember.relu, (x,))
        >>> _ = g.output(x)
        >>> g.eliminate_dead_code(), len(g.nodes)
        (True, 2)
        """
        impure = is_impure_node or (lambda n: n.is_impure())
        changed = False
        for node in list(reversed(self.nodes)):
            if not node.users and not impure(node):
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Checks the graph: known ops, unique names, arguments defined before use, consistent
        users, nothing after the output, and (with an owning module) targets that exist.
        Raises RuntimeError naming the first problem."""
        seen: set[Node] = set()
        names: set[str] = set()
        output_seen = None
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node {node} does not belong to this graph")
            if output_seen is not None:
                raise RuntimeError(f"Node {node} comes after the output node {output_seen}")
            if node.name in names:
                raise RuntimeError(f"Node name {node.name!r} is used twice")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp not in seen:
                    raise RuntimeError(
                        f"Argument {inp!r} of Node {node!r} was used before it was defined (or "
                        "belongs to another graph)")
                if node not in inp.users:
                    raise RuntimeError(f"Node {inp!r} does not list its user {node!r}")
            for user in node.users:
                if user._erased or node not in user._input_nodes:
                    raise RuntimeError(f"Node {node!r} lists {user!r} as a user but it is not")
            if node.op == "output":
                output_seen = node
            seen.add(node)
            if self.owning_module is not None and node.op in ("get_attr", "call_module"):
                obj = self.owning_module
                for i, part in enumerate(node.target.split(".")):
                    if not hasattr(obj, part):
                        where = ".".join(node.target.split(".")[:i]) or "the root module"
                        raise RuntimeError(
                            f"Node {node.name} target {node.target} references nonexistent "
                            f"attribute {part} of {where}")
                    obj = getattr(obj, part)
                from ember.nn import Module

                if node.op == "call_module" and not isinstance(obj, Module):
                    raise RuntimeError(
                        f"Node {node.name} target {node.target} is not an nn.Module "
                        f"(a {type(obj).__name__})")

    # ---- printing -----------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = [f"    {n.format_node()}" for n in self.nodes]
        return "\n".join(["graph():", *lines])

    def __repr__(self) -> str:
        return f"<ember.fx.Graph with {len(self.nodes)} nodes>"

    def print_tabular(self) -> None:
        """Prints the nodes as a table (opcode, name, target, args, kwargs)."""
        rows = [["opcode", "name", "target", "args", "kwargs"]]
        for n in self.nodes:
            rows.append([n.op, n.name, n._pretty_target(), _format_arg(n.args).replace("%", ""),
                         _format_arg(n.kwargs).replace("%", "")])
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*rows[0]).rstrip(), "  ".join("-" * w for w in widths)]
        out += [fmt.format(*r).rstrip() for r in rows[1:]]
        print("\n".join(out))

    # ---- code generation -----------------------------------------------------------------------
    def python_code(self, root_module: str = "self") -> PythonCode:
        """The ``forward`` that runs this graph, as source and the globals it needs
        (``root_module`` names the module whose attributes ``get_attr`` / ``call_module``
        read)."""
        return _CodeGen(self, root_module).generate()


class _CodeGen:
    def __init__(self, graph: Graph, root_module: str) -> None:
        self.graph = graph
        self.root = root_module
        self.globals: dict[str, Any] = {"inf": math.inf, "nan": math.nan}
        self.node_names = {n.name for n in graph.nodes}
        self.by_id: dict[int, str] = {}

    def add_global(self, hint: str, obj: Any) -> str:
        if id(obj) in self.by_id:
            return self.by_id[id(obj)]
        name = getattr(obj, "__name__", None)
        if isinstance(name, str) and builtins.__dict__.get(name) is obj:
            return name
        module = getattr(obj, "_tf_home", None) or getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if module == "_operator":
            module = "operator"
        if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
            top = module.split(".")[0]
            if top in _IMPORTABLE:
                path = f"{module}.{qualname}"
                try:
                    found = _resolve_path(path)
                except (ImportError, AttributeError):
                    found = None
                if found is obj:
                    self.globals[top] = importlib.import_module(top)
                    self.by_id[id(obj)] = path
                    return path
        base = re.sub(r"[^0-9a-zA-Z_]+", "_", hint) or "_global"
        if base[0].isdigit():
            base = f"_{base}"
        cand, i = base, 0
        while (cand in self.globals or cand in self.node_names or cand in _RESERVED
               or keyword.iskeyword(cand) or cand in builtins.__dict__):
            i += 1
            cand = f"{base}_{i}"
        self.globals[cand] = obj
        self.by_id[id(obj)] = cand
        return cand

    def fmt(self, a: Any) -> str:
        if isinstance(a, Node):
            return a.name
        if isinstance(a, tuple):
            inner = ", ".join(self.fmt(e) for e in a)
            if hasattr(a, "_fields"):
                return f"{self.add_global(type(a).__name__, type(a))}({inner})"
            return f"({inner},)" if len(a) == 1 else f"({inner})"
        if isinstance(a, list):
            return "[" + ", ".join(self.fmt(e) for e in a) + "]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.fmt(k)}: {self.fmt(v)}" for k, v in a.items()) + "}"
        if isinstance(a, slice):
            return f"slice({self.fmt(a.start)}, {self.fmt(a.stop)}, {self.fmt(a.step)})"
        if a is None or a is Ellipsis or isinstance(a, (bool, int, str, bytes)):
            return repr(a)
        if isinstance(a, float):
            if math.isinf(a):
                return "inf" if a > 0 else "-inf"
            return "nan" if math.isnan(a) else repr(a)
        if isinstance(a, complex) and math.isfinite(a.real) and math.isfinite(a.imag):
            return repr(a)
        r = repr(a)
        if re.fullmatch(r"ember(\.\w+)+", r):
            try:
                if _resolve_path(r) == a:
                    self.globals["ember"] = importlib.import_module("ember")
                    return r
            except (ImportError, AttributeError):
                pass
        return self.add_global(_snake_case(type(a).__name__), a)

    def fmt_index(self, a: Any) -> str:
        if isinstance(a, slice):
            parts = ["" if v is None else self.fmt(v) for v in (a.start, a.stop, a.step)]
            return ":".join(parts) if a.step is not None else ":".join(parts[:2])
        if a is Ellipsis:
            return "..."
        if isinstance(a, tuple) and a and not hasattr(a, "_fields"):
            return ", ".join(self.fmt_index(e) for e in a) + ("," if len(a) == 1 else "")
        return self.fmt(a)

    def call_args(self, args: tuple, kwargs: dict) -> str:
        parts = [self.fmt(a) for a in args] + [f"{k} = {self.fmt(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def expr(self, node: Node) -> str:
        op, target, args, kwargs = node.op, node.target, node.args, node.kwargs
        if op == "get_attr":
            return _attr_path(self.root, target)
        if op == "call_module":
            return f"{_attr_path(self.root, target)}({self.call_args(args, kwargs)})"
        if op == "call_method":
            if not args:
                raise RuntimeError(f"Node {node.name}: call_method needs the object in args[0]")
            return f"{self.fmt(args[0])}.{target}({self.call_args(args[1:], kwargs)})"
        # call_function
        if not kwargs:
            if target in _MAGIC_BINARY and len(args) == 2:
                return f"{self.fmt(args[0])} {_MAGIC_BINARY[target]} {self.fmt(args[1])}"
            if target in _MAGIC_UNARY and len(args) == 1:
                return f"{_MAGIC_UNARY[target]}{self.fmt(args[0])}"
            if target is operator.getitem and len(args) == 2:
                return f"{self.fmt(args[0])}[{self.fmt_index(args[1])}]"
            if (target is builtins.getattr and len(args) == 2 and isinstance(args[1], str)
                    and args[1].isidentifier() and not keyword.iskeyword(args[1])):
                return f"{self.fmt(args[0])}.{args[1]}"
        fn = self.add_global(self.graph._target_to_str(target), target)
        return f"{fn}({self.call_args(args, kwargs)})"

    def generate(self) -> PythonCode:
        nodes = list(self.graph.nodes)
        last_use: dict[Node, Node] = {}
        for node in nodes:
            for inp in node.all_input_nodes:
                last_use[inp] = node
        params: list[str] = []
        body: list[str] = []
        for node in nodes:
            if node.op == "placeholder":
                stars = len(node.target) - len(node.target.lstrip("*"))
                arg = node.target[stars:]
                if not arg.isidentifier() or keyword.iskeyword(arg) or arg in self.node_names:
                    arg = node.name
                elif arg != node.name:  # forward keeps the argument's name (`input`)
                    body.append(f"{node.name} = {arg}")
                default = f" = {self.fmt(node.args[0])}" if node.args and not stars else ""
                params.append(f"{'*' * stars}{arg}{default}")
                continue
            if node.op == "output":
                body.append(f"return {self.fmt(node.args[0]) if node.args else 'None'}")
                break
            line = f"{node.name} = {self.expr(node)}"
            dead = [v.name for v in node.all_input_nodes if last_use[v] is node]
            if not node.users:
                dead.append(node.name)
            if dead:
                line += ";  " + " = ".join(dead) + " = None"
            body.append(line)
        if not body:
            body.append("pass")
        src = "\n\n\ndef forward(" + ", ".join([self.root, *params]) + "):\n"
        src += "".join(f"    {line}\n" for line in body) + "    "
        return PythonCode(src, self.globals)

