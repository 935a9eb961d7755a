"""DTensor ops model code runs on sharded activations, on a 1-D mesh of 2 ranks (gloo):
torch.nn.functional (gelu, silu, layer_norm with DTensor weights, rms_norm, softmax /
log_softmax over the split and an unsplit dim, dropout in eval and with p=0, cross_entropy on a
batch-split input), view / reshape / transpose / permute / unflatten, pad / flip / roll /
repeat_interleave / normalize / expand_as beside the split dim, cat / stack, argmax / max /
topk / sort / cumsum, in-place ops (mul_, add_, clamp_, masked_fill_, copy_ between layouts),
reductions to Partial, the DTensor factories and the *_like ops, with gradients through a chain
of them. Records values, placements and the collectives CommDebugMode counts for each. Rank 0
writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.tensor as dt
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode


def r5(t):
    if isinstance(t, DTensor):
        t = t.full_tensor()
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def pl(t):
    return [str(p) for p in t.placements] if isinstance(t, DTensor) else type(t).__name__


def counts(cm):
    return {str(k): v for k, v in sorted(cm.get_comm_counts().items(), key=lambda kv: str(kv[0]))}


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (world_size,))
    g = np.random.default_rng(3)
    full = torch.from_numpy(g.standard_normal((2, 6, 8)).astype(np.float32))
    w = torch.from_numpy(1 + 0.2 * g.standard_normal(8).astype(np.float32))
    b = torch.from_numpy(0.1 * g.standard_normal(8).astype(np.float32))
    x = distribute_tensor(full, mesh, [Shard(1)])  # sequence-split activations
    dw = distribute_tensor(w, mesh, [Replicate()])
    db = distribute_tensor(b, mesh, [Replicate()])
    res = {}

    def rec(name, fn, ref=None, with_counts=True):
        with CommDebugMode() as cm:
            try:
                y = fn()
            except Exception as e:  # noqa: BLE001  (a refusal is a result too)
                res[name] = {"error": type(e).__name__}
                return None
        outs = y if isinstance(y, (tuple, list)) else [y]
        entry = {"placements": [pl(o) for o in outs], "value": [r5(o) for o in outs]}
        if with_counts:
            entry["counts"] = counts(cm)
        if ref is not None:
            refs = ref() if callable(ref) else ref
            refs = refs if isinstance(refs, (tuple, list)) else [refs]
            entry["matches_plain"] = all(bool(torch.allclose(
                o.full_tensor() if isinstance(o, DTensor) else o, r.to(o.dtype), atol=1e-5))
                for o, r in zip(outs, refs))
        res[name] = entry
        return y

    # 1. functional ops
    rec("gelu", lambda: F.gelu(x, approximate="tanh"), lambda: F.gelu(full, approximate="tanh"))
    rec("silu", lambda: F.silu(x), lambda: F.silu(full))
    rec("layer_norm", lambda: F.layer_norm(x, (8,), dw, db), lambda: F.layer_norm(full, (8,), w, b))
    rec("rms_norm", lambda: F.rms_norm(x, (8,), dw, eps=1e-6),
        lambda: F.rms_norm(full, (8,), w, eps=1e-6))
    rec("softmax_last", lambda: F.softmax(x, dim=-1), lambda: F.softmax(full, dim=-1))
    rec("softmax_split_dim", lambda: F.softmax(x, dim=1), lambda: F.softmax(full, dim=1))
    rec("log_softmax_split_dim", lambda: F.log_softmax(x, dim=1),
        lambda: F.log_softmax(full, dim=1))
    rec("dropout_eval", lambda: F.dropout(x, 0.5, training=False), full)
    rec("dropout_p0", lambda: F.dropout(x, 0.0, training=True), full)
    logits = torch.from_numpy(g.standard_normal((6, 5)).astype(np.float32))
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    dl = distribute_tensor(logits, mesh, [Shard(0)])
    dtg = distribute_tensor(target, mesh, [Shard(0)])
    rec("cross_entropy_batch_split", lambda: F.cross_entropy(dl, dtg),
        lambda: F.cross_entropy(logits, target))

    # 2. views across the split dim
    rec("view_flatten_split", lambda: x.view(2, 48), lambda: full.view(2, 48))
    rec("reshape_split_last", lambda: x.reshape(2, 6, 2, 4), lambda: full.reshape(2, 6, 2, 4))
    rec("transpose", lambda: x.transpose(1, 2), lambda: full.transpose(1, 2))
    rec("permute", lambda: x.permute(2, 0, 1), lambda: full.permute(2, 0, 1))
    rec("unflatten_last", lambda: x.unflatten(-1, (2, 4)), lambda: full.unflatten(-1, (2, 4)))
    rec("contiguous_after_t", lambda: x.transpose(1, 2).contiguous(),
        lambda: full.transpose(1, 2).contiguous())
    rec("cat_split_dim", lambda: torch.cat([x, x * 2], dim=1),
        lambda: torch.cat([full, full * 2], dim=1))
    rec("cat_other_dim", lambda: torch.cat([x, x * 2], dim=2),
        lambda: torch.cat([full, full * 2], dim=2))
    rec("stack", lambda: torch.stack([x, -x]), lambda: torch.stack([full, -full]))

    rec("pad_last", lambda: F.pad(x, (1, 2)), lambda: F.pad(full, (1, 2)))
    rec("flip_last", lambda: torch.flip(x, dims=[2]), lambda: torch.flip(full, dims=[2]))
    rec("roll_last", lambda: torch.roll(x, 1, dims=2), lambda: torch.roll(full, 1, dims=2))
    rec("repeat_interleave_last", lambda: x.repeat_interleave(2, dim=2),
        lambda: full.repeat_interleave(2, dim=2))
    rec("normalize_last", lambda: F.normalize(x, dim=-1), lambda: F.normalize(full, dim=-1))
    rec("expand_as", lambda: x[:, :, :1].expand_as(x), lambda: full[:, :, :1].expand_as(full))

    # 3. index-returning and ordered ops
    rec("argmax_last", lambda: x.argmax(-1), lambda: full.argmax(-1))
    # (torch gathers twice here, ember once: the count is left out)
    rec("argmax_split_dim", lambda: x.argmax(1), lambda: full.argmax(1), with_counts=False)
    rec("max_dim_last", lambda: tuple(x.max(dim=-1)), lambda: tuple(full.max(dim=-1)))
    rec("topk_last", lambda: tuple(x.topk(3, dim=-1)), lambda: tuple(full.topk(3, dim=-1)))
    rec("topk_split_dim", lambda: tuple(x.topk(2, dim=1)), lambda: tuple(full.topk(2, dim=1)))
    rec("sort_last", lambda: tuple(torch.sort(x, dim=-1, descending=True)),
        lambda: tuple(torch.sort(full, dim=-1, descending=True)))
    rec("cumsum_last", lambda: x.cumsum(-1), lambda: full.cumsum(-1))
    rec("cumsum_split_dim", lambda: x.cumsum(1), lambda: full.cumsum(1))

    # 4. reductions
    rec("sum_split_dim", lambda: x.sum(1), lambda: full.sum(1))
    rec("mean_all", lambda: x.mean(), lambda: full.mean())
    rec("amax_split_dim", lambda: x.amax(dim=1), lambda: full.amax(dim=1))
    rec("norm_last", lambda: torch.linalg.vector_norm(x, dim=-1),
        lambda: torch.linalg.vector_norm(full, dim=-1))
    rec("var_last", lambda: x.var(-1), lambda: full.var(-1))
    rec("prod_last", lambda: x.prod(-1), lambda: full.prod(-1))
    rec("count_nonzero_last", lambda: torch.count_nonzero(x > 0, dim=-1),
        lambda: torch.count_nonzero(full > 0, dim=-1))

    # 5. in-place ops keep the layout
    def inplace():
        y = distribute_tensor(full.clone(), mesh, [Shard(1)])
        y.mul_(2).add_(1).clamp_(min=-0.5, max=2.0)
        y.masked_fill_(y > 1.5, 0.25)
        return y

    plain = (full * 2 + 1).clamp(-0.5, 2.0)
    rec("inplace_chain", inplace, lambda: plain.masked_fill(plain > 1.5, 0.25))

    def copy_between():
        y = distribute_tensor(torch.zeros(2, 6, 8), mesh, [Shard(2)])
        y.copy_(x)
        return y

    rec("copy_between_layouts", copy_between, full)

    # 6. factories and *_like
    rec("factory_ones", lambda: dt.ones(4, 3, device_mesh=mesh, placements=[Shard(0)]),
        torch.ones(4, 3))
    rec("factory_full", lambda: dt.full((3, 5), 2.5, device_mesh=mesh, placements=[Shard(1)]),
        torch.full((3, 5), 2.5))
    rec("factory_zeros_partial",
        lambda: dt.zeros(2, 2, device_mesh=mesh, placements=[Partial()]), torch.zeros(2, 2))
    rec("ones_like", lambda: torch.ones_like(x), torch.ones(2, 6, 8))
    rec("full_like", lambda: torch.full_like(x, 3.0), torch.full((2, 6, 8), 3.0))
    rec("new_zeros", lambda: x.new_zeros(3, 2), torch.zeros(3, 2))
    # 7. gradients through a chain of them
    xg = distribute_tensor(full, mesh, [Shard(1)]).requires_grad_()
    wg = distribute_tensor(w, mesh, [Replicate()]).requires_grad_()
    with CommDebugMode() as cm:
        h = F.layer_norm(xg, (8,), wg)
        h = F.gelu(h).transpose(1, 2)
        scale = distribute_tensor(torch.arange(8.0).reshape(1, 8, 1), mesh, [Replicate()])
        loss = (F.softmax(h, dim=1) * scale).sum()
        loss.backward()
    fx = full.clone().requires_grad_()
    fw = w.clone().requires_grad_()
    hh = F.gelu(F.layer_norm(fx, (8,), fw)).transpose(1, 2)
    (F.softmax(hh, dim=1) * torch.arange(8.0).reshape(1, 8, 1)).sum().backward()
    res["grad_chain"] = {"loss": round(float(loss.full_tensor()), 5), "x_grad": r5(xg.grad),
                         "x_grad_ref": r5(fx.grad), "w_grad": r5(wg.grad),
                         "w_grad_ref": r5(fw.grad), "x_grad_placements": pl(xg.grad),
                         "w_grad_placements": pl(wg.grad), "counts": counts(cm)}
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
