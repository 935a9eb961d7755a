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

import importlib
import json
import types
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["PyTree", "Context", "FlattenFn", "UnflattenFn", "DumpableContext",
           "ToDumpableContextFn", "FromDumpableContextFn", "PyTreeSpec", "TreeSpec", "LeafSpec",
           "keystr", "key_get", "register_pytree_node", "tree_is_leaf", "tree_flatten",
           "tree_flatten_with_path", "tree_unflatten", "tree_iter", "tree_leaves",
           "tree_leaves_with_path", "tree_structure", "tree_map", "tree_map_with_path",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any",
           "tree_all_only", "tree_any_only", "treespec_dumps", "treespec_loads", "treespec_pprint",
           "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance", "is_structseq",
           "is_structseq_class", "is_structseq_instance"]

T = TypeVar("T")
PyTree = Any
Context = Any
DumpableContext = Any  # a JSON-serializable form of a Context
FlattenFn = Callable[[PyTree], tuple[list, Context]]
UnflattenFn = Callable[[Iterable, Context], PyTree]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


# ---- key paths: how a leaf is reached from the root ---------------------------------------------
@dataclass(frozen=True)
class SequenceKey(Generic[T]):
    """The ``idx``-th item of a sequence: ``str`` is ``[idx]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Any) -> T:
        return sequence[self.idx]


K = TypeVar("K")


@dataclass(frozen=True)
class MappingKey(Generic[K, T]):
    """The value at ``key`` of a mapping: ``str`` is ``[key!r]``."""

    key: K

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Any) -> T:
        return mapping[self.key]


@dataclass(frozen=True)
class GetAttrKey:
    """The attribute ``name`` (a named tuple's field...): ``str`` is ``.name``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


KeyEntry = Any  # SequenceKey, MappingKey, GetAttrKey or anything with __str__ and get(parent)
KeyPath = tuple[KeyEntry, ...]
FlattenWithKeysFunc = Callable[[PyTree], tuple[list[tuple[KeyEntry, Any]], Any]]


def keystr(kp: KeyPath) -> str:
    """The key path as source text: ``keystr((MappingKey('a'), SequenceKey(0)))`` is
    ``"['a'][0]"``."""
    return "".join(str(k) for k in kp)


def key_get(obj: Any, kp: KeyPath) -> Any:
    """What the key path leads to in ``obj``.

    >>> from ember.utils._pytree import key_get, tree_leaves_with_path
    >>> tree = {"a": [1, (2, 3)]}
    >>> path, leaf = tree_leaves_with_path(tree)[2]
    >>> key_get(tree, path), leaf
    (3, 3)
    """
    for k in kp:
        obj = k.get(obj)
    return obj


# ---- the registry ---------------------------------------------------------------------------------
class _Node(NamedTuple):
    flatten: FlattenFn
    unflatten: UnflattenFn
    flatten_with_keys: FlattenWithKeysFunc | None = None
    serialized_type_name: str = NO_SERIALIZED_TYPE_NAME_FOUND
    to_dumpable_context: ToDumpableContextFn | None = None
    from_dumpable_context: FromDumpableContextFn | None = None


_REGISTRY: dict[type, _Node] = {}
_SERIALIZED_TYPES: dict[str, type] = {}
_NAMEDTUPLE_NAMES: dict[type, str] = {}  # named tuple class -> its serialized name
_NAMEDTUPLE_BY_NAME: dict[str, type] = {}


def register_pytree_node(cls: type, flatten_fn: FlattenFn, unflatten_fn: UnflattenFn, *,
                         serialized_type_name: str | None = None,
                         to_dumpable_context: ToDumpableContextFn | None = None,
                         from_dumpable_context: FromDumpableContextFn | None = None,
                         flatten_with_keys_fn: FlattenWithKeysFunc | None = None) -> None:
    """Make ``cls`` a container: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj``. ``flatten_with_keys_fn(obj) ->
    ([(key, child), ...], context)`` gives the key paths (``tree_flatten_with_path``);
    ``serialized_type_name`` and the ``*_dumpable_context`` functions are for
    ``treespec_dumps``/``treespec_loads``.

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
    if (to_dumpable_context is None) != (from_dumpable_context is None):
        raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be "
                         "None or registered.")
    name = NO_SERIALIZED_TYPE_NAME_FOUND if serialized_type_name is None else serialized_type_name
    _REGISTRY[cls] = _Node(flatten_fn, unflatten_fn, flatten_with_keys_fn, name,
                           to_dumpable_context, from_dumpable_context)
    if serialized_type_name is not None:
        _SERIALIZED_TYPES[serialized_type_name] = cls


def _register_namedtuple(cls: type, *, serialized_type_name: str) -> None:
    """Gives a named tuple class the name ``treespec_dumps`` writes for it."""
    _NAMEDTUPLE_NAMES[cls] = serialized_type_name
    _NAMEDTUPLE_BY_NAME[serialized_type_name] = cls


def _seq_keys(x: Any) -> tuple[list, None]:
    return [(SequenceKey(i), v) for i, v in enumerate(x)], None


def _map_keys(x: Any) -> tuple[list, list]:
    return [(MappingKey(k), v) for k, v in x.items()], list(x.keys())


def _defaultdict_flatten(x: defaultdict) -> tuple[list, list]:
    return list(x.values()), [x.default_factory, list(x.keys())]


def _defaultdict_keys(x: defaultdict) -> tuple[list, list]:
    return [(MappingKey(k), v) for k, v in x.items()], [x.default_factory, list(x.keys())]


def _defaultdict_unflatten(children: Iterable, context: list) -> defaultdict:
    factory, keys = context
    return defaultdict(factory, zip(keys, children, strict=True))


def _defaultdict_dump(context: list) -> dict:
    factory, keys = context
    return {"default_factory_module": factory.__module__,
            "default_factory_name": factory.__qualname__, "dict_context": keys}


def _defaultdict_load(dumped: dict) -> list:
    factory = getattr(importlib.import_module(dumped["default_factory_module"]),
                      dumped["default_factory_name"])
    return [factory, dumped["dict_context"]]


register_pytree_node(tuple, lambda x: (list(x), None), lambda c, _: tuple(c),
                     serialized_type_name="builtins.tuple", flatten_with_keys_fn=_seq_keys)
register_pytree_node(list, lambda x: (list(x), None), lambda c, _: list(c),
                     serialized_type_name="builtins.list", flatten_with_keys_fn=_seq_keys)
register_pytree_node(dict, lambda x: (list(x.values()), list(x.keys())),
                     lambda c, keys: dict(zip(keys, c, strict=True)),
                     serialized_type_name="builtins.dict", flatten_with_keys_fn=_map_keys)
register_pytree_node(OrderedDict, lambda x: (list(x.values()), list(x.keys())),
                     lambda c, keys: OrderedDict(zip(keys, c, strict=True)),
                     serialized_type_name="collections.OrderedDict",
                     flatten_with_keys_fn=_map_keys)
register_pytree_node(defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                     serialized_type_name="collections.defaultdict",
                     to_dumpable_context=_defaultdict_dump,
                     from_dumpable_context=_defaultdict_load,
                     flatten_with_keys_fn=_defaultdict_keys)
register_pytree_node(deque, lambda x: (list(x), x.maxlen),
                     lambda c, maxlen: deque(c, maxlen=maxlen),
                     serialized_type_name="collections.deque",
                     flatten_with_keys_fn=lambda x: ([(SequenceKey(i), v) for i, v in
                                                      enumerate(x)], x.maxlen))


# ---- named tuples and structseqs -----------------------------------------------------------------
def is_namedtuple_class(cls: type) -> bool:
    """Whether ``cls`` is a named tuple class (``collections.namedtuple`` or
    ``typing.NamedTuple``)."""
    return (isinstance(cls, type) and issubclass(cls, tuple)
            and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(f) is str for f in cls._fields)
            and callable(getattr(cls, "_make", None))
            and callable(getattr(cls, "_asdict", None)))


def is_namedtuple_instance(obj: object) -> bool:
    """Whether ``obj`` is a named tuple."""
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj: object | type) -> bool:
    """Whether ``obj`` is a named tuple or a named tuple class."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: type) -> bool:
    """Whether ``cls`` is a C struct sequence type (``os.stat_result``, ``time.struct_time``):
    a tuple subclass with ``n_fields``/``n_sequence_fields``/``n_unnamed_fields`` that cannot be
    subclassed."""
    if not (isinstance(cls, type) and cls.__bases__ == (tuple,)):
        return False
    counts = [getattr(cls, a, None) for a in ("n_fields", "n_sequence_fields",
                                              "n_unnamed_fields")]
    if not all(type(n) is int for n in counts):
        return False
    try:
        types.new_class("_probe", (cls,))
    except (TypeError, ValueError):
        return True  # not a base type, as structseqs are
    return False


def is_structseq_instance(obj: object) -> bool:
    """Whether ``obj`` is a struct sequence."""
    return is_structseq_class(type(obj))


def is_structseq(obj: object | type) -> bool:
    """Whether ``obj`` is a struct sequence or a struct sequence type."""
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _namedtuple_keys(x: Any) -> tuple[list, None]:
    if type(x).__module__ == "ember.return_types":
        return _seq_keys(x)  # PyTorch's return types are struct sequences: keyed by position
    return [(GetAttrKey(f), v) for f, v in zip(type(x)._fields, x)], None


def _node(x: Any) -> tuple[type, _Node] | None:
    t = type(x)
    if t in _REGISTRY:
        return t, _REGISTRY[t]
    if _is_namedtuple(x):
        return t, _Node(lambda v: (list(v), None), lambda c, _, t=t: t(*c), _namedtuple_keys)
    return None  # (a struct sequence is a leaf unless registered, as in PyTorch)


def _node_of_type(typ: type) -> _Node:
    node = _REGISTRY.get(typ)
    if node is not None:
        return node
    return _Node(lambda v: (list(v), None), lambda c, _: typ(*c), _namedtuple_keys)


@dataclass
class TreeSpec:
    """The shape of a tree: a node's type, its context (dict keys...) and its children's specs;
    a leaf's spec has ``type`` None."""

    type: Any
    context: Any
    children_specs: list[TreeSpec] = field(default_factory=list)
    num_leaves: int = 0

    def __post_init__(self) -> None:
        self.num_leaves = (1 if self.type is None and not self.children_specs
                           else sum(c.num_leaves for c in self.children_specs))

    def is_leaf(self) -> bool:
        return self.type is None

    @property
    def num_children(self) -> int:
        return len(self.children_specs)

    def child(self, index: int) -> TreeSpec:
        return self.children_specs[index]

    def children(self) -> list[TreeSpec]:
        return list(self.children_specs)

    def unflatten(self, leaves: Iterable) -> PyTree:
        """The tree of this spec with ``leaves`` in place (``tree_unflatten``)."""
        return tree_unflatten(leaves, self)

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
    return _node_of_type(spec.type).unflatten(children, spec.context)


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


def _type_check(type_or_types: Any) -> Callable[[Any], bool]:
    if isinstance(type_or_types, (type, tuple, types.UnionType)):
        return lambda x: isinstance(x, type_or_types)
    if callable(type_or_types):
        return type_or_types
    raise TypeError(f"Unexpected type {type(type_or_types)}")


def tree_map_only(type_or_types: Any, /, func: Callable, tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with ``func`` applied to the leaves that are instances of ``type_or_types``
    (the others are kept).

    >>> from ember.utils._pytree import tree_map_only
    >>> tree_map_only(int, lambda x: -x, [1, "a", (2.5, 3)])
    [-1, 'a', (2.5, -3)]
    """
    check = _type_check(type_or_types)
    return tree_map(lambda x: func(x) if check(x) else x, tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_map_only_(type_or_types_or_pred: Any, /, func: Callable, tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Calls ``func`` on the leaves that are instances of ``type_or_types_or_pred`` (or for which
    it, a predicate, holds) for its side effects; returns ``tree``."""
    check = _type_check(type_or_types_or_pred)
    for x in tree_iter(tree, is_leaf):
        if check(x):
            func(x)
    return tree


def tree_all_only(type_or_types: Any, /, pred: Callable[[Any], bool], tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``pred`` holds for every leaf that is an instance of ``type_or_types``.

    >>> from ember.utils._pytree import tree_all_only
    >>> tree_all_only(int, lambda x: x > 0, [1, "a", (2, -1.5)])
    True
    """
    check = _type_check(type_or_types)
    return all(pred(x) for x in tree_iter(tree, is_leaf) if check(x))


def tree_any_only(type_or_types: Any, /, pred: Callable[[Any], bool], tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``pred`` holds for some leaf that is an instance of ``type_or_types``."""
    check = _type_check(type_or_types)
    return any(pred(x) for x in tree_iter(tree, is_leaf) if check(x))


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> bool:
    """Whether ``tree`` is a leaf (not a registered container, or ``is_leaf`` says so).

    >>> from ember.utils._pytree import tree_is_leaf
    >>> tree_is_leaf(1), tree_is_leaf([1]), tree_is_leaf([1], is_leaf=lambda x: True)
    (True, False, True)
    """
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node(tree) is None


def tree_iter(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None) -> Iterator[Any]:
    """The leaves of ``tree``, depth first, one at a time."""
    stack = [tree]
    while stack:
        node = stack.pop()
        entry = None if (is_leaf is not None and is_leaf(node)) else _node(node)
        if entry is None:
            yield node
            continue
        children, _ = entry[1].flatten(node)
        stack.extend(reversed(children))


# ---- with key paths -------------------------------------------------------------------------------
def _keyed_children(typ: type, fns: _Node, tree: Any) -> tuple[list, Any]:
    if fns.flatten_with_keys is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {typ}. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node.")
    return fns.flatten_with_keys(tree)


def _flatten_with_path(tree: Any, path: tuple, out: list,
                       is_leaf: Callable[[Any], bool] | None) -> TreeSpec:
    node = None if (is_leaf is not None and is_leaf(tree)) else _node(tree)
    if node is None:
        out.append((path, tree))
        return LeafSpec()
    typ, fns = node
    keyed, _ = _keyed_children(typ, fns, tree)
    _, context = fns.flatten(tree)
    specs = [_flatten_with_path(c, path + (k,), out, is_leaf) for k, c in keyed]
    return TreeSpec(typ, context, specs)


def tree_flatten_with_path(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                           ) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """Like :func:`tree_flatten`, each leaf with its key path.

    >>> from ember.utils._pytree import keystr, tree_flatten_with_path
    >>> pairs, spec = tree_flatten_with_path({"a": [1, 2], "b": 3})
    >>> [(keystr(p), v) for p, v in pairs]
    [("['a'][0]", 1), ("['a'][1]", 2), ("['b']", 3)]
    """
    out: list = []
    spec = _flatten_with_path(tree, (), out, is_leaf)
    return out, spec


def tree_leaves_with_path(tree: PyTree, is_leaf: Callable[[PyTree], bool] | None = None
                          ) -> list[tuple[KeyPath, Any]]:
    """The leaves of ``tree``, each with its key path."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
                       is_leaf: Callable[[PyTree], bool] | None = None) -> PyTree:
    """``tree`` with ``func(path, leaf, *leaves_of_rests)`` in place of each leaf.

    >>> from ember.utils._pytree import keystr, tree_map_with_path
    >>> tree_map_with_path(lambda p, x: f"{keystr(p)}={x}", {"a": (1, 2)})
    {'a': ("['a'][0]=1", "['a'][1]=2")}
    """
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = []
    for r in rests:
        rl, rs = tree_flatten(r, is_leaf)
        if len(rl) != len(pairs) or repr(rs) != repr(spec):
            raise ValueError("tree_map_with_path: the trees do not have the same structure")
        others.append(rl)
    leaves = [func(p, x, *xs) for (p, x), *xs in zip(pairs, *others, strict=True)]
    return tree_unflatten(leaves, spec)


# ---- serialization of specs -----------------------------------------------------------------------
def _spec_to_json(spec: TreeSpec) -> dict:
    if spec.is_leaf():
        return {"type": None, "context": None, "children_spec": []}
    if is_namedtuple_class(spec.type) and spec.type not in _REGISTRY:
        name = _NAMEDTUPLE_NAMES.get(spec.type)
        if name is None:
            raise NotImplementedError(
                f"Can't serialize TreeSpec of namedtuple class {spec.type} because we didn't "
                "register a serializated_type_name. Please register using `_register_namedtuple`.")
        type_name, context = "collections.namedtuple", name
    else:
        node = _REGISTRY.get(spec.type)
        if node is None:
            raise NotImplementedError(f"Serializing {spec.type} in pytree is not registered.")
        if node.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
            raise NotImplementedError(
                f"No registered serialization name for {spec.type} found. Please update your "
                "register_pytree_node call with a `serialized_type_name` kwarg.")
        type_name = node.serialized_type_name
        if node.to_dumpable_context is None:
            try:
                context = json.dumps(spec.context)
            except TypeError as e:
                raise TypeError("Unable to serialize context. Please make the context json "
                                "dump-able, or register a custom serializer using "
                                "register_pytree_node.") from e
        else:
            context = node.to_dumpable_context(spec.context)
    return {"type": type_name, "context": context,
            "children_spec": [_spec_to_json(c) for c in spec.children_specs]}


def _json_to_spec(schema: dict) -> TreeSpec:
    if schema["type"] is None and schema["context"] is None and not schema["children_spec"]:
        return LeafSpec()
    children = [_json_to_spec(c) for c in schema["children_spec"]]
    if schema["type"] == "collections.namedtuple":
        cls = _NAMEDTUPLE_BY_NAME.get(schema["context"])
        if cls is None:
            raise NotImplementedError(f"Deserializing namedtuple {schema['context']} in pytree "
                                      "is not registered (see `_register_namedtuple`).")
        return TreeSpec(cls, None, children)
    typ = _SERIALIZED_TYPES.get(schema["type"])
    if typ is None:
        raise NotImplementedError(f"Deserializing {schema['type']} in pytree is not registered.")
    node = _REGISTRY[typ]
    if node.from_dumpable_context is None:
        context = json.loads(schema["context"])
    else:
        context = node.from_dumpable_context(schema["context"])
    return TreeSpec(typ, context, children)


def treespec_dumps(treespec: TreeSpec, protocol: int | None = None) -> str:
    """``treespec`` as a JSON string, in PyTorch's format (protocol 1):
    ``[1, {"type": ..., "context": ..., "children_spec": [...]}]``.

    >>> from ember.utils._pytree import tree_structure, treespec_dumps, treespec_loads
    >>> spec = tree_structure({"a": [1, 2]})
    >>> treespec_loads(treespec_dumps(spec)) == spec
    True
    """
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"treespec_dumps: expected a TreeSpec, got {type(treespec).__name__}")
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return json.dumps([protocol, _spec_to_json(treespec)])


def treespec_loads(serialized: str) -> TreeSpec:
    """The TreeSpec that :func:`treespec_dumps` wrote."""
    protocol, schema = json.loads(serialized)
    if protocol != 1:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: [1]")
    return _json_to_spec(schema)


class _Asterisk(str):
    __slots__ = ()

    def __new__(cls) -> _Asterisk:
        return super().__new__(cls, "*")

    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The tree of ``treespec`` written with ``*`` for each leaf.

    >>> from ember.utils._pytree import tree_structure, treespec_pprint
    >>> treespec_pprint(tree_structure({"a": [1, (2, 3)], "b": None}))
    "{'a': [*, (*, *)], 'b': *}"
    """
    star = _Asterisk()
    return repr(tree_unflatten([star] * treespec.num_leaves, treespec))


PyTreeSpec = TreeSpec
