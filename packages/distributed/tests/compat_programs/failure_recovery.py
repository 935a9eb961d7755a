"""Failure handling: rank 1 hits an error and skips a collective that rank 0 entered; rank 0's
all_reduce gives up after init_process_group's timeout= with a clear error instead of hanging.
Then both ranks destroy_process_group() and initialize a fresh group (a new store), which works;
collectives before init and after destroy raise. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 1


def describe(exc):
    msg = str(exc).lower()
    return {"is_runtime_error": isinstance(exc, RuntimeError),
            "mentions_timeout": "timeout" in msg or "timed out" in msg}


def worker(rank, world_size, out):
    res = {"initialized_before": dist.is_initialized()}
    try:
        dist.all_reduce(torch.ones(1))
    except (RuntimeError, ValueError) as e:
        res["before_init_error"] = type(e).__name__
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "store1"),
                            rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=TIMEOUT_S))
    t = torch.ones(2)
    dist.all_reduce(t)
    res["first_ok"] = t.tolist()
    if rank == 1:
        try:
            raise ValueError("bad batch on rank 1")
        except ValueError:
            pass  # rank 1 skips the collective, as a rank that failed would
        time.sleep(TIMEOUT_S + 1.5)  # outlive rank 0's timeout, then leave the group
    else:
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(3))
            res["hung_collective"] = "returned"
        except Exception as e:  # noqa: BLE001
            res["hung_collective"] = describe(e)
            res["gave_up_within_limit"] = time.monotonic() - start < TIMEOUT_S + 30
    dist.destroy_process_group()
    res["initialized_after_destroy"] = dist.is_initialized()
    try:
        dist.get_rank()
        res["get_rank_after_destroy"] = "no error"
    except (RuntimeError, ValueError) as e:
        res["get_rank_after_destroy"] = type(e).__name__

    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "store2"),
                            rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=30))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    res["reinit_all_reduce"] = t.item()
    res["reinit_world"] = [dist.get_rank(), dist.get_world_size()]
    objs = [None] * world_size
    dist.all_gather_object(objs, rank * 10)
    res["reinit_objects"] = objs
    dist.destroy_process_group()
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, args.out), nprocs=2, join=True)
