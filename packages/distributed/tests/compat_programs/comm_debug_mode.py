"""CommDebugMode on 2 ranks (gloo): which collectives, under which op names, torch counts for
DTensor redistributions (Shard -> Replicate, Shard(0) -> Shard(1), Partial -> Replicate,
Partial -> Shard, Replicate -> Shard), distribute_tensor, DTensor matmuls, functional
collectives and plain torch.distributed calls (object collectives, point-to-point and barrier
included), looked up by torch.ops.c10d_functional / torch.ops.c10d packets; and per module for a
tensor-parallel MLP's forward and backward: the counts, sharding and parameter info, and the
tracing table at noise level 0 (plus the module-type / parameter lines of level 1). Rank 0
writes OUT/result.json."""

import argparse
import json
import os
import re
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

c10d_functional = torch.ops.c10d_functional


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


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
    x = torch.arange(24.0).reshape(4, 6) + 10 * rank
    uneven = torch.arange(15.0).reshape(5, 3) * (rank + 1)

    def record(name, fn):
        with CommDebugMode() as cm:
            value = fn()
        res[name] = {"counts": counts(cm), "total": cm.get_total_counts()}
        if isinstance(value, torch.Tensor):
            if isinstance(value, DTensor):
                value = value.to_local()
            res[name]["value"] = gathered(r5(value))
        return cm

    d = distribute_tensor(x, mesh, [Shard(0)])
    record("shard_to_replicate", lambda: d.redistribute(mesh, [Replicate()]))
    record("shard0_to_shard1", lambda: d.redistribute(mesh, [Shard(1)]))
    record("full_tensor", lambda: d.full_tensor())
    p = DTensor.from_local(x, mesh, [Partial()])
    record("partial_to_replicate", lambda: p.redistribute(mesh, [Replicate()]))
    record("partial_to_shard0", lambda: p.redistribute(mesh, [Shard(0)]))
    record("partial_to_shard1", lambda: p.redistribute(mesh, [Shard(1)]))
    pu = DTensor.from_local(uneven, mesh, [Partial()])
    record("uneven_partial_to_shard0", lambda: pu.redistribute(mesh, [Shard(0)]))
    pm = DTensor.from_local(uneven, mesh, [Partial("max")])
    record("partial_max_to_shard1", lambda: pm.redistribute(mesh, [Shard(1)]))
    # (torch broadcasts a Replicate source into the given tensor itself: hand it a copy)
    r = distribute_tensor(x.clone(), mesh, [Replicate()])
    record("replicate_to_shard", lambda: r.redistribute(mesh, [Shard(0)]))
    record("distribute_shard", lambda: distribute_tensor(x, mesh, [Shard(0)]))
    record("distribute_shard1_uneven", lambda: distribute_tensor(uneven, mesh, [Shard(1)]))
    record("distribute_replicate", lambda: distribute_tensor(x.clone(), mesh, [Replicate()]))
    record("distribute_local_data", lambda: distribute_tensor(x, mesh, [Shard(0)],
                                                              src_data_rank=None))
    record("uneven_shard_full",
           lambda: distribute_tensor(uneven, mesh, [Shard(0)]).full_tensor())
    g = np.random.default_rng(5)
    a = distribute_tensor(torch.from_numpy(g.standard_normal((4, 6)).astype(np.float32)), mesh,
                          [Shard(1)])
    b = distribute_tensor(torch.from_numpy(g.standard_normal((6, 4)).astype(np.float32)), mesh,
                          [Shard(0)])
    record("mm_shard1_shard0", lambda: torch.mm(a, b))
    record("mm_shard1_shard0_full", lambda: torch.mm(a, b).full_tensor())

    record("all_reduce", lambda: dist.all_reduce(x.clone()))
    record("all_gather", lambda: dist.all_gather([torch.empty(4, 6), torch.empty(4, 6)], x))
    record("broadcast", lambda: dist.broadcast(x.clone(), 0))
    record("barrier", lambda: dist.barrier())
    record("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(torch.empty(8, 6), x))
    record("reduce_scatter_tensor",
           lambda: dist.reduce_scatter_tensor(torch.empty(2, 6), x.clone()))
    record("reduce_scatter", lambda: dist.reduce_scatter(torch.empty(4, 6), [x.clone(), x.clone()]))
    record("all_to_all_single", lambda: dist.all_to_all_single(torch.empty(4, 6), x.clone()))
    record("all_to_all", lambda: dist.all_to_all([torch.empty(2, 6), torch.empty(2, 6)],
                                                 [x[:2].clone(), x[2:].clone()]))
    record("gather", lambda: dist.gather(x, [torch.empty(4, 6), torch.empty(4, 6)]
                                         if rank == 0 else None, dst=0))
    record("scatter", lambda: dist.scatter(torch.empty(4, 6), [x, x] if rank == 0 else None,
                                           src=0))
    record("reduce", lambda: dist.reduce(x.clone(), dst=0))
    record("all_gather_object", lambda: dist.all_gather_object([None, None], {"r": rank}))
    record("broadcast_object_list", lambda: dist.broadcast_object_list([1, 2], src=0))

    def send_recv():
        if rank == 0:
            dist.send(x, 1)
        else:
            dist.recv(torch.empty(4, 6), 0)

    record("send_recv", send_recv)
    record("funcol_all_reduce", lambda: funcol.all_reduce(x, "sum", mesh))
    record("funcol_all_gather", lambda: funcol.all_gather_tensor(x, 0, mesh))
    record("funcol_reduce_scatter", lambda: funcol.reduce_scatter_tensor(x, "sum", 0, mesh))
    record("funcol_all_to_all", lambda: funcol.all_to_all_single(x, None, None, mesh))
    record("nested", lambda: [dist.all_reduce(x.clone()), d.full_tensor(),
                              funcol.all_reduce(x, "sum", mesh)])

    sub = dist.new_group([0])  # rank 1 is outside it: its calls issue (and count) nothing
    with CommDebugMode() as cm:
        dist.all_reduce(x.clone(), group=sub)
        dist.broadcast(x.clone(), 0, group=sub)
        dist.all_gather_object([None], rank, group=sub)
    res["subgroup_per_rank"] = gathered(counts(cm))

    with CommDebugMode() as cm:
        d.redistribute(mesh, [Replicate()])
        p.redistribute(mesh, [Replicate()])
        p.redistribute(mesh, [Replicate()])
    cc = cm.get_comm_counts()
    keys_are_packets = sorted(cc, key=str) == [c10d_functional.all_gather_into_tensor,
                                               c10d_functional.all_reduce]
    res["lookup"] = {
        "keys_are_packets": keys_are_packets,
        "all_gather_into_tensor": cc[c10d_functional.all_gather_into_tensor],
        "all_reduce": cc[c10d_functional.all_reduce],
        "reduce_scatter_tensor": cc[c10d_functional.reduce_scatter_tensor],
        "allreduce_": cc[torch.ops.c10d.allreduce_],
        "same_object": c10d_functional.all_reduce is torch.ops.c10d_functional.all_reduce,
        "repr_packet": repr(c10d_functional.all_reduce),
        "str_packet": str(c10d_functional.all_reduce),
        "str_default": str(c10d_functional.all_reduce.default),
        "repr_mode": repr(cm),
        "total": cm.get_total_counts(),
    }

    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 6))
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.from_numpy((0.5 * g.standard_normal(prm.shape)).astype(np.float32)))
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    inp = torch.from_numpy(g.standard_normal((3, 6)).astype(np.float32)).requires_grad_()
    with CommDebugMode() as cm:
        model(inp).sum().backward()
    res["tp_mlp"] = {
        "counts": counts(cm),
        "total": cm.get_total_counts(),
        "module_counts": {m: {k: {str(op): n for op, n in v.items()} for k, v in c.items()}
                          for m, c in sorted(cm.comm_module_counts.items())},
        "sharding": {k: str(v) for k, v in sorted(cm.get_sharding_info().items())},
        "parameters": {m: {n: [type(t).__name__, list(t.shape)] for n, t in sorted(ps.items())}
                       for m, ps in sorted(cm.get_parameter_info().items())},
        "table0": re.sub(r"\x1B\[[0-?]*[ -/]*[@-~]", "",
                         cm.generate_comm_debug_tracing_table(noise_level=0)).splitlines(),
        # the module lines (names, types, parameters) of level 1; not the operations
        "table1_modules": [ln for ln in cm.generate_comm_debug_tracing_table(noise_level=1)
                           .splitlines() if "\x1b" not in ln and "PASS" not in ln
                           and "CHECKPOINTING" not in ln],
        "input_grad": r5(inp.grad),
    }
    path = os.path.join(out, f"table{rank}.txt")
    cm.log_comm_debug_tracing_table_to_file(path, noise_level=0)
    with open(path) as f:
        res["tp_mlp"]["logged_table"] = f.read().splitlines()
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
