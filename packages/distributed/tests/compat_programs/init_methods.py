"""The ways scripts start a process group, one after the other in the same 2 processes (gloo),
each checked with an all_reduce and ended with destroy_process_group: a shared file
(init_method="file://...", as SLURM scripts use it), tcp:// with rank and world_size as
arguments and as the URL's query (?rank=..&world_size=..), env:// from MASTER_ADDR /
MASTER_PORT / RANK / WORLD_SIZE set by the script, an explicit TCPStore (store=) and a
PrefixStore over it, no backend named, a timeout; what the group reports (backend, world size,
ranks, is_initialized, Backend names, is_backend_available, is_torchelastic_launched), and the
errors as a script catching torch's exception classes sees them: initializing twice, a rank
outside the world, store= with init_method= or without world_size, an unknown backend. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def check(tag, res, rank):
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    res[tag] = {"sum": t.item(), "backend": str(dist.get_backend()),
                "world": dist.get_world_size(), "rank": dist.get_rank(),
                "ranks": dist.get_process_group_ranks(dist.group.WORLD),
                "initialized": dist.is_initialized()}
    dist.barrier()
    dist.destroy_process_group()
    res[tag]["after_destroy"] = dist.is_initialized()


def err(fn, cls):
    """What a script that catches torch's exception class sees."""
    try:
        fn()
        return "no error"
    except cls:
        return f"caught as {cls.__name__}"


def worker(rank, world, ports, out):
    res = {}
    # 1. a shared file
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "rdzv"),
                            rank=rank, world_size=world)
    check("file", res, rank)

    # 2. tcp:// with rank / world_size as arguments
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ports[0]}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    check("tcp", res, rank)

    # 3. tcp:// with them in the URL
    dist.init_process_group("gloo",
                            init_method=f"tcp://127.0.0.1:{ports[1]}?rank={rank}&world_size={world}")
    check("tcp_query", res, rank)

    # 4. env:// from variables the script sets
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[2]), RANK=str(rank),
                      WORLD_SIZE=str(world))
    dist.init_process_group("gloo")
    check("env", res, rank)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        del os.environ[k]

    # 5. an explicit store, and a PrefixStore over it (no backend named)
    store = dist.TCPStore("127.0.0.1", ports[3], world, rank == 0, timeout=timedelta(seconds=60))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    check("store", res, rank)
    dist.init_process_group(store=dist.PrefixStore("second", store), rank=rank, world_size=world)
    check("prefix_store_no_backend", res, rank)
    store.set(f"done{rank}", "1")
    store.wait(["done0", "done1"])

    # 6. names and availability
    res["backend_names"] = [dist.Backend("GLOO"), dist.Backend.GLOO, str(dist.Backend("gloo"))]
    res["gloo_available"] = dist.is_backend_available("gloo")
    res["gloo_is_available"] = dist.is_gloo_available()
    res["elastic"] = dist.is_torchelastic_launched()

    # 7. errors
    dist.init_process_group("gloo", init_method="file://" + os.path.join(out, "rdzv2"),
                            rank=rank, world_size=world)
    res["init_twice"] = err(lambda: dist.init_process_group(
        "gloo", init_method="file://" + os.path.join(out, "rdzv3"), rank=rank,
        world_size=world), ValueError)
    dist.barrier()
    dist.destroy_process_group()
    res["rank_outside"] = err(lambda: dist.init_process_group(
        "gloo", init_method="file://" + os.path.join(out, "rdzv4"), rank=5, world_size=2), RuntimeError)
    res["store_and_init_method"] = err(lambda: dist.init_process_group(
        "gloo", init_method="tcp://127.0.0.1:1", store=dist.HashStore(), rank=0,
        world_size=1), AssertionError)
    res["unknown_backend"] = err(lambda: dist.init_process_group(
        "no_such_backend", store=dist.HashStore(), rank=0, world_size=1), AssertionError)
    res["store_without_world_size"] = err(lambda: dist.init_process_group(
        "gloo", store=dist.HashStore(), rank=0), AssertionError)
    res["initialized_at_end"] = dist.is_initialized()
    res["collective_without_group"] = err(lambda: dist.all_reduce(torch.ones(1)), ValueError)

    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(2, [free_port() for _ in range(4)], args.out), nprocs=2, join=True)
    results = []
    for r in range(2):
        with open(os.path.join(args.out, f"rank{r}.json")) as f:
            results.append(json.load(f))
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(results, f)
