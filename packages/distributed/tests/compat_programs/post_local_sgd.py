"""Post-local SGD as torch's documentation sets it up, on 2 ranks: DDP with the
post_localSGD_hook (gradients averaged globally for 2 iterations, then within one-rank
subgroups, i.e. not at all), a PostLocalSGDOptimizer whose PeriodicModelAverager averages the
parameters every 2 steps after a warm-up of 2, its state dict carrying the averager's step, and
a bare averager over model.parameters(). Each rank trains on its own data; the parameters of
both ranks after every step must be torch's. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.algorithms.model_averaging.averagers as averagers
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (
    PostLocalSGDState,
    post_localSGD_hook,
)
from torch.distributed.algorithms.model_averaging.utils import average_parameters
from torch.distributed.optim import PostLocalSGDOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def build():
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    rng = np.random.default_rng(4)
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
    subgroup, _ = dist.new_subgroups(1)
    model = DDP(build())
    state = PostLocalSGDState(process_group=None, subgroup=subgroup, start_localSGD_iter=2)
    model.register_comm_hook(state, post_localSGD_hook)
    opt = PostLocalSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.2),
                                averagers.PeriodicModelAverager(period=2, warmup_steps=2))
    rng = np.random.default_rng(70 + rank)  # each rank its own data
    trace = []
    for step in range(6):
        x = torch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((4, 1)).astype(np.float32))
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        trace.append(r5(model.module[2].weight.sum()))
    res["trace"] = gathered(trace)
    res["hook_iter"] = state.iter
    sd = opt.state_dict()
    res["state_step"] = sd["step"]
    fresh = PostLocalSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.2),
                                  averagers.PeriodicModelAverager(period=2))
    fresh.load_state_dict(sd)
    res["loaded_step"] = fresh.averager.step
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fresh.load_state_dict(torch.optim.SGD(model.parameters(), lr=0.2).state_dict())
    res["no_step_warns"] = [len(caught) > 0, fresh.averager.step]

    plain = build()
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(rank)
    for p in plain.parameters():
        p.grad = torch.zeros_like(p)
    avg = averagers.PeriodicModelAverager(period=3)
    sums = []
    for _ in range(4):
        avg.average_parameters(plain.parameters())
        sums.append(r5(plain[0].weight.sum()))
        with torch.no_grad():
            plain[0].weight.add_(rank + 1)
    res["bare_averager"] = gathered(sums)
    m = build()
    with torch.no_grad():
        m[0].bias.mul_(rank + 2)
    average_parameters(iter(m.parameters()), None)
    res["average_parameters"] = r5(m[0].bias)
    try:
        averagers.PeriodicModelAverager(period=0)
        res["bad_period"] = "ok"
    except ValueError as exc:
        res["bad_period"] = [type(exc).__name__, str(exc)]
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
