"""DTensor ops beyond elementwise math and matrix products, on a 1-D mesh of 2 ranks: slicing,
select, split / chunk / unbind, cat / stack, unsqueeze / squeeze, batched matrix products,
convolutions of a split batch (with gradients), and random ops. Rank 0 writes OUT/result.json."""

import argparse
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def gathered(value):
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def r5(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 5).tolist()


def show(t):
    return [str(t.placements), list(t.shape), r5(t.full_tensor())]


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (2,))
    rng = np.random.default_rng(3)

    def rand(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    full = rand(4, 6, 5)
    res = {}
    d = distribute_tensor(full, mesh, [Shard(1)])
    res["slice_other"] = show(d[1:3])
    res["slice_all"] = show(d[:, :, 1:4])
    res["select"] = show(d[2])
    res["select_last"] = show(d[..., 3])
    res["narrow"] = show(d.narrow(2, 1, 2))
    res["split"] = [show(p) for p in d.split(2, dim=0)]
    res["chunk"] = [show(p) for p in torch.chunk(d, 2, dim=2)]
    res["unbind"] = [show(p) for p in d.unbind(0)]
    e = distribute_tensor(rand(4, 6, 5), mesh, [Shard(1)])
    res["cat"] = show(torch.cat([d, e], dim=0))
    res["cat_shard_dim"] = show(torch.cat([d, e], dim=1))
    res["stack"] = show(torch.stack([d, e], dim=0))
    res["unsqueeze"] = show(d.unsqueeze(1))
    res["squeeze"] = show(distribute_tensor(rand(4, 1, 6), mesh, [Shard(2)]).squeeze(1))
    res["flatten"] = show(d.flatten(1))

    a = distribute_tensor(rand(4, 3, 5), mesh, [Shard(0)])
    b = distribute_tensor(rand(4, 5, 2), mesh, [Shard(0)])
    res["bmm_batch"] = show(torch.bmm(a, b))
    a1 = distribute_tensor(rand(4, 3, 5), mesh, [Shard(2)])
    b1 = distribute_tensor(rand(4, 5, 2), mesh, [Shard(1)])
    res["bmm_partial"] = show(torch.bmm(a1, b1))

    # a convolution of a batch split over the ranks
    x = distribute_tensor(rand(4, 2, 5, 5), mesh, [Shard(0)]).requires_grad_()
    w = distribute_tensor(rand(3, 2, 3, 3), mesh, [Replicate()]).requires_grad_()
    bias = distribute_tensor(rand(3), mesh, [Replicate()]).requires_grad_()
    y = F.conv2d(x, w, bias, padding=1)
    y.pow(2).mean().full_tensor().backward()
    res["conv"] = show(y)
    res["conv_grads"] = [show(x.grad), show(w.grad), show(bias.grad)]

    # random ops on a sharded tensor: each rank its own piece
    s = torch.rand_like(distribute_tensor(torch.zeros(4, 4), mesh, [Shard(0)]))
    res["rand_shard"] = [str(s.placements), list(s.to_local().shape)]
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
