"""FSDP training as PyTorch's FSDP tutorial writes it: an auto-wrap policy, DistributedSampler,
AdamW, gradient accumulation with no_sync(), clip_grad_norm_, a rank-0 full state dict
saved with torch.save and loaded into a plain module, the full optimizer state
dict, summon_full_params, and a second model with use_orig_params=True and SHARD_GRAD_OP.
Rank 0 writes its results to OUT/result.json."""

import argparse
import contextlib
import json
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullStateDictConfig, ShardingStrategy, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_model():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 1))
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.3 * rng.standard_normal(p.shape)).astype(np.float32)))
    return model


def make_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = (np.sin(x[:, :1]) + 0.1 * rng.standard_normal((32, 1))).astype(np.float32)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def worker(rank, world_size, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    res = {}
    ds = make_data()
    sampler = DistributedSampler(ds, shuffle=False)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    policy = ModuleWrapPolicy({nn.Linear})
    model = FSDP(build_model(), auto_wrap_policy=policy, device_id=torch.device("cpu"))
    res["units"] = [type(m.module).__name__ for m in FSDP.fsdp_modules(model)]
    res["flat_shapes"] = [list(p.shape) for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    losses, norms = [], []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            sync = i % 2 == 1
            with contextlib.nullcontext() if sync else model.no_sync():
                loss = F.mse_loss(model(xb), yb) / 2
                loss.backward()
            if sync:
                norms.append(model.clip_grad_norm_(0.5).item())
                opt.step()
                opt.zero_grad()
            total = loss.detach().clone()
            dist.all_reduce(total)
            losses.append(total.item() / world_size)
    res["losses"] = losses
    res["grad_norms"] = norms

    # offload_to_cpu=True fails in torch 2.13 when the parameters are on the CPU already
    cfg = FullStateDictConfig(offload_to_cpu=False, rank0_only=True)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
        state = model.state_dict()
    flags = [None] * world_size
    dist.all_gather_object(flags, len(state) == 0)
    res["state_dict_empty"] = flags
    ckpt = os.path.join(out, "fsdp_checkpoint.pt")
    if rank == 0:
        torch.save(state, ckpt)
    dist.barrier()
    plain = build_model()
    plain.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True))
    res["state_keys"] = list(plain.state_dict().keys())
    x = torch.from_numpy(np.linspace(-1, 1, 8, dtype=np.float32)).reshape(1, 8)
    res["plain_output"] = plain(x).item()

    osd = FSDP.optim_state_dict(model, opt)
    res["optim_keys"] = sorted(osd["state"].keys())
    res["optim_exp_avg_last_bias"] = osd["state"]["4.bias"]["exp_avg"].tolist()
    res["optim_step"] = float(osd["state"]["4.bias"]["step"])
    res["optim_group_params"] = osd["param_groups"][0]["params"]

    with FSDP.summon_full_params(model, writeback=False):
        res["summoned"] = [(n, list(p.shape)) for n, p in model.named_parameters()]

    # use_orig_params with SHARD_GRAD_OP: the optimizer sees the original parameters
    model2 = FSDP(build_model(), auto_wrap_policy=policy,
                  sharding_strategy=ShardingStrategy.SHARD_GRAD_OP, use_orig_params=True,
                  device_id=torch.device("cpu"))
    res["orig_names"] = [(n, list(p.shape)) for n, p in model2.named_parameters()]
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1)
    for xb, yb in loader:
        F.mse_loss(model2(xb), yb).backward()
        opt2.step()
        opt2.zero_grad()
    full2 = model2.state_dict()
    res["orig_params_last_weight"] = full2["4.weight"].flatten().tolist()
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
