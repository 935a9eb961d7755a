"""Object collectives over gloo: all_gather_object, broadcast_object_list, gather_object,
scatter_object_list, send_object_list / recv_object_list and monitored_barrier, with objects
of mixed Python types (dicts, tuples, strings, tensors inside lists). Rank 0 writes
OUT/result.json."""

import argparse
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def as_json(obj):
    if isinstance(obj, torch.Tensor):
        return {"tensor": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, dict):
        return {str(k): as_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_json(v) for v in obj]
    return obj


def worker(rank, world_size, init_file, out):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=30))
    res = {}
    gathered = [None] * world_size
    obj = {"rank": rank, "name": f"worker-{rank}", "shape": (rank + 1, 2),
           "t": torch.arange(rank + 2, dtype=torch.float32)}
    dist.all_gather_object(gathered, obj)
    res["all_gather_object"] = as_json(gathered)

    objs = [{"lr": 0.1, "sched": [1, 2, 3]}, "config", torch.ones(2, dtype=torch.int64)] \
        if rank == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    res["broadcast_object_list"] = as_json(objs)
    objs1 = ["from-one", 7] if rank == 1 else [None, None]
    dist.broadcast_object_list(objs1, src=1)
    res["broadcast_from_1"] = objs1

    gather_list = [None] * world_size if rank == 0 else None
    dist.gather_object({"r": rank, "sq": rank * rank}, gather_list, dst=0)
    res["gather_object"] = gather_list

    scatter_out = [None]
    inputs = [{"shard": i, "data": list(range(i, i + 3))} for i in range(world_size)] \
        if rank == 0 else None
    dist.scatter_object_list(scatter_out, inputs, src=0)
    got = [None] * world_size
    dist.all_gather_object(got, scatter_out[0])
    res["scatter_object_list"] = got

    if rank == 0:
        dist.send_object_list([("hello", 1), {"k": [1.5]}], dst=1)
        back = [None]
        dist.recv_object_list(back, src=1)
        res["p2p_objects"] = as_json(back)
    else:
        recv = [None, None]
        dist.recv_object_list(recv, src=0)
        dist.send_object_list([{"echo": recv}], dst=0)

    dist.monitored_barrier(timeout=timedelta(seconds=10))
    dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=True)
    res["monitored_barrier"] = "ok"
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    init_file = os.path.join(args.out, "init")
    mp.spawn(worker, args=(2, init_file, args.out), nprocs=2, join=True)
