"""fully_shard's placement and offload options on 2 ranks: shard_placement_fn splitting the
2-D weights along dim 1 (the rest along dim 0), CPUOffloadPolicy on a second model, trained
with AdamW on each rank's half of every batch; the placements, local shapes, gradients,
losses, and the full weights must be those of torch. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
from torch.distributed.tensor import Shard


def build():
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3))
    rng = np.random.default_rng(17)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def batch(step):
    rng = np.random.default_rng(500 + step)
    x = torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((8, 3)).astype(np.float32))
    return x, y


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def train(model, rank):
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    losses = []
    for step in range(3):
        x, y = batch(step)
        mine = slice(4 * rank, 4 * rank + 4)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[mine]), y[mine])
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
    res = {}
    model = build()
    fully_shard(model[0], shard_placement_fn=lambda p: Shard(1) if p.ndim == 2 else None)
    fully_shard(model, shard_placement_fn=lambda p: Shard(1) if p.ndim == 2 else Shard(0))
    res["placements"] = {n: [str(p.placements), gathered(list(p.to_local().shape))]
                         for n, p in model.named_parameters()}
    res["losses"] = train(model, rank)
    g = model[2].weight.grad
    res["grad"] = [str(g.placements), r5(g.full_tensor())]
    res["weights"] = {n: r5(p.full_tensor()) for n, p in model.named_parameters()}

    off = build()
    fully_shard(off, offload_policy=CPUOffloadPolicy(pin_memory=False))
    res["offload_param"] = [str(off[0].weight.placements), off[0].weight.device.type]
    res["offload_losses"] = train(off, rank)
    res["offload_weights"] = r5(off[2].weight.full_tensor())
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
