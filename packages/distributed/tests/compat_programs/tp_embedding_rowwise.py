"""Row-split (vocabulary-parallel) embeddings on 2 ranks (gloo), as the tensor-parallel
tutorials shard a language model's token embedding: RowwiseParallel on nn.Embedding (with
Replicate and Shard(1) inputs), a plain F.embedding on a Shard(0) DTensor weight, padding_idx,
ids outside one rank's rows on every rank, and an embedding followed by a column-split head.
Records outputs, weight gradients (their placements too), one optimizer step and the
collectives CommDebugMode counts. Rank 0 writes OUT/result.json."""

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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


def r5(t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


def init_(module, seed):
    """Weights from NumPy (the two libraries' random generators differ)."""
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for prm in module.parameters():
            prm.copy_(torch.from_numpy(g.standard_normal(prm.shape).astype(np.float32)))
    return module


class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim, padding_idx=3)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        return self.head(torch.tanh(self.tok(ids)))


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    g = np.random.default_rng(11)
    res = {}
    ids = torch.tensor([[0, 4, 9, 3], [8, 1, 1, 5]])  # rows of both ranks (vocab 10: 5 and 5)

    # 1. RowwiseParallel on an nn.Embedding, the ids Replicate (as the tutorials plan it)
    emb = init_(nn.Embedding(10, 6), 0)
    ref = nn.Embedding(10, 6)
    ref.load_state_dict(emb.state_dict())
    parallelize_module(emb, mesh, RowwiseParallel(input_layouts=Replicate()))
    with CommDebugMode() as cm:
        y = emb(ids)
        (y * torch.arange(6.0)).sum().backward()
    y_ref = ref(ids)
    (y_ref * torch.arange(6.0)).sum().backward()
    res["rowwise"] = {
        "out_is_dtensor": isinstance(y, DTensor), "out": r5(y), "same_as_plain": bool(torch.allclose(
            y, y_ref, atol=1e-6)),
        "weight_placements": [str(p) for p in emb.weight.placements],
        "grad_placements": [str(p) for p in emb.weight.grad.placements],
        "grad": r5(emb.weight.grad), "grad_ref": r5(ref.weight.grad),
        "local_grad_rows": list(emb.weight.grad.to_local().shape),
        "counts": counts(cm), "total": cm.get_total_counts(),
    }

    # 1b. the default input layout is Shard(-1): each rank's ids are its columns of the whole
    emb2 = init_(nn.Embedding(10, 6), 0)
    parallelize_module(emb2, mesh, RowwiseParallel())
    with CommDebugMode() as cm:
        y2 = emb2((ids + rank) % 10)
    res["rowwise_default_layout"] = {"shape": list(y2.shape), "out": r5(y2),
                                     "counts": counts(cm)}

    # 2. plain F.embedding on a Shard(0) DTensor weight, padding_idx, then the output kept as a
    # DTensor (use_local_output is not involved) and made whole
    w = torch.from_numpy(g.standard_normal((7, 3)).astype(np.float32))
    dw = distribute_tensor(w, mesh, [Shard(0)]).requires_grad_()
    di = distribute_tensor(torch.tensor([6, 0, 2, 3, 6]), mesh, [Replicate()])
    with CommDebugMode() as cm:
        o = F.embedding(di, dw, padding_idx=2)
        placements = [str(p) for p in o.placements]
        whole = o.redistribute(mesh, [Replicate()])
        (whole * whole).sum().backward()
    wr = w.clone().requires_grad_()
    orr = F.embedding(torch.tensor([6, 0, 2, 3, 6]), wr, padding_idx=2)
    (orr * orr).sum().backward()
    res["functional"] = {
        "out_is_partial": "Partial" in placements[0] or "MaskPartial" in placements[0],
        "out": r5(whole), "out_ref": r5(orr),
        "grad_placements": [str(p) for p in dw.grad.placements],
        "grad": r5(dw.grad), "grad_ref": r5(wr.grad),
        "counts": counts(cm),
    }

    # 3. a tiny LM: row-split token embedding (Replicate ids in, Shard(1) out for the next
    # layer's input as in the tutorials' sequence-parallel plans: here Replicate out), column-
    # split head; one SGD step, then the loss again
    lm = init_(TinyLM(10, 4), 1)
    lm_ref = TinyLM(10, 4)
    lm_ref.load_state_dict(lm.state_dict())
    parallelize_module(lm, mesh, {"tok": RowwiseParallel(input_layouts=Replicate()),
                                  "head": ColwiseParallel(output_layouts=Replicate())})
    opt = torch.optim.SGD(lm.parameters(), lr=0.5)
    opt_ref = torch.optim.SGD(lm_ref.parameters(), lr=0.5)
    target = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    losses, losses_ref = [], []
    for _ in range(2):
        with CommDebugMode() as cm:
            loss = F.cross_entropy(lm(ids).reshape(-1, 10), target.reshape(-1))
            loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(loss.item(), 5))
        loss_ref = F.cross_entropy(lm_ref(ids).reshape(-1, 10), target.reshape(-1))
        loss_ref.backward()
        opt_ref.step()
        opt_ref.zero_grad()
        losses_ref.append(round(loss_ref.item(), 5))
    res["tiny_lm"] = {"losses": losses, "losses_ref": losses_ref, "counts": counts(cm),
                      "tok_weight": r5(lm.tok.weight), "tok_weight_ref": r5(lm_ref.tok.weight)}
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
