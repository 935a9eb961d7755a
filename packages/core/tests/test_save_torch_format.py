"""ember.save(obj, f, format="torch"): torch.save's zip format, so a checkpoint written by an
ember run opens in PyTorch (torch.load with weights_only=True and mmap=True, when torch is
installed) and in ember again: tensors of every dtype with shared storages kept shared,
Parameters, Sizes, dtypes, devices, model and optimizer state dicts; objects torch could not
load (modules, tensor subclasses) are refused before anything is written."""

from __future__ import annotations

import collections
import io
import zipfile

import ember
import numpy as np
import pytest
from ember import nn


def _sample() -> dict:
    x = ember.arange(6.0).reshape(2, 3)
    return {
        "param": nn.Parameter(ember.arange(4.0)),
        "view": x[:, 1:], "x": x,
        "bf16": ember.tensor([1.5, -2.0], dtype=ember.bfloat16),
        "scalar": ember.tensor(3), "u16": ember.tensor([1, 65535], dtype=ember.uint16),
        "f8": ember.tensor([0.5, 1.0]).to(ember.float8_e4m3fn),
        "c64": ember.tensor([1 + 2j]), "mask": ember.tensor([True, False]),
        "n": 5, "size": ember.Size([2, 3]), "dtype": ember.float16, "dev": ember.device("cpu"),
        "od": collections.OrderedDict(a=1), "nested": [x, (x, "s")],
        "empty": ember.empty(0, 3), "t_strided": x.t(),
    }


def _save(obj: object) -> bytes:
    buf = io.BytesIO()
    ember.save(obj, buf, format="torch")
    return buf.getvalue()


def test_archive_layout_matches_torch_save():
    data = _save(_sample())
    zf = zipfile.ZipFile(io.BytesIO(data))
    names = zf.namelist()
    assert names[0] == "archive/data.pkl" and "archive/version" in names
    assert zf.read("archive/byteorder") == b"little"
    # each storage once: x, its view and its transpose share one file
    assert len([n for n in names if n.startswith("archive/data/")]) == 9
    for info in zf.infolist():  # data aligned for torch.load(mmap=True)
        if info.filename.startswith("archive/data/"):
            start = info.header_offset + 30 + len(info.filename) + len(info.extra)
            assert start % 64 == 0


def test_round_trip_in_ember_keeps_values_dtypes_and_sharing():
    want = _sample()
    got = ember.load(io.BytesIO(_save(want)))
    assert sorted(got) == sorted(want)
    def values(t: ember.Tensor) -> np.ndarray:
        t = t.detach()
        return (t.float() if t.dtype in (ember.bfloat16, ember.float8_e4m3fn) else t).numpy()

    for k, v in want.items():
        if isinstance(v, ember.Tensor):
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
            np.testing.assert_array_equal(values(got[k]), values(v))
    assert isinstance(got["param"], nn.Parameter) and got["param"].requires_grad
    assert got["view"].untyped_storage().data_ptr() == got["x"].untyped_storage().data_ptr()
    assert got["t_strided"].stride() == (1, 3)
    assert got["size"] == ember.Size([2, 3]) and got["dtype"] is ember.float16
    assert got["od"] == collections.OrderedDict(a=1) and got["nested"][1][1] == "s"


def test_torch_loads_it_weights_only_and_mmap(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "ck.pt"
    ember.save(_sample(), path, format="torch")
    for kwargs in ({"weights_only": True}, {"weights_only": True, "mmap": True}):
        got = torch.load(path, **kwargs)
        assert isinstance(got["param"], torch.nn.Parameter) and got["param"].requires_grad
        assert got["view"].tolist() == [[1.0, 2.0], [4.0, 5.0]]
        assert got["view"].untyped_storage().data_ptr() == got["x"].untyped_storage().data_ptr()
        assert got["bf16"].dtype == torch.bfloat16 and got["bf16"].tolist() == [1.5, -2.0]
        assert got["u16"].dtype == torch.uint16 and got["u16"].tolist() == [1, 65535]
        assert got["f8"].dtype == torch.float8_e4m3fn and got["f8"].float().tolist() == [0.5, 1.0]
        assert got["c64"].tolist() == [1 + 2j] and got["mask"].tolist() == [True, False]
        assert got["size"] == torch.Size([2, 3]) and got["dtype"] is torch.float16
        assert got["dev"] == torch.device("cpu") and got["t_strided"].stride() == (1, 3)
        assert got["empty"].shape == (0, 3) and got["scalar"].item() == 3


def test_a_model_and_optimizer_trained_in_ember_continue_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = ember.optim.Adam(model.parameters(), lr=0.01)
    x = ember.randn(8, 3)
    model(x).sum().backward()
    opt.step()
    ember.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 1},
               tmp_path / "ck.pt", format="torch")
    ck = torch.load(tmp_path / "ck.pt", weights_only=True)
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4),
                               torch.nn.Linear(4, 2))
    twin.load_state_dict(ck["model"])
    topt = torch.optim.Adam(twin.parameters(), lr=0.5)
    topt.load_state_dict(ck["optim"])
    assert topt.param_groups[0]["lr"] == 0.01 and ck["epoch"] == 1
    model.eval()
    twin.eval()
    np.testing.assert_allclose(twin(torch.from_numpy(x.numpy())).detach().numpy(),
                               model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_objects_torch_cannot_read_are_refused(tmp_path):
    path = tmp_path / "keep.pt"
    path.write_bytes(b"old")
    with pytest.raises(TypeError, match="save model.state_dict"):
        ember.save({"model": nn.Linear(2, 2)}, path, format="torch")
    assert path.read_bytes() == b"old"  # nothing half-written over the user's file
    sparse = ember.sparse_coo_tensor(ember.tensor([[0], [1]]), ember.tensor([1.0]), (2, 2))
    with pytest.raises(TypeError, match="torch.load"):
        _save({"s": sparse})
    # meta tensors are written as torch.save writes them (torch.load gives them back on meta)
    back = ember.load(io.BytesIO(_save({"m": ember.empty(2, device="meta")})))
    assert back["m"].device.type == "meta" and back["m"].shape == (2,)
    with pytest.raises(ValueError, match="'ember', 'torch' or 'safetensors'"):
        ember.save({}, io.BytesIO(), format="pickle")
