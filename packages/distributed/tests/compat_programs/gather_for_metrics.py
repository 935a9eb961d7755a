"""Evaluation-time gathering as accelerate-style helpers do it, on 3 ranks (gloo): outputs of a
different length on each rank padded to the longest (lengths all_gather'd first) with
all_gather, trimmed back and concatenated; a gather to a non-zero dst of padded tensors;
collectives over the dtypes metrics come in (bool, uint8, int8, int32, int64, float16,
bfloat16, float64, complex64; sums and products of the 16-bit floats over 3 ranks rounded
once) with SUM / MAX / MIN / PRODUCT where gloo takes them;
all_gather_into_tensor of a bool mask; broadcast of a uint8 buffer; 0-d scalars; and
all_gather_object of per-rank string predictions. Rank 0 writes OUT/result.json (every rank's
results)."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def vals(t):
    if t.is_complex():
        return [[round(z.real, 5), round(z.imag, 5)] for z in t.flatten().tolist()]
    return np.round(np.asarray(t.float().tolist() if t.dtype == torch.bfloat16 else t.tolist(),
                               dtype=np.float64), 5).tolist()


def pad_across(t, dim=0, pad_value=0):
    size = torch.tensor([t.shape[dim]])
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = max(int(s) for s in sizes)
    if t.shape[dim] == longest:
        return t, [int(s) for s in sizes]
    shape = list(t.shape)
    shape[dim] = longest
    out = t.new_full(shape, pad_value)
    idx = [slice(None)] * t.dim()
    idx[dim] = slice(0, t.shape[dim])
    out[tuple(idx)] = t
    return out, [int(s) for s in sizes]


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}

    # 1. variable-length predictions (logits of 2 classes), padded with -1, gathered, trimmed
    n = [4, 2, 3][rank]
    g = np.random.default_rng(rank)
    logits = torch.from_numpy(g.standard_normal((n, 2)).astype(np.float32))
    labels = torch.arange(n) % 2 + rank
    padded, sizes = pad_across(logits, pad_value=-1.0)
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    allp = torch.cat([gp[:s] for gp, s in zip(gathered, sizes)])
    padded_l, _ = pad_across(labels, pad_value=-100)
    gl = [torch.empty_like(padded_l) for _ in range(world)]
    dist.all_gather(gl, padded_l)
    all_l = torch.cat([x[:s] for x, s in zip(gl, sizes)])
    res["sizes"] = sizes
    res["all_preds"] = allp.argmax(dim=-1).tolist()
    res["all_labels"] = all_l.tolist()
    res["all_logits"] = vals(allp)

    # 2. gather to rank 2 (not 0)
    out_list = [torch.empty_like(padded) for _ in range(world)] if rank == 2 else None
    dist.gather(padded, out_list, dst=2)
    if rank == 2:
        res["gather_dst2"] = [vals(t) for t in out_list]

    # 3. dtypes
    dt = {}
    cases = [("bool", torch.tensor([rank == 0, rank == 1, False, True])),
             ("uint8", torch.tensor([rank + 1, 200, 3], dtype=torch.uint8)),
             ("int8", torch.tensor([rank - 1, -100, 7], dtype=torch.int8)),
             ("int32", torch.tensor([rank + 5, 2 ** 30], dtype=torch.int32)),
             ("int64", torch.tensor([rank * 2 ** 40, -1])),
             ("float16", torch.tensor([0.1 * (rank + 1), 1000.0], dtype=torch.float16)),
             ("bfloat16", torch.tensor([0.1 * (rank + 1), 3.0], dtype=torch.bfloat16)),
             ("float64", torch.tensor([1 / 3 + rank, -2.5], dtype=torch.float64))]
    for name, t in cases:
        rec = {}
        for opname in ("SUM", "MAX", "MIN", "PRODUCT"):
            x = t.clone()
            try:
                dist.all_reduce(x, op=getattr(dist.ReduceOp, opname))
                rec[opname] = [vals(x), str(x.dtype)]
            except Exception as e:  # noqa: BLE001 - the class is what is compared
                rec[opname] = type(e).__name__
        parts = [torch.empty_like(t) for _ in range(world)]
        try:
            dist.all_gather(parts, t)
            rec["all_gather"] = [vals(p) for p in parts]
        except Exception as e:  # noqa: BLE001
            rec["all_gather"] = type(e).__name__
        x = t.clone()
        try:
            dist.broadcast(x, src=1)
            rec["broadcast"] = vals(x)
        except Exception as e:  # noqa: BLE001
            rec["broadcast"] = type(e).__name__
        dt[name] = rec
    c = torch.tensor([1 + 1j * rank, 2 - 1j], dtype=torch.complex64)
    dist.all_reduce(c)
    dt["complex64_sum"] = [vals(c), str(c.dtype)]
    parts = [torch.empty_like(c) for _ in range(world)]
    dist.all_gather(parts, c)
    dt["complex64_gather_dtype"] = str(parts[0].dtype)
    res["dtypes"] = dt

    # 4. a bool mask into one tensor, a uint8 buffer broadcast, 0-d scalars
    mask = torch.tensor([rank % 2 == 0, True, rank == 2])
    out_mask = torch.empty(world * 3, dtype=torch.bool)
    dist.all_gather_into_tensor(out_mask, mask)
    res["mask"] = out_mask.tolist()
    buf = torch.tensor(list(b"ember?"), dtype=torch.uint8) if rank == 1 else \
        torch.zeros(6, dtype=torch.uint8)
    dist.broadcast(buf, src=1)
    res["buffer"] = bytes(buf.tolist()).decode()
    s = torch.tensor(float(rank + 1))
    dist.all_reduce(s, op=dist.ReduceOp.PRODUCT)
    res["scalar"] = [s.item(), s.dim()]
    ps = [torch.zeros(()) for _ in range(world)]
    dist.all_gather(ps, torch.tensor(rank * 1.5))
    res["scalars"] = [p.item() for p in ps]

    # 5. strings
    preds = [f"r{rank}-{i}" for i in range(n)]
    objs = [None] * world
    dist.all_gather_object(objs, preds)
    res["strings"] = [x for lst in objs for x in lst]

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
