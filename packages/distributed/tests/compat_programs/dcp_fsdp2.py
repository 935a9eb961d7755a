"""Checkpointing a fully_shard (FSDP2) model with torch.distributed.checkpoint, as torchtitan-
style trainers do: 2 ranks train, save the sharded model and optimizer state from
get_state_dict (DTensors: each rank writes its own shard), train on; a freshly built and
sharded model and optimizer load the checkpoint in place and replay the same steps with the
same losses; an unsharded model loads the same checkpoint (the shards assembled); a full
state dict gathers plain tensors. Rank 0 writes OUT/result.json."""

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
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.fsdp import fully_shard


def build(seed=4):
    model = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 7), nn.GELU(),
                          nn.Linear(7, 2))
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def sharded(seed=4):
    model = build(seed)
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    return model, torch.optim.Adam(model.parameters(), lr=0.03)


def steps(model, opt, rank, first, n):
    out = []
    for step in range(first, first + n):
        rng = np.random.default_rng(70 * step + rank)
        x = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((6, 2)).astype(np.float32))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        out.append(round(t.item(), 6))
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model, opt = sharded()
    res = {"warmup": steps(model, opt, rank, 0, 2)}
    msd, osd = get_state_dict(model, opt)
    res["types"] = [type(msd["0.weight"]).__name__, type(osd["state"]["0.weight"]["exp_avg"]).__name__]
    ckpt = os.path.join(out, "ckpt")
    meta = dcp.save({"model": msd, "optim": osd}, checkpoint_id=ckpt)
    res["chunks"] = [[list(c.offsets), list(c.sizes)]
                     for c in meta.state_dict_metadata["model.0.weight"].chunks]
    res["files"] = sorted({i.relative_path for i in meta.storage_data.values()})
    res["after"] = steps(model, opt, rank, 2, 2)

    model2, opt2 = sharded(seed=99)
    msd2, osd2 = get_state_dict(model2, opt2)
    state = {"model": msd2, "optim": osd2}
    dcp.load(state, checkpoint_id=ckpt)
    set_state_dict(model2, opt2, model_state_dict=state["model"], optim_state_dict=state["optim"])
    res["replayed"] = steps(model2, opt2, rank, 2, 2)

    plain = build(seed=123)
    psd = {"model": plain.state_dict()}
    dcp.load(psd, checkpoint_id=ckpt)
    plain.load_state_dict(psd["model"])
    res["plain_weight"] = np.round(np.asarray(plain[4].weight.detach().tolist()), 5).tolist()
    full = get_model_state_dict(model2, options=StateDictOptions(full_state_dict=True))
    res["full_types"] = sorted({type(v).__name__ for v in full.values()})
    res["full_shape"] = list(full["2.weight"].shape)
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
