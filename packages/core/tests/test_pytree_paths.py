"""``ember.utils._pytree``'s key-path API (``tree_flatten_with_path``, ``keystr``, ``key_get``,
the key entry classes), the ``*_only`` and iteration helpers, TreeSpec serialization in
PyTorch's JSON format and the named tuple / struct sequence predicates, against
``torch.utils._pytree``."""

from __future__ import annotations

import os
import time
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import NamedTuple

import ember
import ember.utils._pytree as ep
import pytest

try:
    import torch
    import torch.utils._pytree as tp
except ImportError:
    torch = None
    tp = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

Point = namedtuple("Point", "x y")


class Typed(NamedTuple):
    a: int
    b: str = "b"


def _tree():
    return {"a": [1, (2, 3)], "b": OrderedDict(x=1, y=[None]), "c": None, "d": Point(1, 2),
            "e": deque([4, 5], maxlen=4), "f": defaultdict(list, k=6), "g": Typed(7),
            "h": time.gmtime(0), 3: [], "i": {}}


def _paths(M, tree, **kw):
    return [(M.keystr(p), v) for p, v in M.tree_leaves_with_path(tree, **kw)]


def test_paths_and_keys_explicit():
    pairs = _paths(ep, _tree())
    assert pairs[:7] == [("['a'][0]", 1), ("['a'][1][0]", 2), ("['a'][1][1]", 3),
                         ("['b']['x']", 1), ("['b']['y'][0]", None), ("['c']", None),
                         ("['d'].x", 1)]
    assert ("['e'][1]", 5) in pairs and ("['f']['k']", 6) in pairs and ("['g'].a", 7) in pairs
    assert ("['g'].b", "b") in pairs
    assert [p for p, _ in pairs if p.startswith("['h']")] == ["['h']"]  # a struct seq: a leaf
    tree = _tree()
    for path, leaf in ep.tree_leaves_with_path(tree):
        assert ep.key_get(tree, path) is leaf
    assert str(ep.SequenceKey(2)) == "[2]" and str(ep.MappingKey("k")) == "['k']"
    assert str(ep.GetAttrKey("w")) == ".w" and ep.GetAttrKey("x").get(Point(5, 6)) == 5
    assert repr(ep.MappingKey(1)) == "MappingKey(key=1)"
    assert ep.SequenceKey(1) == ep.SequenceKey(1) and hash(ep.SequenceKey(1)) == hash(ep.SequenceKey(1))


@needs_torch
def test_paths_match_torch():
    e_tree, t_tree = _tree(), _tree()
    assert _paths(ep, e_tree) == _paths(tp, t_tree)

    def leaf(x):
        return isinstance(x, tuple)

    assert _paths(ep, e_tree, is_leaf=leaf) == _paths(tp, t_tree, is_leaf=leaf)
    e_pairs, e_spec = ep.tree_flatten_with_path(e_tree)
    t_pairs, t_spec = tp.tree_flatten_with_path(t_tree)
    assert [repr(p) for p, _ in e_pairs] == [repr(p) for p, _ in t_pairs]
    assert e_spec.num_leaves == t_spec.num_leaves
    # ember's multi-result types key by position, as PyTorch's struct sequences
    e = ep.tree_leaves_with_path(ember.max(ember.ones(2, 2), 0))
    t = tp.tree_leaves_with_path(torch.max(torch.ones(2, 2), 0))
    assert [p for p, _ in e] == [(ep.SequenceKey(0),), (ep.SequenceKey(1),)]
    assert [repr(p) for p, _ in e] == [repr(p) for p, _ in t]


def test_tree_map_with_path():
    for M in [ep] + ([tp] if tp is not None else []):
        out = M.tree_map_with_path(lambda p, x, y: (M.keystr(p), x + y),
                                   {"a": [1, 2], "b": (3,)}, {"a": [10, 20], "b": (30,)})
        assert out == {"a": [("['a'][0]", 11), ("['a'][1]", 22)], "b": (("['b'][0]", 33),)}


def test_unkeyed_registered_node_raises():
    class Box:
        def __init__(self, v):
            self.v = v

    ep.register_pytree_node(Box, lambda b: ([b.v], None), lambda c, _: Box(c[0]))
    assert ep.tree_leaves([Box(3)]) == [3]
    with pytest.raises(ValueError, match="Did not find a flatten_with_keys_fn"):
        ep.tree_flatten_with_path([Box(3)])

    class KBox(Box):
        pass

    ep.register_pytree_node(KBox, lambda b: ([b.v], None), lambda c, _: KBox(c[0]),
                            flatten_with_keys_fn=lambda b: ([(ep.GetAttrKey("v"), b.v)], None))
    assert _paths(ep, {"k": KBox(4)}) == [("['k'].v", 4)]


def test_iteration_and_only_helpers():
    tree = [1, "a", (2.5, 3, [True])]
    for M in [ep] + ([tp] if tp is not None else []):
        assert list(M.tree_iter(tree)) == M.tree_leaves(tree)
        assert list(M.tree_iter(tree, is_leaf=lambda x: isinstance(x, tuple))) == [1, "a", (2.5, 3, [True])]
        assert M.tree_is_leaf(1) and not M.tree_is_leaf([1]) and M.tree_is_leaf([1], lambda x: True)
        assert M.tree_is_leaf(None) and not M.tree_is_leaf({}) and not M.tree_is_leaf(deque())
        assert M.tree_all_only(int, lambda x: x > 0, tree)  # bool is an int too
        assert not M.tree_any_only(str, lambda x: x == "b", tree)
        assert M.tree_any_only((float, str), lambda x: x == 2.5, tree)
        assert M.tree_all(lambda x: x is not None, tree, is_leaf=None)
        assert M.tree_any(lambda x: isinstance(x, tuple), tree, is_leaf=lambda x: isinstance(x, tuple))
        seen = []
        assert M.tree_map_only_(float, seen.append, tree) is tree and seen == [2.5]
        # a predicate instead of a type
        assert M.tree_map_only(lambda x: x == 3, lambda x: -x, tree) == [1, "a", (2.5, -3, [True])]
        assert M.tree_map_only(int | float, lambda x: 0, [1, 2.0, "s"]) == [0, 0, "s"]


def test_treespec_dumps_loads_pprint_explicit():
    spec = ep.tree_structure({"a": [1, (2, 3)], "b": OrderedDict(x=1), "c": None})
    text = ep.treespec_dumps(spec)
    assert text.startswith('[1, {"type": "builtins.dict", "context": "[\\"a\\", \\"b\\", \\"c\\"]"')
    assert ep.treespec_loads(text) == spec
    assert ep.treespec_pprint(spec) == "{'a': [*, (*, *)], 'b': OrderedDict([('x', *)]), 'c': *}"
    with pytest.raises(NotImplementedError, match="namedtuple"):
        ep.treespec_dumps(ep.tree_structure(Point(1, 2)))
    ep._register_namedtuple(Point, serialized_type_name="tests.Point")
    spec = ep.tree_structure([Point(1, 2)])
    assert ep.treespec_loads(ep.treespec_dumps(spec)) == spec
    with pytest.raises(ValueError, match="Unknown protocol"):
        ep.treespec_loads('[7, {}]')


@needs_torch
def test_treespec_json_matches_torch():
    trees = [{"a": [1, (2, 3)], "b": OrderedDict(x=1), "c": None}, [deque([1, 2], maxlen=5)],
             defaultdict(list, k=[1, 2]), (), [[]], 5, {1: "a", 2: ("b",)}]
    for tree in trees:
        e = ep.treespec_dumps(ep.tree_structure(tree))
        t = tp.treespec_dumps(tp.tree_structure(tree))
        assert e == t, tree
        assert ep.treespec_loads(t) == ep.tree_structure(tree)
        assert ep.treespec_pprint(ep.tree_structure(tree)) == tp.treespec_pprint(tp.tree_structure(tree))
        assert ep.tree_unflatten(ep.tree_leaves(tree), ep.treespec_loads(t)) == tree


def test_namedtuple_and_structseq_predicates():
    st = time.gmtime(0)
    cases = [(Point(1, 2), True, False), (Point, True, False), (Typed(1), True, False),
             (st, False, True), (type(st), False, True), (os.stat_result, False, True),
             ((1, 2), False, False), (tuple, False, False), (3, False, False)]
    for obj, nt, ss in cases:
        assert ep.is_namedtuple(obj) is nt and ep.is_structseq(obj) is ss, obj
        if tp is not None:
            assert tp.is_namedtuple(obj) is nt and tp.is_structseq(obj) is ss, obj
    assert ep.is_namedtuple_class(Point) and not ep.is_namedtuple_class(Point(1, 2))
    assert ep.is_namedtuple_instance(Point(1, 2)) and not ep.is_namedtuple_instance(Point)
    assert ep.is_structseq_class(type(st)) and ep.is_structseq_instance(st)


@needs_torch
def test_public_names_of_torch_exist():
    missing = [n for n in tp.__all__ if not hasattr(ep, n)]
    assert missing == [], missing
    for n in ("SequenceKey", "MappingKey", "GetAttrKey", "KeyEntry", "KeyPath",
              "DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL"):
        assert hasattr(ep, n) and hasattr(tp, n)
    assert ep.PyTreeSpec is ep.TreeSpec
    assert ep.DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL == tp.DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
