"""torch.multiprocessing.spawn as the entry point (no launcher), each rank with a DataLoader of
num_workers=2 (worker processes inside a distributed rank) over a map-style dataset sharded by
DistributedSampler, a worker_init_fn, persistent_workers, and an IterableDataset that shards by
both rank and get_worker_info(). Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
from torch.utils.data.distributed import DistributedSampler


class Squares(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        return torch.tensor([float(i), float(i * i)]), i % 3


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n
        # read here, in the rank: worker processes have no process group
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        shard = self.rank * nw + wid
        for i in range(shard, self.n, self.world * nw):
            yield torch.tensor(i)


def seed_worker(worker_id):
    info = get_worker_info()
    np.random.seed(info.seed % 2**32)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    ds = Squares()
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2,
                        worker_init_fn=seed_worker, persistent_workers=True)
    seen = []
    sums = torch.zeros(2)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            seen.extend(int(v) for v in xb[:, 0])
            sums += xb.sum(0)
    dist.all_reduce(sums)
    every = [None] * world_size
    dist.all_gather_object(every, seen)
    res["sums"] = sums.tolist()
    res["seen"] = every
    res["batches_per_epoch"] = len(loader)

    stream = DataLoader(Stream(16), batch_size=None, num_workers=2)
    got = sorted(int(t) for t in stream)
    every = [None] * world_size
    dist.all_gather_object(every, got)
    res["stream_union"] = sorted(v for e in every for v in e)
    res["stream_disjoint"] = not set(every[0]) & set(every[1])
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
    ctx = mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=False)
    while not ctx.join():
        pass
