"""DDP training of a small MLP: DistributedSampler with set_epoch, gradient accumulation with
no_sync(), a rank-0 checkpoint of model.module.state_dict(), a barrier, and every rank loading
it back with map_location. Rank 0 writes its results to OUT/result.json."""

import argparse
import contextlib
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_model():
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.3 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def make_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x @ rng.standard_normal((8, 1)) + 0.1 * rng.standard_normal((64, 1))).astype(np.float32)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    ds = make_data()

    # The shuffled sampler: the ranks' shards partition the data, and set_epoch reshuffles.
    shards = {}
    for epoch in range(2):
        s = DistributedSampler(ds, shuffle=True, seed=7)
        s.set_epoch(epoch)
        shards[epoch] = list(s)
    mine = [None] * world_size
    dist.all_gather_object(mine, shards[0])
    res["shard_len"] = len(shards[0])
    res["shards_partition"] = sorted(i for m in mine for i in m) == list(range(len(ds)))
    res["set_epoch_reshuffles"] = shards[0] != shards[1]
    s1, s2 = DistributedSampler(ds, seed=7), DistributedSampler(ds, seed=7)
    s1.set_epoch(3)
    s2.set_epoch(3)
    res["same_epoch_same_order"] = list(s1) == list(s2)

    # Training: a fixed order, so the numbers compare with another implementation's.
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    model = DDP(build_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    accum = 2
    epoch_losses = []
    grads_differ_in_no_sync = None
    for epoch in range(3):
        sampler.set_epoch(epoch)
        total = torch.zeros(1)
        for i, (xb, yb) in enumerate(loader):
            sync = (i + 1) % accum == 0
            ctx = contextlib.nullcontext() if sync else model.no_sync()
            with ctx:
                loss = F.mse_loss(model(xb), yb) / accum
                loss.backward()
            if not sync and grads_differ_in_no_sync is None:
                g = model.module[0].weight.grad.clone()
                gs = [torch.zeros_like(g) for _ in range(world_size)]
                dist.all_gather(gs, g)
                grads_differ_in_no_sync = not torch.equal(gs[0], gs[1])
            if sync:
                opt.step()
                opt.zero_grad()
            total += loss.detach()
        dist.all_reduce(total)
        epoch_losses.append(total.item() / world_size)
    res["epoch_losses"] = epoch_losses
    res["grads_differ_in_no_sync"] = grads_differ_in_no_sync
    w = model.module[2].weight.detach().clone()
    ws = [torch.zeros_like(w) for _ in range(world_size)]
    dist.all_gather(ws, w)
    res["params_equal_across_ranks"] = all(torch.equal(ws[0], x) for x in ws)
    res["final_weight"] = w.flatten().tolist()

    ckpt = os.path.join(out, "checkpoint.pt")
    if rank == 0:
        torch.save(model.module.state_dict(), ckpt)
    dist.barrier()
    state = torch.load(ckpt, map_location={"cuda:0": "cpu"})
    fresh = build_model()
    fresh.load_state_dict(state)
    res["state_keys"] = list(state.keys())
    res["reloaded_equal"] = all(torch.equal(a, b) for a, b in
                                zip(fresh.parameters(), model.module.parameters()))
    state2 = torch.load(ckpt, map_location="cpu", weights_only=True)
    res["weights_only_device"] = str(state2["0.weight"].device)
    x = torch.from_numpy(np.linspace(-1, 1, 8, dtype=np.float32)).reshape(1, 8)
    res["reloaded_output"] = fresh(x).item()
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
