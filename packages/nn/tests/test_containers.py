"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from __future__ import annotations

from collections import OrderedDict

import ember
import pytest
from ember import nn


def test_sequential_indexing_slicing_append():
    a, b, c = nn.Linear(2, 3), nn.Identity(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert seq[0] is a and seq[-1] is c
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]  # slices keep the names
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    with pytest.raises(TypeError, match="integers or slices"):
        seq["0"]
    d = nn.Flatten()
    seq[1] = d
    assert seq[1] is d
    seq.append(nn.Identity())
    assert len(seq) == 4
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"] and seq[0] is d
    seq.insert(0, a)
    assert seq[0] is a and len(seq) == 4
    assert seq.pop(0) is a
    assert seq(ember.ones(2, 3)).shape == (2, 1)
    seq2 = seq + nn.Sequential(nn.Identity())
    assert len(seq2) == 4
    seq2 += nn.Sequential(nn.Identity())
    assert len(seq2) == 5
    assert len(nn.Sequential(nn.Identity()) * 3) == 3
    with pytest.raises(ValueError, match="Sequential"):
        seq + [nn.Identity()]


def test_sequential_ordered_dict():
    seq = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.Identity())]))
    assert list(seq._modules) == ["enc", "act"]
    assert seq.enc is seq[0]
    assert [n for n, _ in seq.named_parameters()] == ["enc.weight", "enc.bias"]


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and isinstance(layers[1:], nn.ModuleList)
    layers.append(nn.Identity())
    layers.extend([nn.Identity()])
    layers.insert(1, nn.Flatten())
    assert isinstance(layers[1], nn.Flatten) and len(layers) == 6
    del layers[1]
    assert list(layers._modules) == [str(i) for i in range(5)]
    assert len(list(layers.parameters())) == 6
    layers[0] = nn.Identity()
    assert len(list(layers.parameters())) == 4
    combined = layers + nn.ModuleList([nn.Identity()])
    assert len(combined) == 6
    with pytest.raises(TypeError, match="iterable"):
        layers.extend(3)
    with pytest.raises(IndexError):
        layers[10]
    with pytest.raises(NotImplementedError):
        layers(ember.ones(1))
    assert layers.pop(-1) is not None and len(layers) == 4


def test_module_dict():
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    md["b"] = nn.Identity()
    md.update([("c", nn.Flatten())])
    assert list(md.keys()) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert list(md) == ["a", "b", "c"]
    assert md.pop("b") is not None and "b" not in md
    with pytest.raises(ValueError, match="length 1"):
        md.update([("x",)])
    with pytest.raises(TypeError, match="Iterable"):
        md.update([3])
    md.clear()
    assert len(md) == 0


def test_parameter_list():
    ps = nn.ParameterList([ember.zeros(2), nn.Parameter(ember.ones(3))])
    assert all(isinstance(p, nn.Parameter) for p in ps)
    ps.append(ember.zeros(4))
    assert [tuple(p.shape) for p in ps] == [(2,), (3,), (4,)]
    assert [n for n, _ in ps.named_parameters()] == ["0", "1", "2"]
    assert isinstance(ps[1:], nn.ParameterList) and len(ps[1:]) == 2
    ps[0] = ember.ones(5)
    assert tuple(ps[0].shape) == (5,) and isinstance(ps[0], nn.Parameter)
    with pytest.raises(TypeError, match="iterable"):
        ps.extend(ember.zeros(2))
    with pytest.raises(RuntimeError, match="should not be called"):
        ps(1)


def test_parameter_dict():
    pd = nn.ParameterDict({"b": ember.zeros(1), "a": ember.ones(2)})
    assert list(pd.keys()) == ["a", "b"]  # a plain dict's items are added in sorted order
    pd["c"] = ember.zeros(3)
    assert isinstance(pd["c"], nn.Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["a", "b", "c"]
    assert pd.get("zz") is None and "a" in pd and len(pd) == 3
    assert pd.pop("a") is not None and "a" not in pd
    merged = pd | nn.ParameterDict({"d": ember.zeros(1)})
    assert list(merged.keys()) == ["b", "c", "d"]
    with pytest.raises(TypeError, match="strings"):
        pd[1] = ember.zeros(1)
    pd.clear()
    assert len(pd) == 0
