"""Differentiable collectives as contrastive-learning (CLIP / SimCLR-style) and
expert-parallel scripts use them, on 2 ranks (gloo): features gathered from every rank with
torch.distributed.nn.functional.all_gather so the loss over the global batch sends gradients
back to the rank that made each feature; the same loss through all_reduce, reduce_scatter,
all_to_all (a list of pieces), broadcast, gather, scatter and reduce, each checked by its
gradients; DDP training of two encoders with that loss. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dfn
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def arr(seed, shape, scale=1.0):
    g = np.random.default_rng(seed)
    return torch.from_numpy((scale * g.standard_normal(shape)).astype(np.float32))


def clip_loss(img, txt, rank, temperature=0.5):
    all_img = torch.cat(dfn.all_gather(img), 0)
    all_txt = torch.cat(dfn.all_gather(txt), 0)
    logits = img @ all_txt.t() / temperature
    logits_t = txt @ all_img.t() / temperature
    n = img.shape[0]
    labels = torch.arange(n) + rank * n
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits_t, labels)) / 2


def gathered(value):
    out = [None, None]
    dist.all_gather_object(out, value)
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}

    # 1. the contrastive loss over the global batch, gradients to each rank's own features
    img = F.normalize(arr(10 + rank, (3, 4)), dim=1).requires_grad_()
    txt = F.normalize(arr(20 + rank, (3, 4)), dim=1).requires_grad_()
    loss = clip_loss(img, txt, rank)
    loss.backward()
    res["clip_loss"] = gathered(round(loss.item(), 6))
    res["clip_img_grad"] = gathered(r6(img.grad))
    res["clip_txt_grad"] = gathered(r6(txt.grad))

    # 2. each differentiable collective, with a weighted sum as the loss
    def check(name, fn, x, weight, out_on=(0, 1)):
        x = x.clone().requires_grad_()
        y = fn(x)
        ys = list(y) if isinstance(y, (list, tuple)) else [y]
        total = sum((yy * (weight + i)).sum() for i, yy in enumerate(ys))
        total.backward()
        res[name] = gathered({"out": [r6(yy) for yy in ys] if rank in out_on else None,
                              "grad": r6(x.grad)})

    x = arr(30 + rank, (4,))
    check("all_reduce", lambda t: dfn.all_reduce(t), x, 1.0 + rank)
    check("all_reduce_max", lambda t: dfn.all_reduce(t, op=dist.ReduceOp.MAX), x, 1.0 + rank)
    check("all_gather", lambda t: dfn.all_gather(t), x, 2.0 - rank)
    check("broadcast", lambda t: dfn.broadcast(t, src=1), x, 1.0 + 2 * rank)
    check("reduce_scatter",
          lambda t: dfn.reduce_scatter(torch.zeros(2), list(t.split(2))), x, 3.0 - rank)
    check("all_to_all",
          lambda t: dfn.all_to_all([torch.zeros(2), torch.zeros(2)], list(t.split(2))), x,
          1.0 + rank)
    check("gather", lambda t: dfn.gather(t, dst=0), x, 1.5 + rank)
    check("scatter", lambda t: dfn.scatter(list(t.split(2)), src=1), x, 2.0 + rank)
    # (what reduce leaves on the other ranks is the backend's business)
    check("reduce", lambda t: dfn.reduce(t, dst=1), x, 1.0 + rank, out_on=(1,))

    # 3. two DDP encoders trained with the global-batch loss
    enc_i = DDP(nn.Linear(5, 4))
    enc_t = DDP(nn.Linear(6, 4))
    g = np.random.default_rng(0)
    with torch.no_grad():
        for p in list(enc_i.parameters()) + list(enc_t.parameters()):
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    opt = torch.optim.Adam(list(enc_i.parameters()) + list(enc_t.parameters()), lr=0.05)
    losses = []
    for step in range(4):
        a = arr(100 + 10 * step + rank, (3, 5))
        b = arr(200 + 10 * step + rank, (3, 6))
        loss = clip_loss(F.normalize(enc_i(a), dim=1), F.normalize(enc_t(b), dim=1), rank)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(round(t.item(), 6))
    res["ddp_losses"] = losses
    res["ddp_weight"] = r6(enc_i.module.weight)

    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
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
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
