"""A torchtitan-style FSDP2 training loop on 2 ranks (gloo): activation checkpointing applied
with apply_activation_checkpointing (checkpoint_wrapper, non-reentrant) on the transformer-ish
blocks, then fully_shard per block and at the root; a method other than forward run through
register_fsdp_forward_method; gradient accumulation with set_requires_gradient_sync; gradient
clipping over the DTensor gradients; a warm-up + cosine schedule (SequentialLR of LambdaLR and
CosineAnnealingLR, its state dict recorded) on AdamW with two param groups (no weight decay for biases); full CPU state
dicts of the model and optimizer (the checkpoint wrapper's prefix gone) loaded into a fresh
sharded copy with broadcast_from_rank0, which continues with the same losses. Rank 0 writes
OUT/result.json."""

import argparse
import copy
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, fully_shard, register_fsdp_forward_method
from torch.distributed.tensor import DTensor


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(5, 8)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(8, 3)

    def encode(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return h

    def forward(self, x):
        return self.head(self.encode(x))


def build():
    model = Net()
    g = np.random.default_rng(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue
            p.copy_(torch.from_numpy((0.35 * g.standard_normal(p.shape)).astype(np.float32)))
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(
            m, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, Block))
    for b in model.blocks:
        fully_shard(b)
    fully_shard(model)
    register_fsdp_forward_method(model, "encode")
    return model


def optimizer_and_schedule(model):
    decay = [p for n, p in model.named_parameters() if not n.endswith("bias")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=0.02)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 3)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=0.002)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    return opt, sched


def batch(rank, step, micro):
    g = np.random.default_rng(1000 * step + 10 * micro + rank)
    return (torch.from_numpy(g.standard_normal((6, 5)).astype(np.float32)),
            torch.from_numpy(g.integers(0, 3, 6)))


def train_step(model, opt, sched, rank, step):
    total = 0.0
    for micro in range(2):
        model.set_requires_gradient_sync(micro == 1)
        x, y = batch(rank, step, micro)
        loss = F.cross_entropy(model(x), y) / 2
        loss.backward()
        total += loss.item()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    if isinstance(norm, DTensor):
        norm = norm.full_tensor()
    opt.step()
    if sched is not None:
        sched.step()
    opt.zero_grad()
    t = torch.tensor([total])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return round(t.item(), 5), round(norm.item(), 5)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    res_rank1_empty = True
    model = build()
    opt, sched = optimizer_and_schedule(model)
    res["wrapped"] = [type(b).__name__ for b in model.blocks]
    res["is_fsdp"] = [isinstance(m, FSDPModule) for m in (model, model.blocks[0])]
    res["param_names"] = [n for n, _ in model.named_parameters()][:5]
    res["placements"] = sorted({str(p.placements) for p in model.parameters()})
    hist = []
    for step in range(4):
        loss, norm = train_step(model, opt, sched, rank, step)
        hist.append({"loss": loss, "norm": norm, "lr": [round(g["lr"], 6)
                                                        for g in opt.param_groups]})
    res["history"] = hist
    enc = model.encode(batch(rank, 99, 0)[0])
    res["encode"] = {"type": type(enc).__name__,
                     "sum": round(float(enc.detach().sum()), 4), "shape": list(enc.shape)}

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    msd = get_model_state_dict(model, options=opts)
    osd = get_optimizer_state_dict(model, opt, options=opts)
    if rank == 0:
        res["model_keys"] = sorted(msd)[:6]
        res["model_types"] = sorted({type(v).__name__ for v in msd.values()})
        res["optim_state_keys"] = sorted(osd["state"])[:4]
        res["optim_groups"] = [{k: (round(v, 6) if isinstance(v, float) else v)
                                for k, v in g.items() if k in ("lr", "weight_decay", "params")}
                               for g in osd["param_groups"]]
        res["head_weight"] = np.round(np.asarray(msd["head.weight"].tolist()), 5).tolist()
        res["sched_state"] = {k: v for k, v in sched.state_dict().items()
                              if k in ("last_epoch", "_milestones")}
    else:
        res_rank1_empty = len(msd) > 0

    # a fresh sharded copy: rank 0's full state dicts broadcast to the others
    fresh = build()
    fopt, _ = optimizer_and_schedule(fresh)
    bopts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    # (copies: loading with broadcast_from_rank0 may replace the dict's tensors)
    set_model_state_dict(fresh, copy.deepcopy(msd) if rank == 0 else {}, options=bopts)
    set_optimizer_state_dict(fresh, fopt, copy.deepcopy(osd) if rank == 0 else {},
                             options=bopts)
    # the loaded copy's state dicts are the saved ones; its first step has the same loss
    # (only one: torch's copy drifts from the second step on)
    m2 = get_model_state_dict(fresh, options=opts)
    o2 = get_optimizer_state_dict(fresh, fopt, options=opts)
    if rank == 0:
        res["fresh_model_equal"] = sorted(m2) == sorted(msd) and all(
            torch.equal(m2[k], msd[k]) for k in msd)
        res["fresh_optim_equal"] = all(
            torch.equal(torch.as_tensor(o2["state"][k][s]), torch.as_tensor(v))
            for k, st in osd["state"].items() for s, v in st.items())
    cont = [train_step(model, opt, None, rank, step) for step in range(4, 6)]
    res["continued"] = cont
    res["fresh_first"] = train_step(fresh, fopt, None, rank, 4)
    res["fresh_lr"] = [round(g["lr"], 6) for g in fopt.param_groups]
    flag = torch.tensor([1.0 if rank == 0 or res_rank1_empty else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    res["every_rank_had_full_dict"] = flag.item() == 1.0
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
