"""Sequence parallelism and loss parallelism as in PyTorch's TP tutorial, on 2 ranks: a block
whose LayerNorm runs on sequence-split activations (SequenceParallel), a Colwise layer that
gathers the sequence (input_layouts=Shard(1)), a Rowwise layer that scatters it back
(output_layouts=Shard(1)), a vocabulary head left as a class-split DTensor, and the cross
entropy computed with loss_parallel, trained with SGD; then loss_parallel on its own (mean /
sum / none, ignore_index, class weights, 3-D logits) with gradients, and PrepareModuleOutput.
Rank 0 writes OUT/result.json."""

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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(6)
        self.up = nn.Linear(6, 8)
        self.down = nn.Linear(8, 6)
        self.head = nn.Linear(6, 10, bias=False)

    def forward(self, x):
        h = self.norm(x)
        h = self.down(torch.relu(self.up(h)))
        return self.head(h)


def init(model, seed):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    res = {}

    model = parallelize_module(init(Block(), 1), mesh, {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
        "head": ColwiseParallel(input_layouts=Shard(1), use_local_output=False),
    })
    res["params"] = [str(model.norm.weight.placements), str(model.up.weight.placements),
                     str(model.down.bias.placements), str(model.head.weight.placements)]
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for step in range(3):
        rng = np.random.default_rng(60 + step)
        x = torch.from_numpy(rng.standard_normal((2, 4, 6)).astype(np.float32))
        labels = torch.from_numpy(rng.integers(0, 10, (2, 4)))
        mine = x[:, 2 * rank:2 * rank + 2]  # this rank's half of the sequence
        opt.zero_grad()
        logits = model(mine)
        with loss_parallel():
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1))
            loss.backward()
        opt.step()
        losses.append(round(loss.full_tensor().item(), 6))
        res.setdefault("logits", [type(logits).__name__, str(logits.placements),
                                  list(logits.shape), list(logits.to_local().shape)])
        res.setdefault("loss", [type(loss).__name__, str(loss.placements)])
    res["losses"] = losses
    res["grads"] = {n: [str(p.grad.placements), r5(p.grad.full_tensor())]
                    for n, p in model.named_parameters()}
    res["final_head"] = r5(model.head.weight.full_tensor())

    # loss_parallel on its own
    rng = np.random.default_rng(7)
    full = torch.from_numpy(rng.standard_normal((5, 7)).astype(np.float32))
    target = torch.tensor([0, 6, 3, 3, 5])
    weight = torch.from_numpy(rng.uniform(0.5, 2.0, 7).astype(np.float32))
    cases = {"mean": {}, "sum": {"reduction": "sum"}, "none": {"reduction": "none"},
             "ignore": {"ignore_index": 3}, "weight": {"weight": weight},
             "weight_ignore_sum": {"weight": weight, "ignore_index": 6, "reduction": "sum"}}
    for name, kw in cases.items():
        logits = distribute_tensor(full.clone(), mesh, [Shard(1)]).requires_grad_()
        with loss_parallel():
            loss = F.cross_entropy(logits, target, **kw)
            loss.sum().backward() if loss.ndim else loss.backward()
        res[f"lp_{name}"] = [str(loss.placements), r5(loss.full_tensor()),
                             str(logits.grad.placements), r5(logits.grad.full_tensor())]
    full3 = torch.from_numpy(rng.standard_normal((2, 6, 3)).astype(np.float32))
    target3 = torch.tensor([[1, 5, 0], [2, 2, 4]])
    logits3 = distribute_tensor(full3.clone(), mesh, [Shard(1)]).requires_grad_()
    with loss_parallel():
        loss3 = F.cross_entropy(logits3, target3)
        loss3.backward()
    res["lp_3d"] = [r5(loss3.full_tensor()), r5(logits3.grad.full_tensor())]
    ls = distribute_tensor(full.clone(), mesh, [Shard(1)])
    with loss_parallel():
        lsm = F.log_softmax(ls, dim=1)
    res["lp_log_softmax"] = [str(lsm.placements), gathered(r5(lsm.to_local()))]

    lin = init(nn.Linear(6, 4), 3)
    parallelize_module(lin, mesh, PrepareModuleOutput(output_layouts=Shard(0),
                                                      desired_output_layouts=Replicate()))
    y = lin(torch.ones(2, 6) * (rank + 1))
    res["prepare_output"] = [type(y).__name__ if not isinstance(y, DTensor) else "DTensor",
                             list(y.shape), r5(y)]
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
