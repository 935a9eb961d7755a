"""Uneven inputs with the generic join context manager, as PyTorch's Join tutorial writes it,
on 3 ranks (gloo): a Joinable of one's own (a counter that all_reduces the number of inputs
seen, its JoinHook shadowing the all_reduce for ranks that ran out and a post_hook that
records the last joiner), used alone and together with DDP (a different number of batches per
rank, divide_by_initial_world_size True and False), Join(enable=False), and
throw_on_early_termination=True, where the ranks still training get a RuntimeError once one
rank runs out. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.join import Join, Joinable, JoinHook
from torch.nn.parallel import DistributedDataParallel as DDP


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


class CounterJoinHook(JoinHook):
    def __init__(self, counter, sync_max_count):
        self.counter = counter
        self.sync_max_count = sync_max_count

    def main_hook(self):
        # a joined rank takes part in the others' all_reduce with a zero
        t = torch.zeros(1, device=self.counter.device)
        dist.all_reduce(t)
        self.counter.shadowed += 1

    def post_hook(self, is_last_joiner: bool):
        self.counter.last_joiner = is_last_joiner
        if not self.sync_max_count:
            return
        rank = dist.get_rank(self.counter.process_group)
        common_rank = self.counter.find_common_rank(rank, is_last_joiner)
        if rank == common_rank:
            self.counter.max_count = self.counter.count.detach().clone()
        dist.broadcast(self.counter.max_count, src=common_rank)


class Counter(Joinable):
    def __init__(self, device, process_group):
        super().__init__()
        self.device = device
        self.process_group = process_group
        self.count = torch.tensor([0], device=device).float()
        self.max_count = torch.tensor([0], device=device).float()
        self.shadowed = 0
        self.last_joiner = None

    def __call__(self):
        Join.notify_join_context(self)
        t = torch.ones(1, device=self.device).float()
        dist.all_reduce(t)
        self.count += t

    def join_hook(self, **kwargs) -> JoinHook:
        return CounterJoinHook(self, kwargs.get("sync_max_count", False))

    @property
    def join_device(self) -> torch.device:
        return self.device

    @property
    def join_process_group(self):
        return self.process_group

    def find_common_rank(self, rank, to_consider):
        common_rank = torch.tensor([rank if to_consider else -1], device=self.device)
        dist.all_reduce(common_rank, op=dist.ReduceOp.MAX, group=self.process_group)
        return common_rank.item()


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}
    n_inputs = [5, 3, 4][rank]

    # 1. the tutorial's counter alone, then with sync_max_count
    counter = Counter(torch.device("cpu"), dist.group.WORLD)
    with Join([counter]):
        for _ in range(n_inputs):
            counter()
    res["counter"] = {"count": counter.count.item(), "shadowed": counter.shadowed,
                      "last_joiner": counter.last_joiner}
    counter = Counter(torch.device("cpu"), dist.group.WORLD)
    with Join([counter], sync_max_count=True):
        for _ in range(n_inputs):
            counter()
    res["counter_sync"] = {"count": counter.count.item(), "max": counter.max_count.item()}

    # 2. DDP and the counter together
    g = np.random.default_rng(0)
    for divide in (True, False):
        net = nn.Linear(3, 1, bias=False)
        with torch.no_grad():
            net.weight.copy_(torch.from_numpy(g.standard_normal((1, 3)).astype(np.float32)))
        model = DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        counter = Counter(torch.device("cpu"), dist.group.WORLD)
        grads = []
        with Join([model, counter], divide_by_initial_world_size=divide):
            for i in range(n_inputs):
                x = torch.full((2, 3), float(rank + 1 + i))
                model(x).sum().backward()
                grads.append(r6(net.weight.grad))
                opt.step()
                opt.zero_grad()
                counter()
        res[f"ddp_divide_{divide}"] = {"grads": grads, "weight": r6(net.weight),
                                       "count": counter.count.item()}

    # 3. disabled: every rank runs the same number of steps
    counter = Counter(torch.device("cpu"), dist.group.WORLD)
    with Join([counter], enable=False):
        for _ in range(2):
            counter()
    res["disabled"] = counter.count.item()

    # 4. throw_on_early_termination: the first rank out makes the others raise
    net = nn.Linear(3, 1, bias=False)
    model = DDP(net)
    done, err = 0, None
    try:
        with Join([model], throw_on_early_termination=True):
            for i in range(n_inputs):
                model(torch.ones(1, 3)).sum().backward()
                done += 1
    except RuntimeError:
        err = "RuntimeError"
    res["throw"] = {"done": done, "error": err}
    dist.barrier()

    results = [None] * world
    dist.all_gather_object(results, res)
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    mp.spawn(worker, args=(3, free_port(), args.out), nprocs=3, join=True)
