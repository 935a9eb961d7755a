"""Several process groups used at once, on 2 ranks (gloo): two groups over the same ranks and
a reversed one (sort_ranks=False), async collectives in flight on different groups that the
ranks issue in different orders (each group keeps its own order), group_src / group_dst
arguments against global ranks, the object collectives on a subgroup, single-rank groups
(each rank its own), new_subgroups / new_subgroups_by_enumeration, group names and
descriptions, get_process_group_ranks / get_group_rank / get_global_rank, a subgroup destroyed
while the others go on, and what calls on a group a rank is not in return. Rank 0 writes
OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    ga = dist.new_group([0, 1])
    gb = dist.new_group([0, 1], group_desc="second")
    rev = dist.new_group([1, 0], sort_ranks=False)
    res["ranks"] = [dist.get_process_group_ranks(g) for g in (ga, gb, rev)]
    res["group_rank"] = [dist.get_group_rank(rev, rank), dist.get_global_rank(rev, 0),
                         dist.get_rank(rev), dist.get_world_size(rev)]
    res["desc"] = [gb.group_desc, isinstance(ga.group_name, str), ga.group_name != gb.group_name]

    # in flight on two groups, issued in opposite orders on the two ranks
    ta, tb = torch.tensor([1.0 + rank]), torch.tensor([10.0 * (rank + 1)])
    if rank == 0:
        wa = dist.all_reduce(ta, group=ga, async_op=True)
        wb = dist.all_reduce(tb, op=dist.ReduceOp.MAX, group=gb, async_op=True)
    else:
        wb = dist.all_reduce(tb, op=dist.ReduceOp.MAX, group=gb, async_op=True)
        wa = dist.all_reduce(ta, group=ga, async_op=True)
    wb.wait()
    wa.wait()
    res["crossed"] = [ta.item(), tb.item()]
    # several in flight on one group, waited for in reverse
    ts = [torch.full((2,), float(i + rank)) for i in range(4)]
    works = [dist.all_reduce(t, group=ga, async_op=True) for t in ts]
    for w in reversed(works):
        w.wait()
    res["queued"] = [t.tolist() for t in ts]

    # group_src / group_dst on the reversed group: group rank 0 is global rank 1
    t = torch.tensor([float(rank)])
    dist.broadcast(t, group=rev, group_src=0)
    res["bcast_group_src"] = t.item()
    t = torch.tensor([float(rank + 1)])
    dist.reduce(t, group=rev, group_dst=1, op=dist.ReduceOp.SUM)
    if rank == 0:  # (what a non-destination rank's tensor holds after a reduce is unspecified)
        res["reduce_group_dst"] = t.item()
    gl = [torch.empty(1) for _ in range(2)] if rank == 0 else None
    dist.gather(torch.tensor([rank + 0.5]), gather_list=gl, group=rev, group_dst=1)
    if rank == 0:
        res["gather_group_dst"] = [g.item() for g in gl]
    sc = torch.empty(1)
    dist.scatter(sc, [torch.tensor([5.0]), torch.tensor([6.0])] if rank == 1 else None,
                 group=rev, group_src=0)
    res[f"scatter_group_src_{rank}"] = sc.item()
    objs = [None, None]
    dist.all_gather_object(objs, {"r": rank}, group=rev)
    res["all_gather_object_rev"] = objs
    ob = [("from", rank)]
    dist.broadcast_object_list(ob, group=rev, group_src=1)
    res["bcast_object_group_src"] = list(ob[0])
    got = [None, None] if rank == 1 else None
    dist.gather_object(f"r{rank}", got, group=rev, group_dst=0)
    if rank == 1:
        res["gather_object_group_dst"] = got

    # single-rank groups: each rank its own, and calls on a group one is not in
    mine = [dist.new_group([r]) for r in range(world_size)]
    t = torch.tensor([3.0 + rank])
    dist.all_reduce(t, group=mine[rank])
    res[f"solo_{rank}"] = t.item()
    other = mine[1 - rank]
    res[f"not_member_{rank}"] = [other == dist.GroupMember.NON_GROUP_MEMBER,
                                 dist.all_reduce(torch.ones(1), group=other),
                                 dist.get_rank(other)]
    sub, subs = dist.new_subgroups(group_size=1)
    res[f"new_subgroups_{rank}"] = [len(subs), dist.get_rank(sub), dist.get_world_size(sub),
                                    dist.get_process_group_ranks(sub)]
    sub2, subs2 = dist.new_subgroups_by_enumeration([[1], [0]])
    res[f"by_enumeration_{rank}"] = [len(subs2), dist.get_process_group_ranks(sub2)]

    # a subgroup destroyed; the world goes on
    dist.destroy_process_group(gb)
    t = torch.tensor([1.0])
    dist.all_reduce(t, group=ga)
    dist.all_reduce(t)
    res["after_destroy"] = t.item()

    every = [None] * world_size
    dist.all_gather_object(every, res)
    if rank == 0:
        merged = {}
        for i, r in enumerate(every):
            for k, v in r.items():
                merged[k if k.endswith(("_0", "_1")) else f"{k}@{i}"] = v
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
