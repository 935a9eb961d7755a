"""Fault tolerance with torchrun, as elastic training scripts use it: this program launches
itself as the worker of `torchrun --nproc-per-node=2 --max-restarts=1`. The workers
(@record entry point, env:// init) train and save a checkpoint every step; in the first attempt
rank 1 fails mid-run, the agent restarts the group (TORCHELASTIC_RESTART_COUNT=1) and the
workers resume from the checkpoint and finish with the losses of an uninterrupted run. A second
launch without restarts ends with the failing worker's error and exit code reported by the
launcher (ChildFailedError), and a worker that exits with sys.exit(0) early counts as success.
The launching process writes OUT/result.json."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record

STEPS = 5
ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"]


def model_and_opt():
    model = nn.Linear(3, 2)
    g = np.random.default_rng(0)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(g.standard_normal((2, 3)).astype(np.float32)))
        model.bias.zero_()
    return model, torch.optim.Adam(model.parameters(), lr=0.05)


def batch(rank, step):
    g = np.random.default_rng(10 * step + rank)
    return (torch.from_numpy(g.standard_normal((4, 3)).astype(np.float32)),
            torch.from_numpy(g.standard_normal((4, 2)).astype(np.float32)))


@record
def train(out, mode):
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo")
    model, opt = model_and_opt()
    ckpt = os.path.join(out, f"ckpt_{mode}.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start = state["step"] + 1
    losses = {}
    for step in range(start, STEPS):
        if mode == "fail_once" and attempt == 0 and rank == 1 and step == 3:
            raise RuntimeError(f"simulated failure at step {step}")
        if mode == "fail_always" and rank == 1 and step == 1:
            raise ValueError("rank 1 lost its data shard")
        if mode == "early_exit" and step == 2:
            dist.destroy_process_group()
            sys.exit(0)
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses[step] = round(t.item(), 6)
        if rank == 0:
            torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step},
                       ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        dist.barrier()
    if rank == 0:
        with open(os.path.join(out, f"worker_{mode}_{attempt}.json"), "w") as f:
            json.dump({"attempt": attempt, "start": start, "losses": losses,
                       "weight": np.round(np.asarray(model.weight.tolist()), 6).tolist(),
                       "env": sorted(k for k in ENV_KEYS if k in os.environ),
                       "max_restarts": os.environ["TORCHELASTIC_MAX_RESTARTS"],
                       "world": world}, f)
    dist.destroy_process_group()


def launch(out, mode, restarts):
    launcher = torch.__name__ + ".distributed.run"  # torch's, or the library standing in for it
    cmd = [sys.executable, "-m", launcher, "--nnodes=1", "--nproc-per-node=2",
           f"--max-restarts={restarts}", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0",
           "--rdzv-id=elastic", os.path.abspath(__file__), "--out", out, "--worker", mode]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=out)


def main(out):
    res = {}
    p = launch(out, "fail_once", 1)
    res["fail_once_rc"] = p.returncode
    with open(os.path.join(out, "worker_fail_once_1.json")) as f:
        res["fail_once"] = json.load(f)
    res["fail_once_attempt0_finished"] = os.path.exists(os.path.join(out,
                                                                     "worker_fail_once_0.json"))

    p = launch(out, "plain", 0)
    res["plain_rc"] = p.returncode
    with open(os.path.join(out, "worker_plain_0.json")) as f:
        plain = json.load(f)
    res["same_as_uninterrupted"] = (plain["losses"] == {
        **{k: v for k, v in plain["losses"].items()}} and
        all(abs(plain["losses"][k] - v) < 1e-5
            for k, v in res["fail_once"]["losses"].items())
        and np.allclose(plain["weight"], res["fail_once"]["weight"], atol=1e-5))

    p = launch(out, "fail_always", 0)
    res["fail_always_rc"] = p.returncode
    res["fail_always_reports"] = {
        "child_failed": "ChildFailedError" in p.stderr,
        "exception_type": "ValueError" in p.stderr,
        "message": "rank 1 lost its data shard" in p.stderr,
        "traceback": "Traceback" in p.stderr,
    }
    p = launch(out, "early_exit", 0)
    res["early_exit_rc"] = p.returncode
    res["early_exit_wrote"] = os.path.exists(os.path.join(out, "worker_early_exit_0.json"))
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        train(args.out, args.worker)
    else:
        main(args.out)
