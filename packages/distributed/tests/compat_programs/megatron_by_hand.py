"""Megatron-style tensor parallelism written by hand, on 2 ranks (gloo): the region functions as
torch.autograd.Function subclasses that call torch.distributed in forward and backward (copy /
reduce / gather along the last dim / scatter), a vocabulary-parallel embedding (ids outside a
rank's rows masked, the partial lookups all_reduce'd), column- and row-parallel linear layers,
and the vocabulary-parallel cross entropy (logits max all_reduce'd with MAX, the target logit
and the sum of exponentials with SUM) with its own backward; trained with SGD and momentum, it
must give the losses and gradients of the same model in one process; the gather / scatter
functions' gradients in float64. Rank 0 writes OUT/result.json (every rank's results)."""

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

V, H, FF, S = 10, 6, 8, 5  # vocabulary, width, hidden, tokens


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def arr(seed, *shape, scale=0.5):
    return torch.from_numpy((scale * np.random.default_rng(seed).standard_normal(shape))
                            .astype(np.float32))


class CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class GatherFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, g):
        return g.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()].contiguous()


class ScatterToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()].contiguous()

    @staticmethod
    def backward(ctx, g):
        parts = [torch.empty_like(g) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, g.contiguous())
        return torch.cat(parts, dim=-1)


class VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, vocab_start):
        lmax = logits.max(dim=-1)[0]
        dist.all_reduce(lmax, op=dist.ReduceOp.MAX)
        logits = logits - lmax.unsqueeze(-1)
        n = logits.shape[-1]
        mask = (target < vocab_start) | (target >= vocab_start + n)
        local_t = (target - vocab_start).masked_fill(mask, 0)
        picked = logits.gather(-1, local_t.unsqueeze(-1)).squeeze(-1).masked_fill(mask, 0.0)
        dist.all_reduce(picked)
        exp = logits.exp()
        sum_exp = exp.sum(dim=-1)
        dist.all_reduce(sum_exp)
        loss = sum_exp.log() - picked
        softmax = exp / sum_exp.unsqueeze(-1)
        ctx.save_for_backward(softmax, mask, local_t)
        return loss

    @staticmethod
    def backward(ctx, g):
        softmax, mask, local_t = ctx.saved_tensors
        grad = softmax.clone()
        onehot = F.one_hot(local_t, grad.shape[-1]).to(grad.dtype)
        grad = grad - onehot * (~mask).unsqueeze(-1).to(grad.dtype)
        return grad * g.unsqueeze(-1), None, None


class TPModel(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        self.rank, self.world = rank, world
        self.vs = V // world * rank
        vl, fl = V // world, FF // world
        emb, w1, b1, w2, b2, head = full_weights()
        self.emb = nn.Parameter(emb[self.vs:self.vs + vl].clone())
        self.w1 = nn.Parameter(w1[rank * fl:(rank + 1) * fl].clone())  # column split
        self.b1 = nn.Parameter(b1[rank * fl:(rank + 1) * fl].clone())
        self.w2 = nn.Parameter(w2[:, rank * fl:(rank + 1) * fl].clone())  # row split
        self.b2 = nn.Parameter(b2.clone())
        self.head = nn.Parameter(head[self.vs:self.vs + vl].clone())  # vocabulary split

    def forward(self, ids, target):
        vl = self.emb.shape[0]
        mask = (ids < self.vs) | (ids >= self.vs + vl)
        e = F.embedding((ids - self.vs).masked_fill(mask, 0), self.emb)
        e = e.masked_fill(mask.unsqueeze(-1), 0.0)
        x = ReduceFromTP.apply(e)
        h = F.gelu(F.linear(CopyToTP.apply(x), self.w1, self.b1))
        y = ReduceFromTP.apply(F.linear(h, self.w2)) + self.b2
        x = x + y
        logits = F.linear(CopyToTP.apply(x), self.head)
        full_h = GatherFromTP.apply(h)  # the hidden units of both ranks, for the record
        return VocabParallelCrossEntropy.apply(logits, target, self.vs).mean(), full_h


def full_weights():
    return arr(1, V, H), arr(2, FF, H), arr(3, FF), arr(4, H, FF), arr(5, H), arr(6, V, H)


class Dense(nn.Module):
    def __init__(self):
        super().__init__()
        emb, w1, b1, w2, b2, head = full_weights()
        self.emb, self.w1, self.b1 = nn.Parameter(emb), nn.Parameter(w1), nn.Parameter(b1)
        self.w2, self.b2, self.head = nn.Parameter(w2), nn.Parameter(b2), nn.Parameter(head)

    def forward(self, ids, target):
        x = F.embedding(ids, self.emb)
        h = F.gelu(F.linear(x, self.w1, self.b1))
        x = x + F.linear(h, self.w2, self.b2)
        return F.cross_entropy(F.linear(x, self.head), target), h


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}
    tp, dense = TPModel(rank, world), Dense()
    opt = torch.optim.SGD(tp.parameters(), lr=0.3, momentum=0.9)
    dopt = torch.optim.SGD(dense.parameters(), lr=0.3, momentum=0.9)
    losses, dlosses = [], []
    for step in range(3):
        g = np.random.default_rng(50 + step)
        ids = torch.from_numpy(g.integers(0, V, S))
        target = torch.from_numpy(g.integers(0, V, S))
        loss, h = tp(ids, target)
        loss.backward()
        dloss, dh = dense(ids, target)
        dloss.backward()
        losses.append(round(loss.item(), 6))
        dlosses.append(round(dloss.item(), 6))
        if step == 0:
            fl, vl = FF // world, V // world
            res["hidden_matches"] = bool(torch.allclose(h, dh, atol=1e-6))
            res["grad_w1"] = r6(tp.w1.grad)
            res["grad_matches"] = {
                "emb": bool(torch.allclose(tp.emb.grad, dense.emb.grad[tp.vs:tp.vs + vl],
                                           atol=1e-6)),
                "w1": bool(torch.allclose(tp.w1.grad, dense.w1.grad[rank * fl:(rank + 1) * fl],
                                          atol=1e-6)),
                "w2": bool(torch.allclose(tp.w2.grad,
                                          dense.w2.grad[:, rank * fl:(rank + 1) * fl],
                                          atol=1e-6)),
                "b2": bool(torch.allclose(tp.b2.grad, dense.b2.grad, atol=1e-6)),
                "head": bool(torch.allclose(tp.head.grad, dense.head.grad[tp.vs:tp.vs + vl],
                                            atol=1e-6))}
        opt.step()
        opt.zero_grad()
        dopt.step()
        dopt.zero_grad()
    res["losses"], res["dense_losses"] = losses, dlosses
    res["head_after"] = r6(tp.head)

    # the gather / scatter pair's backward in float64
    x = torch.from_numpy(np.random.default_rng(7 + rank).standard_normal((2, 3))) \
        .requires_grad_()
    w = torch.arange(12, dtype=torch.float64).reshape(2, 6)
    gathered = GatherFromTP.apply(x)
    (gathered * w).sum().backward()
    res["gather_dtype"] = str(gathered.dtype)
    res["gather_grad"] = x.grad.tolist()
    y = torch.from_numpy(np.random.default_rng(9).standard_normal((2, 4))).requires_grad_()
    s = ScatterToTP.apply(y)
    (s * (rank + 1.0)).sum().backward()
    res["scatter_grad"] = y.grad.tolist()

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
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
