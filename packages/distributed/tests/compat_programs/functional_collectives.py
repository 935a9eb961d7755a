"""Functional collectives (torch.distributed._functional_collectives) on 2 ranks: all_reduce
with each reduce op over a DeviceMesh, a ProcessGroup and the list of ranks (the input left
alone), all_gather and reduce_scatter along dims 0 and 1, all_to_all_single with uneven
splits, broadcast, permute_tensor, wait_tensor, and the errors for a bad op or uneven split.
Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def v(t):
    return funcol.wait_tensor(t).tolist()


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    warnings.simplefilter("ignore")
    mesh = init_device_mesh("cpu", (2,))
    res = {}
    x = torch.arange(6.0).reshape(2, 3) + 10 * rank
    for op in ("sum", "avg", "max", "min"):
        res[f"all_reduce_{op}"] = v(funcol.all_reduce(x, op, mesh))
    res["all_reduce_pg"] = v(funcol.all_reduce(x, "sum", dist.group.WORLD))
    res["all_reduce_list"] = v(funcol.all_reduce(x, "sum", [0, 1]))
    res["input_untouched"] = x.tolist()
    res["gather0"] = v(funcol.all_gather_tensor(x, 0, mesh))
    res["gather1"] = v(funcol.all_gather_tensor(x, 1, (mesh, 0)))
    y = torch.arange(8.0).reshape(4, 2) * (rank + 1)
    res["reduce_scatter0"] = gathered(v(funcol.reduce_scatter_tensor(y, "sum", 0, mesh)))
    res["reduce_scatter1"] = gathered(v(funcol.reduce_scatter_tensor(y, "max", 1, mesh)))
    rows = torch.arange(5.0).unsqueeze(1) + 100 * rank
    ins = [2, 3] if rank == 0 else [1, 4]
    outs = [2, 1] if rank == 0 else [3, 4]
    res["all_to_all"] = gathered(v(funcol.all_to_all_single(rows, outs, ins, mesh)))
    res["broadcast"] = gathered(v(funcol.broadcast(x, 1, mesh)))
    res["permute"] = gathered(v(funcol.permute_tensor(x.reshape(-1), [1, 0], mesh)))
    for name, call in (("bad_op", lambda: funcol.all_reduce(x, "mean", mesh)),
                       ("uneven", lambda: funcol.reduce_scatter_tensor(
                           torch.ones(3, 2), "sum", 0, mesh))):
        try:
            v(call())
            res[name] = "ok"
        except (ValueError, RuntimeError, AssertionError):
            res[name] = "error"
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
