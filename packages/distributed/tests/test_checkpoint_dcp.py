"""ember.distributed.checkpoint in one process: save / load round trips of nested state dicts,
the format shared with torch.distributed.checkpoint both ways (when torch is installed),
tensors saved in chunks (as torch's FSDP writes them) assembled on load, an FSDP model's state
through get_state_dict, and the errors: a missing key or size, a truncated item, an interrupted
save (no .metadata), metadata naming a foreign global. The 2-rank DDP flow against torch's
reference is the dcp_checkpoint program of test_compat_dist_programs.py."""

from __future__ import annotations

import pickle

import ember
import ember.distributed.checkpoint as dcp
import numpy as np
import pytest
from ember import nn
from ember.distributed.checkpoint import _pickle
from ember.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_state_dict,
)

# without a process group, save and load warn as torch's do (checked once below)
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


def _nested() -> dict:
    return {"a": [ember.ones(2), ember.zeros(1)], "b": [1, 2], "c": {"d": ember.ones(1) * 4,
                                                                     "e": {"f": 3}},
            "g": (ember.ones(1), 5), "h": [[ember.full((1,), 7.0)]], "s": "str", "n": None,
            "w": ember.arange(6.0).reshape(2, 3).to(ember.bfloat16),
            "groups": [{"lr": 0.1, "params": ["x"]}]}


def _blank() -> dict:
    return {"a": [ember.zeros(2), ember.ones(1)], "b": [0, 0], "c": {"d": ember.zeros(1),
                                                                     "e": {"f": 0}},
            "g": (ember.zeros(1), 0), "h": [[ember.zeros(1)]], "s": "", "n": 1,
            "w": ember.zeros(2, 3, dtype=ember.bfloat16), "groups": [{"lr": 0.0, "params": []}]}


def _check_loaded(sd: dict) -> None:
    assert sd["a"][0].tolist() == [1.0, 1.0] and sd["a"][1].tolist() == [0.0]
    assert sd["b"] == [1, 2] and sd["c"]["e"]["f"] == 3 and sd["c"]["d"].tolist() == [4.0]
    assert sd["g"][1] == 5 and sd["h"][0][0].tolist() == [7.0]
    assert sd["s"] == "str" and sd["n"] is None and sd["groups"] == [{"lr": 0.1,
                                                                      "params": ["x"]}]
    assert sd["w"].dtype == ember.bfloat16 and sd["w"].float().tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.filterwarnings("default")
def test_round_trip_fills_tensors_in_place(tmp_path):
    with pytest.warns(UserWarning, match="intent is to save in a single process"):
        meta = dcp.save(_nested(), checkpoint_id=tmp_path / "ck")
    assert meta.planner_data["c.e.f"] == ("c", "e", "f")
    assert meta.planner_data["groups.0.lr"] == ("groups", 0, "lr")  # lists of dicts open up
    assert meta.planner_data["g"] == ("g",)  # a tuple is one entry
    sd = _blank()
    w = sd["w"]
    dcp.load(sd, checkpoint_id=tmp_path / "ck")
    _check_loaded(sd)
    assert sd["w"] is w  # tensors are filled, not replaced
    fut = dcp.async_save({"x": ember.ones(3)}, storage_writer=dcp.FileSystemWriter(tmp_path / "a"))
    assert fut.result().state_dict_metadata["x"].size == ember.Size([3])


def test_torch_reads_ember_checkpoints_and_ember_reads_torchs(tmp_path):
    torch = pytest.importorskip("torch")
    import torch.distributed.checkpoint as tdcp

    dcp.save(_nested(), checkpoint_id=tmp_path / "from_ember")
    t_sd = {"a": [torch.zeros(2), torch.ones(1)], "b": [0, 0],
            "c": {"d": torch.zeros(1), "e": {"f": 0}}, "g": (torch.zeros(1), 0),
            "h": [[torch.zeros(1)]], "s": "", "n": 1,
            "w": torch.zeros(2, 3, dtype=torch.bfloat16), "groups": [{"lr": 0.0, "params": []}]}
    tdcp.load(t_sd, checkpoint_id=str(tmp_path / "from_ember"))
    assert t_sd["c"]["d"].tolist() == [4.0] and t_sd["groups"][0]["lr"] == 0.1
    assert t_sd["w"].float().tolist() == [[0, 1, 2], [3, 4, 5]] and t_sd["g"][1] == 5
    t_save = {k: v for k, v in t_sd.items()}
    t_save["c"] = {"d": torch.full((1,), 4.0), "e": {"f": 3}}
    tdcp.save(t_save, checkpoint_id=str(tmp_path / "from_torch"))
    sd = _blank()
    dcp.load(sd, checkpoint_id=tmp_path / "from_torch")
    _check_loaded(sd)


def test_chunked_tensors_are_assembled(tmp_path):
    # a tensor saved in two row blocks (what a sharded save writes), loaded into a whole one
    from ember.distributed.checkpoint.filesystem import FileSystemWriter
    from ember.distributed.checkpoint.metadata import (
        ChunkStorageMetadata,
        Metadata,
        MetadataIndex,
        TensorProperties,
        TensorStorageMetadata,
    )

    full = ember.arange(12.0).reshape(4, 3)
    writer = FileSystemWriter(tmp_path)
    where = writer.write_items(0, [("top", full[:2].clone()), ("bottom", full[2:].clone())])
    chunks = [ChunkStorageMetadata(ember.Size([0, 0]), ember.Size([2, 3])),
              ChunkStorageMetadata(ember.Size([2, 0]), ember.Size([2, 3]))]
    meta = Metadata({"w": TensorStorageMetadata(TensorProperties(ember.float32),
                                                ember.Size([4, 3]), chunks)},
                    {"w": ("w",)},
                    {MetadataIndex("w", [0, 0], 0): where["top"],
                     MetadataIndex("w", [2, 0], 1): where["bottom"]})
    writer.write_metadata(_pickle.dumps(meta))
    sd = {"w": ember.zeros(4, 3)}
    dcp.load(sd, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(sd["w"].numpy(), full.numpy())


def test_errors_name_the_problem(tmp_path):
    ck = tmp_path / "ck"
    dcp.save({"x": ember.ones(2, 2), "y": 3}, checkpoint_id=ck)
    with pytest.raises(dcp.CheckpointException, match="Missing key in checkpoint state_dict: z"):
        dcp.load({"z": ember.ones(1)}, checkpoint_id=ck)
    with pytest.raises(dcp.CheckpointException, match=r"Size mismatch .*\[2, 2\].* for x"):
        dcp.load({"x": ember.ones(3)}, checkpoint_id=ck)
    with pytest.raises(RuntimeError, match="checkpoint_id"):
        dcp.save({"x": ember.ones(1)})
    with pytest.raises(TypeError, match="must be a dict"):
        dcp.save([ember.ones(1)], checkpoint_id=ck)
    data = (ck / "__0_0.distcp").read_bytes()
    (ck / "__0_0.distcp").write_bytes(data[:len(data) // 2])
    with pytest.raises(dcp.CheckpointException, match="truncated"):
        dcp.load({"x": ember.ones(2, 2), "y": 0}, checkpoint_id=ck)
    (ck / ".metadata").unlink()  # a save interrupted before its last step
    with pytest.raises(FileNotFoundError, match="interrupted save"):
        dcp.load({"x": ember.ones(2, 2)}, checkpoint_id=ck)
    evil = pickle.dumps(__import__("os").system)
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        _pickle.loads(evil)


def _trained() -> tuple[nn.Module, ember.optim.Optimizer]:
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = ember.optim.Adam(model.parameters(), lr=0.05)
    model(ember.randn(5, 3)).pow(2).mean().backward()
    opt.step()
    return model, opt


def test_stateful_values_and_get_set_state_dict(tmp_path):
    model, opt = _trained()
    dcp.save({"model": model, "optim": opt}, checkpoint_id=tmp_path)  # Stateful values
    model2 = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    dcp.load({"model": model2}, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(model2[2].weight.detach().numpy(),
                                  model[2].weight.detach().numpy())
    msd, osd = get_state_dict(model, opt)
    assert osd["param_groups"][0]["params"] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    opt2 = ember.optim.Adam(model2.parameters(), lr=1.0)
    keys = set_state_dict(model2, opt2, model_state_dict=msd, optim_state_dict=osd)
    assert keys.missing_keys == [] and opt2.param_groups[0]["lr"] == 0.05
    np.testing.assert_array_equal(opt2.state[model2[0].weight]["exp_avg"].numpy(),
                                  opt.state[model[0].weight]["exp_avg"].numpy())
    with pytest.raises(RuntimeError, match="Missing key"):
        set_state_dict(model2, opt2, model_state_dict={}, optim_state_dict={})
    flat = get_optimizer_state_dict(model, opt, options=StateDictOptions(
        flatten_optimizer_state_dict=True))
    assert "state.0.weight.exp_avg" in flat and flat["param_groups.2.bias.lr"] == 0.05


def test_helpers_match_torch_names():
    torch = pytest.importorskip("torch")
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict as t_get_optim,
    )

    tm = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3),
                             torch.nn.Linear(3, 1))
    tm[2].weight.requires_grad_(False)
    to = torch.optim.SGD([p for p in tm.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    tm(torch.randn(4, 2)).sum().backward()
    to.step()
    em = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))
    em[2].weight.requires_grad_(False)
    eo = ember.optim.SGD([p for p in em.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    em(ember.randn(4, 2)).sum().backward()
    eo.step()
    opts = StateDictOptions(ignore_frozen_params=True)
    assert list(get_model_state_dict(em, options=opts)) == [
        k for k in tm.state_dict() if k != "2.weight"]
    flat = StateDictOptions(flatten_optimizer_state_dict=True)
    # the same entries per parameter (the option names inside a group may differ)
    e_keys = {k.rsplit(".", 1)[0] for k in get_optimizer_state_dict(em, eo, options=flat)}
    t_keys = {k.rsplit(".", 1)[0] for k in t_get_optim(tm, to, options=flat)}
    assert e_keys == t_keys


@pytest.mark.filterwarnings("ignore:FSDP is switching to use `NO_SHARD`")
def test_fsdp_model_state_by_module_path(tmp_path):
    import ember.distributed as dist
    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP

    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        base, _ = _trained()
        # one rank: NO_SHARD, with FSDP's warning saying so
        wrapped = FSDP(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)),
                       use_orig_params=True)
        opt = ember.optim.Adam(wrapped.parameters(), lr=0.05)
        set_state_dict(wrapped, opt, model_state_dict=get_model_state_dict(base),
                       optim_state_dict={})
        msd, osd = get_state_dict(wrapped, opt)
        assert list(msd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
        np.testing.assert_array_equal(msd["2.weight"].numpy(), base[2].weight.detach().numpy())
        dcp.save({"model": msd}, checkpoint_id=tmp_path)
        plain = {"model": nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).state_dict()}
        dcp.load(plain, checkpoint_id=tmp_path)
        np.testing.assert_array_equal(plain["model"]["0.bias"].numpy(),
                                      base[0].bias.detach().numpy())
    finally:
        dist.destroy_process_group()


def test_stateful_protocol_app_state(tmp_path):
    """DCP's tutorial pattern: an AppState(Stateful) wrapping model and optimizer."""
    from ember.distributed.checkpoint.stateful import Stateful

    class AppState(Stateful):
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        def state_dict(self):
            msd, osd = get_state_dict(self.model, self.optimizer)
            return {"model": msd, "optim": osd}

        def load_state_dict(self, state_dict):
            set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                           optim_state_dict=state_dict["optim"])

    model, opt = _trained()
    assert isinstance(model, Stateful) and isinstance(opt, Stateful)
    dcp.save({"app": AppState(model, opt)}, checkpoint_id=tmp_path)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt2 = ember.optim.Adam(model2.parameters(), lr=1.0)
    dcp.load({"app": AppState(model2, opt2)}, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(model2[0].weight.detach().numpy(),
                                  model[0].weight.detach().numpy())
    assert opt2.param_groups[0]["lr"] == 0.05
