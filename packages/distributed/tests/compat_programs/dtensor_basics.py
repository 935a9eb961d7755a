"""DTensor (torch.distributed.tensor) on a 1-D mesh of 2 ranks, as tensor-parallel code uses it:
distribute_tensor with Shard / Replicate, from_local / to_local / full_tensor, redistribute
between Shard, Replicate and Partial, elementwise math and in-place updates on sharded tensors,
reductions (sum, mean, norms, max) that combine over the ranks, row- and column-parallel
matrix products, gradients through to_local / full_tensor / from_local, and an optimizer
stepping DTensor parameters; errors for ops without a sharding rule. Rank 0 writes
OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def r5(t):
    return np.round(np.asarray(t.tolist(), dtype=np.float64), 5).tolist()


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    rng = np.random.default_rng(0)
    full = torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32))
    res = {}

    d = distribute_tensor(full, mesh, [Shard(0)])
    res["shard0"] = [list(d.shape), str(d.placements), gathered(list(d.to_local().shape)),
                     r5(d.full_tensor())]
    d1 = distribute_tensor(full, mesh, [Shard(1)])
    res["shard1_local"] = gathered(r5(d1.to_local()))
    rep = distribute_tensor(full, mesh, [Replicate()])
    res["replicate"] = [str(rep.placements), r5(rep.to_local())]
    res["repr_type"] = [type(d).__name__, d.dtype == torch.float32, d.device.type]

    # redistribute
    res["s0_to_rep"] = r5(d.redistribute(mesh, [Replicate()]).to_local())
    res["rep_to_s1"] = gathered(r5(rep.redistribute(mesh, [Shard(1)]).to_local()))
    res["s0_to_s1"] = gathered(r5(d.redistribute(mesh, [Shard(1)]).to_local()))
    part = DTensor.from_local(torch.full((2, 2), float(rank + 1)), mesh, [Partial()])
    res["partial_full"] = r5(part.full_tensor())
    res["partial_to_s0"] = gathered(r5(part.redistribute(mesh, [Shard(0)]).to_local()))

    # from_local: global shape from the local one
    loc = torch.arange(6.0).reshape(3, 2) + 10 * rank
    fl = DTensor.from_local(loc, mesh, [Shard(0)])
    res["from_local"] = [list(fl.shape), r5(fl.full_tensor())]

    # elementwise and in place on sharded tensors
    e = d * 2 + 1
    res["pointwise"] = [str(e.placements), r5(e.full_tensor())]
    e.mul_(0.5).add_(d)
    res["inplace"] = r5(e.full_tensor())
    res["unary"] = r5(torch.tanh(d).full_tensor())
    z = torch.zeros_like(d)
    res["zeros_like"] = [str(z.placements), gathered(list(z.to_local().shape))]
    scale = distribute_tensor(torch.tensor(3.0), mesh, [Replicate()])
    res["times_replicated_scalar"] = r5((d * scale).full_tensor())

    # reductions
    s = d.sum()
    res["sum"] = [str(s.placements), round(s.full_tensor().item(), 4)]
    res["mean"] = round(d.mean().full_tensor().item(), 4)
    res["norm"] = round(torch.linalg.vector_norm(d).full_tensor().item(), 4)
    res["norm_inf"] = round(torch.linalg.vector_norm(d, float("inf")).full_tensor().item(), 4)
    res["max"] = round(d.max().full_tensor().item(), 4)
    res["sum_dim1"] = [str(d.sum(1).placements), r5(d.sum(1).full_tensor())]
    res["sum_dim0"] = r5(d.sum(0).full_tensor())

    # matrix products: row- and column-parallel
    w = torch.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
    x_rows = distribute_tensor(full, mesh, [Shard(0)])
    w_rep = distribute_tensor(w, mesh, [Replicate()])
    y = torch.mm(x_rows, w_rep)
    res["mm_rows"] = [str(y.placements), r5(y.full_tensor())]
    w_cols = distribute_tensor(w, mesh, [Shard(1)])
    y2 = torch.mm(distribute_tensor(full, mesh, [Replicate()]), w_cols)
    res["mm_cols"] = [str(y2.placements), r5(y2.full_tensor())]
    y3 = torch.mm(distribute_tensor(full, mesh, [Shard(1)]), distribute_tensor(w, mesh, [Shard(0)]))
    res["mm_partial"] = [str(y3.placements), r5(y3.full_tensor())]

    # gradients
    p = distribute_tensor(full.clone(), mesh, [Shard(0)]).requires_grad_()
    (p.full_tensor() ** 2).sum().backward()
    res["grad_full_tensor"] = [str(p.grad.placements), r5(p.grad.full_tensor())]
    leaf = torch.ones(3, 2, requires_grad=True)
    g = DTensor.from_local(leaf, mesh, [Shard(0)])
    (g * (rank + 2)).to_local().sum().backward()
    res["grad_from_local"] = gathered(r5(leaf.grad))

    # an optimizer on DTensor parameters
    param = torch.nn.Parameter(distribute_tensor(full.clone(), mesh, [Shard(0)]))
    opt = torch.optim.Adam([param], lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        loss = (param * param).sum()
        loss.full_tensor().backward() if isinstance(loss, DTensor) else loss.backward()
        opt.step()
    res["adam"] = [type(param).__name__, r5(param.full_tensor()),
                   type(opt.state[param]["exp_avg"]).__name__]

    # ops along the other dims stay sharded: softmax, layer norm, a column-split embedding
    sm = torch.nn.functional.softmax(d, dim=1)
    res["softmax_dim1"] = [str(sm.placements), r5(sm.full_tensor())]
    xs = distribute_tensor(full.clone(), mesh, [Shard(0)]).requires_grad_()
    ln = torch.nn.functional.layer_norm(xs, (4,))
    scale = distribute_tensor(torch.arange(1.0, 5.0), mesh, [Replicate()])
    (ln * ln.detach() * scale).sum().full_tensor().backward()
    res["layer_norm"] = [str(ln.placements), r5(ln.full_tensor()), str(xs.grad.placements),
                         r5(xs.grad.full_tensor())]
    table = distribute_tensor(torch.from_numpy(rng.standard_normal((6, 4)).astype(np.float32)),
                              mesh, [Shard(1)]).requires_grad_()
    ids = distribute_tensor(torch.tensor([[1, 5], [0, 1]]), mesh, [Replicate()])
    emb = torch.nn.functional.embedding(ids, table)
    emb.full_tensor().pow(2).sum().backward()
    res["embedding_cols"] = [str(emb.placements), r5(emb.full_tensor()),
                             str(table.grad.placements), r5(table.grad.full_tensor())]
    try:
        torch.nn.functional.softmax(d, dim=0).full_tensor()
        res["softmax_dim0"] = "ok"
    except Exception as exc:  # noqa: BLE001
        res["softmax_dim0"] = type(exc).__name__
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
