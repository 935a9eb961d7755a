"""Several pipeline stages per rank with torch.distributed.pipelining: an MLP cut into 4
stages on 2 ranks (stages 0 and 2 on rank 0, 1 and 3 on rank 1), trained with
ScheduleLoopedBFS and ScheduleInterleaved1F1B over 4 micro-batches; the last stage reports
the merged output and the losses, every stage its gradients, which must be those of the whole
model on the whole batch; then an optimizer step. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.pipelining import (
    PipelineStage,
    ScheduleInterleaved1F1B,
    ScheduleLoopedBFS,
)


def build():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                          nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    rng = np.random.default_rng(33)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.5 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


PARTS = [(0, 2), (2, 4), (4, 6), (6, 7)]  # module ranges of the 4 stages


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
    rng = np.random.default_rng(6)
    x = torch.from_numpy(rng.standard_normal((8, 4)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((8, 2)).astype(np.float32))
    res = {}
    full = build()
    loss_fn(full(x), y).backward()
    res["reference_grads"] = [r5(p.grad.norm()) for p in full.parameters()]
    for name, cls in (("looped_bfs", ScheduleLoopedBFS), ("interleaved", ScheduleInterleaved1F1B)):
        model = build()
        mine = [s for s in range(4) if s % world_size == rank]
        stages = [PipelineStage(model[PARTS[s][0]:PARTS[s][1]], s, 4, torch.device("cpu"))
                  for s in mine]
        schedule = cls(stages, n_microbatches=4, loss_fn=loss_fn)
        losses = []
        if rank == 0:
            result = schedule.step(x)
        else:
            result = schedule.step(target=y, losses=losses)
        grads = {s: [r5(p.grad.norm()) for p in stages[i].submod.parameters()]
                 for i, s in enumerate(mine)}
        res[name] = gathered([grads, r5(result) if result is not None else None,
                              [round(float(v), 5) for v in losses]])
        opt = torch.optim.SGD([p for st in stages for p in st.submod.parameters()], lr=0.1)
        opt.step()
        res[name + "_after_step"] = gathered({s: r5(stages[i].submod[0].weight.sum())
                                              for i, s in enumerate(mine)})
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
