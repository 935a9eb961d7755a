"""2-D parallelism layout with a DeviceMesh, as torchtitan-style scripts set it up: 4 ranks in a
(dp=2, tp=2) mesh from init_device_mesh; each dimension's groups, sub-meshes by name, a
flattened mesh, collectives over the row and column groups, DDP over the "dp" sub-mesh
(device_mesh=), a mesh made from explicit ranks and one made from an existing group, and the
errors of asking a 2-D mesh for one group or slicing it by an unknown or reordered name. Rank 0
writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.nn.parallel import DistributedDataParallel as DDP


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the class is the result)
        return type(e).__name__
    return "no error"


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    res = {
        "repr": repr(mesh),
        "mesh": mesh.mesh.tolist(),
        "mesh_dtype": str(mesh.mesh.dtype),
        "shape": list(mesh.shape),
        "ndim": mesh.ndim,
        "size": [mesh.size(), mesh.size(0), mesh.size(1)],
        "names": list(mesh.mesh_dim_names),
        "device_type": mesh.device_type,
    }
    res["coordinates"] = gathered(list(mesh.get_coordinate()))
    res["local_ranks"] = gathered([mesh.get_local_rank("dp"), mesh.get_local_rank(1)])
    res["group_ranks"] = gathered([dist.get_process_group_ranks(g) for g in mesh.get_all_groups()])
    dp, tp = mesh["dp"], mesh["tp"]
    res["sub_repr"] = [repr(dp), repr(tp), repr(mesh["dp", "tp"])]
    res["sub_meshes"] = gathered([dp.mesh.tolist(), tp.mesh.tolist()])
    res["sub_group_is_parent_group"] = (dp.get_group() is mesh.get_group("dp")
                                        and tp.get_group() is mesh.get_group(1))
    flat = mesh._flatten("dp_tp")
    res["flat"] = [repr(flat), dist.get_process_group_ranks(flat.get_group())]

    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=tp.get_group())
    u = torch.tensor([float(10 * (rank + 1))])
    dist.all_reduce(u, op=dist.ReduceOp.MAX, group=mesh.get_group("dp"))
    res["row_sum_col_max"] = gathered([t.item(), u.item()])

    # data parallel over the "dp" dimension only: ranks 0, 2 and 1, 3 average separately
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    init = np.random.default_rng(rank)  # different per rank: DDP broadcasts the group's rank 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.3 * init.standard_normal(p.shape)).astype(np.float32)))
    ddp = DDP(model, device_mesh=dp)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    rng = np.random.default_rng(100 + rank)
    x = torch.from_numpy(rng.standard_normal((16, 4)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((16, 1)).astype(np.float32))
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
    res["ddp_final_weight_sums"] = gathered(round(float(model[0].weight.detach().sum()), 5))
    res["ddp_both"] = error_of(lambda: DDP(model, process_group=dist.group.WORLD, device_mesh=dp))
    res["ddp_2d"] = error_of(lambda: DDP(model, device_mesh=mesh))

    explicit = DeviceMesh("cpu", [[0, 2], [1, 3]], mesh_dim_names=("a", "b"))
    res["explicit"] = [repr(explicit), gathered(list(explicit.get_coordinate())),
                       gathered([dist.get_process_group_ranks(g)
                                 for g in explicit.get_all_groups()])]
    from_group = DeviceMesh.from_group(tp.get_group(), "cpu")
    res["from_group"] = [repr(from_group), from_group.mesh.tolist()]
    res["errors"] = [error_of(lambda: mesh.get_group()), error_of(lambda: mesh["xx"]),
                     error_of(lambda: mesh["tp", "dp"]), error_of(lambda: mesh.get_local_rank()),
                     error_of(lambda: init_device_mesh("cpu", (2, 2), mesh_dim_names=("a",))),
                     error_of(lambda: init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "a")))]
    res["equal"] = mesh == init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    one = init_device_mesh("cpu", (4,))
    res["one_d"] = [repr(one), dist.get_process_group_ranks(one.get_group()),
                    one.mesh_dim_names is None, one.get_group(0) is one.get_group()]
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
    mp.spawn(worker, args=(4, free_port(), args.out), nprocs=4, join=True)
