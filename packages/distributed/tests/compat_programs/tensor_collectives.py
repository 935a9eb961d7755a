"""The tensor collectives over gloo, as programs call them: all_reduce with every ReduceOp,
reduce, broadcast, all_gather / all_gather_into_tensor, reduce_scatter / reduce_scatter_tensor,
all_to_all / all_to_all_single with uneven splits, send / recv, isend / irecv, a
batch_isend_irecv ring, async_op=True handles, new_group subgroups, get_backend() and
torch.distributed.nn's differentiable all_gather / all_reduce. Rank 0
writes every rank's results to OUT/result.json."""

import argparse
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.nn.functional import all_gather as all_gather_with_grad
from torch.distributed.nn.functional import all_reduce as all_reduce_with_grad


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)
    res = {"backend": dist.get_backend()}
    base = torch.tensor([1.0, -2.0, 3.0]) * (rank + 1)
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT,
           "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
    for name, op in ops.items():
        t = base.clone()
        dist.all_reduce(t, op=op)
        res[f"all_reduce_{name}"] = t.tolist()
    for name, op in {"BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
                     "BXOR": dist.ReduceOp.BXOR}.items():
        t = torch.tensor([6, 5, 12], dtype=torch.int64) + rank
        dist.all_reduce(t, op=op)
        res[f"all_reduce_{name}"] = t.tolist()
    ti = torch.tensor([rank + 1, 10], dtype=torch.int32)
    dist.all_reduce(ti)
    res["all_reduce_int32"] = [ti.tolist(), str(ti.dtype)]

    t = base.clone()
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    res[f"reduce_rank{rank}"] = t.tolist() if rank == 1 else "n/a"
    t = torch.full((2, 2), float(rank))
    dist.broadcast(t, src=1)
    res["broadcast"] = t.tolist()

    parts = [torch.empty(2, 3) for _ in range(world_size)]
    dist.all_gather(parts, torch.full((2, 3), rank + 0.5))
    res["all_gather"] = [p.tolist() for p in parts]
    flat = torch.empty(world_size * 2, 3)
    dist.all_gather_into_tensor(flat, torch.full((2, 3), rank + 0.25))
    res["all_gather_into_tensor"] = flat.tolist()

    out_t = torch.empty(2)
    dist.reduce_scatter(out_t, [torch.tensor([1.0, 2.0]) * (rank + i + 1)
                                for i in range(world_size)])
    got = [torch.empty(2) for _ in range(world_size)]
    dist.all_gather(got, out_t)
    res["reduce_scatter"] = [g.tolist() for g in got]
    out_t = torch.empty(3)
    dist.reduce_scatter_tensor(out_t, torch.arange(6, dtype=torch.float32) * (rank + 1))
    dist.all_gather(got3 := [torch.empty(3) for _ in range(world_size)], out_t)
    res["reduce_scatter_tensor"] = [g.tolist() for g in got3]

    # all_to_all with uneven splits: rank r sends r + i + 1 elements to rank i
    sizes_in = [rank + i + 1 for i in range(world_size)]
    sizes_out = [i + rank + 1 for i in range(world_size)]
    inp = torch.arange(sum(sizes_in), dtype=torch.float32) + 100 * rank
    outp = torch.empty(sum(sizes_out))
    dist.all_to_all_single(outp, inp, output_split_sizes=sizes_out, input_split_sizes=sizes_in)
    res[f"all_to_all_single_uneven_{rank}"] = outp.tolist()
    outp = torch.empty(world_size * 2, dtype=torch.int64)
    dist.all_to_all_single(outp, torch.arange(world_size * 2) + 10 * rank)
    res[f"all_to_all_single_even_{rank}"] = outp.tolist()
    ins = [torch.full((2,), float(10 * rank + i)) for i in range(world_size)]
    outs = [torch.empty(2) for _ in range(world_size)]
    dist.all_to_all(outs, ins)  # gloo's list form takes equal sizes
    res[f"all_to_all_{rank}"] = [o.tolist() for o in outs]

    # point to point
    if rank == 0:
        dist.send(torch.tensor([3.5, 4.5]), dst=1)
        buf = torch.empty(3, dtype=torch.int64)
        dist.recv(buf, src=1)
        res["recv"] = buf.tolist()
        req = dist.isend(torch.arange(4.0), dst=1)
        req.wait()
        buf = torch.empty(2)
        src = dist.recv(buf)  # any source
        res["recv_any_source"] = [src, buf.tolist()]
    else:
        buf = torch.empty(2)
        dist.recv(buf, src=0)
        dist.send(buf.long().repeat(2)[:3] + 1, dst=0)
        buf = torch.empty(4)
        req = dist.irecv(buf, src=0)
        req.wait()
        res["irecv"] = buf.tolist()
        dist.send(torch.tensor([-1.0, 1.0]), dst=0)

    # a ring: everyone sends to the next rank and receives from the previous one
    send_t = torch.full((3,), float(rank))
    recv_t = torch.empty(3)
    ops_ = [dist.P2POp(dist.isend, send_t, (rank + 1) % world_size),
            dist.P2POp(dist.irecv, recv_t, (rank - 1) % world_size)]
    for req in dist.batch_isend_irecv(ops_):
        req.wait()
    res[f"ring_{rank}"] = recv_t.tolist()

    # async handles
    t = base.clone()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    res["async_all_reduce"] = [t.tolist(), work.is_completed()]
    parts = [torch.empty(1) for _ in range(world_size)]
    work = dist.all_gather(parts, torch.tensor([float(rank)]), async_op=True)
    work.wait()
    res["async_all_gather"] = [p.item() for p in parts]
    t = torch.full((2,), float(rank))
    fut = dist.broadcast(t, src=0, async_op=True).get_future()
    fut.wait()
    res["async_broadcast_future"] = t.tolist()

    # subgroups
    g0 = dist.new_group([0])
    g_all = dist.new_group([0, 1])
    g_rev = dist.new_group([1, 0])
    res[f"group_sizes_{rank}"] = [dist.get_world_size(g_all), dist.get_rank(g_all),
                                  dist.get_rank(g0), dist.get_rank(g_rev)]
    if rank == 0:
        t = torch.tensor([5.0])
        dist.all_reduce(t, group=g0)
        res["solo_group"] = [t.item(), dist.get_world_size(g0)]
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=g_all)
    res["group_all_reduce"] = t.item()
    res["group_backend"] = dist.get_backend(g_all)
    res["group_ranks"] = dist.get_process_group_ranks(g_rev)
    res["global_rank"] = dist.get_global_rank(g_rev, 0)
    t = torch.tensor([float(rank)])
    dist.broadcast(t, src=1, group=g_rev)  # src is a global rank
    res["group_broadcast"] = t.item()
    dist.barrier()

    # collectives autograd differentiates through (a contrastive loss gathers features)
    feats = (torch.arange(3.0) + rank).requires_grad_()
    gathered = torch.cat(all_gather_with_grad(feats))
    (gathered * torch.arange(6.0)).sum().backward()
    res[f"all_gather_grad_{rank}"] = [gathered.tolist(), feats.grad.tolist()]
    x = (torch.tensor([1.0, 2.0]) * (rank + 1)).requires_grad_()
    y = all_reduce_with_grad(x)
    (y * (rank + 1)).sum().backward()
    res[f"all_reduce_grad_{rank}"] = [y.tolist(), x.grad.tolist()]

    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {}
        for r in every:
            merged.update({k: v for k, v in r.items() if v != "n/a"})
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(merged, f, sort_keys=True)
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
