"""Shuffled data orders a seeded torch script reproduces, on 2 ranks (gloo): DistributedSampler
with shuffle=True (its generator seeded with seed + epoch) over several epochs, with and
without drop_last, with explicit num_replicas / rank, and under a DataLoader; torch.randperm
with a seeded Generator (fresh, and twice in a row); random_split with a seeded generator
(lengths and fractions); RandomSampler and SubsetRandomSampler with a generator. Every rank
checks its shard against the others with all_gather_object. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import (
    DataLoader,
    RandomSampler,
    SubsetRandomSampler,
    TensorDataset,
    random_split,
)
from torch.utils.data.distributed import DistributedSampler


def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    data = list(range(11))
    for epoch in range(3):
        s = DistributedSampler(data, shuffle=True, seed=5)
        s.set_epoch(epoch)
        res[f"epoch{epoch}_{rank}"] = list(s)
    s = DistributedSampler(data, shuffle=True, seed=5, drop_last=True)
    s.set_epoch(1)
    res[f"drop_last_{rank}"] = list(s)
    res[f"default_seed_{rank}"] = list(DistributedSampler(data))
    res[f"three_replicas_{rank}"] = list(DistributedSampler(data, num_replicas=3, rank=rank + 1,
                                                            seed=11))
    ds = TensorDataset(torch.arange(10.0))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, seed=3))
    loader.sampler.set_epoch(4)
    res[f"loader_{rank}"] = [b[0].tolist() for b in loader]
    shards = [None] * world_size
    dist.all_gather_object(shards, res[f"epoch0_{rank}"])
    res["epoch0_partition"] = sorted(i for sh in shards for i in sh)

    res["randperm"] = [torch.randperm(10, generator=gen(s)).tolist() for s in (0, 1, 2**40 + 3)]
    g = gen(9)
    res["randperm_twice"] = [torch.randperm(6, generator=g).tolist(),
                             torch.randperm(8, generator=g).tolist()]
    res["randperm_int32"] = torch.randperm(7, generator=gen(2), dtype=torch.int32).tolist()
    a, b = random_split(range(10), [7, 3], generator=gen(42))
    res["split_lengths"] = [list(a), list(b)]
    parts = random_split(range(10), [0.5, 0.3, 0.2], generator=gen(0))
    res["split_fractions"] = [list(p) for p in parts]
    res["random_sampler"] = list(RandomSampler(range(8), generator=gen(7)))
    res["subset_sampler"] = list(SubsetRandomSampler([10, 20, 30, 40, 50], generator=gen(1)))

    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {}
        for r in every:
            merged.update(r)
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(merged, f, sort_keys=True)
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
