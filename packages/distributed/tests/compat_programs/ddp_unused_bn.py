"""DDP beyond the plain case: find_unused_parameters=True with a model whose forward takes a
branch by a flag (so some parameters get no gradient in some steps), and a model with
BatchNorm buffers (broadcast_buffers=True), then that model converted with
SyncBatchNorm.convert_sync_batchnorm. Rank 0 writes OUT/result.json."""

import argparse
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


def init_from_numpy(model, seed):
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.from_numpy((0.4 * rng.standard_normal(p.shape))
                                         .astype(np.float32)))


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(6, 8)
        self.head_a = nn.Linear(8, 2)
        self.head_b = nn.Linear(8, 2)

    def forward(self, x, use_b=False):
        h = F.relu(self.trunk(x))
        return self.head_b(h) if use_b else self.head_a(h)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(-1))


def gather_equal(t, world_size):
    parts = [torch.zeros_like(t) for _ in range(world_size)]
    dist.all_gather(parts, t.detach().contiguous())
    return all(torch.equal(parts[0], p) for p in parts)


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    rng = np.random.default_rng(100 + rank)

    model = Branchy()
    init_from_numpy(model, 0)
    ddp = DDP(model, find_unused_parameters=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    losses = []
    for step in range(4):
        x = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
        opt.zero_grad()
        loss = F.mse_loss(ddp(x, use_b=step % 2 == 1), y)
        loss.backward()
        if step == 0:
            res["unused_grad_is_none"] = model.head_b.weight.grad is None
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / world_size)
    res["branchy_losses"] = losses
    res["branchy_in_sync"] = all(gather_equal(p, world_size) for p in model.parameters())
    res["head_b_weight"] = model.head_b.weight.flatten().tolist()

    # BatchNorm buffers: rank 0's running stats are broadcast at each forward
    torch.manual_seed(0)
    bn_model = ConvBN()
    init_from_numpy(bn_model, 1)
    ddp = DDP(bn_model, broadcast_buffers=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(3):
        x = torch.from_numpy(rng.standard_normal((4, 3, 7)).astype(np.float32) + rank)
        opt.zero_grad()
        ddp(x).pow(2).mean().backward()
        opt.step()
    # the last forward broadcast rank 0's stats before it updated them with its own batch,
    # so they differ now; after one more forward in eval mode they are rank 0's again
    ddp.eval()
    with torch.no_grad():
        ddp(torch.zeros(1, 3, 7))
    res["bn_buffers_in_sync_after_eval_forward"] = gather_equal(bn_model.bn.running_mean,
                                                                world_size)
    res["bn_num_batches_tracked"] = bn_model.bn.num_batches_tracked.item()
    res["bn_running_mean"] = bn_model.bn.running_mean.tolist()

    # SyncBatchNorm.convert_sync_batchnorm keeps the weights and running statistics (torch's
    # SyncBatchNorm then trains only on GPUs, so the program stops at the conversion)
    sync_model = nn.SyncBatchNorm.convert_sync_batchnorm(bn_model)
    res["converted"] = type(sync_model.bn).__name__
    res["converted_keeps_stats"] = torch.equal(sync_model.bn.running_mean,
                                               bn_model.bn.running_mean)
    res["converted_state_keys"] = sorted(sync_model.state_dict())

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
