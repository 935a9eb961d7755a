"""Attributes set on a tensor (``t.name = value``), as in PyTorch: every tensor has a __dict__,
which deep copies, pickles and ember.save / ember.load keep, and which the cycle collector sees.
Subclass instances keep their class through ember.save under PyTorch's weights_only rules."""

from __future__ import annotations

import copy
import gc
import io
import pickle
import weakref
import zlib

import ember
import pytest
from core_helpers import needs_torch, torch


def test_set_get_delete_and_dict():
    t = ember.ones(3)
    t.owner = "layer1"
    t.step = 7
    assert t.owner == "layer1" and t.__dict__ == {"owner": "layer1", "step": 7}
    assert vars(t) is t.__dict__
    del t.step
    assert not hasattr(t, "step") and t.__dict__ == {"owner": "layer1"}
    t.__dict__ = {"x": 1}
    assert t.x == 1


def test_missing_attribute_message_names_tensor():
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'nope'"):
        ember.ones(1).nope  # noqa: B018


def test_properties_are_not_shadowed_by_the_dict():
    t = ember.ones(2, requires_grad=True)
    t.__dict__["requires_grad"] = False  # a data descriptor wins over the instance dict
    assert t.requires_grad is True
    with pytest.raises(AttributeError):
        t.shape = (1, 2)


def test_results_and_views_start_without_attributes():
    t = ember.ones(4)
    t.tag = 1
    for r in (t + 1, t[1:], t.view(2, 2), t.detach(), t.clone()):
        assert r.__dict__ == {}
    assert t.tag == 1


def test_subclasses_and_parameters_keep_their_own_dicts():
    class Tagged(ember.Tensor):
        pass

    class Slotted(ember.Tensor):
        __slots__ = ("extra",)

    s = ember.ones(2).as_subclass(Tagged)
    s.a = 1
    z = ember.ones(2).as_subclass(Slotted)
    z.extra = 2
    z.b = 3
    assert s.__dict__ == {"a": 1} and z.extra == 2 and z.__dict__ == {"b": 3}
    p = ember.nn.Parameter(ember.ones(2))
    p.sharded = True
    assert p.__dict__ == {"sharded": True}


def test_cycle_through_the_dict_is_collected():
    t = ember.ones(2)
    t.me = t
    t.box = [t]
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


def test_deepcopy_copies_the_attributes():
    t = ember.ones(2)
    t.meta = {"k": [1, 2]}
    t.me = t
    c = copy.deepcopy(t)
    assert c.meta == {"k": [1, 2]} and c.meta is not t.meta and c.me is c
    assert copy.deepcopy(ember.ones(1)).__dict__ == {}


def test_pickle_keeps_the_attributes():
    t = ember.arange(3.0, requires_grad=True)
    t.meta = {"k": 1}
    r = pickle.loads(pickle.dumps(t))
    assert type(r) is ember.Tensor and r.meta == {"k": 1} and r.requires_grad
    assert r.tolist() == [0.0, 1.0, 2.0]
    # a tensor without attributes keeps the short reduction (no rebuild wrapper)
    func, _ = ember.ones(1).__reduce_ex__(2)
    assert func.__name__ != "_rebuild_from_type_v2"


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **load_kwargs)


def test_save_load_keeps_tensor_attributes_weights_only():
    t = ember.arange(4.0)
    t.name_ = "w"
    t.scale = ember.ones(2)
    t.me = t
    p = ember.nn.Parameter(ember.ones(3))
    p.sharded = {"dim": 0}
    out = _roundtrip({"t": t, "p": p, "plain": ember.ones(1)})
    r = out["t"]
    assert r.name_ == "w" and r.me is r and r.scale.tolist() == [1.0, 1.0]
    assert r.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert type(out["p"]).__name__ == "Parameter" and out["p"].sharded == {"dim": 0}
    assert out["p"].requires_grad and out["plain"].__dict__ == {}


class _Saved(ember.Tensor):
    pass


def test_save_load_subclass_follows_weights_only_rules():
    s = ember.ones(2).as_subclass(_Saved)
    s.tag = 5
    buf = io.BytesIO()
    ember.save(s, buf)
    data = buf.getvalue()
    # the class is a global: weights_only refuses it until it is allow-listed, naming it
    with pytest.raises(pickle.UnpicklingError, match="_Saved"):
        ember.load(io.BytesIO(data))
    assert ember.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == [
        f"{__name__}._Saved"]
    r = ember.load(io.BytesIO(data), weights_only=False)
    assert type(r) is _Saved and r.tag == 5 and r.tolist() == [1.0, 1.0]
    with ember.serialization.safe_globals([_Saved]):
        r = ember.load(io.BytesIO(data))
    assert type(r) is _Saved and r.tag == 5


@needs_torch
def test_torch_checkpoint_with_attributes_loads(tmp_path):
    path = tmp_path / "attrs.pt"
    t = torch.arange(3.0)
    t.tag = "a"
    t.aux = torch.ones(2)
    p = torch.nn.Parameter(torch.ones(2))
    p.sharded = 1
    torch.save({"t": t, "p": p}, path)
    out = ember.load(path)
    assert type(out["t"]) is ember.Tensor and out["t"].tag == "a"
    assert out["t"].aux.tolist() == [1.0, 1.0] and out["t"].tolist() == [0.0, 1.0, 2.0]
    assert type(out["p"]).__name__ == "Parameter" and out["p"].sharded == 1


@needs_torch
def test_same_behaviour_as_torch():
    for lib in (torch, ember):
        t = lib.ones(2)
        t.a = 1
        c = copy.deepcopy(t)
        assert (c.a, (t + 1).__dict__, pickle.loads(pickle.dumps(t)).a) == (1, {}, 1)


def _forged(state_node):
    """A checkpoint of one tensor whose attribute node is replaced by state_node."""
    import json
    import struct

    t = ember.ones(1)
    t.a = 1
    buf = io.BytesIO()
    ember.save(t, buf)
    data = bytearray(buf.getvalue())
    hoff, hlen = struct.unpack_from("<QQ", data, 16)
    header = json.loads(bytes(data[hoff:hoff + hlen]))
    header["tensors"][0]["state"] = state_node
    raw = json.dumps(header).encode()
    data = data[:hoff] + raw
    struct.pack_into("<QQ", data, 16, hoff, len(raw))
    struct.pack_into("<I", data, 12, zlib.crc32(raw))
    return io.BytesIO(bytes(data))


@pytest.mark.parametrize("node,what", [
    ([1, 2], "malformed"),
    ({"$dict": [["__class__", 1]]}, "weights-only loading refuses"),
    ({"$dict": [["not an identifier", 1]]}, "attribute named"),
])
def test_forged_attributes_are_refused(node, what):
    with pytest.raises(ember.serialization.CheckpointError, match=what):
        ember.load(_forged(node))
