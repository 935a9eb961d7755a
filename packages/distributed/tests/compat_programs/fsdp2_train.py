"""Per-parameter FSDP (fully_shard, "FSDP2") as torch 2.x training scripts use it: 2 ranks
shard each block of a small model and then the root, train with AdamW and clip_grad_norm_ on
each rank's half of every batch, accumulate gradients over two micro-batches with
set_requires_gradient_sync(False), and inspect what torch shows: FSDP<Name> classes, DTensor
parameters sharded along dim 0 with their global shapes, DTensor gradients and optimizer state,
the state dict, full tensors gathered back, and the loss matching single-process training.
Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 6)

    def forward(self, x):
        return x + self.fc2(torch.tanh(self.fc1(x)))


def build():
    model = nn.Sequential(Block(), Block(), nn.Linear(6, 3))
    rng = np.random.default_rng(11)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def batch(step):
    rng = np.random.default_rng(500 + step)
    return (torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32)),
            torch.from_numpy(rng.standard_normal((8, 3)).astype(np.float32)))


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = build()
    for block in model[:2]:
        fully_shard(block)
    fully_shard(model)
    res = {"classes": [type(m).__name__ for m in model.modules()]}
    first = model[0].fc1.weight
    res["param"] = [type(first).__name__, list(first.shape), list(first.to_local().shape),
                    str(first.placements), sum(p.numel() for p in model.parameters())]
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    losses, norms = [], []
    for step in range(3):
        x, y = batch(step)
        half = slice(4 * rank, 4 * rank + 4)
        opt.zero_grad()
        # two micro-batches of 2 rows: the first without gradient sync
        model.set_requires_gradient_sync(False)
        loss_a = nn.functional.mse_loss(model(x[half][:2]), y[half][:2]) / 2
        loss_a.backward()
        model.set_requires_gradient_sync(True)
        loss_b = nn.functional.mse_loss(model(x[half][2:]), y[half][2:]) / 2
        loss_b.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        norms.append(round(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm), 5))
        opt.step()
        t = (loss_a + loss_b).detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    res["losses"], res["norms"] = losses, norms
    g = model[2].weight.grad
    res["grad"] = [type(g).__name__, str(g.placements), list(g.to_local().shape)]
    state = opt.state[first]
    res["optim_state"] = [type(state["exp_avg"]).__name__, list(state["exp_avg"].shape)]
    sd = model.state_dict()
    res["state_dict"] = {k: [type(v).__name__, list(v.shape)] for k, v in sd.items()}
    res["final_weight"] = r5(model[2].weight.full_tensor())
    res["final_bias0"] = r5(model[0].fc1.bias.full_tensor())
    with torch.no_grad():
        x, _ = batch(9)
        res["eval_out"] = r5(model(x))
    res["after_forward"] = type(model[0].fc1.weight).__name__
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
