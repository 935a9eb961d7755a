"""An expert-parallel mixture-of-experts layer as MoE trainers write it, on 2 ranks (gloo): 4
experts, 2 on each rank; a shared gate routes each token (top-1) and the tokens travel to their
expert's rank with all_to_all_single and uneven split sizes (the counts exchanged first with an
int64 all_to_all_single, then the tokens, through torch.distributed.nn.functional's
differentiable all_to_all_single, and back), including a step in which one rank sends no token
to the other and an expert receives no token; the shared gate and embedding are under
DDP with the experts (different on each rank) kept out of it by
DDP._set_params_and_buffers_to_ignore_for_model, and the list form all_to_all (empty pieces
too). The outputs, loss and gradients must be those of the whole layer computed in one
process. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnnf
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

D, E, T = 4, 4, 6  # model width, experts, tokens per rank


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def arr(seed, *shape, scale=0.5):
    return torch.from_numpy((scale * np.random.default_rng(seed).standard_normal(shape))
                            .astype(np.float32))


class MoE(nn.Module):
    def __init__(self, rank, world):
        super().__init__()
        self.rank, self.world = rank, world
        self.local = E // world
        self.proj = nn.Linear(D, D)
        self.gate = nn.Linear(D, E)
        # this rank's experts: global expert ids rank*local .. rank*local+local-1
        self.experts = nn.ModuleList(nn.Linear(D, D) for _ in range(self.local))
        with torch.no_grad():
            self.proj.weight.copy_(arr(1, D, D))
            self.proj.bias.copy_(arr(2, D))
            self.gate.weight.copy_(arr(3, E, D))
            self.gate.bias.zero_()
            for i, ex in enumerate(self.experts):
                g = rank * self.local + i
                ex.weight.copy_(arr(10 + g, D, D))
                ex.bias.copy_(arr(20 + g, D))

    def forward(self, x, bias=None):
        h = self.proj(x)
        logits = self.gate(h)
        if bias is not None:
            logits = logits + bias
        probs = torch.softmax(logits, dim=-1)
        top_p, top_e = probs.max(dim=-1)
        order = torch.argsort(top_e, stable=True)
        counts = torch.bincount(top_e, minlength=E)  # tokens for each global expert
        send_counts = counts.view(self.world, self.local).sum(dim=1)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        # which local expert each received token is for: exchange the expert ids too
        ids_out = torch.empty(int(recv_counts.sum()), dtype=torch.int64)
        dist.all_to_all_single(ids_out, top_e[order].contiguous(),
                               output_split_sizes=recv_counts.tolist(),
                               input_split_sizes=send_counts.tolist())
        tokens = h[order]
        recv = dnnf.all_to_all_single(
            torch.empty(int(recv_counts.sum()), D), tokens,
            output_split_sizes=recv_counts.tolist(), input_split_sizes=send_counts.tolist())
        out = torch.zeros_like(recv)
        for i, ex in enumerate(self.experts):
            mask = ids_out == self.rank * self.local + i
            out = out.index_put((mask.nonzero().flatten(),), ex(recv[mask]))
        back = dnnf.all_to_all_single(
            torch.empty(tokens.shape[0], D), out,
            output_split_sizes=send_counts.tolist(), input_split_sizes=recv_counts.tolist())
        y = torch.empty_like(back).index_put((order,), back)
        info = {"send": send_counts.tolist(), "recv": recv_counts.tolist(),
                "experts": top_e.tolist()}
        return h + y * top_p.unsqueeze(-1), info


def reference(x_all, bias=None):
    """The whole layer in one process: every expert, every token."""
    proj = nn.Linear(D, D)
    gate = nn.Linear(D, E)
    experts = nn.ModuleList(nn.Linear(D, D) for _ in range(E))
    with torch.no_grad():
        proj.weight.copy_(arr(1, D, D))
        proj.bias.copy_(arr(2, D))
        gate.weight.copy_(arr(3, E, D))
        gate.bias.zero_()
        for g, ex in enumerate(experts):
            ex.weight.copy_(arr(10 + g, D, D))
            ex.bias.copy_(arr(20 + g, D))
    h = proj(x_all)
    logits = gate(h)
    if bias is not None:
        logits = logits + bias
    probs = torch.softmax(logits, dim=-1)
    top_p, top_e = probs.max(dim=-1)
    y = torch.stack([experts[int(e)](h[i]) for i, e in enumerate(top_e)])
    return h + y * top_p.unsqueeze(-1), proj, gate, experts


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}

    moe = MoE(rank, world)
    ignore = [f"experts.{i}.{p}" for i in range(moe.local) for p in ("weight", "bias")]
    DDP._set_params_and_buffers_to_ignore_for_model(moe, ignore)
    model = DDP(moe)
    res["ddp_param_count"] = len(list(model.parameters()))
    # the experts differ on the ranks: DDP's start-up broadcast must have left them alone
    res["expert0_bias_after_ddp"] = r6(moe.experts[0].bias)

    x_all = arr(99, world * T, D, scale=1.0)
    x = x_all[rank * T:(rank + 1) * T]
    target = arr(98, world * T, D)
    steps = []
    biases = [None, torch.tensor([5.0, 5.0, -5.0, -5.0]) if rank == 0 else
              torch.tensor([0.0, 0.0, 0.0, 0.0])]
    for step, bias in enumerate(biases):
        model.zero_grad()
        y, info = model(x, bias)
        loss = F.mse_loss(y, target[rank * T:(rank + 1) * T])
        loss.backward()
        ref_bias = None if bias is None else torch.cat(
            [torch.tensor([5.0, 5.0, -5.0, -5.0]).expand(T, E), torch.zeros(T, E)])
        y_ref, proj, gate, experts = reference(x_all, ref_bias)
        loss_ref = sum(F.mse_loss(y_ref[r * T:(r + 1) * T], target[r * T:(r + 1) * T])
                       for r in range(world)) / world
        loss_ref.backward()
        rec = {"info": info, "y": r6(y), "loss": round(loss.item(), 6),
               "y_matches": bool(torch.allclose(y, y_ref[rank * T:(rank + 1) * T].detach(),
                                                atol=1e-5)),
               # DDP averages the shared gradients; the experts' gradients are this rank's own
               # tokens' plus what other ranks sent (not averaged)
               "gate_grad": r6(moe.gate.weight.grad),
               "gate_grad_matches": bool(torch.allclose(moe.gate.weight.grad, gate.weight.grad,
                                                        atol=1e-5)),
               "proj_grad_matches": bool(torch.allclose(moe.proj.weight.grad, proj.weight.grad,
                                                        atol=1e-5)),
               "expert_grads": [None if ex.weight.grad is None else r6(ex.weight.grad)
                                for ex in moe.experts]}
        want = [experts[rank * moe.local + i].weight.grad for i in range(moe.local)]
        rec["expert_grads_match"] = [
            bool(torch.allclose(ex.weight.grad, w * world if w is not None else
                                torch.zeros(D, D), atol=1e-5))
            for ex, w in zip(moe.experts, want)]
        steps.append(rec)
    res["steps"] = steps

    # list-form all_to_all (gloo wants pieces of one size), and one of empty pieces
    ins = [torch.arange(float(rank * 10 + 2 * j), rank * 10 + 2 * j + 2) for j in range(world)]
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, ins)
    res["list_all_to_all"] = [o.tolist() for o in outs]
    outs = [torch.empty(0, 3) for _ in range(world)]
    dist.all_to_all(outs, [torch.empty(0, 3) for _ in range(world)])
    res["empty_all_to_all"] = [list(o.shape) for o in outs]

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
