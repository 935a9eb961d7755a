"""DTensor's smaller APIs on 2 ranks, as library code uses them: to_local / full_tensor with
grad_placements, distribute_module (a partition_fn sharding Linear weights, input_fn and
output_fn hooks), implicit_replication (plain tensors next to DTensors), and local_map (a
function on pieces, with in_placements, redistribute_inputs and its error). Rank 0 writes
OUT/result.json."""

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
from torch.distributed.tensor import (
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_module,
    distribute_tensor,
)
from torch.distributed.tensor.experimental import implicit_replication, local_map


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
    full = torch.arange(12.0).reshape(4, 3)

    # grad_placements: the piece's gradient declared partial (summed over the ranks)
    d = distribute_tensor(full.clone(), mesh, [Replicate()]).requires_grad_()
    (d.to_local(grad_placements=[Partial()]) * (rank + 1)).sum().backward()
    res["grad_partial"] = [str(d.grad.placements), r5(d.grad.full_tensor())]
    e = distribute_tensor(full.clone(), mesh, [Shard(0)]).requires_grad_()
    e.full_tensor().pow(2).sum().backward()
    res["grad_full"] = [str(e.grad.placements), r5(e.grad.full_tensor())]

    # distribute_module
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    rng = np.random.default_rng(8)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.standard_normal(p.shape).astype(np.float32)))

    def partition(name, module, mesh):
        if isinstance(module, nn.Linear) and name == "0":
            module.weight = nn.Parameter(distribute_tensor(module.weight.data, mesh,
                                                           [Shard(0)]))

    def input_fn(module, inputs, mesh):
        return tuple(DTensor.from_local(x, mesh, [Replicate()]) for x in inputs)

    def output_fn(module, outputs, mesh):
        return outputs.to_local()

    distribute_module(model, mesh, partition, input_fn, output_fn)
    res["module_params"] = {n: [type(p).__name__, str(p.placements)]
                            for n, p in model.named_parameters()}
    y = model(torch.ones(2, 3))
    res["module_out"] = [type(y).__name__, r5(y)]
    try:
        distribute_module(model, mesh)
        res["twice"] = "ok"
    except RuntimeError as exc:
        res["twice"] = type(exc).__name__

    # implicit_replication
    s = distribute_tensor(full.clone(), mesh, [Shard(0)])
    try:
        s * torch.ones(4, 3)
        res["mixed"] = "ok"
    except RuntimeError as exc:
        res["mixed"] = type(exc).__name__
    with implicit_replication():
        z = s * torch.arange(3.0) + torch.ones(4, 3)
    res["implicit"] = [str(z.placements), r5(z.full_tensor())]

    # local_map
    def scale_rows(x, k):
        return x * k + dist.get_rank()

    mapped = local_map(scale_rows, out_placements=[Shard(0)], in_placements=([Shard(0)], None))
    m = mapped(s, 2.0)
    res["local_map"] = [str(m.placements), r5(m.full_tensor())]
    r = distribute_tensor(full.clone(), mesh, [Replicate()])
    try:
        mapped(r, 2.0)
        res["local_map_mismatch"] = "ok"
    except ValueError as exc:
        res["local_map_mismatch"] = type(exc).__name__
    moved = local_map(scale_rows, out_placements=[Shard(0)], in_placements=([Shard(0)], None),
                      redistribute_inputs=True)(r, 3.0)
    res["local_map_redistribute"] = r5(moved.full_tensor())
    res["local_map_plain"] = r5(mapped(torch.ones(2), 2.0))
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
