"""torch.multiprocessing as Hogwild-style training uses it (PyTorch's mnist_hogwild example):
a model's parameters in shared memory (Module.share_memory()) trained by 3 spawned processes,
here taking turns at a Barrier so the result is deterministic; each worker's own optimizer
(SGD with momentum, its state private); results and tensors sent back on a Queue (in-place
writes of the receiver seen by the sender through the shared storage); an mp.Value counter
under its lock; an Event; a Pool mapping over tensors; spawn(join=False) polled with join(),
start_processes, and the ProcessExitedException of a rank that calls sys.exit. The parent
writes OUT/result.json."""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.multiprocessing.spawn import ProcessException

NPROC = 3
STEPS = 4


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def make_model():
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    g = np.random.default_rng(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((0.4 * g.standard_normal(p.shape)).astype(np.float32)))
    return model


def data(rank, step):
    g = np.random.default_rng(100 * rank + step)
    return (torch.from_numpy(g.standard_normal((5, 4)).astype(np.float32)),
            torch.from_numpy(g.integers(0, 2, 5)))


def train(rank, model, barrier, queue, counter, ready):
    ready.wait(30)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(STEPS):
        for turn in range(NPROC):
            if turn == rank:
                x, y = data(rank, step)
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses.append(round(loss.item(), 6))
                with counter.get_lock():
                    counter.value += 1
            barrier.wait(30)
    mom = opt.state[model[0].weight]["momentum_buffer"]
    queue.put({"rank": rank, "losses": losses, "momentum_norm": round(mom.norm().item(), 6),
               "shared": model[0].weight.is_shared()})


def scale_in_place(t, done):
    t.mul_(2.0)
    t[0] = -1.0
    done.put(t.is_shared())


def square_sum(t):
    return float((t * t).sum())


def spawned(i, scale, q, release):
    q.put((i, torch.full((2,), float(i) * scale)))
    release.wait(60)  # torch passes the tensor's descriptor: stay alive until it is received


def exits(i):
    if i == 1:
        sys.exit(3)


def raises(i):
    if i == 0:
        raise KeyError("missing shard")


def main(out):
    res = {}
    model = make_model()
    model.share_memory()
    res["is_shared"] = [p.is_shared() for p in model.parameters()]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(NPROC)
    queue = ctx.Queue()
    counter = ctx.Value("i", 0)
    ready = ctx.Event()
    procs = [ctx.Process(target=train, args=(r, model, barrier, queue, counter, ready))
             for r in range(NPROC)]
    for p in procs:
        p.start()
    ready.set()
    results = sorted((queue.get(timeout=120) for _ in range(NPROC)), key=lambda d: d["rank"])
    for p in procs:
        p.join(60)
    res["exitcodes"] = [p.exitcode for p in procs]
    res["workers"] = results
    res["counter"] = counter.value
    res["trained_weight"] = r6(model[2].weight)
    res["trained_bias"] = r6(model[0].bias)

    # the same schedule in one process gives the same weights
    ref = make_model()
    opts = [torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9) for _ in range(NPROC)]
    for step in range(STEPS):
        for rank in range(NPROC):
            x, y = data(rank, step)
            # each worker's optimizer keeps its own momentum
            opts[rank].zero_grad()
            F.cross_entropy(ref(x), y).backward()
            opts[rank].step()
    res["serial_matches"] = bool(torch.allclose(ref[2].weight, model[2].weight, atol=1e-6))

    # a shared tensor written in place by a child
    t = torch.arange(4.0).share_memory_()
    done = ctx.SimpleQueue()
    p = ctx.Process(target=scale_in_place, args=(t, done))
    p.start()
    res["child_saw_shared"] = done.get()
    p.join(60)
    res["after_child"] = t.tolist()

    # a pool over tensors
    with ctx.Pool(2) as pool:
        res["pool"] = pool.map(square_sum, [torch.arange(float(n)) for n in range(1, 5)])

    # spawn without joining, polled
    q = ctx.SimpleQueue()
    release = ctx.Event()
    pc = mp.spawn(spawned, args=(0.5, q, release), nprocs=2, join=False)
    res["context_type"] = type(pc).__name__
    res["n_pids"] = len(pc.pids())
    got = sorted((q.get() for _ in range(2)), key=lambda v: v[0])
    res["spawned"] = [[i, v.tolist()] for i, v in got]
    res["poll_before_release"] = pc.join(timeout=0.01)
    release.set()
    while not pc.join(timeout=5):
        pass
    res["joined"] = pc.join()
    release = ctx.Event()
    pc2 = mp.start_processes(spawned, args=(2.0, q, release), nprocs=1, join=False,
                             start_method="spawn")
    res["start_processes"] = q.get()[1].tolist()
    release.set()
    pc2.join()

    # a rank that exits with a code
    try:
        mp.spawn(exits, nprocs=2)
    except mp.ProcessExitedException as e:
        res["exited"] = {"index": e.error_index, "code": e.exit_code,
                         "is_process_exception": isinstance(e, ProcessException),
                         "says_code": "3" in str(e)}
    try:
        mp.spawn(raises, nprocs=2)
    except mp.ProcessRaisedException as e:
        res["raised"] = {"index": e.error_index, "names_error": "KeyError" in str(e),
                         "names_message": "missing shard" in str(e)}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    main(parser.parse_args().out)
