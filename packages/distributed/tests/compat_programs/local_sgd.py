"""Local SGD / model averaging written by hand: each rank trains its own copy on its own data
and every few steps the ranks average parameters (per tensor with all_reduce(AVG) on p.data,
and flat through parameters_to_vector / vector_to_parameters with SUM then divide), plus
optimizer state averaged the same way. Then DDP with ZeroRedundancyOptimizer (Adam's state
sharded over the ranks), its consolidated state dict saved by rank 0 and loaded into a plain
Adam. Rank 0 writes OUT/result.json."""

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

    # ZeRO: each rank keeps Adam's state for its share of the parameters only
    model = build()
    ddp = DDP(model)
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01,
                                   betas=(0.8, 0.99))
    zero_losses = []
    for step in range(4):
        zero.zero_grad()
        loss = loss_fn(ddp(x), labels)
        loss.backward()
        zero.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        zero_losses.append(t.item())
    res["zero_losses"] = zero_losses
    res["zero_params"] = parameters_to_vector(model.parameters()).detach()[-8:].tolist()
    n_local = torch.tensor([len(zero.optim.state)])
    dist.all_reduce(n_local)
    res["zero_states_total"] = int(n_local.item())
    res["zero_sharded"] = len(zero.optim.state) < len(list(model.parameters()))
    zero.consolidate_state_dict(to=0)
    if rank == 0:
        sd = zero.state_dict()
        res["zero_state_indices"] = sorted(sd["state"])
        res["zero_group_lr"] = sd["param_groups"][0]["lr"]
        res["zero_group_params"] = sd["param_groups"][0]["params"]
        res["zero_step"] = float(sd["state"][0]["step"])
        plain = torch.optim.Adam(build().parameters(), lr=0.5)
        plain.load_state_dict(sd)
        res["plain_loaded_lr"] = plain.param_groups[0]["lr"]
        res["plain_exp_avg_sq"] = plain.state_dict()["state"][3]["exp_avg_sq"][:4].tolist()
    outcome = None
    if rank == 1:  # it did not receive the consolidated state
        try:
            zero.state_dict()
            outcome = "no error"
        except RuntimeError as e:
            outcome = "consolidate_state_dict" in str(e)
    outcomes = [None] * world_size
    dist.all_gather_object(outcomes, outcome)
    res["unconsolidated_state_dict"] = outcomes[1]
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
