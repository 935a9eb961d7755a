"""DDP options real training scripts combine, on 2 ranks (gloo): gradient accumulation under
no_sync() with find_unused_parameters=True and a branch some micro-batches skip,
gradient_as_bucket_view=True with a small bucket_cap_mb, an fp16 gradient compression
hook (the rounded gradients recorded), a hook of one's own returning a future,
static_graph=True with activation checkpointing (torch.utils.checkpoint), dict outputs,
ZeroRedundancyOptimizer with consolidate_state_dict, broadcast_buffers=False, and a
checkpoint of the DDP module loaded into a plain model with
consume_prefix_in_state_dict_if_present. Rank 0 writes OUT/result.json."""

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
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def init_(module, seed, scale=0.5):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy((scale * g.standard_normal(p.shape)).astype(np.float32)))
    return module


def batch(seed, n=4, d=5):
    g = np.random.default_rng(seed)
    return (torch.from_numpy(g.standard_normal((n, d)).astype(np.float32)),
            torch.from_numpy(g.standard_normal((n, 2)).astype(np.float32)))


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 6)
        self.b = nn.Linear(6, 2)
        self.side = nn.Linear(6, 2)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, use_side):
        self.calls += 1
        h = torch.tanh(self.a(x))
        out = self.b(h)
        if use_side:
            out = out + self.side(h)
        return {"out": out, "hidden": h}


class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(5, 5), nn.GELU()) for _ in range(3)])
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        for blk in self.blocks:
            x = x + checkpoint(blk, x, use_reentrant=False)
        return self.head(x)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}

    # 1. accumulation over 3 micro-batches (2 under no_sync), the side branch used only in one
    model = DDP(init_(Branchy(), 0), find_unused_parameters=True, gradient_as_bucket_view=True,
                bucket_cap_mb=0.0001, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hist = []
    for step in range(2):
        for micro in range(3):
            x, y = batch(100 * step + 10 * micro + rank)
            use_side = micro == 1 if step == 0 else False
            if micro < 2:
                with model.no_sync():
                    o = model(x, use_side)
                    F.mse_loss(o["out"], y).backward()
                if micro == 0:
                    hist.append(r6(model.module.a.bias.grad))  # local, not averaged yet
            else:
                o = model(x, use_side)
                F.mse_loss(o["out"], y).backward()
        hist.append({"a_bias": r6(model.module.a.bias.grad),
                     "side_w": None if model.module.side.weight.grad is None
                     else r6(model.module.side.weight.grad)})
        opt.step()
        opt.zero_grad()
    res["accumulate"] = hist
    res["accumulate_weight"] = r6(model.module.b.weight)
    res["calls_buffer"] = model.module.calls.item()
    res["hidden_shape"] = list(o["hidden"].shape)

    # 2. compression hooks: the averaged gradients rounded through fp16 (not bf16's: torch
    # builds without CUDA 11+ / NCCL 2.10+ refuse it whatever the backend)
    for name, hook in (("fp16", default_hooks.fp16_compress_hook),):
        m = DDP(init_(nn.Linear(5, 3), 1, scale=0.37))
        m.register_comm_hook(dist.group.WORLD, hook)
        x, y = batch(7 + rank, d=5)
        x = x * 1.37
        F.mse_loss(m(x), torch.zeros(4, 3) + 0.3 * rank).backward()
        res[f"{name}_grad"] = r6(m.module.weight.grad)
        plain = init_(nn.Linear(5, 3), 1, scale=0.37)
        F.mse_loss(plain(x), torch.zeros(4, 3) + 0.3 * rank).backward()
        g = plain.weight.grad.clone()
        dist.all_reduce(g)
        res[f"{name}_exact"] = r6(g / world_size)

    # 3. a hook of one's own: sum, not average, through the bucket's future
    def sum_hook(state, bucket):
        state["calls"] += 1
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0] * state["scale"])

    m = DDP(init_(nn.Linear(5, 2), 2))
    state = {"calls": 0, "scale": 0.25}
    m.register_comm_hook(state, sum_hook)
    x, y = batch(20 + rank)
    F.mse_loss(m(x), y).backward()
    res["own_hook"] = {"calls": state["calls"], "grad": r6(m.module.weight.grad)}

    # 4. static_graph with activation checkpointing, three steps of Adam
    deep = DDP(init_(Deep(), 3), static_graph=True)
    opt = torch.optim.Adam(deep.parameters(), lr=0.01)
    losses = []
    for step in range(3):
        x, y = batch(30 + 2 * step + rank)
        loss = F.mse_loss(deep(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    res["static_checkpointed"] = {"losses": losses, "head": r6(deep.module.head.weight)}

    # 5. ZeroRedundancyOptimizer: each rank steps its share, the whole state on rank 0
    zm = DDP(init_(nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2)), 4))
    zopt = ZeroRedundancyOptimizer(zm.parameters(), optimizer_class=torch.optim.AdamW, lr=0.05)
    for step in range(2):
        x, y = batch(50 + step + rank)
        F.mse_loss(zm(x), y).backward()
        zopt.step()
        zopt.zero_grad()
    zopt.consolidate_state_dict(to=0)
    res["zero"] = {"weight": r6(zm.module[2].weight)}
    if rank == 0:
        zsd = zopt.state_dict()
        res["zero"]["state_keys"] = sorted(zsd["state"])
        res["zero"]["exp_avg_0"] = r6(zsd["state"][0]["exp_avg"])
        res["zero"]["groups"] = [sorted(k for k in g if k != "params") for g in
                                 zsd["param_groups"]]

    # 6. checkpoint of the DDP module: keys prefixed "module.", loaded into a plain model
    path = os.path.join(out, "ddp.pt")
    if rank == 0:
        torch.save(zm.state_dict(), path)
    dist.barrier()
    sd = torch.load(path, map_location="cpu")
    res["saved_keys"] = sorted(sd)
    consume_prefix_in_state_dict_if_present(sd, "module.")
    plain = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
    plain.load_state_dict(sd)
    res["plain_keys"] = sorted(sd)
    res["plain_out"] = r6(plain(batch(9)[0]))
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
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
