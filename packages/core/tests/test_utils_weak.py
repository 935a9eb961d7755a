"""ember.utils.weak (PyTorch's torch.utils.weak): identity-keyed weak dictionaries and refs."""

from __future__ import annotations

import gc

import ember
import pytest
from ember.utils.weak import TensorWeakRef, WeakIdKeyDictionary, WeakIdRef, WeakTensorKeyDictionary


def _exercise(lib):
    weak = lib.utils.weak
    d = weak.WeakIdKeyDictionary()
    a, b = lib.ones(2), lib.ones(2)  # equal values, different objects
    d[a] = "a"
    d[b] = "b"
    out = [len(d), d[a], d[b], a in d, lib.zeros(1) in d]
    del d[a]
    out += [len(d), a in d]
    d[a] = "again"
    del b
    gc.collect()
    out += [len(d), sorted(d.values())]
    r = weak.TensorWeakRef(a)
    out.append(r() is a)
    del a
    gc.collect()
    out += [r() is None, len(d)]
    return out


def test_weak_id_key_dictionary_semantics():
    got = _exercise(ember)
    assert got == [2, "a", "b", True, False, 1, False, 1, ["again"], True, True, 0]
    torch = pytest.importorskip("torch")
    assert _exercise(torch) == got


def test_weak_id_ref_hash_and_equality():
    t = ember.zeros(3)
    r1, r2 = WeakIdRef(t), WeakIdRef(t)
    assert r1 == r2 and hash(r1) == hash(r2) == id(t) and r1() is t
    other = WeakIdRef(ember.zeros(3))  # its referent is already gone
    assert other() is None and other == other and other != r1
    assert WeakTensorKeyDictionary is WeakIdKeyDictionary


def test_dictionary_copy_iteration_and_errors():
    keys = [ember.tensor([float(i)]) for i in range(3)]
    d = WeakIdKeyDictionary({k: i for i, k in enumerate(keys)})
    c = d.copy()
    assert [v for _, v in c.items()] == [0, 1, 2] and all(k is keys[i] for i, k in enumerate(c))
    with pytest.raises(KeyError):
        d[ember.zeros(1)]
    assert "a string" not in d
    with pytest.raises(TypeError, match="TensorWeakRef: expected a tensor"):
        TensorWeakRef([1.0])
