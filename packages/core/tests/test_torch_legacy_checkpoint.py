"""ember.load reads checkpoints that real torch wrote in its legacy (non-zip) stream format,
``torch.save(obj, f, _use_new_zipfile_serialization=False)``: module state dicts, every dtype,
storages shared between tensors and views, non-contiguous tensors, parameters, containers and
map_location; truncated or corrupt files raise CheckpointError."""

from __future__ import annotations

import collections
import io
import pickle

import ember
import numpy as np
import pytest
from ember.serialization import CheckpointError

torch = pytest.importorskip("torch")


def _legacy_bytes(obj, **kw) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False, **kw)
    return buf.getvalue()


def _load(data: bytes, **kw):
    return ember.load(io.BytesIO(data), **kw)


def _np(t) -> np.ndarray:
    if t.dtype in (torch.bfloat16,):
        return t.float().numpy()
    return t.detach().numpy()


def _same(e, t) -> None:
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    got = e.float().numpy() if e.dtype == ember.bfloat16 else e.detach().numpy()
    np.testing.assert_array_equal(got, _np(t))


def test_state_dicts_of_several_modules_load_into_ember_modules(tmp_path):
    torch.manual_seed(0)
    tmods = {
        "linear": torch.nn.Linear(5, 3),
        "conv": torch.nn.Conv2d(2, 4, 3, bias=False),
        "bn": torch.nn.BatchNorm2d(4),
        "lstm": torch.nn.LSTM(3, 4, num_layers=2, batch_first=True),
        "emb": torch.nn.Embedding(7, 2, padding_idx=0),
        "ln": torch.nn.LayerNorm(6),
    }
    tmods["bn"](torch.randn(3, 4, 5, 5))  # running stats and num_batches_tracked move
    path = tmp_path / "mods.pt"
    torch.save({k: m.state_dict() for k, m in tmods.items()}, path,
               _use_new_zipfile_serialization=False)
    got = ember.load(path)
    emods = {
        "linear": ember.nn.Linear(5, 3),
        "conv": ember.nn.Conv2d(2, 4, 3, bias=False),
        "bn": ember.nn.BatchNorm2d(4),
        "lstm": ember.nn.LSTM(3, 4, num_layers=2, batch_first=True),
        "emb": ember.nn.Embedding(7, 2, padding_idx=0),
        "ln": ember.nn.LayerNorm(6),
    }
    for name, tm in tmods.items():
        sd = got[name]
        assert isinstance(sd, collections.OrderedDict)
        assert list(sd) == list(tm.state_dict())
        for key, tv in tm.state_dict().items():
            _same(sd[key], tv)
        emods[name].load_state_dict(sd)  # the loaded state dict fits ember's module
    assert int(got["bn"]["num_batches_tracked"]) == 1
    assert got["bn"]["num_batches_tracked"].dtype == ember.int64
    # the loaded LSTM computes what torch's does
    x = np.random.default_rng(0).normal(size=(2, 3, 3)).astype(np.float32)
    ref = tmods["lstm"](torch.from_numpy(x))[0].detach().numpy()
    out = emods["lstm"](ember.from_numpy(x))[0].detach().numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                   "int16", "int8", "uint8", "bool"])
def test_tensors_of_each_dtype(dtype):
    rng = np.random.default_rng(1)
    t = torch.from_numpy(rng.normal(0, 40, size=(3, 4))).to(getattr(torch, dtype))
    got = _load(_legacy_bytes({"t": t, "empty": t[:0]}))
    _same(got["t"], t)
    _same(got["empty"], t[:0])


def test_bool_and_byte_storages():
    t = torch.tensor([True, False, True])
    got = _load(_legacy_bytes([t, torch.tensor([0, 255, 7], dtype=torch.uint8)]))
    assert got[0].tolist() == [True, False, True] and got[1].tolist() == [0, 255, 7]


def test_shared_storages_and_views_stay_shared():
    base = torch.arange(12.0).reshape(3, 4)
    obj = {"base": base, "col": base[:, 1], "t": base.t(), "tail": base.view(-1)[5:],
           "other": torch.ones(2)}
    got = _load(_legacy_bytes(obj))
    for key, tv in obj.items():
        _same(got[key], tv)
        assert tuple(got[key].stride()) == tuple(tv.stride())
        assert got[key].storage_offset() == tv.storage_offset()
    assert not got["t"].is_contiguous() and not got["col"].is_contiguous()
    got["base"][0, 1] = -1.0  # one storage: the views see the write
    assert got["col"][0].item() == -1.0 and got["t"][1, 0].item() == -1.0
    got["base"][1, 1] = -2.0
    assert got["tail"][0].item() == -2.0
    assert got["other"].tolist() == [1.0, 1.0]


def test_non_contiguous_tensors():
    x = torch.arange(60.0).reshape(3, 4, 5)
    cases = [x.permute(2, 0, 1), x[:, ::2, 1:4], x.transpose(0, 2)[1], x.expand(2, 3, 4, 5)]
    got = _load(_legacy_bytes(cases))
    for g, t in zip(got, cases):
        _same(g, t)
        assert tuple(g.stride()) == tuple(t.stride())


def test_parameters_containers_and_numbers():
    p = torch.nn.Parameter(torch.randn(2, 2))
    frozen = torch.nn.Parameter(torch.randn(3), requires_grad=False)
    obj = {"p": p, "frozen": frozen, "grad": torch.ones(2, requires_grad=True),
           "nested": [(1, 2.5, "s", None, True), {"x": torch.zeros(1)}], "set": {1, 2},
           "bytes": b"ab\x00", "np": np.float32(1.5), "arr": np.arange(3)}
    got = _load(_legacy_bytes(obj))
    assert isinstance(got["p"], ember.nn.Parameter) and got["p"].requires_grad
    assert isinstance(got["frozen"], ember.nn.Parameter) and not got["frozen"].requires_grad
    _same(got["p"], p)
    assert got["grad"].requires_grad
    assert got["nested"][0] == (1, 2.5, "s", None, True)
    assert got["nested"][1]["x"].tolist() == [0.0]
    assert got["set"] == {1, 2} and got["bytes"] == b"ab\x00"
    assert got["np"] == np.float32(1.5) and got["arr"].tolist() == [0, 1, 2]


def test_state_dict_metadata_and_optimizer_state():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    got = _load(_legacy_bytes({"model": model.state_dict(), "opt": opt.state_dict(),
                               "epoch": 3}))
    assert got["model"]._metadata[""]["version"] == 1
    emodel = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.ReLU(), ember.nn.Linear(3, 1))
    emodel.load_state_dict(got["model"])
    eopt = ember.optim.Adam(emodel.parameters(), lr=0.01)
    eopt.load_state_dict(got["opt"])
    ref_state = opt.state_dict()["state"][0]
    _same(eopt.state_dict()["state"][0]["exp_avg"], ref_state["exp_avg"])
    assert got["epoch"] == 3


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_pickle_protocols(tmp_path, protocol):
    t = torch.arange(5, dtype=torch.int32)
    path = tmp_path / "p.pt"
    torch.save({"t": t}, path, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    assert ember.load(path)["t"].tolist() == [0, 1, 2, 3, 4]


def test_map_location_forms():
    data = _legacy_bytes({"a": torch.ones(2), "b": torch.zeros(3)})
    seen = []

    def where(t, location):
        seen.append((tuple(t.shape), location))
        return None  # the default placement

    got = _load(data, map_location=where)
    assert sorted(seen) == [((2,), "cpu"), ((3,), "cpu")]  # once per tensor, filled already
    assert got["a"].tolist() == [1.0, 1.0]
    assert _load(data, map_location=lambda t, loc: t * 2)["a"].tolist() == [2.0, 2.0]
    assert _load(data, map_location="cpu")["b"].tolist() == [0.0] * 3
    assert _load(data, map_location={"cpu": "cpu"})["b"].device.type == "cpu"


def test_torch_load_reads_the_same_files_ember_reads(tmp_path):
    # the reference: our reading agrees with torch's own reader of the file
    sd = torch.nn.GRU(2, 3).state_dict()
    path = tmp_path / "gru.pt"
    torch.save(sd, path, _use_new_zipfile_serialization=False)
    ref = torch.load(path)
    got = ember.load(path)
    for k in ref:
        _same(got[k], ref[k])


def test_refuses_pickled_code():
    data = _legacy_bytes(torch.nn.Linear(2, 2))  # a whole module: loading it would run code
    with pytest.raises(pickle.UnpicklingError, match="needs the global torch.nn"):
        _load(data)


def test_mmap_is_refused_for_the_legacy_format(tmp_path):
    path = tmp_path / "l.pt"
    torch.save({"a": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="mmap=True needs a checkpoint in PyTorch's zip"):
        ember.load(path, mmap=True)


def test_truncated_files_raise_checkpoint_error():
    data = _legacy_bytes({"w": torch.arange(40.0), "b": torch.ones(3, dtype=torch.int64),
                          "name": "net"})
    # every cut point: in the header pickles, the object, the key list and the storages
    for n in range(0, len(data), 7):
        with pytest.raises(CheckpointError, match="truncated|corrupt|not a|magic"):
            _load(data[:n])
    with pytest.raises(CheckpointError, match="truncated legacy PyTorch checkpoint"):
        _load(data[:-1])  # the last storage is one byte short


def test_corrupt_files_raise_checkpoint_error():
    good = _legacy_bytes({"w": torch.arange(6.0)})
    with pytest.raises(CheckpointError, match="bad magic number"):
        _load(pickle.dumps(12345, protocol=2))
    with pytest.raises(CheckpointError, match="protocol version"):
        _load(pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(999, protocol=2))
    # the storage's element count disagrees with the tensor's storage
    at = len(good) - 6 * 4 - 8  # the last storage's int64 count, then its 6 floats
    assert good[at:at + 8] == (6).to_bytes(8, "little")
    bad = good[:at] + (5).to_bytes(8, "little") + good[at + 8:]
    with pytest.raises(CheckpointError, match="holds 5 elements"):
        _load(bad)
    # random single-byte corruptions: a clear error or a loaded object, never anything else
    rng = np.random.default_rng(0)
    for _ in range(200):
        i = int(rng.integers(0, len(good)))
        bad = bytearray(good)
        bad[i] = int(rng.integers(0, 256))
        try:
            _load(bytes(bad))
        except (CheckpointError, pickle.UnpicklingError):
            pass


def test_protocol_2_builtins_load_from_zip_checkpoints_too():
    # torch pickles with protocol 2, which names builtins as Python 2's __builtin__ module
    buf = io.BytesIO()
    torch.save({"classes": {3, 1}, "frozen": frozenset({2}), "t": torch.ones(1)}, buf)
    got = ember.load(io.BytesIO(buf.getvalue()))
    assert got["classes"] == {1, 3} and got["frozen"] == frozenset({2})
