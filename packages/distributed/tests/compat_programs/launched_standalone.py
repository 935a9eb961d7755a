"""A worker under torchrun --standalone with a role and a rendezvous of its own: the elastic
environment every worker reads (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
GROUP_WORLD_SIZE, ROLE_RANK, ROLE_NAME, ROLE_WORLD_SIZE, TORCHELASTIC_RESTART_COUNT,
TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, MASTER_ADDR / MASTER_PORT, OMP_NUM_THREADS),
dist.get_node_local_rank(), is_torchelastic_launched(), and a store-backed barrier through the
default group's store. Run as: torchrun --standalone --nproc-per-node=2 --max-restarts=1
--role=trainer launched_standalone.py --out OUT"""

import argparse
import json
import os

import torch
import torch.distributed as dist

NAMES = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    env = {k: os.environ.get(k) for k in NAMES}
    res = {
        "env": env,
        "run_id_set": bool(os.environ.get("TORCHELASTIC_RUN_ID")),
        "master": [os.environ.get("MASTER_ADDR") is not None,
                   (os.environ.get("MASTER_PORT") or "x").isdigit()],
        "node_local_rank": dist.get_node_local_rank(),
        "launched": dist.is_torchelastic_launched(),
    }
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    res["sum"] = t.item()
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, res)
    if rank == 0:
        with open(os.path.join(args.out, "result.json"), "w") as f:
            json.dump({f"rank{i}": r for i, r in enumerate(every)}, f, sort_keys=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
