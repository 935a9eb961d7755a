"""Asynchronous collectives and torch.futures as overlap-minded code uses them, on 2 ranks
(gloo): several async all_reduce / all_gather / broadcast / reduce_scatter handles in flight at
once and waited for in reverse order, their futures' values (what each collective's future
holds), chains of then() (a callback that raises, the error reaching wait() of the chained
future as a RuntimeError), add_done_callback, torch.futures.collect_all and wait_all over
collective futures and plain Futures, a Future completed by a thread (set_result /
set_exception), done() before and after, and compute overlapped with a bucketed gradient
all-reduce. Rank 0 writes OUT/result.json (every rank's results)."""

import argparse
import json
import os
import socket
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def r6(t):
    return np.round(np.asarray(t.detach().tolist(), dtype=np.float64), 6).tolist()


def worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    res = {}

    # 1. several handles in flight, waited for in reverse order
    a = torch.full((3,), float(rank + 1))
    b = torch.arange(4.0) + rank
    gathered = [torch.empty(2) for _ in range(world)]
    c = torch.tensor([10.0 * rank, 1.0])
    rs_out = torch.empty(2)
    works = [dist.all_reduce(a, async_op=True),
             dist.broadcast(b, src=1, async_op=True),
             dist.all_gather(gathered, c, async_op=True),
             dist.reduce_scatter_tensor(rs_out, torch.arange(4.0) * (rank + 1), async_op=True)]
    for w in reversed(works):
        w.wait()
    res["in_flight"] = [r6(a), r6(b), [r6(g) for g in gathered], r6(rs_out)]
    res["completed"] = [w.is_completed() for w in works[:3]]

    # 2. what each collective's future holds
    fa = dist.all_reduce(torch.ones(2) * (rank + 1), async_op=True).get_future()
    vals = fa.wait()
    res["all_reduce_future"] = [type(vals).__name__, len(vals), r6(vals[0])]
    fb = dist.broadcast(torch.ones(2) * rank, src=1, async_op=True).get_future()
    res["broadcast_future"] = [r6(v) for v in fb.wait()]
    outs = [torch.empty(1) for _ in range(world)]
    fg = dist.all_gather(outs, torch.tensor([rank + 0.5]), async_op=True).get_future()
    gv = fg.wait()
    res["all_gather_future"] = [type(gv).__name__, len(gv),
                                [type(x).__name__ for x in gv]]

    # 3. then() chains, a raising callback
    fut = dist.all_reduce(torch.ones(2) * (rank + 1), async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2).then(lambda f: f.value().sum().item())
    res["chain"] = chained.wait()

    def boom(f):
        raise ValueError("callback failed")

    bad = dist.all_reduce(torch.ones(1), async_op=True).get_future().then(boom)
    try:
        bad.wait()
        res["then_error"] = "no error"
    except RuntimeError as e:
        res["then_error"] = ["RuntimeError", "callback failed" in str(e)]
    except ValueError:
        res["then_error"] = ["ValueError", True]
    seen = []
    f2 = dist.all_reduce(torch.ones(1) * 3, async_op=True).get_future()
    f2.add_done_callback(lambda f: seen.append(f.value()[0].item()))
    f2.wait()
    res["done_callback"] = seen

    # 4. collect_all / wait_all over collective futures and plain Futures
    plain = torch.futures.Future()
    res["plain_done_before"] = plain.done()
    futs = [dist.all_reduce(torch.ones(1) * (i + rank), async_op=True).get_future()
            for i in range(3)] + [plain]
    all_f = torch.futures.collect_all(futs)
    t = threading.Thread(target=lambda: (time.sleep(0.05), plain.set_result(torch.tensor(7.0))))
    t.start()
    done = all_f.wait()
    t.join()
    res["collect_all"] = [type(done).__name__, len(done),
                          [f.value()[0].item() for f in done[:3]], done[3].value().item()]
    res["plain_done_after"] = plain.done()
    vals = torch.futures.wait_all([dist.all_reduce(torch.ones(1) * rank, async_op=True)
                                   .get_future() for _ in range(2)])
    res["wait_all"] = [type(vals).__name__, [v[0].item() for v in vals]]
    err_f = torch.futures.Future()
    err_f.set_exception(ValueError("no data"))
    try:
        err_f.wait()
        res["set_exception"] = "no error"
    except ValueError as e:
        res["set_exception"] = ["ValueError", str(e)]
    try:
        torch.futures.wait_all([err_f])
        res["wait_all_error"] = "no error"
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        res["wait_all_error"] = type(e).__name__

    # 5. compute overlapped with bucketed gradient all-reduces
    g = np.random.default_rng(rank)
    layers = [torch.from_numpy(g.standard_normal((4, 4)).astype(np.float32)) for _ in range(3)]
    pending = []
    acc = torch.zeros(4, 4)
    for i, w in enumerate(layers):
        grad = w * (i + 1)
        pending.append((grad, dist.all_reduce(grad, op=dist.ReduceOp.AVG, async_op=True)))
        acc = acc + w @ w.T  # compute while the reduction runs
    for grad, work in pending:
        work.wait()
    res["overlap_grads"] = [r6(gr[0]) for gr, _ in pending]
    res["overlap_acc"] = r6(acc[0])

    results = [None] * world
    dist.all_gather_object(results, res)
    if rank == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(results, f)
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
