"""Local SGD / model averaging written by hand: each rank trains its own copy on its own data
and every few steps the ranks average parameters (per tensor with all_reduce(AVG) on p.data,
and flat through parameters_to_vector / vector_to_parameters with SUM then divide), plus
optimizer state averaged the same way. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters


def build():
    model = nn.Sequential(nn.Linear(5, 10), nn.GELU(), nn.Linear(10, 3))
    rng = np.random.default_rng(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.3 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def average_per_tensor(model):
    for p in model.parameters():
        dist.all_reduce(p.data, op=dist.ReduceOp.AVG)


def average_flat(model, world_size):
    vec = parameters_to_vector(model.parameters()).detach()
    dist.all_reduce(vec, op=dist.ReduceOp.SUM)
    vector_to_parameters(vec / world_size, model.parameters())


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    rng = np.random.default_rng(20 + rank)
    x = torch.from_numpy(rng.standard_normal((32, 5)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 3, 32))
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    res = {"losses": [], "diverged_before_avg": [], "equal_after_avg": []}
    for step in range(1, 13):
        opt.zero_grad()
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()
        if step % 4 == 0:
            w = model[0].weight.detach().clone()
            dist.all_reduce(w, op=dist.ReduceOp.MAX)
            res["diverged_before_avg"].append(not torch.equal(w, model[0].weight))
            if step % 8 == 0:
                average_flat(model, world_size)
            else:
                average_per_tensor(model)
            for state in opt.state.values():
                for k in ("exp_avg", "exp_avg_sq"):
                    dist.all_reduce(state[k], op=dist.ReduceOp.AVG)
            w = model[0].weight.detach().clone()
            dist.broadcast(w, src=1)
            res["equal_after_avg"].append(torch.allclose(w, model[0].weight, atol=1e-7))
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        res["losses"].append(t.item())
    res["final_params"] = parameters_to_vector(model.parameters()).detach()[:12].tolist()
    res["step_count"] = int(opt.state[model[0].weight]["step"])
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
