"""Distributed checkpointing as a DDP training script does it (torch.distributed.checkpoint):
2 ranks train a DDP model, take its state by module path with get_state_dict (no "module."
prefix), save it with dcp.save (each replicated entry written once; a per-rank entry from
each), train on, then load the checkpoint back in place with dcp.load and set_state_dict and
replay the same steps, which must give the same losses; a plain (unwrapped) model loads the
same checkpoint; loading a key the checkpoint lacks fails. Rank 0 writes OUT/result.json."""

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
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.nn.parallel import DistributedDataParallel as DDP


def build():
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 2))
    rng = np.random.default_rng(7)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def steps(ddp, opt, rank, first, n):
    losses = []
    for step in range(first, first + n):
        rng = np.random.default_rng(1000 * step + rank)
        x = torch.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, 2, 8))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    return losses


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    ddp = DDP(build())
    opt = torch.optim.AdamW(ddp.parameters(), lr=0.05, weight_decay=0.01)
    res = {"warmup": steps(ddp, opt, rank, 0, 3)}
    model_sd, optim_sd = get_state_dict(ddp, opt)
    res["model_keys"] = sorted(model_sd)
    res["optim_keys"] = sorted(optim_sd["state"])
    res["optim_params"] = optim_sd["param_groups"][0]["params"]
    ckpt = os.path.join(out, "ckpt")
    meta = dcp.save({"model": model_sd, "optim": optim_sd, "step": 3,
                     f"rank{rank}": {"seen": 3 * (rank + 1)}}, checkpoint_id=ckpt)
    res["entries"] = sorted(meta.state_dict_metadata)
    res["writers"] = sorted({info.relative_path for info in meta.storage_data.values()})
    res["after"] = steps(ddp, opt, rank, 3, 3)

    model_sd, optim_sd = get_state_dict(ddp, opt)
    state = {"model": model_sd, "optim": optim_sd, "step": 0, f"rank{rank}": {"seen": 0}}
    dcp.load(state, checkpoint_id=ckpt)
    set_state_dict(ddp, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    res["step"] = state["step"]
    res["seen"] = state[f"rank{rank}"]["seen"]
    res["replayed"] = steps(ddp, opt, rank, 3, 3)

    plain = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 2))
    plain_sd = {"model": plain.state_dict()}
    dcp.load(plain_sd, checkpoint_id=ckpt)
    keys = set_state_dict(plain, [], model_state_dict=plain_sd["model"], optim_state_dict={},
                          options=StateDictOptions(strict=True))
    res["plain_missing"] = list(keys.missing_keys)
    res["plain_weight"] = [round(v, 5) for v in plain[3].weight.detach().flatten().tolist()]
    try:
        dcp.load({"absent": torch.zeros(1)}, checkpoint_id=ckpt)
        res["missing_key"] = "no error"
    except BaseException as e:  # noqa: BLE001  (torch's CheckpointException is one)
        res["missing_key"] = [type(e).__name__, "Missing key in checkpoint state_dict: absent."
                              in str(e)]
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
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
