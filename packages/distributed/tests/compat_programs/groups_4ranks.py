"""Process-group plumbing of hybrid / expert-parallel trainers, on 4 ranks (gloo): subgroups
from new_group (one in a given, unsorted rank order with sort_ranks=False) and new_subgroups,
collectives addressed by group rank (group_src / group_dst / group_peer) as well as by global
rank, ranks outside a group (get_rank -> -1, GroupMember.NON_GROUP_MEMBER), uneven
all_to_all_single inside a subgroup, a batch_isend_irecv ring, reduce_scatter inside a
subgroup, object collectives in subgroups, barrier(timeout=), per-rank model averaging
(HierarchicalModelAverager) and fp16_compress_wrapper around a DDP hook. Rank 0 writes
OUT/result.json."""

import argparse
import json
import os
import socket
from collections import OrderedDict
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.algorithms.model_averaging.hierarchical_model_averager as hma
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = 4


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def gather_all(value):
    out = [None] * WORLD
    dist.all_gather_object(out, value)
    return out


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=timedelta(seconds=60))
    res = {}

    # subgroups: every rank makes every group, in the same order
    evens = dist.new_group([0, 2])
    odds = dist.new_group([3, 1])
    rev = dist.new_group([3, 2, 1, 0], sort_ranks=False)
    mine = evens if rank % 2 == 0 else odds
    res["ranks"] = gather_all({
        "evens": dist.get_rank(evens), "odds": dist.get_rank(odds), "rev": dist.get_rank(rev),
        "mine_size": dist.get_world_size(mine),
        "mine_ranks": dist.get_process_group_ranks(mine),
        "rev_ranks": dist.get_process_group_ranks(rev),
        "other_rank": dist.get_rank(evens if rank % 2 else odds),
        "other_is_non_member": (evens if rank % 2 else odds) is
        dist.GroupMember.NON_GROUP_MEMBER,
    })
    res["group_rank_map"] = gather_all([dist.get_group_rank(rev, 0), dist.get_global_rank(rev, 0),
                                        dist.get_group_rank(mine, rank),
                                        dist.get_global_rank(mine, 1)])

    # collectives addressed by group rank
    t = torch.tensor([float(rank)])
    dist.broadcast(t, group=mine, group_src=1)
    res["bcast_group_src"] = gather_all(t.item())
    t = torch.tensor([float(rank + 1)])
    dist.reduce(t, group=mine, group_dst=0, op=dist.ReduceOp.PRODUCT)
    res["reduce_group_dst"] = gather_all(t.item())
    t = torch.tensor([float(rank * 10)])
    dist.broadcast(t, src=3, group=rev)
    res["bcast_rev_src3"] = gather_all(t.item())
    t = torch.tensor([float(rank)])
    dist.broadcast(t, group=rev, group_src=0)  # group rank 0 of rev is global rank 3
    res["bcast_rev_group_src0"] = gather_all(t.item())
    gl = [torch.zeros(2) for _ in range(2)] if dist.get_rank(mine) == 0 else None
    dist.gather(torch.full((2,), float(rank)), gl, group=mine, group_dst=0)
    res["gather_group_dst"] = gather_all(None if gl is None else [g.tolist() for g in gl])
    out_t = torch.zeros(3)
    sl = [torch.full((3,), 100.0 * rank + i) for i in range(2)] \
        if dist.get_rank(mine) == 1 else None
    dist.scatter(out_t, sl, group=mine, group_src=1)
    res["scatter_group_src"] = gather_all(out_t.tolist())

    # point to point by group peer: in each pair, group rank 0 sends to group rank 1
    buf = torch.full((2,), float(rank))
    if dist.get_rank(mine) == 0:
        dist.send(buf * 7, group=mine, group_dst=1)
    else:
        res_src = dist.recv(buf, group=mine, group_src=0)
    res["p2p"] = gather_all(buf.tolist())
    res["recv_returned"] = gather_all(res_src if dist.get_rank(mine) == 1 else None)

    # uneven all_to_all_single inside the subgroup: group rank g sends g+1 rows to peer 0
    # and 2 rows to peer 1
    g = dist.get_rank(mine)
    send_splits = [g + 1, 2]
    recv_splits = [[1, 2], [2, 2]][g]
    inp = torch.arange(sum(send_splits), dtype=torch.float32) + 100 * rank
    outp = torch.empty(sum(recv_splits))
    dist.all_to_all_single(outp, inp, recv_splits, send_splits, group=mine)
    res["a2a_uneven"] = gather_all(outp.tolist())

    # a ring over all ranks with batch_isend_irecv, and one over rev by group peer
    send_t = torch.full((3,), float(rank))
    recv_t = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, send_t, (rank + 1) % WORLD),
           dist.P2POp(dist.irecv, recv_t, (rank - 1) % WORLD)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    res["ring"] = gather_all(recv_t.tolist())
    gr = dist.get_rank(rev)
    send_t = torch.full((2,), float(10 * rank))
    recv_t = torch.zeros(2)
    ops = [dist.P2POp(dist.irecv, recv_t, group=rev, group_peer=(gr - 1) % WORLD),
           dist.P2POp(dist.isend, send_t, group=rev, group_peer=(gr + 1) % WORLD)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    res["ring_rev"] = gather_all(recv_t.tolist())

    # reduce_scatter inside a subgroup
    rs_out = torch.zeros(2)
    dist.reduce_scatter_tensor(rs_out, torch.arange(4, dtype=torch.float32) * (rank + 1),
                               group=mine)
    res["reduce_scatter_sub"] = gather_all(rs_out.tolist())

    # objects inside subgroups
    objs = [{"from": rank, "tag": "x" * (rank + 1)}, (rank, [rank] * rank)] \
        if dist.get_rank(mine) == 1 else [None, None]
    dist.broadcast_object_list(objs, group=mine, group_src=1)
    res["bcast_objects_sub"] = gather_all(json.loads(json.dumps(objs)))
    glist = [None] * 4 if dist.get_rank(rev) == 2 else None
    dist.gather_object({"r": rank}, glist, group=rev, group_dst=2)
    res["gather_object_rev"] = gather_all(glist)
    outl = [None]
    dist.scatter_object_list(outl, [f"piece{i}" for i in range(4)] if rank == 1 else None,
                             src=1, group=dist.group.WORLD)
    res["scatter_object"] = gather_all(outl[0])
    if dist.get_rank(mine) == 0:
        dist.send_object_list([{"k": rank}, "hello"], group=mine, group_dst=1)
        got = None
    else:
        got = [None, None]
        dist.recv_object_list(got, group=mine, group_src=0)
    res["p2p_objects"] = gather_all(got)

    # new_subgroups: consecutive pairs
    cur, subs = dist.new_subgroups(group_size=2)
    res["new_subgroups"] = gather_all([dist.get_process_group_ranks(cur), len(subs),
                                       dist.get_rank(cur)])
    dist.barrier(group=cur)
    dist.barrier(timeout=timedelta(seconds=30))

    # hierarchical model averaging: every 2 steps inside pairs, every 4 over everyone
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(float(rank))
        model.bias.fill_(0.0)
    averager = hma.HierarchicalModelAverager(period_group_size_dict=OrderedDict([(2, 2), (4, 4)]),
                                             warmup_steps=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trace = []
    for step in range(5):
        x = torch.from_numpy(np.random.default_rng(rank * 10 + step).standard_normal((4, 3))
                             .astype(np.float32))
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        averager.average_parameters(model.parameters())
        trace.append(r6(model.weight[0]))
    res["hierarchical"] = gather_all(trace)

    # fp16 compression around a hook of one's own (the wrapper decompresses the result)
    def sum_hook(state, bucket):
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0] / WORLD)

    def make():
        lin = nn.Linear(3, 2)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([[0.3, -0.2, 0.1], [0.05, 0.4, -0.35]]))
            lin.bias.zero_()
        return lin

    m = DDP(make())
    m.register_comm_hook(None, default_hooks.fp16_compress_wrapper(sum_hook))
    x = torch.from_numpy(np.random.default_rng(50 + rank).standard_normal((4, 3))
                         .astype(np.float32)) * 1.37
    y = torch.full((4, 2), 0.1 * rank)
    F.mse_loss(m(x), y).backward()
    plain = make()
    F.mse_loss(plain(x), y).backward()
    exact = plain.weight.grad.clone()
    dist.all_reduce(exact)
    exact /= WORLD
    g = m.module.weight.grad
    # (the fp16 sum's rounding depends on the backend's reduction order: compare loosely)
    res["fp16_wrapper"] = {"dtype": str(g.dtype), "exact": r6(exact),
                           "representable_in_fp16": bool((g == g.half().float()).all()),
                           "close": bool(torch.allclose(g, exact, rtol=2e-3, atol=1e-3)),
                           "differs": bool((g != exact).any())}

    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(res, f)
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
    mp.spawn(worker, args=(WORLD, free_port(), args.out), nprocs=WORLD, join=True)
