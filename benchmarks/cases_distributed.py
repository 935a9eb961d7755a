"""ember.distributed (shm backend) vs torch.distributed (gloo): all_reduce with 2 ranks.

Two spawned processes per framework stay up for the run (one process group each); a measurement
asks both ranks to time `iters` back-to-back all_reduces of a float32 tensor after a warm-up and
a barrier, and takes the slower rank's time per call. The 64 MB case also reports the fraction
of this machine's memory bandwidth it reaches: the time of one single-threaded 64 MB copy
(NumPy) divided by the time of the all_reduce (1.0 would be an all_reduce as fast as a memcpy).
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import socket
import sys
import time

import numpy as np
from harness import SelfTimed, case

WORLD = 2


def _worker(framework: str, rank: int, port: int, conn) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if framework == "torch":
        import torch as mod
        import torch.distributed as dist

        backend = "gloo"
    else:
        import ember as mod
        import ember.distributed as dist

        backend = "shm"
    mod.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    tensors: dict[int, object] = {}
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        nbytes, iters = msg
        if nbytes not in tensors:
            tensors[nbytes] = mod.ones(nbytes // 4, dtype=mod.float32)
        t = tensors[nbytes]
        for _ in range(2):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        conn.send((time.perf_counter() - t0) / iters)
    dist.destroy_process_group()


class _Pair:
    def __init__(self, framework: str) -> None:
        ctx = mp.get_context("spawn")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.conns, self.procs = [], []
        for r in range(WORLD):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(framework, r, port, b), daemon=True)
            p.start()
            self.conns.append(a)
            self.procs.append(p)
        for c in self.conns:
            if not c.poll(120) or c.recv() != "ready":
                raise RuntimeError(f"{framework}: the benchmark ranks did not start")

    def time(self, nbytes: int, iters: int) -> float:
        for c in self.conns:
            c.send((nbytes, iters))
        return max(c.recv() for c in self.conns)

    def close(self) -> None:
        for c, p in zip(self.conns, self.procs):
            try:
                c.send(None)
            except OSError:
                pass
            p.join(10)
            if p.is_alive():
                p.kill()


_PAIRS: dict[str, _Pair] = {}


@atexit.register
def _close_pairs() -> None:
    for p in _PAIRS.values():
        p.close()
    _PAIRS.clear()


def _pair(fw) -> _Pair:
    if fw.name not in _PAIRS:
        _PAIRS[fw.name] = _Pair(fw.name)
    return _PAIRS[fw.name]


def _memcpy_seconds(nbytes: int) -> float:
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return best


def _all_reduce(fw, nbytes: int, iters: int, report: bool = False):
    pair = _pair(fw)

    def once() -> float:
        t = pair.time(nbytes, iters)
        if report:
            frac = _memcpy_seconds(nbytes) / t
            print(f"note: {fw.name} all_reduce {nbytes >> 20} MB: {t * 1e3:.1f} ms, "
                  f"{nbytes / t / 1e9:.2f} GB/s, {frac:.0%} of a single-thread memcpy",
                  file=sys.stderr)
        return t

    return SelfTimed(once)


MB64 = 64 << 20


@case("dist/all_reduce 64MB 2 ranks", unit="ms", target=0.25, check=False, repeats=(5, 2),
      bytes=MB64,
      doc="float32 all_reduce of 64 MB between 2 processes: ember shm vs torch gloo "
          "(target: >= 4x torch's throughput)")  # fmt: skip
def _ar_64mb(fw):
    return _all_reduce(fw, MB64, 4, report=True)


@case("dist/all_reduce 4KB 2 ranks", unit="us", target=0.3, check=False, repeats=(7, 3),
      doc="float32 all_reduce of 4 KB between 2 processes: latency "
          "(target: <= 0.3x torch's time)")  # fmt: skip
def _ar_4kb(fw):
    return _all_reduce(fw, 4096, 500)


# ---- the mpi backend (ember only; beside torch's gloo) ------------------------------------------
_MPI_JOB = """
import sys, time, ember, ember.distributed as dist
ember.set_num_threads(1)
dist.init_process_group("mpi")
nbytes, iters = int(sys.argv[1]), int(sys.argv[2])
t = ember.ones(nbytes // 4)
for _ in range(2):
    dist.all_reduce(t)
dist.barrier()
t0 = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(t)
dt = (time.perf_counter() - t0) / iters
out = [None] * dist.get_world_size()
dist.all_gather_object(out, dt)
if dist.get_rank() == 0:
    print("TIME", max(out))
dist.destroy_process_group()
"""


def _mpi_all_reduce(fw, nbytes: int, iters: int):
    if fw.name != "ember":
        return _all_reduce(fw, nbytes, iters)
    import shutil
    import subprocess

    mpirun = shutil.which("mpirun")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        mpirun = None
    if mpirun is None:
        raise NotImplementedError("mpi4py / mpirun are not installed")
    cmd = [mpirun, "-n", str(WORLD), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [sys.executable, "-c", _MPI_JOB, str(nbytes), str(iters)]

    def once() -> float:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        for line in r.stdout.splitlines():
            if line.startswith("TIME "):
                return float(line.split()[1])
        raise RuntimeError(f"mpirun failed: {r.stderr[-500:]}")

    return SelfTimed(once)


@case("dist/mpi all_reduce 64MB 2 ranks", unit="ms", check=False, repeats=(3, 1), bytes=MB64,
      doc="the same 64 MB all_reduce through ember's mpi backend (mpirun -n 2, Open MPI) vs "
          "torch gloo: reported beside shm's")  # fmt: skip
def _mpi_64mb(fw):
    return _mpi_all_reduce(fw, MB64, 4)


@case("dist/mpi all_reduce 4KB 2 ranks", unit="us", check=False, repeats=(3, 1),
      doc="4 KB all_reduce latency through ember's mpi backend vs torch gloo")  # fmt: skip
def _mpi_4kb(fw):
    return _mpi_all_reduce(fw, 4096, 500)
