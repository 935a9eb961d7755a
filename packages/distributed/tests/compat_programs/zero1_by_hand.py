"""ZeRO written by hand as small training frameworks do it, on 2 ranks (gloo): the parameters
flattened into one buffer with torch._utils._flatten_dense_tensors (padded to a multiple of the
world size), gradients flattened and reduce_scatter_tensor'd (AVG) into each rank's shard, the
global gradient norm from an all_reduce of the shards' squared sums and clipping by it, Adam
stepping a shard Parameter, the updated shards all_gather_into_tensor'd and
_unflatten_dense_tensors'd back into the model; each rank's optimizer state saved with
torch.save and loaded again with map_location; the training must
follow a one-process model trained on the whole batch with clip_grad_norm_ and Adam. Rank 0
writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def make_model():
    m = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3, bias=False))  # 63: padded
    g = np.random.default_rng(0)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    return m


def batch(step, rank=None, n=4):
    g = np.random.default_rng(100 + step)
    x = torch.from_numpy(g.standard_normal((2 * n, 5)).astype(np.float32))
    y = torch.from_numpy(g.standard_normal((2 * n, 3)).astype(np.float32))
    if rank is None:
        return x, y
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


class Zero1:
    def __init__(self, model, rank, world, lr, max_norm):
        self.model, self.rank, self.world, self.max_norm = model, rank, world, max_norm
        self.params = [p for p in model.parameters()]
        flat = _flatten_dense_tensors([p.detach() for p in self.params])
        self.numel = flat.numel()
        self.padded = -(-self.numel // world) * world
        self.shard_n = self.padded // world
        full = torch.zeros(self.padded)
        full[:self.numel] = flat
        lo = rank * self.shard_n
        self.shard = nn.Parameter(full[lo:lo + self.shard_n].clone())
        self.opt = torch.optim.Adam([self.shard], lr=lr, betas=(0.8, 0.95), eps=1e-6)

    def step(self):
        grads = _flatten_dense_tensors([p.grad for p in self.params])
        gfull = torch.zeros(self.padded)
        gfull[:self.numel] = grads
        gshard = torch.empty(self.shard_n)
        dist.reduce_scatter_tensor(gshard, gfull, op=dist.ReduceOp.AVG)
        sq = gshard.pow(2).sum()
        dist.all_reduce(sq)
        norm = sq.sqrt()
        coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
        self.shard.grad = gshard * coef
        self.opt.step()
        out = torch.empty(self.padded)
        dist.all_gather_into_tensor(out, self.shard.detach())
        new = _unflatten_dense_tensors(out[:self.numel], [p.detach() for p in self.params])
        with torch.no_grad():
            for p, v in zip(self.params, new):
                p.copy_(v)
                p.grad = None
        return norm.item()


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}

    model = make_model()
    z = Zero1(model, rank, world, lr=0.05, max_norm=0.5)
    res["numel"], res["padded"], res["shard_n"] = z.numel, z.padded, z.shard_n
    ref = make_model()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    losses, ref_losses, norms, ref_norms = [], [], [], []
    for step in range(4):
        x, y = batch(step, rank)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        norms.append(round(z.step(), 5))
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
        # one process on the whole batch (the same mean of the two halves)
        X, Y = batch(step)
        rl = F.mse_loss(ref(X), Y)
        rl.backward()
        ref_norms.append(round(nn.utils.clip_grad_norm_(ref.parameters(), 0.5).item(), 5))
        ref_opt.step()
        ref_opt.zero_grad()
        ref_losses.append(round(rl.item(), 6))
    res["losses"], res["ref_losses"] = losses, ref_losses
    res["norms"], res["ref_norms"] = norms, ref_norms
    res["weights"] = [r6(p) for p in model.parameters()]
    res["matches_ref"] = all(torch.allclose(p, q, atol=1e-5) for p, q in
                             zip(model.parameters(), ref.parameters()))

    # the shard's optimizer state through torch.save / torch.load(map_location)
    path = os.path.join(out, f"zero_shard_{rank}.pt")
    torch.save({"shard": z.shard.detach(), "opt": z.opt.state_dict(), "rank": rank}, path)
    dist.barrier()
    other = torch.load(os.path.join(out, f"zero_shard_{1 - rank}.pt"), map_location="cpu",
                       weights_only=True)
    res["other_rank"] = other["rank"]
    res["other_state_keys"] = sorted(other["opt"]["state"][0])
    res["other_step"] = float(other["opt"]["state"][0]["step"])
    res["other_exp_avg_sq_shape"] = list(other["opt"]["state"][0]["exp_avg_sq"].shape)
    fresh = torch.optim.Adam([nn.Parameter(torch.zeros(z.shard_n))], lr=0.05)
    fresh.load_state_dict(z.opt.state_dict())
    res["reloaded_betas"] = list(fresh.param_groups[0]["betas"])
    res["reloaded_exp_avg"] = r6(fresh.state[fresh.param_groups[0]["params"][0]]["exp_avg"][:4])
    pieces = torch.cat([other["shard"], z.shard.detach()] if rank == 1 else
                       [z.shard.detach(), other["shard"]])
    res["pieces_make_model"] = bool(torch.equal(
        pieces[:z.numel], _flatten_dense_tensors([p.detach() for p in model.parameters()])))

    results = [None] * world
    dist.all_gather_object(results, res)
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(results, f)
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
