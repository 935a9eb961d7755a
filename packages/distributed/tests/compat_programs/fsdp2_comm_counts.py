"""The collectives fully_shard (FSDP2) issues, counted by CommDebugMode on 2 ranks (gloo): per
training step (forward, backward, optimizer step) of a model whose blocks and root are fully
sharded (one all-gather per fully_shard call in forward, one more in backward for those resharded
after forward, one reduce-scatter per call in backward), with uneven shapes (dim 0 not a multiple
of the world size, and a 1-row weight one rank holds nothing of), the root kept unsharded
(reshard_after_forward=False), mixed precision (param_dtype / reduce_dtype), gradient
accumulation without synchronization, a parameter a forward does not use, and
DistributedDataParallel's start-up collectives; plus the losses and gathered parameters, which
must not change. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.debug import CommDebugMode


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)
        self.spare = nn.Linear(n_in, n_out)  # used only when asked

    def forward(self, x, use_spare=False):
        h = torch.tanh(self.lin(x))
        return h + self.spare(x) if use_spare else h


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(5, 7), Block(7, 3)])
        self.head = nn.Linear(3, 1)  # one row: rank 1's shard of its weight is empty

    def forward(self, x, use_spare=False):
        for b in self.blocks:
            x = b(x, use_spare)
        return self.head(x)


def make(seed):
    torch.manual_seed(0)
    net = Net()
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    return net


def shard(net, **kw):
    for b in net.blocks:
        fully_shard(b, **kw)
    fully_shard(net, **kw)
    return net


def full_params(net):
    return {n: r5(p.full_tensor()) for n, p in net.named_parameters()}


def train(net, xs, ys, rank, accumulate=1, use_spare=False):
    """Per step: the collectives of forward, backward and the optimizer step, and the loss."""
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    steps = []
    for step in range(2):
        rec = {}
        for k in range(accumulate):
            last = k == accumulate - 1
            if accumulate > 1:
                net.set_requires_gradient_sync(last)
            x, y = xs[step * accumulate + k][rank], ys[step * accumulate + k][rank]
            with CommDebugMode() as cm:
                loss = ((net(x, use_spare) - y) ** 2).mean()
            rec[f"forward{k}"] = counts(cm)
            with CommDebugMode() as cm:
                loss.backward()
            rec[f"backward{k}"] = counts(cm)
            rec[f"loss{k}"] = round(float(loss), 5)
        with CommDebugMode() as cm:
            opt.step()
            opt.zero_grad()
        rec["step"] = counts(cm)
        steps.append(rec)
    grads_none = {n: p.grad is None for n, p in net.named_parameters()}
    return {"steps": steps, "params": full_params(net), "grad_none": grads_none}


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    g = np.random.default_rng(3)
    xs = [[torch.from_numpy(g.standard_normal((4, 5)).astype(np.float32)) for _ in range(2)]
          for _ in range(4)]
    ys = [[torch.from_numpy(g.standard_normal((4, 1)).astype(np.float32)) for _ in range(2)]
          for _ in range(4)]
    res = {}
    res["default"] = train(shard(make(1)), xs, ys, rank)
    res["root_unsharded"] = train(shard(make(1), reshard_after_forward=False), xs, ys, rank)
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.float64, reduce_dtype=torch.float64)
    res["mixed_precision"] = train(shard(make(1), mp_policy=mp_policy), xs, ys, rank)
    res["accumulate"] = train(shard(make(1)), xs, ys, rank, accumulate=2)
    res["with_spare"] = train(shard(make(2)), xs, ys, rank, use_spare=True)
    # the spare layers take no part: their parameters get no gradient, and are not waited for
    res["unused_spare"] = train(shard(make(2)), xs, ys, rank)

    with CommDebugMode() as cm:
        nn.parallel.DistributedDataParallel(make(4))
    res["ddp_start"] = counts(cm)
    with CommDebugMode() as cm:
        nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)))
    res["ddp_start_buffers"] = counts(cm)
    with CommDebugMode() as cm:
        nn.parallel.DistributedDataParallel(make(4), init_sync=False)
    res["ddp_start_no_sync"] = counts(cm)
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
