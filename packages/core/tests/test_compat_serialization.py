"""ember.save of any picklable object; ember.load's weights-only allow-list (issue 15 items 2, 5).

Tensors, containers, numbers and NumPy data load without running code; other objects are
pickled and load only with ``weights_only=False`` or allow-listed globals, as in torch >= 2.6.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import pickle

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from ember.serialization import (
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)


@dataclasses.dataclass
class HParams:
    lr: float = 0.01
    layers: tuple = (64, 64)
    table: np.ndarray | None = None


class Evil:
    def __reduce__(self):
        return (os.system, ("echo never-run",))


@pytest.fixture(autouse=True)
def _clean_allow_list():
    clear_safe_globals()
    yield
    clear_safe_globals()


def _roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **load_kw)


# ---- NumPy data: native, loads with weights_only=True ------------------------------------------

@pytest.mark.parametrize("arr", [
    np.arange(6.0).reshape(2, 3), np.arange(6, dtype=np.int16).reshape(3, 2).T,
    np.asfortranarray(np.ones((2, 3), np.float32)), np.array(3.5), np.zeros((0, 4)),
    np.array([True, False]), np.array([1 + 2j], dtype=np.complex64), np.arange(3, dtype=">i4"),
    np.array(["2020-01-01"], dtype="datetime64[D]"), np.array(["ab", "c"]),
])
def test_numpy_arrays_load_safely(arr):
    out = _roundtrip({"a": arr})["a"]
    assert isinstance(out, np.ndarray) and out.dtype == arr.dtype and out.shape == arr.shape
    np.testing.assert_array_equal(out, arr)
    out[...] = out  # writable, owns its memory


def test_numpy_scalars_load_safely():
    obj = {"f": np.float32(2.5), "i": np.int64(-3), "b": np.bool_(True), "l": [np.float16(1)]}
    out = _roundtrip(obj)
    for k in ("f", "i", "b"):
        assert type(out[k]) is type(obj[k]) and out[k] == obj[k]
    assert type(out["l"][0]) is np.float16


def test_plain_checkpoints_keep_the_native_format():
    buf = io.BytesIO()
    ember.save({"w": ember.ones(2), "step": 3, "arr": np.ones(2)}, buf)
    assert b"$objects" not in buf.getvalue() and b"$pickle" not in buf.getvalue()


# ---- pickled objects ----------------------------------------------------------------------------

def test_objects_are_refused_by_default_with_the_fix_named():
    buf = io.BytesIO()
    ember.save({"hp": HParams(), "w": ember.ones(2)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError) as info:
        ember.load(buf)
    msg = str(info.value)
    assert f"'{__name__}.HParams'" in msg
    assert "weights_only=False" in msg and "add_safe_globals([HParams])" in msg
    assert "safe_globals([HParams])" in msg


def test_weights_only_false_loads_anything():
    hp = HParams(lr=0.5, table=np.eye(2))
    out = _roundtrip({"hp": hp, "set": {1, 2}, "ns": argparse.Namespace(a=1)}, weights_only=False)
    assert out["hp"].lr == 0.5 and out["hp"].layers == (64, 64)
    np.testing.assert_array_equal(out["hp"].table, np.eye(2))
    assert out["set"] == {1, 2} and out["ns"].a == 1


def test_allow_list_api():
    hp = HParams(lr=0.2)
    add_safe_globals([HParams])
    assert HParams in get_safe_globals()
    assert _roundtrip(hp) == hp
    clear_safe_globals()
    assert get_safe_globals() == []
    with safe_globals([HParams, argparse.Namespace]):
        assert HParams in get_safe_globals()
        out = _roundtrip([hp, argparse.Namespace(x=[1, 2])])
    assert out[0] == hp and out[1].x == [1, 2]
    assert get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        _roundtrip(hp)
    # (object, "module.name") entries, and the default allow-list (sets, OrderedDict, ...)
    with safe_globals([(HParams, f"{__name__}.HParams")]):
        assert _roundtrip(hp) == hp
    assert _roundtrip({frozenset({1}), 2}) == {frozenset({1}), 2}


def test_code_in_a_file_never_runs_by_default(capfd):
    buf = io.BytesIO()
    ember.save({"x": Evil()}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        ember.load(buf)
    assert "never-run" not in capfd.readouterr().out


def test_whole_module_and_optimizer_state(tmp_path):
    nn = pytest.importorskip("ember.nn")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    path = tmp_path / "model.ckpt"
    ember.save(model, path)
    with pytest.raises(pickle.UnpicklingError, match="Sequential"):
        ember.load(path)
    loaded = ember.load(path, weights_only=False)
    x = ember.randn(5, 3)
    assert ember.equal(loaded(x), model(x))
    assert type(loaded[0].weight).__name__ == "Parameter" and loaded[0].weight.requires_grad
    # the parameters are storages of the file, not pickle bytes: mmap works on them
    loaded = ember.load(path, weights_only=False, mmap=True)
    assert ember.equal(loaded(x), model(x))
    with safe_globals([nn.Sequential, nn.Linear]):  # ReLU still missing
        with pytest.raises(pickle.UnpicklingError, match="ReLU"):
            ember.load(path)
    with safe_globals([nn.Sequential, nn.Linear, nn.ReLU]):  # the module classes are enough
        assert ember.equal(ember.load(path)(x), model(x))


def test_sharing_survives_across_pickles_and_tensors():
    w = ember.ones(3)
    ns = argparse.Namespace(w=w, arr=np.arange(2))
    out = _roundtrip({"a": ns, "b": [ns], "w": w}, weights_only=False)
    assert out["a"] is out["b"][0]
    assert out["a"].w is out["w"]


def test_unpicklable_objects_name_their_path():
    # pickle's own exception (PicklingError, or AttributeError for a local lambda before
    # Python 3.14), as torch.save lets it through
    with pytest.raises((pickle.PicklingError, AttributeError), match="the function at obj\\['cb'\\]"):
        ember.save({"cb": lambda: 1}, io.BytesIO())


@needs_torch
def test_torch_has_the_same_contract(tmp_path):
    """torch refuses the same objects by default and accepts the same opt-ins."""
    p = tmp_path / "t.pt"
    torch.save({"hp": HParams(), "arr": np.arange(3)}, p)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(p)
    assert torch.load(p, weights_only=False)["hp"] == HParams()
    for name in ("add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"):
        assert hasattr(torch.serialization, name) and hasattr(ember.serialization, name)
    # ember loads NumPy arrays without an opt-in; HParams needs one in both
    e = tmp_path / "e.ckpt"
    ember.save({"hp": HParams(), "arr": np.arange(3)}, e)
    with pytest.raises(pickle.UnpicklingError):
        ember.load(e)
    with torch.serialization.safe_globals([HParams]), safe_globals([HParams]):
        assert ember.load(e)["hp"] == torch.load(p, weights_only=False)["hp"]


def test_save_load_take_torchs_pickle_arguments(tmp_path):
    # issue 15: programs pass pickle_protocol=, _use_new_zipfile_serialization=False, and
    # load(..., encoding="latin1") for old checkpoints
    path = tmp_path / "a.pt"
    obj = {"w": ember.ones(2), "args": argparse.Namespace(lr=0.1), "n": 3}
    for kw in (dict(pickle_protocol=4), dict(pickle_protocol=2, pickle_module=pickle),
               dict(_use_new_zipfile_serialization=False, _disable_byteorder_record=True)):
        ember.save(obj, path, **kw)
        got = ember.load(path, weights_only=False, encoding="latin1")
        assert got["args"].lr == 0.1 and got["w"].tolist() == [1.0, 1.0] and got["n"] == 3
        assert ember.load(path, map_location="cpu", pickle_module=pickle, weights_only=False,
                          mmap=True)["n"] == 3
    # the protocol reaches the pickled objects' stream
    ember.save({"args": argparse.Namespace(x=1)}, path, pickle_protocol=2)
    assert ember.load(path, weights_only=False)["args"].x == 1
    with pytest.raises(ValueError, match="pickle_protocol must be an int from 2 to"):
        ember.save(obj, path, pickle_protocol=1)
    with pytest.raises(TypeError, match="pickle_module must be the standard pickle module"):
        ember.save(obj, path, pickle_module=argparse)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
        ember.load(path, bogus=1)
