"""``torch.fx``: capture a program as a graph of operations, edit it, and run it again as
Python code.

:func:`symbolic_trace` records a module's ``forward`` (or a function) as a :class:`Graph` of
:class:`Node` s and returns a :class:`GraphModule` that runs it; passes edit the graph (or
rebuild it with a :class:`Transformer`) and call :meth:`GraphModule.recompile`.

>>> import ember
>>> import ember.fx
>>> def f(x):
...     return ember.relu(x) * 2
>>> gm = ember.fx.symbolic_trace(f)
>>> for node in gm.graph.nodes:
...     if node.target is ember.relu:
...         node.target = ember.nn.functional.gelu
>>> _ = gm.recompile()  # the node keeps its name
>>> print(gm.code.strip())
def forward(self, x):
    relu = ember.nn.functional.gelu(x);  x = None
    mul = relu * 2;  relu = None
    return mul
"""

from ember.fx import passes
from ember.fx._symbolic_trace import PH, Tracer, symbolic_trace, wrap
from ember.fx.graph import Graph, PythonCode
from ember.fx.graph_module import GraphModule
from ember.fx.interpreter import Interpreter, Transformer
from ember.fx.node import Node, has_side_effect, map_arg
from ember.fx.proxy import Proxy, TraceError
from ember.fx.subgraph_rewriter import replace_pattern

__all__ = [
    "PH", "Graph", "GraphModule", "Interpreter", "Node", "Proxy", "PythonCode", "TraceError",
    "Tracer", "Transformer", "has_side_effect", "map_arg", "passes", "replace_pattern",
    "symbolic_trace", "wrap",
]
