"""Nested containers as flat lists of leaves (PyTorch's ``torch.utils._pytree``).

Lists, tuples, named tuples, dicts (their keys kept in insertion order) and ``OrderedDict``
are containers; anything else (``None`` too) is a leaf. More container
types register with :func:`register_pytree_node`.

>>> from ember.utils._pytree import tree_flatten, tree_unflatten, tree_map
>>> leaves, spec = tree_flatten({"a": [1, 2], "b": (3, None)})
>>> leaves
[1, 2, 3, None]
>>> tree_unflatten([x and x * 10 for x in leaves], spec)
{'a': [10, 20], 'b': (30, None)}
>>> tree_map(lambda x: x + 1, [1, (2, 3)])
[2, (3, 4)]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_map", "tree_map_only",
           "tree_leaves", "tree_structure", "tree_all", "tree_any", "tree_map_", "register_pytree_node"]

FlattenFn = Callable[[Any], tuple[list, Any]]
UnflattenFn = Callable[[Iterable, Any], Any]


class _Node(NamedTuple):
    flatten: FlattenFn
    unflatten: UnflattenFn


_REGISTRY: dict[type, _Node] = {}


def register_pytree_node(cls: type, flatten_fn: FlattenFn, unflatten_fn: UnflattenFn, *,
                         serialized_type_name: str | None = None, **_: Any) -> None:
    """Make ``cls`` a container: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj``.

    >>> from ember.utils._pytree import register_pytree_node, tree_leaves
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
    >>> tree_leaves([Pair(1, 2), 3])
    [1, 2, 3]
    """
    if cls in _REGISTRY:
        raise ValueError(f"register_pytree_node: {cls.__qualname__} is already registered")
    _REGISTRY[cls] = _Node(flatten_fn, unflatten_fn)


register_pytree_node(list, lambda x: (list(x), None), lambda c, _: list(c))
register_pytree_node(tuple, lambda x: (list(x), None), lambda c, _: tuple(c))
register_pytree_node(dict, lambda x: (list(x.values()), list(x.keys())),
                     lambda c, keys: dict(zip(keys, c, strict=True)))
register_pytree_node(OrderedDict, lambda x: (list(x.values()), list(x.keys())),
                     lambda c, keys: OrderedDict(zip(keys, c, strict=True)))


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _node(x: Any) -> tuple[type, _Node] | None:
    t = type(x)
    if t in _REGISTRY:
        return t, _REGISTRY[t]
    if _is_namedtuple(x):
        return t, _Node(lambda v: (list(v), None), lambda c, _, t=t: t(*c))
    return None


@dataclass
class TreeSpec:
    """The shape of a tree: a node's type, its context (dict keys...) and its children's specs;
    a leaf's spec has ``type`` None."""

    type: Any
    context: Any
    children_specs: list[TreeSpec] = field(default_factory=list)
    num_leaves: int = 0

    def is_leaf(self) -> bool:
        return self.type is None

    def __repr__(self) -> str:
        if self.is_leaf():
            return "*"
        name = getattr(self.type, "__name__", str(self.type))
        return f"TreeSpec({name}, {self.context!r}, [{', '.join(map(repr, self.children_specs))}])"


def LeafSpec() -> TreeSpec:  # noqa: N802  (PyTorch's name)
    """The spec of a single leaf."""
    return TreeSpec(None, None, [], 1)


def _flatten(tree: Any, leaves: list, is_leaf: Callable[[Any], bool] | None) -> TreeSpec:
    node = None if (is_leaf is not None and is_leaf(tree)) else _node(tree)
    if node is None:
        leaves.append(tree)
        return LeafSpec()
    typ, fns = node
    children, context = fns.flatten(tree)
    specs = [_flatten(c, leaves, is_leaf) for c in children]
    return TreeSpec(typ, context, specs, sum(s.num_leaves for s in specs))


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeSpec]:
    """The leaves of ``tree`` (depth first) and its spec."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of ``tree``."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec:
    """The spec of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def _unflatten(spec: TreeSpec, it: Any) -> Any:
    if spec.is_leaf():
        return next(it)
    children = [_unflatten(s, it) for s in spec.children_specs]
    node = _REGISTRY.get(spec.type)
    if node is None:  # a named tuple
        return spec.type(*children)
    return node.unflatten(children, spec.context)


def tree_unflatten(leaves: Iterable, treespec: TreeSpec) -> Any:
    """The tree of ``treespec`` with ``leaves`` in place."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten: treespec must be a TreeSpec, got {type(treespec).__name__}")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"tree_unflatten: treespec needs {treespec.num_leaves} leaves, "
                         f"got {len(leaves)}")
    return _unflatten(treespec, iter(leaves))


def tree_map(func: Callable, tree: Any, *rests: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with ``func`` applied to each leaf (to the leaves of ``tree`` and of each tree
    in ``rests`` at the same places, which must have the same structure)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = []
    for r in rests:
        rl, rs = tree_flatten(r, is_leaf)
        if len(rl) != len(leaves) or repr(rs) != repr(spec):
            raise ValueError("tree_map: the trees do not have the same structure")
        others.append(rl)
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others, strict=True)], spec)


def tree_map_(func: Callable, tree: Any, *rests: Any,
              is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Calls ``func`` on each leaf for its side effects; returns ``tree``."""
    tree_map(func, tree, *rests, is_leaf=is_leaf)
    return tree


def _type_check(type_or_types: type | tuple[type, ...]) -> Callable[[Any], bool]:
    return lambda x: isinstance(x, type_or_types)


def tree_map_only(type_or_types: type | tuple[type, ...], func: Callable, tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with ``func`` applied to the leaves that are instances of ``type_or_types``
    (the others are kept).

    >>> from ember.utils._pytree import tree_map_only
    >>> tree_map_only(int, lambda x: -x, [1, "a", (2.5, 3)])
    [-1, 'a', (2.5, -3)]
    """
    check = _type_check(type_or_types)
    return tree_map(lambda x: func(x) if check(x) else x, tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: Any) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_leaves(tree)))


def tree_any(pred: Callable[[Any], bool], tree: Any) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_leaves(tree)))
