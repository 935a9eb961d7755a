"""A sequence-split activation (Shard(1) of (B, S, H)) through reshapes and a linear layer on
2 ranks (gloo): flatten / view / reshape of the split dim with the dims before it give a
_StridedShard with no collective, view back gives Shard(1), elementwise ops and mm keep the
strided split, F.linear / @ keep Shard(1) (forward and backward), redistribute from and to it
(even and uneven splits). Records values, placements, local shapes and CommDebugMode counts.
Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode


def r5(t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    g = np.random.default_rng(5)
    res = {}
    B, S, H, OUT = 3, 4, 5, 6
    x = torch.from_numpy(g.standard_normal((B, S, H)))
    w = torch.from_numpy(g.standard_normal((OUT, H)))
    dx = distribute_tensor(x, mesh, [Shard(1)])
    dw = distribute_tensor(w, mesh, [Replicate()])

    def step(name, fn, ref):
        with CommDebugMode() as cm:
            y = fn()
        res[name] = {"placements": [repr(p) for p in y.placements],
                     "local_shape": list(y.to_local().shape), "counts": counts(cm),
                     "value": r5(y), "same": bool(torch.allclose(y.full_tensor(), ref))}
        return y

    y = step("flatten", lambda: dx.flatten(0, 1), x.flatten(0, 1))
    step("view", lambda: dx.view(B * S, H), x.view(B * S, H))
    step("reshape", lambda: dx.reshape(-1, H), x.reshape(-1, H))
    step("unflatten_back", lambda: y.view(B, S, H), x)
    step("unflatten", lambda: y.unflatten(0, (B, S)), x)
    step("transpose", lambda: y.t(), x.flatten(0, 1).t())
    rows = distribute_tensor(x.flatten(0, 1), mesh, [Shard(0)])
    step("add_shard0", lambda: y + rows, 2 * x.flatten(0, 1))
    bias = distribute_tensor(torch.ones(OUT, dtype=torch.float64), mesh, [Replicate()])
    step("addmm", lambda: torch.addmm(bias, y, dw.t()), x.flatten(0, 1) @ w.t() + 1)
    step("view_merge_after", lambda: y.view(B, S * H), x.view(B, S * H))
    r = step("relu", lambda: y.relu(), x.flatten(0, 1).relu())
    step("add_self", lambda: r + y * 2.0, x.flatten(0, 1).relu() + x.flatten(0, 1) * 2.0)
    step("mm", lambda: torch.mm(y, dw.t()), x.flatten(0, 1) @ w.t())
    step("sum_dim0", lambda: y.sum(0), x.flatten(0, 1).sum(0))
    step("to_replicate", lambda: y.redistribute(mesh, [Replicate()]), x.flatten(0, 1))
    step("to_shard0", lambda: y.redistribute(mesh, [Shard(0)]), x.flatten(0, 1))

    # linear with grad: autograd's view + mm + view
    dx2 = distribute_tensor(x, mesh, [Shard(1)]).requires_grad_()
    dw2 = distribute_tensor(w, mesh, [Replicate()]).requires_grad_()
    o = step("linear", lambda: F.linear(dx2, dw2), F.linear(x, w))
    step("matmul", lambda: dx2 @ dw2.t(), x @ w.t())
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    (F.linear(xr, wr) * torch.arange(OUT, dtype=torch.float64)).sum().backward()
    scale = distribute_tensor(torch.arange(OUT, dtype=torch.float64), mesh, [Replicate()])
    with CommDebugMode() as cm:
        (o * scale).sum().backward()
    res["linear_backward"] = {
        "counts": counts(cm),
        "x_grad_placements": [repr(p) for p in dx2.grad.placements],
        "w_grad_placements": [repr(p) for p in dw2.grad.placements],
        "x_grad": r5(dx2.grad), "w_grad": r5(dw2.grad),
        "x_grad_ok": bool(torch.allclose(dx2.grad.full_tensor(), xr.grad)),
        "w_grad_ok": bool(torch.allclose(dw2.grad.full_tensor(), wr.grad))}

    # an uneven split (S = 5 over 2 ranks)
    x5 = torch.from_numpy(g.standard_normal((3, 5, 4)))
    d5 = distribute_tensor(x5, mesh, [Shard(1)])
    y5 = step("uneven_flatten", lambda: d5.flatten(0, 1), x5.flatten(0, 1))
    step("uneven_back", lambda: y5.view(3, 5, 4), x5)
    step("mean0", lambda: y.mean(0), x.flatten(0, 1).mean(0))
    step("shard0_add", lambda: rows + y, 2 * x.flatten(0, 1))
    step("uneven_mean0", lambda: y5.mean(0), x5.flatten(0, 1).mean(0))
    step("uneven_slice", lambda: y5[1:7], x5.flatten(0, 1)[1:7])
    step("uneven_to_replicate", lambda: y5.redistribute(mesh, [Replicate()]), x5.flatten(0, 1))
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
