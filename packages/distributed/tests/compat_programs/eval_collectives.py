"""Collectives as a data-parallel evaluation / mixture-of-experts script uses them, on 2 ranks
(gloo): a DistributedSampler that pads the last batch, predictions gathered with
all_gather_into_tensor (the concatenated output gloo takes) and the padding dropped, per-class
counts summed with all_reduce and reduce_scatter_tensor (SUM and AVG), token routing with
all_to_all_single and uneven split sizes (counts exchanged first, then the tokens, then the
autograd version through torch.distributed.nn.functional), metrics gathered to rank 0 with
gather_object, min / max / product / bitwise reductions, async work handles,
monitored_barrier(wait_all_ranks=True), subgroups from new_group (use_local_synchronization)
and new_subgroups_by_enumeration, and split_group's refusal without a bound device. Rank 0
writes OUT/result.json."""

import argparse
import datetime
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    g = np.random.default_rng(0)

    # 1. evaluation over a sampler that pads 7 samples to 8
    feats = torch.from_numpy(g.standard_normal((7, 4)).astype(np.float32))
    labels = torch.tensor([0, 1, 2, 1, 0, 2, 2])
    weight = torch.from_numpy(g.standard_normal((4, 3)).astype(np.float32))
    ds = TensorDataset(torch.arange(7), feats, labels)
    sampler = DistributedSampler(ds, num_replicas=world_size, rank=rank, shuffle=False)
    loader = DataLoader(ds, batch_size=2, sampler=sampler)
    idx_parts, logit_parts = [], []
    for idx, x, y in loader:
        idx_parts.append(idx)
        logit_parts.append(x @ weight)
    idx_local = torch.cat(idx_parts)
    logits_local = torch.cat(logit_parts)
    # (gloo takes only the concatenated output: torch's refuses NCCL's stacked one)
    stacked = torch.empty(world_size * logits_local.shape[0], 3)
    dist.all_gather_into_tensor(stacked, logits_local)
    flat_idx = torch.empty(world_size * idx_local.numel(), dtype=idx_local.dtype)
    dist.all_gather_into_tensor(flat_idx, idx_local)
    all_logits = stacked.reshape(-1, 3)
    keep = {}
    for i, row in zip(flat_idx.tolist(), all_logits):
        keep.setdefault(i, row)
    preds = torch.stack([keep[i] for i in range(7)]).argmax(1)
    res["eval"] = {"local_idx": idx_local.tolist(), "gathered_idx": flat_idx.tolist(),
                   "preds": preds.tolist(), "acc": round((preds == labels).float().mean().item(), 6)}

    # per-class counts: all_reduce, and reduce_scatter_tensor (each rank keeps its half)
    counts = torch.bincount(logits_local.argmax(1), minlength=4).float()
    total = counts.clone()
    dist.all_reduce(total)
    half = torch.empty(2)
    dist.reduce_scatter_tensor(half, counts, op=dist.ReduceOp.SUM)
    avg_half = torch.empty(2)
    dist.reduce_scatter_tensor(avg_half, counts * (rank + 1), op=dist.ReduceOp.AVG)
    res["counts"] = {"total": total.tolist(), "half_rank0": half.tolist(),
                     "avg_half": avg_half.tolist()}
    halves = [None] * world_size
    dist.all_gather_object(halves, [half.tolist(), avg_half.tolist()])
    res["counts"]["halves"] = halves

    # 2. token routing: rank r sends (r + 1) tokens to rank 0 and (3 - r) to rank 1
    send_counts = torch.tensor([rank + 1, 3 - rank])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    tokens = torch.arange(4, dtype=torch.float32).reshape(4, 1).repeat(1, 2) + 10 * rank
    routed = torch.empty(int(recv_counts.sum()), 2)
    dist.all_to_all_single(routed, tokens, output_split_sizes=recv_counts.tolist(),
                           input_split_sizes=send_counts.tolist())
    res["routing"] = {"recv_counts_rank0": recv_counts.tolist()}
    routed_all = [None] * world_size
    dist.all_gather_object(routed_all, routed.tolist())
    res["routing"]["routed"] = routed_all
    # with autograd: the expert output's gradient flows back to the sender's tokens
    src = (tokens / 10).requires_grad_()
    got = dist_fn.all_to_all_single(torch.empty(int(recv_counts.sum()), 2), src,
                                     recv_counts.tolist(), send_counts.tolist())
    (got * torch.arange(1.0, got.shape[0] + 1).reshape(-1, 1)).sum().backward()
    grads = [None] * world_size
    dist.all_gather_object(grads, src.grad.tolist())
    res["routing"]["autograd_grads"] = grads

    # 3. metrics to rank 0 with gather_object
    metrics = {"rank": rank, "n": len(idx_local), "loss": round(float(logits_local.sum()), 5)}
    gathered = [None] * world_size if rank == 0 else None
    dist.gather_object(metrics, gathered, dst=0)
    res["gather_object"] = gathered if rank == 0 else None

    # 4. other reductions, async handles
    ints = torch.tensor([3 + rank, 10 - 4 * rank, 6, 5 * rank + 1])
    red = {}
    for name, op in (("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN),
                     ("product", dist.ReduceOp.PRODUCT), ("band", dist.ReduceOp.BAND),
                     ("bor", dist.ReduceOp.BOR), ("bxor", dist.ReduceOp.BXOR)):
        t = ints.clone()
        dist.all_reduce(t, op=op)
        red[name] = t.tolist()
    res["reductions"] = red
    works = []
    bufs = [torch.full((3,), float(rank + i)) for i in range(3)]
    for b in bufs:
        works.append(dist.all_reduce(b, async_op=True))
    for w in works:
        w.wait()
    res["async"] = {"values": [b.tolist() for b in bufs],
                    "completed": [w.is_completed() for w in works]}
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)

    # 5. subgroups
    solo = dist.new_group([rank], use_local_synchronization=True)
    both = dist.new_group([1, 0])
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, group=solo)
    u = torch.tensor([rank + 1.0])
    dist.all_reduce(u, group=both)
    mine, groups = dist.new_subgroups_by_enumeration([[0], [1]])
    v = torch.tensor([rank + 5.0])
    dist.all_reduce(v, group=mine)
    res["subgroups"] = {
        "solo": t.tolist(), "both": u.tolist(), "both_ranks": dist.get_process_group_ranks(both),
        "solo_size": dist.get_world_size(solo), "solo_rank": dist.get_rank(solo),
        "enumerated": v.tolist(), "n_groups": len(groups),
        "global_of_group_rank0": dist.get_global_rank(mine, 0),
        "group_rank_of_me": dist.get_group_rank(mine, rank),
    }
    try:
        dist.split_group(split_ranks=[[0], [1]])
        res["split_group"] = "split"
    except RuntimeError as e:
        res["split_group"] = str(e)
    try:
        dist.split_group(split_ranks=[])
    except ValueError as e:
        res["split_group_empty"] = str(e)
    dist.barrier()
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
