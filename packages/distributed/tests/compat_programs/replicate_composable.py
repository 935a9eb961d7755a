"""Composable data parallelism and activation checkpointing (torch.distributed._composable) on
2 ranks: replicate(model) keeps the model's class and state-dict keys, averages gradients over
the ranks (each rank its own batch) and syncs a BatchNorm's buffers; checkpoint(block)
recomputes a block in backward with the same gradients. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed._composable import checkpoint, replicate


def build():
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 2))
    rng = np.random.default_rng(12)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    model = build()
    if rank == 1:
        with torch.no_grad():
            model[0].weight.add_(1.0)  # replicate broadcasts rank 0's parameters
    checkpoint(model[0])
    replicate(model)
    res["class"] = [type(model).__name__, type(model[0]).__name__]
    res["keys"] = list(model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        rng = np.random.default_rng(200 + 10 * step + rank)
        x = torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    res["losses"] = gathered(losses)
    res["grad"] = gathered(r5(model[3].weight.grad))
    res["weight"] = gathered(r5(model[0].weight))
    res["running_mean"] = gathered(r5(model[1].running_mean))
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
