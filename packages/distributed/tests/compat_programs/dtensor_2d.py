"""DTensor on a 2-D device mesh of 4 ranks (2 x 2), as 2-D parallel code uses it: placements
per mesh dimension ((Shard(0), Shard(1)), a dim sharded twice, Replicate and Partial mixed),
uneven pieces, redistribute between them, elementwise math, reductions over sharded dims,
matrix products, softmax / layer norm with gradients, and HSDP: fully_shard on the 2-D mesh
(replicated over "dp_replicate", sharded over "dp_shard") training a small model like one
process. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def r5(t):
    return np.round(np.asarray(t.tolist(), dtype=np.float64), 5).tolist()


def build():
    model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3))
    rng = np.random.default_rng(5)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def batch(step):
    rng = np.random.default_rng(100 + step)
    x = torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((8, 3)).astype(np.float32))
    return x, y


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    rng = np.random.default_rng(0)
    full = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
    res = {}

    layouts = {"s0_s1": [Shard(0), Shard(1)], "s0_s0": [Shard(0), Shard(0)],
               "r_s0": [Replicate(), Shard(0)], "s1_r": [Shard(1), Replicate()]}
    ds = {k: distribute_tensor(full, mesh, v) for k, v in layouts.items()}
    for k, d in ds.items():
        res[f"layout_{k}"] = [str(d.placements), list(d.shape),
                              gathered(list(d.to_local().shape)), r5(d.full_tensor())]
    res["local_s0_s0"] = gathered(r5(ds["s0_s0"].to_local()))

    # redistribute between 2-D layouts
    pairs = [("s0_s1", [Shard(1), Shard(0)]), ("s0_s0", [Replicate(), Shard(0)]),
             ("s0_s0", [Shard(0), Replicate()]), ("s0_s1", [Replicate(), Replicate()]),
             ("r_s0", [Shard(0), Shard(0)]), ("s1_r", [Shard(0), Shard(1)])]
    for i, (k, target) in enumerate(pairs):
        r = ds[k].redistribute(mesh, target)
        res[f"redistribute_{i}"] = [str(r.placements), gathered(r5(r.to_local()))]
    part = DTensor.from_local(torch.full((2, 3), float(rank + 1)), mesh, [Partial(), Shard(0)])
    res["partial_shard"] = [list(part.shape), r5(part.full_tensor())]
    res["partial_to_s1"] = gathered(r5(part.redistribute(mesh, [Shard(1), Shard(0)]).to_local()))

    # elementwise: shards with shards, with replicated operands, in place
    d = ds["s0_s1"]
    rep = distribute_tensor(full.flip(0).contiguous(), mesh, [Replicate(), Replicate()])
    e = d * 2 + rep
    res["pointwise"] = [str(e.placements), r5(e.full_tensor())]
    row = distribute_tensor(torch.arange(6.0), mesh, [Replicate(), Shard(0)])
    res["broadcast_row"] = [str((d - row).placements), r5((d - row).full_tensor())]
    e.mul_(0.5).add_(d)
    res["inplace"] = r5(e.full_tensor())

    # reductions: partial over the mesh dims that shard a reduced dim
    for k in ("s0_s1", "s0_s0"):
        x = ds[k]
        s = x.sum()
        res[f"sum_{k}"] = [str(s.placements), round(s.full_tensor().item(), 4)]
        s0 = x.sum(0)
        res[f"sum0_{k}"] = [str(s0.placements), r5(s0.full_tensor())]
        s1 = x.sum(1)
        res[f"sum1_{k}"] = [str(s1.placements), r5(s1.full_tensor())]
        res[f"mean_{k}"] = round(x.mean().full_tensor().item(), 4)
        res[f"norm_{k}"] = round(torch.linalg.vector_norm(x).full_tensor().item(), 4)
        res[f"max_{k}"] = round(x.max().full_tensor().item(), 4)

    # matrix products
    w = torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32))
    y = torch.mm(distribute_tensor(full, mesh, [Shard(0), Replicate()]),
                 distribute_tensor(w, mesh, [Replicate(), Shard(1)]))
    res["mm_rows_cols"] = [str(y.placements), r5(y.full_tensor())]
    y2 = torch.mm(distribute_tensor(full, mesh, [Shard(1), Shard(0)]),
                  distribute_tensor(w, mesh, [Shard(0), Replicate()]))
    res["mm_partial_rows"] = [str(y2.placements), r5(y2.full_tensor())]
    lin = torch.nn.functional.linear(distribute_tensor(full, mesh, [Shard(0), Replicate()]),
                                     distribute_tensor(w.t().contiguous(), mesh,
                                                       [Replicate(), Shard(0)]),
                                     distribute_tensor(torch.arange(4.0), mesh,
                                                       [Replicate(), Shard(0)]))
    res["linear"] = [str(lin.placements), r5(lin.full_tensor())]

    # softmax / layer norm along unsharded dims, with gradients
    xs = distribute_tensor(full.clone(), mesh, [Shard(0), Replicate()]).requires_grad_()
    sm = torch.softmax(xs, dim=1)
    ln = torch.nn.functional.layer_norm(xs, (6,))
    (sm * ln).sum().full_tensor().backward()
    res["softmax"] = [str(sm.placements), r5(sm.full_tensor())]
    res["layer_norm"] = [str(ln.placements), r5(ln.full_tensor())]
    res["grad"] = [str(xs.grad.placements), r5(xs.grad.full_tensor())]
    tb = distribute_tensor(full.clone(), mesh, [Shard(0), Shard(1)]).requires_grad_()
    (tb.exp() * tb).mean().full_tensor().backward()
    res["grad_2d"] = [str(tb.grad.placements), r5(tb.grad.full_tensor())]

    # HSDP: replicate over dim 0, shard over dim 1
    hsdp = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp_replicate", "dp_shard"))
    model = build()
    fully_shard(model, mesh=hsdp)
    first = model[0].weight
    res["hsdp_param"] = [str(first.placements), list(first.shape),
                         gathered(list(first.to_local().shape))]
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(3):
        x, yb = batch(step)
        mine = slice(2 * rank, 2 * rank + 2)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[mine]), yb[mine])
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    res["hsdp_losses"] = losses
    g = model[2].weight.grad
    res["hsdp_grad"] = [str(g.placements), r5(g.full_tensor())]
    res["hsdp_weight"] = r5(model[2].weight.full_tensor())
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
