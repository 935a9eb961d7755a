"""Pipeline parallelism with torch.distributed.pipelining: an MLP cut into 2 stages (one per
rank), trained with ScheduleGPipe and with Schedule1F1B over 4 micro-batches; the last stage
reports the merged output and each micro-batch's loss, both stages their gradients after the
step (scaled by the micro-batch count), which must be those of the whole model trained on the
whole batch in one process; a forward-only step without a loss function. Rank 0 writes
OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


def build():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                          nn.Linear(8, 2))
    rng = np.random.default_rng(21)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def loss_fn(out, target):
    return ((out - target) ** 2).mean()


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((8, 2)).astype(np.float32))
    res = {}
    full = build()
    loss_fn(full(x), y).backward()  # the whole model on the whole batch: the reference
    res["reference_grads"] = [r5(p.grad.norm()) for p in full.parameters()]
    for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        model = build()
        part = model[:2] if rank == 0 else model[2:]
        stage = PipelineStage(part, rank, world_size, torch.device("cpu"))
        schedule = cls(stage, n_microbatches=4, loss_fn=loss_fn)
        losses = []
        if rank == 0:
            result = schedule.step(x)
        else:
            result = schedule.step(target=y, losses=losses)
        mine = {"result": None if result is None else r5(result),
                "losses": [round(float(v.detach()), 6) for v in losses],
                "grads": [r5(p.grad.norm()) for p in part.parameters()]}
        res[name] = gathered(mine)
    model = build()
    part = model[:2] if rank == 0 else model[2:]
    stage = PipelineStage(part, rank, world_size, torch.device("cpu"))
    fwd = ScheduleGPipe(stage, n_microbatches=2)
    with torch.no_grad():
        result = fwd.step(x) if rank == 0 else fwd.step()
    res["forward_only"] = gathered(None if result is None else r5(result))
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
