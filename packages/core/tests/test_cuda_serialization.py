"""ember.save / ember.load of CUDA tensors and map_location: the recorded location, loading onto
the CPU with map_location as a string, device, dict or callable, and the errors for a CUDA
checkpoint on a machine without CUDA or for a device that does not exist. The CPU tests write
CUDA checkpoints through the save path with the recorded location faked; the round trips on a
GPU are skipped without a CUDA device."""

from __future__ import annotations

import io

import ember
import numpy as np
import pytest
from ember import serialization

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(), reason="needs a CUDA device")
no_cuda = pytest.mark.skipif(ember.cuda.is_available(), reason="checks the CPU-only behaviour")


def _fake_cuda_checkpoint(monkeypatch, location="cuda:0"):
    """A checkpoint whose tensors say they were saved from `location`: a tensor, a view of it,
    and a bool tensor."""
    w = ember.arange(6.0).reshape(2, 3)
    obj = {"w": w, "row": w[1], "mask": ember.tensor([True, False]), "empty": ember.empty(0, 3),
           "step": 3}
    with monkeypatch.context() as m:
        m.setattr(serialization, "_location_of", lambda t: location)
        buf = io.BytesIO()
        ember.save(obj, buf)
    buf.seek(0)
    return buf


def _check_loaded(d, device="cpu"):
    assert d["step"] == 3
    assert d["w"].device.type == device and d["row"].device.type == device
    np.testing.assert_array_equal(d["w"].cpu().numpy(), np.arange(6.0).reshape(2, 3))
    assert d["row"].cpu().tolist() == [3.0, 4.0, 5.0]
    assert d["row"].data_ptr() - d["w"].data_ptr() == 3 * 4  # still a view of w
    assert d["mask"].cpu().tolist() == [True, False]
    if "empty" in d:
        assert tuple(d["empty"].shape) == (0, 3) and d["empty"].device.type == device


def test_saved_locations_are_recorded(monkeypatch):
    seen = []
    buf = _fake_cuda_checkpoint(monkeypatch, "cuda:1")
    ember.load(buf, map_location=lambda t, loc: (seen.append(loc), t)[1])
    assert seen == ["cuda:1"] * 4
    plain = io.BytesIO()
    ember.save(ember.ones(1), plain)
    plain.seek(0)
    ember.load(plain, map_location=lambda t, loc: (seen.append(loc), t)[1])
    assert seen[-1] == "cpu"


@no_cuda
def test_cuda_checkpoint_without_cuda_needs_map_location(monkeypatch):
    buf = _fake_cuda_checkpoint(monkeypatch)
    with pytest.raises(RuntimeError, match=r"Attempting to deserialize object on a CUDA device "
                       r"\('cuda:0', saved at 'cuda:0'\) but ember.cuda.is_available\(\) is "
                       r"False.*map_location=ember.device\('cpu'\)"):
        ember.load(buf)
    for bad in ("cuda", "cuda:0", ember.device("cuda"), {"cpu": "cpu"}):
        buf.seek(0)
        with pytest.raises(RuntimeError, match="is_available"):
            ember.load(buf, map_location=bad)
    # a callable that returns None asks for the default placement
    buf.seek(0)
    with pytest.raises(RuntimeError, match="is_available"):
        ember.load(buf, map_location=lambda t, loc: None)


@pytest.mark.parametrize("where", ["cpu", "device", "dict", "callable"])
def test_map_location_onto_the_cpu(where, monkeypatch):
    buf = _fake_cuda_checkpoint(monkeypatch)
    ml = {"cpu": "cpu", "device": ember.device("cpu"), "dict": {"cuda:0": "cpu"},
          "callable": lambda t, loc: t}[where]
    _check_loaded(ember.load(buf, map_location=ml))


def test_bad_map_location(monkeypatch):
    buf = _fake_cuda_checkpoint(monkeypatch)
    with pytest.raises(ValueError, match="unknown map_location device 'tpu'"):
        ember.load(buf, map_location="tpu")
    buf.seek(0)
    with pytest.raises(ValueError, match="unknown map_location device 'meta:3'"):
        ember.load(buf, map_location={"cuda:0": "meta:3"})


# ---- on a GPU ------------------------------------------------------------------------------------

@needs_cuda
def test_cuda_round_trip_keeps_device_and_views():
    w = ember.arange(6.0, device="cuda").reshape(2, 3)
    buf = io.BytesIO()
    ember.save({"w": w, "row": w[1], "mask": ember.tensor([True, False], device="cuda"),
                "empty": ember.empty(0, 3, device="cuda"), "step": 3}, buf)
    seen = []
    buf.seek(0)
    ember.load(buf, map_location=lambda t, loc: (seen.append(loc), t)[1])
    assert set(seen) == {f"cuda:{ember.cuda.current_device()}"}
    for ml in (None, "cuda", "cuda:0", ember.device("cuda:0"), {"cpu": "cpu"}):
        buf.seek(0)
        _check_loaded(ember.load(buf, map_location=ml), "cuda")
    for ml in ("cpu", {"cuda:0": "cpu"}, ember.device("cpu")):
        buf.seek(0)
        _check_loaded(ember.load(buf, map_location=ml), "cpu")
    buf.seek(0)
    d = ember.load(buf, map_location=lambda t, loc: t.cuda())
    assert d["w"].device.type == "cuda" and d["row"].cpu().tolist() == [3.0, 4.0, 5.0]


@needs_cuda
def test_cuda_device_that_does_not_exist():
    n = ember.cuda.device_count()
    buf = io.BytesIO()
    ember.save(ember.ones(2), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match=f"CUDA device {n} but ember.cuda.device_count"):
        ember.load(buf, map_location=f"cuda:{n}")


@needs_cuda
def test_cuda_module_state_dict_round_trip():
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 2).to("cuda")
    buf = io.BytesIO()
    ember.save(lin.state_dict(), buf)
    buf.seek(0)
    sd = ember.load(buf, map_location="cpu")
    assert all(v.device.type == "cpu" for v in sd.values())
    cpu = ember.nn.Linear(3, 2)
    cpu.load_state_dict(sd)
    np.testing.assert_array_equal(cpu.weight.detach().numpy(), lin.weight.detach().cpu().numpy())
