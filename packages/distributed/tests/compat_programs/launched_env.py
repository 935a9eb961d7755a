"""A torchrun-style worker: it reads RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT
from the environment the launcher set, calls init_process_group(backend="gloo") with the default
init_method (env://) under @record, averages gradients of a tiny model by hand, and rank 0
writes OUT/result.json. Run as: torchrun --nnodes=1 --nproc-per-node=2 --rdzv-id=compat
--rdzv-backend=c10d --rdzv-endpoint=localhost:0 launched_env.py --out OUT"""

import argparse
import json
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    env_ok = all(k in os.environ for k in ("MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"))
    dist.init_process_group(backend="gloo")
    res = {
        "env_ok": env_ok,
        "launched": dist.is_torchelastic_launched(),
        "rank_matches": dist.get_rank() == rank and local_rank == rank,
        "world_size": dist.get_world_size(),
        "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"]),
        "backend": dist.get_backend(),
        "initialized": dist.is_initialized(),
        "run_id": os.environ.get("TORCHELASTIC_RUN_ID"),
    }
    ranks = [None] * world_size
    dist.all_gather_object(ranks, (rank, local_rank, os.environ["MASTER_PORT"]))
    res["gathered_ranks"] = [r[:2] for r in ranks]
    res["same_master_port"] = len({r[2] for r in ranks}) == 1

    rng = np.random.default_rng(0)
    model = nn.Linear(4, 2)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(rng.standard_normal((2, 4)).astype(np.float32)))
        model.bias.zero_()
    x = torch.from_numpy(np.random.default_rng(10 + rank).standard_normal((8, 4))
                         .astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(t.item())
    res["losses"] = losses
    res["weight"] = model.weight.detach().flatten().tolist()
    if rank == 0:
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
