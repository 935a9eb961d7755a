"""The Llama-style tensor + sequence parallel plan of PyTorch's TP tutorial, on 2 ranks (gloo):
a token embedding split by rows that hands on sequence-split activations
(RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))), RMSNorms under
SequenceParallel, PrepareModuleInput in front of the attention and the feed-forward, column /
row split attention projections (the local head count halved, causal scaled-dot-product
attention) and SwiGLU, a final norm and a column-split output head kept as a DTensor, the loss
under loss_parallel(), and AdamW steps with gradient clipping. A plain copy of the model trains
beside it; records losses, a few gradients, placements and the collectives of one step.
Rank 0 writes OUT/result.json."""

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
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

VOCAB, DIM, HEADS, HIDDEN, SEQ, BATCH = 16, 8, 2, 12, 6, 2


def r5(t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.n_heads = HEADS
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, mask_scale):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=mask_scale)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = RMSNorm(DIM)
        self.feed_forward = FeedForward()

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x), 0.5)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block(), Block()])
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        h = self.tok_embeddings(ids)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def init_(model, seed):
    """Weights from NumPy (the two libraries' random generators differ)."""
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            if "norm" in name:
                prm.copy_(torch.from_numpy(1.0 + 0.1 * g.standard_normal(prm.shape)).float())
            else:
                prm.copy_(torch.from_numpy(0.4 * g.standard_normal(prm.shape)).float())
    return model


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    tp_mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=("tp",))
    res = {}
    model = init_(Llama(), 0)
    ref = Llama()
    ref.load_state_dict(model.state_dict())

    parallelize_module(model, tp_mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), use_local_output=False),
    })
    for block in model.layers:
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1), None),
                                            desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        })
        block.attention.n_heads = HEADS // world_size

    res["placements"] = {name: [str(p) for p in prm.placements]
                         for name, prm in model.named_parameters()}
    res["all_dtensor"] = all(isinstance(p, DTensor) for p in model.parameters())

    g = np.random.default_rng(5)
    opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.1)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=0.02, weight_decay=0.1)
    losses, losses_ref, norms, norms_ref = [], [], [], []
    for step in range(3):
        ids = torch.from_numpy(g.integers(0, VOCAB, (BATCH, SEQ + 1)))
        inp, labels = ids[:, :-1], ids[:, 1:]
        with CommDebugMode() as cm:
            pred = model(inp)
            with loss_parallel():
                loss = F.cross_entropy(pred.flatten(0, 1), labels.flatten(0, 1))
                loss.backward()
        if step == 0:
            res["pred_placements"] = [str(p) for p in pred.placements]
            res["pred_local_shape"] = list(pred.to_local().shape)
            res["loss_type"] = type(loss).__name__
            res["step_counts"] = counts(cm)
            res["step_total"] = cm.get_total_counts()
            res["grads"] = {n: r5(model.get_parameter(n).grad) for n in (
                "tok_embeddings.weight", "layers.0.attention.wq.weight",
                "layers.1.feed_forward.w2.weight", "norm.weight", "output.weight")}
        norms.append(round(float(nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                                 .full_tensor()), 4))
        opt.step()
        opt.zero_grad()
        losses.append(round(float(loss.full_tensor() if isinstance(loss, DTensor) else loss), 5))

        pr = ref(inp)
        lr_ = F.cross_entropy(pr.flatten(0, 1), labels.flatten(0, 1))
        lr_.backward()
        if step == 0:
            res["grads_ref"] = {n: r5(ref.get_parameter(n).grad) for n in res["grads"]}
        norms_ref.append(round(float(nn.utils.clip_grad_norm_(ref.parameters(), 1.0)), 4))
        opt_ref.step()
        opt_ref.zero_grad()
        losses_ref.append(round(lr_.item(), 5))
    res["losses"], res["losses_ref"] = losses, losses_ref
    res["grad_norms"], res["grad_norms_ref"] = norms, norms_ref
    res["final_wo"] = r5(model.layers[1].attention.wo.weight)
    res["final_wo_ref"] = r5(ref.layers[1].attention.wo.weight)
    res["adam_state_placements"] = sorted(
        {str(v.placements) for st in opt.state.values() for k, v in st.items()
         if isinstance(v, DTensor)})
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
