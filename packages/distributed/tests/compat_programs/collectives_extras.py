"""Less common corners programs still use: gather / scatter of tensors, integer and
float64 all_gather_into_tensor / reduce_scatter_tensor, 0-d and half-precision tensors, futures
chained with then(), DDP's state_dict prefix, comm hooks, static_graph and Join with uneven
inputs, DistributedSampler padding and drop_last, a monitored_barrier a rank misses, and
torch.multiprocessing.spawn's error when a rank raises. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def linear(seed):
    model = nn.Linear(3, 2)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(rng.standard_normal((2, 3)).astype(np.float32)))
        model.bias.fill_(0.5)
    return model


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=30))
    res = {}
    t = torch.tensor([float(rank), rank + 0.5])
    gl = [torch.empty(2) for _ in range(world_size)] if rank == 1 else None
    dist.gather(t, gather_list=gl, dst=1)
    if rank == 1:
        res["gather"] = [g.tolist() for g in gl]
    sc = torch.empty(3)
    dist.scatter(sc, [torch.full((3,), 7.0 + i) for i in range(world_size)] if rank == 0
                 else None, src=0)
    res[f"scatter_{rank}"] = sc.tolist()
    flat = torch.empty(world_size * 2, dtype=torch.int64)  # gloo takes the flat form only
    dist.all_gather_into_tensor(flat, torch.tensor([rank, -rank]))
    res["all_gather_into_tensor_int"] = flat.tolist()
    rs = torch.empty(2, dtype=torch.float64)
    dist.reduce_scatter_tensor(rs, torch.arange(4, dtype=torch.float64) + rank,
                               op=dist.ReduceOp.MAX)
    res[f"reduce_scatter_max_{rank}"] = rs.tolist()
    z = torch.tensor(rank + 1.5)
    dist.all_reduce(z)
    res["zero_dim"] = [z.item(), list(z.shape)]
    h = torch.tensor([0.5, 1.25], dtype=torch.float16) * (rank + 1)
    dist.all_reduce(h)
    res["half"] = [h.tolist(), str(h.dtype)]
    b = torch.tensor([1.5, 2.0], dtype=torch.bfloat16) + rank
    dist.broadcast(b, src=1)
    res["bf16_broadcast"] = [b.float().tolist(), str(b.dtype)]
    nc = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()  # not contiguous
    dist.all_reduce(nc)
    res["non_contiguous"] = nc.tolist()

    fut = dist.all_reduce(torch.ones(2) * rank, async_op=True).get_future()
    res["future_then"] = fut.then(lambda f: f.value()[0] * 10).wait().tolist()
    work = dist.all_reduce(torch.ones(1), async_op=True)
    work.wait()
    res["work_result"] = [r.tolist() for r in work.result()]

    # DDP: state_dict keys, a comm hook, static_graph, Join with uneven inputs
    model = DDP(linear(0))
    res["ddp_state_keys"] = sorted(model.state_dict())
    model.register_comm_hook(None, default_hooks.allreduce_hook)
    x = torch.full((4, 3), float(rank + 1))
    model(x).sum().backward()
    res["hooked_grad"] = model.module.weight.grad.tolist()
    static = DDP(linear(1), static_graph=True)
    opt = torch.optim.SGD(static.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        static(x).pow(2).mean().backward()
        opt.step()
    res["static_graph_weight"] = static.module.weight.flatten().tolist()
    uneven = DDP(linear(2))
    opt = torch.optim.SGD(uneven.parameters(), lr=0.1)
    with Join([uneven]):
        for _ in range(2 + rank):  # rank 1 has one batch more
            opt.zero_grad()
            uneven(x).sum().backward()
            opt.step()
    res["join_weight"] = uneven.module.weight.flatten().tolist()

    # DistributedSampler padding / drop_last on 7 samples
    data = list(range(7))
    res[f"sampler_pad_{rank}"] = list(DistributedSampler(data, shuffle=False))
    res[f"sampler_drop_last_{rank}"] = list(DistributedSampler(data, shuffle=False,
                                                               drop_last=True))
    res["sampler_len"] = [len(DistributedSampler(data)), len(DistributedSampler(data,
                                                                             drop_last=True))]

    every = [None] * world_size
    dist.all_gather_object(every, res)
    merged = {}
    for r in every:
        merged.update(r)

    # last (the group is no use afterwards): a monitored_barrier that rank 1 reaches late;
    # rank 0 names the missing rank, rank 1 then gives up waiting for rank 0's release too
    if rank == 1:
        time.sleep(1.6)
    try:
        dist.monitored_barrier(timeout=timedelta(seconds=1))
        merged[f"monitored_barrier_missed_{rank}"] = "passed"
    except RuntimeError as e:
        msg = str(e)
        merged[f"monitored_barrier_missed_{rank}"] = "raised"
        if rank == 0:
            merged["monitored_barrier_names_rank_1"] = "1" in msg
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(merged, f, sort_keys=True)
    dist.destroy_process_group()


def failing(rank, out):
    if rank == 1:
        raise KeyError("rank 1 failed")
    time.sleep(0.5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
    res = json.load(open(os.path.join(args.out, "result.json")))
    try:
        mp.spawn(failing, args=(args.out,), nprocs=2)
        res["spawn_error"] = "none"
    except mp.ProcessRaisedException as e:
        res["spawn_error"] = [type(e).__name__, e.error_index, "KeyError" in str(e),
                              "rank 1 failed" in str(e), isinstance(e.error_pid, int)]
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(res, f, sort_keys=True)
