"""Runs several of the session-25 programs one after the other in the same 2 spawned ranks (each
with its own process group, port and output folder OUT/<program>), so that a test pays for one
start of the ranks instead of one per program; OUT/result.json maps each program to its result.
Every program also runs alone (python <program>.py --out OUT).

Each rank runs the programs in order: work_handles, subgroup_overlap, sampler_shuffle,
ddp_edges, zero_adam, store_kinds and collective_errors (last: its monitored_barrier leaves the
group unusable)."""

import argparse
import json
import os
import socket
import sys

import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import collective_errors  # noqa: E402
import ddp_edges  # noqa: E402
import sampler_shuffle  # noqa: E402
import store_kinds  # noqa: E402
import subgroup_overlap  # noqa: E402
import work_handles  # noqa: E402
import zero_adam  # noqa: E402

ORDER = [work_handles, subgroup_overlap, sampler_shuffle, ddp_edges, zero_adam, store_kinds,
         collective_errors]


def name(module):
    return module.__name__.rsplit(".", 1)[-1]


def worker(rank, world_size, ports, out):
    for module, port in zip(ORDER, ports):
        sub = os.path.join(out, name(module))
        if module is store_kinds:
            module.worker(rank, world_size, port, os.path.join(sub, "filestore"), sub)
        else:
            module.worker(rank, world_size, port, sub)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    for module in ORDER:
        os.makedirs(os.path.join(args.out, name(module)), exist_ok=True)
    mp.spawn(worker, args=(2, free_ports(len(ORDER)), args.out), nprocs=2, join=True)
    collective_errors.merge(os.path.join(args.out, "collective_errors"))
    results = {}
    for module in ORDER:
        with open(os.path.join(args.out, name(module), "result.json")) as f:
            results[name(module)] = json.load(f)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(results, f, sort_keys=True)
