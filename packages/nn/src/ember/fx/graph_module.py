"""``torch.fx.graph_module``: an ``nn.Module`` whose ``forward`` is generated from a graph.

>>> import ember
>>> from ember import nn
>>> from ember.fx import symbolic_trace
>>> gm = symbolic_trace(nn.Sequential(nn.Linear(3, 4), nn.ReLU()))
>>> print(gm.code.strip())
def forward(self, input):
    input_1 = input
    _0 = getattr(self, "0")(input_1);  input_1 = None
    _1 = getattr(self, "1")(_0);  _0 = None
    return _1
>>> gm(ember.ones(2, 3)).shape
ember.Size([2, 4])
"""

from __future__ import annotations

import linecache
from typing import Any

import ember
from ember.fx.graph import Graph, PythonCode
from ember.nn import Module

__all__ = ["GraphModule"]

_source_counter = [0]


def _exec_forward(src: str, globals_: dict) -> Any:
    """Compiles the generated source under a unique file name that ``linecache`` knows, so that
    tracebacks through ``forward`` show its lines."""
    _source_counter[0] += 1
    filename = f"<eval_with_key>.{_source_counter[0]}"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = dict(globals_)
    exec(compile(src, filename, "exec"), namespace)
    return namespace["forward"]


def _copy_attr(src: Module, dst: Module, target: str) -> None:
    """Copies ``src.<target>`` (a dotted path) into ``dst``, making empty modules on the way."""
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(src, item)
        t = getattr(dst, item, None)
        if f is t:
            return  # already installed (a submodule copied whole)
        if t is None:
            t = Module()
            setattr(dst, item, t)
        src, dst = f, t
    orig = getattr(src, field)
    if isinstance(orig, ember.Tensor) and not isinstance(orig, ember.nn.Parameter) and (
            field in src._buffers):
        dst.register_buffer(field, orig, persistent=field not in src._non_persistent_buffers_set)
    else:
        setattr(dst, field, orig)


def _assign_attr(obj: Any, dst: Module, target: str) -> None:
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(dst, item, None)
        if t is None:
            t = Module()
            setattr(dst, item, t)
        dst = t
    setattr(dst, field, obj)


def _rebuild(body: dict, graph: Graph, class_name: str) -> GraphModule:
    gm = GraphModule.__new__(GraphModule)
    gm.__dict__.update(body)
    gm._class_name = class_name
    type(gm).__name__ = class_name
    gm.graph = graph
    return gm


class GraphModule(Module):
    """A module that runs ``graph``: its ``forward`` is Python code generated from the graph
    (see :attr:`code`). ``root`` supplies the submodules and attributes that the graph's
    ``call_module`` / ``get_attr`` nodes name (a module, whose referenced members are copied,
    or a dict from qualified names to objects).

    After editing ``gm.graph``, call :meth:`recompile` to regenerate ``forward``. Each instance
    gets its own subclass, so that ``forward`` is a method of its class and replacing it does
    not affect other GraphModules.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> GraphModule:
        for base in cls.__mro__:
            if "_fx_per_instance" in vars(base):
                cls = base.__bases__[0]
                break

        class GraphModuleImpl(cls):  # type: ignore[valid-type, misc]
            _fx_per_instance = True

        return super().__new__(GraphModuleImpl)

    def __init__(self, root: Module | dict[str, Any], graph: Graph,
                 class_name: str = "GraphModule") -> None:
        super().__init__()
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphModule: graph must be an ember.fx.Graph, got "
                            f"{type(graph).__name__}")
        type(self).__name__ = class_name
        self._class_name = class_name
        if isinstance(root, Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if not isinstance(node.target, str):
                        raise TypeError(f"Node {node.name}: {node.op} target must be a string")
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(
                            f"Node {node.name} references target {node.target} but that target "
                            "was not provided in the root dict")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise TypeError(f"GraphModule: root must be an nn.Module or a dict, got "
                            f"{type(root).__name__}")
        self.meta: dict[str, Any] = {}
        self.graph = graph

    @property
    def graph(self) -> Graph:
        """The graph this module runs; assigning one regenerates ``forward``."""
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"GraphModule.graph must be an ember.fx.Graph, got {type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The Python source of the generated ``forward``."""
        if "_code" not in self.__dict__:
            raise RuntimeError("GraphModule.code: the code has not been generated; call "
                               "recompile()")
        return self.__dict__["_code"]

    def recompile(self) -> PythonCode:
        """Regenerates ``forward`` from :attr:`graph` (call it after editing the graph)."""
        python_code = self._graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        type(self).forward = _exec_forward(python_code.src, python_code.globals)
        return python_code

    def print_readable(self, print_output: bool = True) -> str:
        """The module as Python source: a class with the generated ``forward`` (submodules
        that are GraphModules are printed inside it). Prints it unless ``print_output`` is
        false; returns it."""
        text = self._readable(self._class_name)
        if print_output:
            print(text)
        return text

    def _readable(self, name: str) -> str:
        lines = [f"class {name}(ember.nn.Module):"]
        for sub_name, sub in self.named_children():
            if isinstance(sub, GraphModule):
                inner = sub._readable(sub_name)
                lines.extend("    " + ln if ln else ln for ln in inner.splitlines())
                lines.append("")
        lines.extend("    " + ln if ln else ln for ln in self.code.strip("\n").splitlines())
        return "\n".join(lines) + "\n"

    # ---- submodule editing ---------------------------------------------------------------------
    def add_submodule(self, target: str, m: Module) -> bool:
        """Installs ``m`` at the dotted path ``target`` (making empty parents). Returns False
        when a part of the path is taken by something that is not a module."""
        *prefix, field = target.split(".")
        mod: Module = self
        for item in prefix:
            sub = getattr(mod, item, None)
            if sub is None:
                sub = Module()
                mod.add_module(item, sub)
            if not isinstance(sub, Module):
                return False
            mod = sub
        mod.add_module(field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        """Removes the submodule at ``target``. Returns False when there is none."""
        *prefix, field = target.split(".")
        mod: Any = self
        for item in prefix:
            mod = getattr(mod, item, None)
            if not isinstance(mod, Module):
                return False
        if not isinstance(getattr(mod, field, None), Module):
            return False
        delattr(mod, field)
        return True

    def delete_all_unused_submodules(self) -> None:
        """Removes the submodules that no ``call_module`` / ``get_attr`` node reaches."""
        used: set[str] = set()
        for node in self._graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[: i + 1]) for i in range(len(parts)))
                if node.op == "call_module":
                    sub = self.get_submodule(node.target)
                    used.update(f"{node.target}.{n}" for n, _ in sub.named_modules() if n)
        for name, _ in list(self.named_modules()):
            if name and name not in used:
                self.delete_submodule(name)

    # ---- copying ---------------------------------------------------------------------------------
    def _body(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}

    def __deepcopy__(self, memo: dict) -> GraphModule:
        res = Module.__deepcopy__(self, memo)  # a fresh per-instance class, members copied
        type(res).__name__ = self._class_name
        res.graph = res.__dict__["_graph"]  # owned by the copy; regenerates forward
        return res

    def __copy__(self) -> GraphModule:
        res = GraphModule.__new__(type(self))
        res.__dict__.update(self._body())
        type(res).__name__ = self._class_name
        res.graph = self._graph
        return res

    def __reduce__(self) -> tuple:
        return (_rebuild, (self._body(), self._graph, self._class_name))

    def __str__(self) -> str:
        return super().__str__() + "\n" + self.code.strip("\n") + "\n"

    def __repr__(self) -> str:
        return Module.__repr__(self)

