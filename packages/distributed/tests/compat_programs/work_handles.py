"""What the Work handles of gloo collectives and point-to-point calls report, on 2 ranks:
wait() / is_completed() / is_success() / exception() / result() of async collectives,
source_rank() of a receive from any source (and the error for a send's), wait(timeout=),
the works batch_isend_irecv returns, 2-D all_gather_into_tensor and
reduce_scatter_tensor, all_reduce_coalesced / all_gather_coalesced, and the object collectives
with a device= argument. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=60))
    res = {}
    t = torch.tensor([1.0, 2.0]) * (rank + 1)
    w = dist.all_reduce(t, async_op=True)
    res["wait_returns"] = w.wait()
    res["completed"] = [w.is_completed(), w.is_success(), w.exception() is None]
    res["result"] = [r.tolist() for r in w.result()]
    res["wait_timeout"] = w.wait(timeout=timedelta(seconds=5))

    # point to point handles
    if rank == 0:
        sw = dist.isend(torch.tensor([5.0, 6.0]), dst=1)
        sw.wait()
        try:
            sw.source_rank()
            res["send_source_rank"] = "no error"
        except RuntimeError:
            res["send_source_rank"] = "RuntimeError"
    else:
        buf = torch.zeros(2)
        rw = dist.irecv(buf)  # from any source
        rw.wait()
        res["any_source_rank"] = rw.source_rank()
        res["any_source_buf"] = buf.tolist()
        buf2 = torch.zeros(2)
    if rank == 1:
        named = dist.irecv(buf2, src=0)
    else:
        named = dist.isend(torch.tensor([7.0, 8.0]), dst=1)
    named.wait()
    if rank == 1:
        res["named_source_rank"] = named.source_rank()
        res["named_buf"] = buf2.tolist()

    # in a group whose order differs from the world's, source_rank() is the group's rank
    rev = dist.new_group([1, 0], sort_ranks=False)
    if rank == 0:
        dist.send(torch.tensor([9.0]), dst=1, group=rev)
        dist.send(torch.tensor([9.5]), group_dst=0, group=rev)
    else:
        b1, b2 = torch.zeros(1), torch.zeros(1)
        w1 = dist.irecv(b1, group=rev)
        w1.wait()
        w2 = dist.irecv(b2, group_src=1, group=rev)
        w2.wait()
        res["group_source_ranks"] = [w1.source_rank(), w2.source_rank(), b1.item(), b2.item()]

    send_t = torch.full((2,), float(rank))
    recv_a, recv_b = torch.zeros(2), torch.zeros(1)
    other = 1 - rank
    works = dist.batch_isend_irecv([
        dist.P2POp(dist.isend, send_t, other),
        dist.P2POp(dist.isend, send_t[:1] + 10, other, tag=3),
        dist.P2POp(dist.irecv, recv_a, other),
        dist.P2POp(dist.irecv, recv_b, other, tag=3),
    ])
    res["batch_len"] = len(works)
    for x in works:
        x.wait()
    res[f"batch_recv_{rank}"] = [recv_a.tolist(), recv_b.tolist(), all(x.is_completed() for x in works)]

    # 2-D tensors (gloo takes the concatenated form only)
    out2 = torch.empty(2, 2)
    dist.reduce_scatter_tensor(out2, torch.arange(8.0).reshape(4, 2) + rank)
    res[f"reduce_scatter_2d_{rank}"] = out2.tolist()
    flat = torch.empty(world_size * 2, 2)
    dist.all_gather_into_tensor(flat, torch.arange(4.0).reshape(2, 2) * (rank + 1))
    res["gather_2d"] = flat.tolist()

    # coalesced (deprecated) forms
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = torch.tensor([1.0, 2.0]) * (rank + 1), torch.tensor([[3.0]]) - rank
        dist.all_reduce_coalesced([a, b], op=dist.ReduceOp.MAX)
        res["all_reduce_coalesced"] = [a.tolist(), b.tolist()]
        try:
            dist.all_reduce_coalesced([a, torch.tensor([1])])
            res["coalesced_mixed_dtypes"] = "no error"
        except ValueError as e:
            res["coalesced_mixed_dtypes"] = ["ValueError", "different dtypes" in str(e)]
        outs = [[torch.empty(2), torch.empty(1, 2)] for _ in range(world_size)]
        dist.all_gather_coalesced(outs, [torch.full((2,), rank + 0.5), torch.full((1, 2), -rank - 1.0)])
        res["all_gather_coalesced"] = [[o.tolist() for o in lst] for lst in outs]

    # object collectives with device=
    objs = [{"r": rank, "t": torch.arange(2) * rank}, "x" * (rank + 1)]
    dist.broadcast_object_list(objs, src=1, device=torch.device("cpu"))
    res[f"bcast_obj_{rank}"] = [objs[0]["r"], objs[0]["t"].tolist(), objs[1]]
    got = [None]
    dist.scatter_object_list(got, [("a", 1), ("b", 2)] if rank == 1 else None, src=1)
    res[f"scatter_obj_{rank}"] = list(got[0])
    if rank == 0:
        dist.send_object_list([{"k": [1, 2]}, 3.5], dst=1, device=torch.device("cpu"))
    else:
        box = [None, None]
        src = dist.recv_object_list(box, src=0, device=torch.device("cpu"))
        res["recv_obj"] = [src, box]

    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {}
        for i, r in enumerate(every):
            for k, v in r.items():
                merged[k if k.endswith(("_0", "_1")) or k in merged and merged[k] == v
                       else (k if i == 0 else f"{k}@{i}")] = v
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
