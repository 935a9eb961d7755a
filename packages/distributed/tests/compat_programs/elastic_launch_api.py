"""torchrun from Python, as job launchers and notebooks use it
(torch.distributed.launcher.api): elastic_launch(LaunchConfig(...), fn)(*args) runs fn on 2
workers with torchrun's environment (init_process_group from env://), returning each rank's
result; a worker that fails in the first attempt is restarted (max_restarts); after the last
restart ChildFailedError names the failed rank, its exit code and its error; a command
entry point runs a script. The launching process writes OUT/result.json."""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch


def train(scale, out):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.tensor([float(rank + 1) * scale])
    dist.all_reduce(t)
    env = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                      "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RESTART_COUNT")}
    dist.destroy_process_group()
    return {"rank": rank, "sum": t.item(), "env": env}


def flaky(out):
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    rank = int(os.environ["RANK"])
    with open(os.path.join(out, f"flaky_{rank}_{attempt}"), "w"):
        pass
    if rank == 1 and attempt == 0:
        raise RuntimeError("transient failure")
    return attempt * 10 + rank


def broken(out):
    if int(os.environ["RANK"]) == 1:
        raise ValueError("bad shard on rank 1")
    return "ok"


def config(restarts):
    return LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=2, run_id="api",
                        rdzv_backend="c10d", rdzv_endpoint="localhost:0",
                        max_restarts=restarts, monitor_interval=0.1)


def main(out):
    res = {}
    got = elastic_launch(config(0), train)(2.5, out)
    res["train"] = {str(k): v for k, v in sorted(got.items())}
    got = elastic_launch(config(1), flaky)(out)
    res["flaky"] = {str(k): v for k, v in sorted(got.items())}
    res["flaky_attempts"] = sorted(f for f in os.listdir(out) if f.startswith("flaky_1"))
    try:
        elastic_launch(config(0), broken)(out)
        res["broken"] = None
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        res["broken"] = {"ranks": sorted(e.failures), "first": rank,
                         "exitcode": failure.exitcode,
                         "names_error": "bad shard on rank 1" in str(e),
                         "is_exception": isinstance(e, Exception)}
    script = os.path.join(out, "cmd.py")
    with open(script, "w") as f:
        f.write("import os, sys\n"
                "open(os.path.join(sys.argv[1], 'cmd_' + os.environ['RANK']), 'w').close()\n")
    got = elastic_launch(config(0), sys.executable)(script, out)
    res["command"] = {str(k): v for k, v in sorted(got.items())}
    res["command_ran"] = sorted(f for f in os.listdir(out) if f.startswith("cmd_"))
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    main(parser.parse_args().out)
