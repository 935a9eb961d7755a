"""Shared by the distributed tests that start their own ranks."""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any, Callable


def run_ranks(worker: Callable[..., None], world: int, args: tuple, timeout: float) -> list[Any]:
    """Spawns ``worker(rank, *args, conn)`` for each rank and returns what each sent on conn as
    ``("ok", value)``, in rank order. A rank that sent ``("err", traceback)`` or stayed silent past
    ``timeout`` seconds in all (a hang) fails the caller with an AssertionError naming it; the
    processes never outlive the call."""
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for r in range(world):
        a, b = ctx.Pipe()
        p = ctx.Process(target=worker, args=(r, *args, b), daemon=True)
        p.start()
        conns.append(a)
        procs.append(p)
    out, errors = [], []
    deadline = time.monotonic() + timeout
    try:
        for r, c in enumerate(conns):
            if not c.poll(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"rank {r} did not finish within {timeout} s (a hang)")
            status, value = c.recv()
            if status != "ok":
                errors.append(f"rank {r}:\n{value}")
            out.append(value)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise AssertionError("\n".join(errors))
    return out
