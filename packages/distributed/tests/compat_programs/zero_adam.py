"""ZeroRedundancyOptimizer with Adam (weight decay, amsgrad) as a memory-sharding script uses
it on 2 ranks (gloo) with DDP: which parameters each rank's local optimizer holds (torch's
greedy partition by size), a step with a closure, an lr change through param_groups, the
optimizer state consolidated on rank 0 (its keys, step counts and shapes), and state_dict()
before consolidation (an error). (Loading it into a fresh wrapper is left out: torch 2.13's
load_state_dict hands the state to the wrong parameters, so torch's fresh wrapper does not go
on as the original did; ember's does.) Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def model_():
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Linear(3, 2))
    g = np.random.default_rng(0)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    return m


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    model = DDP(model_())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.05,
                                  weight_decay=0.01, amsgrad=True)
    shapes = {id(p): list(p.shape) for p in model.parameters()}
    res[f"local_{rank}"] = [shapes[id(p)] for g in opt.optim.param_groups for p in g["params"]]
    x = torch.from_numpy(np.random.default_rng(1 + rank).standard_normal((6, 4))
                         .astype(np.float32))
    losses = []
    for step in range(3):
        def closure():
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            return loss
        losses.append(opt.step(closure).item())
        if step == 1:
            for g in opt.param_groups:
                g["lr"] = 0.02
    res[f"losses_{rank}"] = losses
    res["weights"] = [r6(p) for p in model.parameters()]
    try:
        opt.state_dict()
        res["state_dict_before_consolidate"] = "no error"
    except RuntimeError:
        res["state_dict_before_consolidate"] = "RuntimeError"
    opt.consolidate_state_dict(to=0)
    box = [opt.state_dict() if rank == 0 else None]
    if rank == 0:
        sd = box[0]
        res["sd_keys"] = sorted(sd)
        res["sd_groups"] = [{k: v for k, v in g.items() if k != "params"} | {"n": len(g["params"])}
                            for g in sd["param_groups"]]
        res["sd_state"] = {str(k): [float(v["step"]), list(v["exp_avg"].shape),
                                    r6(v["max_exp_avg_sq"].flatten()[:2])]
                           for k, v in sorted(sd["state"].items())}
    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {}
        for i, r in enumerate(every):
            for k, v in r.items():
                merged[k if k.endswith(("_0", "_1")) else f"{k}@{i}"] = v
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(merged, f, sort_keys=True)
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
