"""Pipeline parallelism written by hand with point-to-point messages, on 3 ranks (gloo): an MLP
cut into 3 stages, 4 micro-batches sent forward with isend (the micro-batch index as the tag,
the receiver posting its irecvs for every micro-batch up front and taking them in reverse
order), the activation gradients sent back with tags too, backward through
torch.autograd.backward(outputs, grad_tensors) on each stage, then an optimizer step; the
losses and every stage's gradients must be those of the whole model on the whole batch in
one process. Rank 0 writes OUT/result.json (every rank's results)."""

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

MB, B, D = 4, 3, 5  # micro-batches, rows per micro-batch, width


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def stages():
    g = np.random.default_rng(0)
    mods = [nn.Sequential(nn.Linear(D, D), nn.Tanh()), nn.Sequential(nn.Linear(D, D), nn.GELU()),
            nn.Linear(D, 2)]
    with torch.no_grad():
        for m in mods:
            for p in m.parameters():
                p.copy_(torch.from_numpy((0.6 * g.standard_normal(p.shape)).astype(np.float32)))
    return mods


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}
    g = np.random.default_rng(1)
    X = torch.from_numpy(g.standard_normal((MB * B, D)).astype(np.float32))
    Y = torch.from_numpy(g.standard_normal((MB * B, 2)).astype(np.float32))
    stage = stages()[rank]
    opt = torch.optim.SGD(stage.parameters(), lr=0.2)

    for it in range(2):
        inputs, outputs = {}, {}
        # forward: receive every micro-batch's activations (posted up front), compute, send on
        if rank > 0:
            bufs = {m: torch.empty(B, D) for m in range(MB)}
            works = {m: dist.irecv(bufs[m], src=rank - 1, tag=m) for m in range(MB)}
        sends = []
        losses = []
        for m in (reversed(range(MB)) if rank > 0 else range(MB)):
            if rank == 0:
                x = X[m * B:(m + 1) * B]
            else:
                works[m].wait()
                x = bufs[m].requires_grad_()
            inputs[m] = x
            y = stage(x)
            if rank == world - 1:
                y = F.mse_loss(y, Y[m * B:(m + 1) * B]) / MB
                losses.append((m, y.item()))
            else:
                sends.append(dist.isend(y.detach().contiguous(), dst=rank + 1, tag=m))
            outputs[m] = y
        for w in sends:
            w.wait()
        # backward: the last stage starts, the others get their output gradients (tags again)
        if rank < world - 1:
            gbufs = {m: torch.empty(B, D) for m in range(MB)}
            gworks = {m: dist.irecv(gbufs[m], src=rank + 1, tag=100 + m) for m in range(MB)}
        sends = []
        for m in range(MB):
            if rank == world - 1:
                torch.autograd.backward([outputs[m]])
            else:
                gworks[m].wait()
                torch.autograd.backward([outputs[m]], grad_tensors=[gbufs[m]])
            if rank > 0:
                sends.append(dist.isend(inputs[m].grad.contiguous(), dst=rank - 1,
                                        tag=100 + m))
        for w in sends:
            w.wait()
        res[f"grads{it}"] = [r6(p.grad) for p in stage.parameters()]
        if rank == world - 1:
            res[f"losses{it}"] = [round(v, 6) for _, v in sorted(losses)]
        opt.step()
        opt.zero_grad()

    # the whole model in one process
    whole = nn.Sequential(*stages())
    wopt = torch.optim.SGD(whole.parameters(), lr=0.2)
    for it in range(2):
        loss = F.mse_loss(whole(X), Y)
        loss.backward()
        mine = list(whole[rank].parameters())
        res[f"matches{it}"] = all(
            np.allclose(np.asarray(a), r6(p.grad), atol=1e-5)
            for a, p in zip(res[f"grads{it}"], mine))
        if rank == world - 1:
            res[f"whole_loss{it}"] = round(loss.item(), 6)
        wopt.step()
        wopt.zero_grad()
    res["weights"] = r6(list(stage.parameters())[0])

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
