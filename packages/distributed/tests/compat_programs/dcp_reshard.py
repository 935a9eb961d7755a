"""Distributed checkpoints loaded under a different sharding than they were saved with, on 2
ranks (gloo): DTensors saved Shard(0) and loaded as Shard(1), Replicate and plain tensors (an
uneven split too); a fully_shard model and its AdamW state saved through a Stateful AppState
(the DCP tutorial's pattern) and loaded into a tensor-parallel copy (ColwiseParallel /
RowwiseParallel) with get/set_model_state_dict and get/set_optimizer_state_dict, the training
replayed on it; full state dicts (cpu_offload, broadcast_from_rank0), a full optimizer state
dict keyed by parameter name, the checkpoint's metadata, async_save, and dcp_to_torch_save.
Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


def r5(t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


class AppState(Stateful):
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}

    def load_state_dict(self, state_dict):
        set_state_dict(self.model, self.optimizer, model_state_dict=state_dict["model"],
                       optim_state_dict=state_dict["optim"])


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(6, 8)
        self.down = nn.Linear(8, 3)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def build(seed):
    model = MLP()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def steps(model, opt, first, n):
    out = []
    for step in range(first, first + n):
        rng = np.random.default_rng(40 + step)  # the same batch on both ranks (TP needs it)
        x = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((5, 3)).astype(np.float32))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        loss = loss.detach()
        out.append(round(float(loss.full_tensor() if isinstance(loss, DTensor) else loss), 6))
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (world_size,))
    res = {}
    base = os.path.join(out, "ckpts")

    # 1. DTensors saved Shard(0) (one of them split unevenly), loaded in other layouts
    full_a = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    full_b = torch.arange(15, dtype=torch.float32).reshape(5, 3) / 7
    saved = {"a": distribute_tensor(full_a, mesh, [Shard(0)]),
             "b": distribute_tensor(full_b, mesh, [Shard(0)]),
             "step": torch.tensor(7), "note": "hello"}
    ck1 = os.path.join(base, "dt")
    dcp.save(saved, checkpoint_id=ck1)
    s1 = {"a": distribute_tensor(torch.zeros(4, 6), mesh, [Shard(1)]),
          "b": distribute_tensor(torch.zeros(5, 3), mesh, [Replicate()]),
          "step": torch.tensor(0), "note": ""}
    dcp.load(s1, checkpoint_id=ck1)
    s2 = {"a": torch.zeros(4, 6), "b": distribute_tensor(torch.zeros(5, 3), mesh, [Shard(1)])}
    dcp.load(s2, checkpoint_id=ck1)
    res["dtensor"] = {
        "a_shard1_local": r5(s1["a"].to_local()), "b_replicate": r5(s1["b"].to_local()),
        "step": s1["step"].item(), "note": s1["note"],
        "a_plain": r5(s2["a"]), "b_shard1_local_shape": list(s2["b"].to_local().shape),
        "b_shard1": r5(s2["b"]),
    }
    meta = dcp.FileSystemReader(ck1).read_metadata()
    res["metadata"] = {
        "keys": sorted(meta.state_dict_metadata),
        "b_size": list(meta.state_dict_metadata["b"].size),
        "b_chunks": sorted([list(c.offsets), list(c.sizes)]
                           for c in meta.state_dict_metadata["b"].chunks),
        "b_dtype": str(meta.state_dict_metadata["b"].properties.dtype),
        "note_type": type(meta.state_dict_metadata["note"]).__name__,
    }

    # 2. fully_shard model + AdamW saved through a Stateful, loaded into a TP copy
    model = build(1)
    fully_shard(model.up)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    res["fsdp_warmup"] = steps(model, opt, 0, 2)
    ck2 = os.path.join(base, "fsdp")
    dcp.save({"app": AppState(model, opt)}, checkpoint_id=ck2)
    res["fsdp_after"] = steps(model, opt, 2, 2)

    tp = build(99)
    parallelize_module(tp, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    tp_opt = torch.optim.AdamW(tp.parameters(), lr=0.05)
    msd = get_model_state_dict(tp)
    osd = get_optimizer_state_dict(tp, tp_opt)
    res["tp_osd_keys"] = sorted(osd["state"])
    state = {"app": {"model": msd, "optim": osd}}
    dcp.load(state, checkpoint_id=ck2)
    set_model_state_dict(tp, state["app"]["model"])
    set_optimizer_state_dict(tp, tp_opt, state["app"]["optim"])
    res["tp_placements"] = {n: [str(p) for p in prm.placements]
                            for n, prm in tp.named_parameters()}
    res["tp_exp_avg_placements"] = [str(p) for p in
                                    tp_opt.state[tp.down.weight]["exp_avg"].placements]
    res["tp_step"] = float(tp_opt.state[tp.up.weight]["step"])
    res["tp_replayed"] = steps(tp, tp_opt, 2, 2)

    # 3. full state dicts: gathered to CPU plain tensors, broadcast from rank 0 into a new model
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                cpu_offload=True))
    # (with cpu_offload only rank 0 keeps the gathered tensors)
    res["full_keys"] = sorted(full)
    res["full_types"] = sorted({type(v).__name__ for v in full.values()})
    if rank == 0:
        res["full_up_bias"] = r5(full["up.bias"])
    fresh = build(5)
    fully_shard(fresh)
    src = full if rank == 0 else {}
    set_model_state_dict(fresh, src, options=StateDictOptions(full_state_dict=True,
                                                              broadcast_from_rank0=True))
    res["broadcast_down_weight"] = r5(fresh.down.weight)
    fosd = get_optimizer_state_dict(model, opt, options=StateDictOptions(full_state_dict=True,
                                                                         cpu_offload=True))
    res["full_optim_rank0_only"] = len(fosd) == 0 if rank == 1 else len(fosd["state"]) == 4
    if rank == 0:
        res["full_optim"] = {
            "state_keys": sorted(fosd["state"]),
            "param_group_params": [list(g["params"]) for g in fosd["param_groups"]],
            "lr": fosd["param_groups"][0]["lr"],
            "exp_avg_type": type(fosd["state"]["up.weight"]["exp_avg"]).__name__,
            "exp_avg_shape": list(fosd["state"]["up.weight"]["exp_avg"].shape),
            "exp_avg_sq_down_bias": r5(fosd["state"]["down.bias"]["exp_avg_sq"]),
        }

    # 4. async_save returns a future; the result loads like a synchronous save
    ck3 = os.path.join(base, "async")
    fut = dcp.async_save({"model": get_model_state_dict(model)}, checkpoint_id=ck3)
    fut.result()
    plain = build(77)
    psd = {"model": plain.state_dict()}
    dcp.load(psd, checkpoint_id=ck3)
    plain.load_state_dict(psd["model"])
    res["async_plain_up_weight"] = r5(plain.up.weight)
    dist.barrier()
    if rank == 0:
        dcp_to_torch_save(ck3, os.path.join(base, "whole.pt"))
        whole = torch.load(os.path.join(base, "whole.pt"))
        res["torch_save_keys"] = sorted(whole["model"])
        res["torch_save_same"] = bool(torch.equal(whole["model"]["up.weight"], plain.up.weight))
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
