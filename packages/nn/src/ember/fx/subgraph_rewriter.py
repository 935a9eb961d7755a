"""``torch.fx.subgraph_rewriter``: find every occurrence of a pattern in a GraphModule and
replace it.

>>> import ember
>>> from ember.fx import replace_pattern, symbolic_trace
>>> def f(x):
...     return ember.relu(x).neg() + 1
>>> def pattern(a):
...     return ember.relu(a).neg()
>>> def replacement(a):
...     return ember.nn.functional.gelu(a)
>>> gm = symbolic_trace(f)
>>> len(replace_pattern(gm, pattern, replacement))
1
>>> [n.name for n in gm.graph.nodes]
['x', 'gelu', 'add', 'output']
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ember.fx._symbolic_trace import symbolic_trace
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule, _copy_attr
from ember.fx.node import Node, map_arg

__all__ = ["Match", "replace_pattern"]


class Match(NamedTuple):
    """One replaced occurrence: the node that produced the pattern's output (``anchor``) and
    the map from pattern nodes to the graph's nodes (or constants, for pattern inputs)."""

    anchor: Node
    nodes_map: dict[Node, Any]


def _graph_of(obj: Callable | GraphModule) -> GraphModule:
    return obj if isinstance(obj, GraphModule) else symbolic_trace(obj)


class _Matcher:
    def __init__(self, pattern: Graph) -> None:
        outputs = [n for n in pattern.nodes if n.op == "output"]
        if len(outputs) != 1 or not isinstance(outputs[0].args[0], Node):
            raise NotImplementedError(
                "replace_pattern: the pattern must return exactly one traced value")
        self.anchor = outputs[0].args[0]
        if self.anchor.op == "placeholder":
            raise ValueError("replace_pattern: the pattern only returns its input")
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]
        self.inner = [n for n in pattern.nodes if n.op not in ("placeholder", "output")]

    def match_arg(self, pa: Any, ga: Any, m: dict) -> bool:
        if isinstance(pa, Node):
            if pa.op == "placeholder":
                if pa in m:
                    return m[pa] is ga or (not isinstance(ga, Node) and m[pa] == ga)
                m[pa] = ga
                return True
            return isinstance(ga, Node) and self.match_node(pa, ga, m)
        if isinstance(pa, (tuple, list)):
            return (type(pa) is type(ga) and len(pa) == len(ga)
                    and all(self.match_arg(p, g, m) for p, g in zip(pa, ga)))
        if isinstance(pa, dict):
            return (isinstance(ga, dict) and pa.keys() == ga.keys()
                    and all(self.match_arg(pa[k], ga[k], m) for k in pa))
        return not isinstance(ga, Node) and type(pa) is type(ga) and pa == ga

    def match_node(self, pn: Node, gn: Node, m: dict) -> bool:
        if pn in m:
            return m[pn] is gn
        if pn.op != gn.op or pn.target != gn.target:
            return False
        m[pn] = gn
        return (self.match_arg(tuple(pn.args), tuple(gn.args), m)
                and self.match_arg(dict(pn.kwargs), dict(gn.kwargs), m))

    def match_at(self, gn: Node, taken: set) -> dict | None:
        m: dict[Node, Any] = {}
        if not self.match_node(self.anchor, gn, m):
            return None
        inner = {m[p] for p in self.inner}
        if len(inner) != len(self.inner) or inner & taken:
            return None
        for p in self.inner:
            g = m[p]
            if g is not gn and any(u not in inner for u in g.users):
                return None  # an intermediate value is used outside the pattern
        if any(m[p] in inner for p in self.placeholders if isinstance(m.get(p), Node)):
            return None
        return m


def replace_pattern(gm: GraphModule, pattern: Callable | GraphModule,
                    replacement: Callable | GraphModule) -> list[Match]:
    """Replaces every non-overlapping occurrence of ``pattern`` in ``gm``'s graph by
    ``replacement`` (functions are traced; both take the pattern's inputs in the same order),
    recompiles ``gm`` and returns the matches. Operations match by op and target, constants by
    value; an occurrence whose intermediate values are used elsewhere is skipped. Patterns
    return one value."""
    if not isinstance(gm, GraphModule):
        raise TypeError(f"replace_pattern: gm must be a GraphModule, got {type(gm).__name__}")
    pattern_gm, replacement_gm = _graph_of(pattern), _graph_of(replacement)
    matcher = _Matcher(pattern_gm.graph)
    rep_placeholders = [n for n in replacement_gm.graph.nodes if n.op == "placeholder"]
    if len(rep_placeholders) != len(matcher.placeholders):
        raise ValueError(
            f"replace_pattern: the pattern takes {len(matcher.placeholders)} inputs but the "
            f"replacement takes {len(rep_placeholders)}")
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    taken: set[Node] = set()
    matches: list[Match] = []
    for gn in reversed(list(graph.nodes)):
        if gn.op in ("placeholder", "output") or gn in taken:
            continue
        m = matcher.match_at(gn, taken)
        if m is not None:
            taken.update(m[p] for p in matcher.inner)
            matches.append(Match(gn, m))
    matches.sort(key=lambda match: order[match.anchor])
    replaced: dict[Node, Any] = {}

    def current(v: Any) -> Any:
        while isinstance(v, Node) and v in replaced:
            v = replaced[v]
        return v

    for match in matches:
        val_map: dict[Node, Any] = {
            rp: current(match.nodes_map[pp])
            for rp, pp in zip(rep_placeholders, matcher.placeholders)}
        out: Any = None
        with graph.inserting_before(match.anchor):
            for rn in replacement_gm.graph.nodes:
                if rn.op == "placeholder":
                    continue
                if rn.op == "output":
                    out = map_arg(rn.args[0], lambda n: val_map[n])
                    break
                if rn.op in ("get_attr", "call_module") and not hasattr(gm, rn.target.split(".")[0]):
                    _copy_attr(replacement_gm, gm, rn.target)
                val_map[rn] = graph.node_copy(rn, lambda n: val_map[n])
        if not isinstance(out, Node):
            raise NotImplementedError("replace_pattern: the replacement must return one value")
        match.anchor.replace_all_uses_with(out)
        replaced[match.anchor] = out
        for pn in reversed(matcher.inner):
            node = match.nodes_map[pn]
            if not node.users:
                graph.erase_node(node)
    gm.recompile()
    return matches
