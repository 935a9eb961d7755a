"""Object collectives with the objects real scripts send, on 2 ranks (gloo): numpy arrays,
dataclasses and enums defined in the script, sets and frozensets, bytes, a 3 MB string,
tensors of several dtypes (bfloat16, complex64, bool, int8), non-contiguous views, a tensor
that requires grad, an nn.Parameter, a state dict with shared storages, an empty list and
None entries, in all_gather_object, broadcast_object_list, scatter_object_list and
gather_object. Rank 0 writes OUT/result.json."""

import argparse
import enum
import json
import os
import socket
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


class Phase(enum.Enum):
    TRAIN = 1
    EVAL = 2


@dataclass
class Metrics:
    rank: int
    loss: float
    tags: list = field(default_factory=list)
    phase: Phase = Phase.TRAIN


def describe(obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        vals = t.tolist()
        if t.is_complex():
            vals = [[v.real, v.imag] for v in t.flatten().tolist()]
        return {"kind": type(obj).__name__, "dtype": str(t.dtype), "shape": list(t.shape),
                "values": vals, "requires_grad": obj.requires_grad}
    if isinstance(obj, np.generic):
        return {"np_scalar": round(obj.item(), 6), "dtype": str(obj.dtype)}
    if isinstance(obj, np.ndarray):
        return {"ndarray": obj.tolist(), "dtype": str(obj.dtype)}
    if isinstance(obj, Metrics):
        return {"metrics": [obj.rank, obj.loss, obj.tags, obj.phase.name]}
    if isinstance(obj, Phase):
        return {"enum": obj.name}
    if isinstance(obj, (set, frozenset)):
        return {type(obj).__name__: sorted(obj)}
    if isinstance(obj, bytes):
        return {"bytes": list(obj)}
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [describe(v) for v in obj]
    if isinstance(obj, str) and len(obj) > 100:
        return {"long_str": len(obj), "head": obj[:10]}
    return obj


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank
    w = torch.tensor([1.0, 2.0 + rank], requires_grad=True)
    obj = {
        "np": np.arange(4, dtype=np.int16) * (rank + 1),
        "metrics": Metrics(rank, 0.5 * rank, ["a", rank]),
        "phase": Phase.EVAL,
        "set": {rank, 10 + rank},
        "frozen": frozenset({"x", str(rank)}),
        "bytes": bytes([rank, 255, 0]),
        "bf16": torch.tensor([1.5, -2.25 + rank], dtype=torch.bfloat16),
        "complex": torch.tensor([1 + 2j, rank - 1j], dtype=torch.complex64),
        "bool": torch.tensor([True, rank == 1]),
        "int8": torch.tensor([-128, 127, rank], dtype=torch.int8),
        "view": base.t()[1:],
        "grad": w * 2,
        "leaf": w,
        "param": nn.Parameter(torch.full((2,), float(rank))),
        "empty": [],
        "none": None,
        "scalar": torch.tensor(3.5 + rank, dtype=torch.float64),
    }
    gathered = [None, None]
    dist.all_gather_object(gathered, obj)
    res["all_gather"] = describe(gathered)
    res["types"] = [[type(v).__name__ for _, v in sorted(g.items())] for g in gathered]

    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6.0).reshape(2, 3))
        lin.bias.fill_(0.5)
    sd = lin.state_dict()
    tied = torch.arange(6.0)
    payload = [sd, {"a": tied, "b": tied[2:]}, "x" * 3_000_000, None] \
        if rank == 1 else [None] * 4
    dist.broadcast_object_list(payload, src=1)
    res["broadcast_sd"] = describe(payload[0])
    a, b = payload[1]["a"], payload[1]["b"]
    res["shared_storage_kept"] = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    res["long"] = describe(payload[2])
    res["none"] = payload[3]

    outs = [None]
    dist.scatter_object_list(outs, [Metrics(i, i / 4, [i] * i) for i in range(2)]
                             if rank == 0 else None, src=0)
    res["scatter"] = gathered_scatter = [None, None]
    dist.all_gather_object(gathered_scatter, describe(outs[0]))
    glist = [None, None] if rank == 1 else None
    dist.gather_object((rank, np.float32(rank) / 3, {"k": {rank}}), glist, dst=1)
    got = [None]
    if rank == 1:
        got = [[describe(list(g)) for g in glist]]
    dist.broadcast_object_list(got, src=1)
    res["gather"] = got[0]
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
    mp.spawn(worker, args=(2, free_port(), args.out), nprocs=2, join=True)
