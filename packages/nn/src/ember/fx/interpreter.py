"""``torch.fx.interpreter``: run a graph node by node (:class:`Interpreter`), or rebuild it into
a new graph while running it on proxies (:class:`Transformer`).

Subclasses override the per-kind hooks (``call_function``, ``call_module``, ...) to observe or
change what each node does.

>>> import ember
>>> from ember.fx import Interpreter, symbolic_trace
>>> def f(x):
...     return ember.relu(x) + 1
>>> class NegRelu(Interpreter):
...     def call_function(self, target, args, kwargs):
...         if target is ember.relu:
...             return -args[0]
...         return super().call_function(target, args, kwargs)
>>> NegRelu(symbolic_trace(f)).run(ember.tensor([2.0])).tolist()
[-1.0]
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from ember.fx._symbolic_trace import Tracer
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.node import Argument, Node, Target, map_aggregate, map_arg
from ember.fx.proxy import Proxy
from ember.nn import Module

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Runs ``module``'s graph (or ``graph``) one node at a time: :meth:`run` calls
    :meth:`run_node` for each node, which calls the hook named after the node's ``op`` with
    the node's target and its arguments' values. With ``garbage_collect_values`` a value is
    dropped after its last use."""

    def __init__(self, module: Module, garbage_collect_values: bool = True,
                 graph: Graph | None = None) -> None:
        self.module = module
        self.submodules = dict(module.named_modules())
        if graph is None:
            graph = getattr(module, "graph", None)
            if not isinstance(graph, Graph):
                raise TypeError("Interpreter: module has no fx graph; pass a GraphModule or graph=")
        self.graph = graph
        self.env: dict[Node, Any] = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        self.args_iter: Iterator[Any] = iter(())
        self.user_to_last_uses: dict[Node, list[Node]] = {}
        if garbage_collect_values:
            last_use: dict[Node, Node] = {}
            for node in self.graph.nodes:
                for inp in node.all_input_nodes:
                    last_use[inp] = node
            for value, user in last_use.items():
                self.user_to_last_uses.setdefault(user, []).append(value)

    def run(self, *args: Any, initial_env: dict[Node, Any] | None = None,
            enable_io_processing: bool = True) -> Any:
        """Runs the graph on ``args`` (the placeholders' values, in order) and returns what its
        output node returns. ``initial_env`` gives values for nodes that are then skipped."""
        self.env = dict(initial_env) if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as err:
                if self.extra_traceback:
                    err.add_note(f"While executing {node.format_node()}")
                raise
            if self.garbage_collect_values:
                for dead in self.user_to_last_uses.get(node, []):
                    self.env.pop(dead, None)
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list: list) -> Any:
        """:meth:`run` on the values of ``args_list``, which it empties."""
        args = list(args_list)
        args_list.clear()
        return self.run(*args)

    def run_node(self, n: Node) -> Any:
        """Runs one node: fetches its arguments' values and calls the hook for its op."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    # ---- hooks ------------------------------------------------------------------------------------
    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The next input (the rest, for ``*args``; a dict, for ``**kwargs``), else the
        default in ``args``."""
        if target.startswith("**"):
            return next(self.args_iter, {})
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from None

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The module's attribute ``target``."""
        return self.fetch_attr(target)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``target(*args, **kwargs)``."""
        return target(*args, **kwargs)

    def call_method(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """``args[0].target(*args[1:], **kwargs)``."""
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """Calls the submodule ``target``."""
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target: Target, args: tuple, kwargs: dict) -> Any:
        """The value returned: ``args[0]``."""
        return args[0]

    # ---- helpers ----------------------------------------------------------------------------------
    def fetch_attr(self, target: str) -> Any:
        """Reads the dotted attribute path ``target`` from the module."""
        obj: Any = self.module
        atoms = target.split(".")
        for i, atom in enumerate(atoms):
            if not hasattr(obj, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(atoms[:i + 1])}")
            obj = getattr(obj, atom)
        return obj

    def fetch_args_kwargs_from_env(self, n: Node) -> tuple[tuple, dict]:
        """The values of ``n``'s arguments."""
        return self.map_nodes_to_values(n.args, n), self.map_nodes_to_values(n.kwargs, n)

    def map_nodes_to_values(self, args: Argument, n: Node) -> Any:
        """``args`` with each node replaced by its computed value."""

        def load(a: Node) -> Any:
            if a not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {a}! Run Graph.lint() "
                                   "to diagnose such issues")
            return self.env[a]

        return map_arg(args, load)


class _TransformerTracer(Tracer):
    def __init__(self, graph: Graph, root: Module) -> None:
        super().__init__()
        self.graph = graph
        self.root = root
        self._collect_attrs(root)
        self.submodule_paths = None

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return True


class Transformer(Interpreter):
    """Runs the graph on proxies, so that each hook records into a new graph; override hooks
    to rewrite nodes, then :meth:`transform` returns the new :class:`GraphModule`.

    >>> import ember
    >>> from ember.fx import Transformer, symbolic_trace
    >>> def f(x):
    ...     return ember.relu(x)
    >>> class ReluToSigmoid(Transformer):
    ...     def call_function(self, target, args, kwargs):
    ...         if target is ember.relu:
    ...             target = ember.sigmoid
    ...         return super().call_function(target, args, kwargs)
    >>> gm = ReluToSigmoid(symbolic_trace(f)).transform()
    >>> [n.target for n in gm.graph.nodes if n.op == "call_function"] == [ember.sigmoid]
    True
    """

    def __init__(self, module: Module) -> None:
        super().__init__(module)
        self.new_graph = Graph()
        self.tracer = _TransformerTracer(self.new_graph, module)

    def placeholder(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        default = args[0] if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target: Target, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target: Target, args: tuple, kwargs: dict) -> Any:
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def call_function(self, target: Target, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Runs the graph through the hooks and returns the module of the new graph."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            self.new_graph.output(
                map_aggregate(result, lambda a: a.node if isinstance(a, Proxy) else a))
        return GraphModule(self.module, self.new_graph)
