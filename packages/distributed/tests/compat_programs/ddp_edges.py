"""DDP corners on 2 ranks (gloo) that training scripts hit: ranks that start from different
weights (construction broadcasts rank 0's), tied weights (an embedding shared with the output
layer) and a frozen layer, a parameter only one rank uses (find_unused_parameters=True: the
other rank gets the average, a parameter nobody uses keeps grad None), buffers broadcast from
rank 0 at each forward (broadcast_buffers) or not, the GradBucket a comm hook sees (index,
is_last, parameters, gradients, buffer: one bucket in registration order, then rebuilt in
the order the gradients came), fp16_compress_hook and fp16_compress_wrapper around allreduce_hook, no_sync accumulation against one big batch, and
require_backward_grad_sync. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def init_(module, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy((0.5 * g.standard_normal(p.shape)).astype(np.float32)))
    return module


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.frozen = nn.Linear(4, 4)
        self.out = nn.Linear(4, 6, bias=False)
        self.out.weight = self.emb.weight  # tied
        self.frozen.requires_grad_(False)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, idx):
        self.steps += 1
        return self.out(torch.tanh(self.frozen(self.emb(idx))))


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.h0 = nn.Linear(3, 1)
        self.h1 = nn.Linear(3, 1)
        self.never = nn.Linear(3, 1)

    def forward(self, x, head):
        h = self.body(x)
        return (self.h0 if head == 0 else self.h1)(h)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    # different starting weights: DDP makes them rank 0's; tied weights stay tied
    model = DDP(init_(Tied(), seed=rank))
    res["tied_params"] = [n for n, _ in model.named_parameters()]
    res["start_weight"] = r6(model.module.emb.weight[0])
    res["start_frozen"] = r6(model.module.frozen.weight[0])
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    idx = torch.tensor([[1, 2, 3], [4, 5, 0]]) if rank == 0 else torch.tensor([[2, 2, 1]])
    for _ in range(2):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(idx).reshape(-1, 6), idx.reshape(-1))
        loss.backward()
        opt.step()
    res["tied_after"] = r6(model.module.emb.weight)
    res["still_tied"] = model.module.out.weight is model.module.emb.weight
    res["frozen_grad"] = model.module.frozen.weight.grad is None
    res["steps_buffer"] = model.module.steps.item()

    # a head only rank 1 uses, and one nobody uses
    heads = DDP(init_(TwoHeads(), seed=3), find_unused_parameters=True)
    x = torch.tensor([[1.0, -1.0, 0.5]]) * (rank + 1)
    heads(x, head=rank).sum().backward()
    res["h0_grad"] = r6(heads.module.h0.weight.grad)
    res["h1_grad"] = r6(heads.module.h1.weight.grad)
    res["never_grad"] = heads.module.never.weight.grad is None
    res["body_grad"] = r6(heads.module.body.weight.grad)

    # buffers: broadcast from rank 0 before each forward unless broadcast_buffers=False
    for flag in (True, False):
        bn = DDP(nn.BatchNorm1d(2), broadcast_buffers=flag)
        for step in range(2):
            bn(torch.tensor([[1.0, 2.0], [3.0, 5.0]]) * (rank + step + 1)).sum().backward()
        res[f"running_mean_broadcast_{flag}_{rank}"] = r6(bn.module.running_mean)

    # what a comm hook sees
    seen = []

    def spy(state, bucket):
        seen.append([bucket.index(), bucket.is_last(), len(bucket.parameters()),
                     [list(g.shape) for g in bucket.gradients()], bucket.buffer().numel()])
        return default_hooks.allreduce_hook(state, bucket)

    lin = DDP(init_(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)), seed=5))
    lin.register_comm_hook(None, spy)
    lin(torch.ones(2, 3) * (rank + 1)).sum().backward()
    res["bucket_views"] = seen
    res["spy_grad"] = r6(lin.module[0].weight.grad)

    # compression hooks: the gradients are the rounded averages
    x = torch.tensor([[0.1, 0.2, 0.3]]) * (rank + 1.37)
    for name, hook, state in [
            ("fp16", default_hooks.fp16_compress_hook, None),
            ("fp16_wrap", default_hooks.fp16_compress_wrapper(default_hooks.allreduce_hook),
             dist.group.WORLD)]:  # (torch takes the bf16 hooks on NCCL only)
        m = DDP(init_(nn.Linear(3, 2), seed=7))
        m.register_comm_hook(state, hook)
        (m(x) ** 2).sum().backward()
        res[f"hook_{name}"] = m.module.weight.grad.flatten().tolist()

    # no_sync accumulation equals one batch of both micro-batches
    acc = DDP(init_(nn.Linear(3, 1), seed=9))
    xs = torch.arange(12.0).reshape(4, 3) / 10 + rank
    with acc.no_sync():
        acc(xs[:2]).pow(2).sum().backward()
    res["local_grad_after_no_sync"] = r6(acc.module.weight.grad)
    acc(xs[2:]).pow(2).sum().backward()
    res["accumulated"] = r6(acc.module.weight.grad)
    acc.require_backward_grad_sync = False
    acc.module.weight.grad = None
    acc(xs).pow(2).sum().backward()
    res["require_sync_false"] = r6(acc.module.weight.grad)
    acc.require_backward_grad_sync = True

    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {f"{key}@{r}" if not key.endswith(("_0", "_1")) else key: v
                  for r, e in enumerate(every) for key, v in e.items()}
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
