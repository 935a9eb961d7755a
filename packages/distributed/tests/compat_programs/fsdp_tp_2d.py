"""2-D parallelism as in PyTorch's FSDP2 + TP tutorial, on 4 ranks (a 2 x 2 mesh: "dp" x "tp"):
tensor parallelism inside each dp group (Colwise / Rowwise layers on mesh["tp"]), then
fully_shard over mesh["dp"], training with AdamW and clip_grad_norm_ on each dp rank's part of
the batch. Checks what torch shows: the parameters' placements on the 2-D mesh, local shapes,
gradients, optimizer state, losses matching one-process training, full weights, and the state
dict. Rank 0 writes OUT/result.json."""

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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(6, 8)
        self.down = nn.Linear(8, 6)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def build():
    model = nn.Sequential(MLP(), MLP())
    rng = np.random.default_rng(21)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def batch(step):
    rng = np.random.default_rng(300 + step)
    x = torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32))
    return x, y


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def parallel_model(mesh):
    model = build()
    for block in model:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(),
                                               "down": RowwiseParallel()})
    for block in model:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    model = parallel_model(mesh)
    res = {"params": {n: [str(p.placements), list(p.shape), gathered(list(p.to_local().shape))]
                      for n, p in model.named_parameters()}}
    opt = torch.optim.AdamW(model.parameters(), lr=0.02)
    losses, norms = [], []
    dp = mesh["dp"].get_local_rank()
    for step in range(3):
        x, y = batch(step)
        mine = slice(4 * dp, 4 * dp + 4)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[mine]), y[mine])
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        norms.append(round(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm), 5))
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    res["losses"], res["norms"] = losses, norms
    g = model[0].up.weight.grad
    res["grad"] = [type(g).__name__, str(g.placements), r5(g.full_tensor())]
    st = opt.state[model[1].down.weight]
    res["optim_state"] = [str(st["exp_avg"].placements), r5(st["exp_avg"].full_tensor())]
    res["weights"] = {n: r5(p.full_tensor()) for n, p in model.named_parameters()}
    res["state_dict"] = {k: [type(v).__name__, list(v.shape)] for k, v in model.state_dict().items()}
    with torch.no_grad():
        x, _ = batch(9)
        res["eval"] = r5(model(x))
    # a distributed checkpoint of the 2-D sharded model, loaded into a fresh one
    path = os.path.join(out, "ckpt")
    dcp.save(model.state_dict(), checkpoint_id=path)
    fresh = parallel_model(mesh)
    sd = fresh.state_dict()
    dcp.load(sd, checkpoint_id=path)
    fresh.load_state_dict(sd)
    with torch.no_grad():
        res["dcp_reload_equal"] = bool(torch.equal(fresh(x), model(x)))
        res["dcp_weight"] = r5(fresh[1].up.weight.full_tensor())
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
    mp.spawn(worker, args=(4, free_port(), args.out), nprocs=4, join=True)
