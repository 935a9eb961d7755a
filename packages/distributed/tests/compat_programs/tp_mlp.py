"""Tensor parallelism as in PyTorch's TP tutorial: 2 ranks split an MLP with
parallelize_module ({"net1": ColwiseParallel(), "net2": RowwiseParallel()}, the same input on
both ranks), train it with SGD on 2-D and 3-D inputs, and check what torch shows: DTensor
parameters and their layouts, local shapes, plain outputs, gradients; a Colwise layer that
gathers its output (output_layouts=Replicate()); a plan with a wildcard; an embedding split
by rows. Rank 0 writes OUT/result.json."""

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
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(6, 8)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def init(model, seed):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    model = parallelize_module(init(MLP(), 1), mesh,
                               {"net1": ColwiseParallel(), "net2": RowwiseParallel()})
    w1, w2 = model.net1.weight, model.net2.weight
    res = {"params": [type(w1).__name__, str(w1.placements), list(w1.to_local().shape),
                      str(model.net1.bias.placements), str(w2.placements),
                      str(model.net2.bias.placements)]}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(3):
        rng = np.random.default_rng(40 + step)  # the same input on every rank
        shape = (5, 6) if step < 2 else (2, 3, 6)
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
        opt.zero_grad()
        y = model(x)
        loss = y.pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 6))
        res.setdefault("out_is_plain", isinstance(y, torch.Tensor) and not hasattr(y, "placements"))
        res.setdefault("out_shape", list(y.shape))
    res["losses"] = losses
    res["grad_w1"] = [type(w1.grad).__name__, str(w1.grad.placements), r5(w1.grad.full_tensor())]
    res["final_w2"] = r5(w2.full_tensor())

    gathered = parallelize_module(init(nn.Linear(6, 4), 2), mesh,
                                  ColwiseParallel(output_layouts=Replicate()))
    x = torch.ones(3, 6)
    res["colwise_replicate"] = [list(gathered(x).shape), r5(gathered(x))]

    blocks = nn.ModuleDict({"a": init(MLP(), 10), "b": init(MLP(), 11)})
    parallelize_module(blocks, mesh, {"*.net1": ColwiseParallel(), "*.net2": RowwiseParallel()})
    res["wildcard"] = [str(blocks["b"].net1.weight.placements),
                       [r5(blocks[k](torch.ones(2, 6))) for k in ("a", "b")]]

    emb = init(nn.Embedding(10, 4), 3)
    parallelize_module(emb, mesh, RowwiseParallel())
    ids = torch.tensor([[1, 7, 3], [9, 0, 5]])
    res["embedding"] = [str(emb.weight.placements), r5(emb(ids))]
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
