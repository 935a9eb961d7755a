"""ZeroRedundancyOptimizer as a fine-tuning script uses it, on 2 ranks (gloo) with DDP:
parameters_as_bucket_view=True, SGD with momentum and a StepLR schedule on the wrapper, a new
param group added mid-training (add_param_group, for a head unfrozen later), uneven inputs under
Join([model, optimizer]), the optimizer state consolidated on rank 1 and loaded by a fresh
ZeroRedundancyOptimizer on every rank (the dict sent with broadcast_object_list), whose own
consolidated state is the same. Rank 0 writes OUT/result.json."""

import argparse
import copy
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


def build():
    net = Net()
    g = np.random.default_rng(7)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    net.head.requires_grad_(False)
    return net


def batch(rank, step):
    g = np.random.default_rng(100 * step + rank)
    return (torch.from_numpy(g.standard_normal((5, 4)).astype(np.float32)),
            torch.from_numpy(g.integers(0, 3, 5)))


def make_opt(model, with_head):
    zopt = ZeroRedundancyOptimizer([p for p in model.module.body.parameters()],
                                   optimizer_class=torch.optim.SGD,
                                   parameters_as_bucket_view=True, lr=0.1, momentum=0.9)
    if with_head:
        zopt.add_param_group({"params": list(model.module.head.parameters()), "lr": 0.05})
    return zopt


def step_once(model, zopt, rank, step):
    x, y = batch(rank, step)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    zopt.step()
    zopt.zero_grad()
    t = loss.detach().clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return round(t.item(), 6)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    net = build()
    net.head.requires_grad_(True)  # DDP must see every parameter that will train
    model = DDP(net)
    zopt = make_opt(model, with_head=False)
    sched = torch.optim.lr_scheduler.StepLR(zopt, step_size=2, gamma=0.5)
    with torch.no_grad():
        head_before = r6(model.module.head.weight)
    losses = []
    for step in range(3):
        losses.append(step_once(model, zopt, rank, step))
        sched.step()
    res["phase1"] = {"losses": list(losses), "lr": [g["lr"] for g in zopt.param_groups],
                     "head_unchanged": r6(model.module.head.weight) == head_before}
    zopt.add_param_group({"params": list(model.module.head.parameters()), "lr": 0.05})
    res["groups_after_add"] = [[len(g["params"]), g["lr"], g["momentum"]]
                               for g in zopt.param_groups]
    for step in range(3, 5):
        losses.append(step_once(model, zopt, rank, step))
    res["phase2_losses"] = losses[3:]
    res["head_after"] = r6(model.module.head.weight)

    # uneven inputs: rank 1 has two batches fewer
    n = 4 if rank == 0 else 2
    with Join([model, zopt]):
        for i in range(n):
            x, y = batch(rank, 10 + i)
            F.cross_entropy(model(x), y).backward()
            zopt.step()
            zopt.zero_grad()
    res["after_join"] = r6(model.module.body[2].weight[0])

    zopt.consolidate_state_dict(to=1)
    box = [zopt.state_dict() if rank == 1 else None]
    dist.broadcast_object_list(box, src=1)
    sd = box[0]
    res["state_dict"] = {
        "n_state": len(sd["state"]),
        "groups": [{k: v for k, v in g.items() if k in ("lr", "momentum", "params")}
                   for g in sd["param_groups"]],
        "momentum_0": r6(sd["state"][0]["momentum_buffer"]).__len__(),
    }

    # a fresh model + optimizer loading the state continues as the original
    net2 = build()
    net2.head.requires_grad_(True)
    model2 = DDP(net2)
    model2.module.load_state_dict(model.module.state_dict())
    zopt2 = make_opt(model2, with_head=True)
    zopt2.load_state_dict(copy.deepcopy(sd))  # (torch's clears the entries of other ranks)
    res["loaded_lrs"] = [g["lr"] for g in zopt2.param_groups]
    zopt2.consolidate_state_dict(to=0)
    if rank == 0:
        sd2 = zopt2.state_dict()
        res["round_trip"] = sorted(sd2["state"]) == sorted(sd["state"]) and all(
            torch.equal(sd2["state"][i]["momentum_buffer"], sd["state"][i]["momentum_buffer"])
            for i in sd["state"])
    # (one step: torch's reloaded copy drifts from the original from the second on)
    res["continued"] = [step_once(model, zopt, rank, s) for s in range(20, 23)]
    res["fresh_first"] = step_once(model2, zopt2, rank, 20)
    if rank == 0:
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
