"""DistributedDataParallel training steps and process-group start-up (issue 13's last two cases).

DDP training step (`ddp/<model> 2 procs`): ember.nn.parallel.DistributedDataParallel over
ember.distributed's shm backend vs torch.nn.parallel.DistributedDataParallel over gloo, 2
processes x 1 thread each (OMP_NUM_THREADS=1, set_num_threads(1)). The models are the MLP and
the small ResNet of cases_nn_train.py, same sizes and batch per rank (MLP 128, ResNet 32; each
rank its own random batch). Two spawned ranks per framework stay up for the whole run with one
process group; a measurement asks both to time `iters` full steps (zero_grad, DDP forward,
cross-entropy, backward with the bucketed all-reduce, SGD step) after a warm-up and a barrier,
and takes the slower rank's time per step. Throughput is 2 x batch / step time.

The `ddp/<model> 1 proc` rows are the baseline of the scaling efficiency: the same model trained
without DDP in one of those processes (1 thread) while the other waits. Scaling efficiency =
2-process throughput / (2 x 1-process throughput) = 1-proc step time / 2-proc step time. A
summary (samples/s, ember/torch throughput ratio, efficiencies) is printed when the run ends.

Start-up (`ddp/spawn 2 + init_process_group`): the wall time of one
`<fw>.multiprocessing.spawn(fn, nprocs=2)` whose workers run init_process_group (tcp:// rendezvous;
ember "shm", torch "gloo"), a barrier and destroy_process_group; from the call to its return.

    python benchmarks/run.py --filter ddp/

On a machine shared with other jobs the 2-process rows measure the scheduler as much as the
libraries (2 ranks want both cores, and the load changes between the 1-proc and 2-proc rows, so
a wall-time efficiency can even exceed 100%): compare ratios from the same run only, and read
the summary's CPU time per step and rank (process_time, all threads of the rank), which the
other jobs barely move: its "CPU efficiency" is 1-proc CPU per step / 2-proc CPU per step, the
share of a rank's work that is the model's rather than DDP's (hooks, bucket copies, all-reduce).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
import traceback
from datetime import timedelta
from typing import Any, Iterator

import numpy as np
from bench_models import small_resnet
from harness import SelfTimed, case

WORLD = 2
_BATCH = {"mlp": 128, "resnet": 32}
_REPLY_TIMEOUT_S = 600.0  # a worker's answer to one command (a generous bound: never hang)
_GROUP_TIMEOUT = timedelta(seconds=300)  # a rank that dies makes the other raise, not hang


# ---- models: the same as cases_nn_train.py's ---------------------------------------------------

def _mlp(mod: Any) -> Any:
    nn = mod.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _train_step(mod: Any, name: str, mode: str, rank: int) -> Any:
    """A closure running one training step of model `name`, DDP-wrapped when mode == "ddp"."""
    mod.manual_seed(0)
    model = _mlp(mod) if name == "mlp" else small_resnet(mod.nn, 32)
    if mode == "ddp":
        model = importlib.import_module(f"{mod.__name__}.nn.parallel").DistributedDataParallel(
            model)
    opt = mod.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = mod.nn.CrossEntropyLoss()
    rng = np.random.default_rng(rank)
    n = _BATCH[name]
    shape = (n, 784) if name == "mlp" else (n, 3, 32, 32)
    x = mod.tensor(rng.standard_normal(shape, dtype=np.float32))
    y = mod.tensor(rng.integers(0, 10, n))

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return step


# ---- the ranks ------------------------------------------------------------------------------

def _import(framework: str) -> tuple[Any, Any, str]:
    mod = importlib.import_module(framework)
    dist = importlib.import_module(f"{framework}.distributed")
    return mod, dist, "gloo" if framework == "torch" else "shm"


def _worker(framework: str, rank: int, port: int, conn: Any) -> None:
    """One rank: builds steps on demand and times them; ("error", traceback) on failure."""
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        mod, dist, backend = _import(framework)
        mod.set_num_threads(1)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=WORLD, timeout=_GROUP_TIMEOUT)
    except Exception:  # noqa: BLE001  (reported to the parent)
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    steps: dict[tuple[str, str], Any] = {}
    while True:
        try:
            msg = conn.recv()
        except EOFError:  # the parent is gone
            msg = None
        if msg is None:
            break
        name, mode, iters, warmup = msg
        try:
            if (name, mode) not in steps:
                steps[name, mode] = _train_step(mod, name, mode, rank)
            step = steps[name, mode]
            for _ in range(warmup):
                step()
            if mode == "ddp":
                dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(iters):
                step()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            conn.send(("ok", (wall / iters, cpu / iters)))
        except Exception:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))
            break
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _one_thread_env() -> Iterator[None]:
    """OMP_NUM_THREADS=1 for the processes started inside (the parent's value is restored)."""
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old


def _recv(conn: Any, what: str) -> Any:
    if not conn.poll(_REPLY_TIMEOUT_S):
        raise RuntimeError(f"{what}: no answer from a rank within {_REPLY_TIMEOUT_S:.0f} s")
    try:
        status, value = conn.recv()
    except EOFError:
        raise RuntimeError(f"{what}: a rank exited") from None
    if status == "error":
        raise RuntimeError(f"{what}: a rank failed: {value.strip().splitlines()[-1]}")
    return value


class _Ranks:
    """WORLD spawned processes of one framework, in one process group, for the whole run."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        ctx = mp.get_context("spawn")
        port = _free_port()
        self.conns, self.procs = [], []
        with _one_thread_env():
            for r in range(WORLD):
                a, b = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(framework, r, port, b), daemon=True)
                p.start()
                b.close()
                self.conns.append(a)
                self.procs.append(p)
        try:
            for c in self.conns:
                _recv(c, f"{framework}: starting the DDP ranks")
        except BaseException:
            self.close()
            raise

    def time(self, name: str, mode: str, iters: int, warmup: int) -> tuple[float, float]:
        """Seconds per step: the slower rank's (mode "ddp"), or rank 0's alone ("local"); and
        the CPU seconds per step of a rank (all its threads; the mean over the ranks)."""
        conns = self.conns if mode == "ddp" else self.conns[:1]
        for c in conns:
            c.send((name, mode, iters, warmup))
        try:
            out = [_recv(c, f"{self.framework} {name} {mode} step") for c in conns]
            return max(w for w, _ in out), statistics.mean(c for _, c in out)
        except BaseException:
            self.close()
            _RANKS.pop(self.framework, None)
            raise

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        for c in self.conns:
            c.close()
        self.conns, self.procs = [], []


_RANKS: dict[str, _Ranks] = {}
# (framework, model, mode) -> measured (wall, CPU) seconds per step, for the summary at exit.
_TIMES: dict[tuple[str, str, str], list[tuple[float, float]]] = {}


def _ranks(fw: Any) -> _Ranks:
    if fw.name not in _RANKS:
        try:  # ember without its distributed package: the case is "missing", not an error
            importlib.import_module(f"{fw.name}.distributed")
            importlib.import_module(f"{fw.name}.nn.parallel")
        except ImportError as e:
            raise NotImplementedError(f"{fw.name}.distributed is not importable: {e}") from e
        _RANKS[fw.name] = _Ranks(fw.name)
    return _RANKS[fw.name]


def _step_case(fw: Any, name: str, mode: str, iters: int, warmup: int) -> SelfTimed:
    ranks = _ranks(fw)
    ranks.time(name, mode, 1, warmup)  # builds the model (and its DDP reducer) and warms up

    calls = 0

    def once() -> float:
        nonlocal calls
        wall, cpu = ranks.time(name, mode, iters, 1)
        if calls:  # the harness's first call is its untimed warm-up: not in the summary
            _TIMES.setdefault((fw.name, name, mode), []).append((wall, cpu))
        calls += 1
        return wall

    return SelfTimed(once)


def _summary() -> str:
    """samples/s, ember/torch throughput ratio and scaling efficiency from the medians; the
    same from CPU time per step (what a rank computes, whoever else wants the cores)."""
    lines = []
    for name in _BATCH:
        med = {(f, m): statistics.median(w for w, _ in ts) for (f, n, m), ts in _TIMES.items()
               if n == name and ts}  # fmt: skip
        cpu = {(f, m): statistics.median(c for _, c in ts) for (f, n, m), ts in _TIMES.items()
               if n == name and ts}  # fmt: skip
        if not med:
            continue
        parts = []
        for f in ("ember", "torch"):
            one, two = med.get((f, "local")), med.get((f, "ddp"))
            if two is not None:
                text = f"{f} {WORLD * _BATCH[name] / two:.0f} samples/s with {WORLD} procs"
                if one is not None:
                    text += (f" ({_BATCH[name] / one:.0f} with 1, scaling efficiency "
                             f"{one / two:.0%})")  # fmt: skip
                text += f", CPU {cpu[f, 'ddp'] * 1e3:.1f} ms/step/rank"
                if one is not None:
                    text += (f" (1 proc {cpu[f, 'local'] * 1e3:.1f}: CPU efficiency "
                             f"{cpu[f, 'local'] / cpu[f, 'ddp']:.0%})")  # fmt: skip
                parts.append(text)
        if ("ember", "ddp") in med and ("torch", "ddp") in med:
            parts.append(f"throughput ember/torch {med['torch', 'ddp'] / med['ember', 'ddp']:.2f}x"
                         " (target >= 1.2x)")
        if parts:
            lines.append(f"note: ddp/{name}: " + "; ".join(parts))
    return "\n".join(lines)


@atexit.register
def _at_exit() -> None:
    text = _summary()
    if text:
        print("\n" + text, file=sys.stderr)
    for r in list(_RANKS.values()):
        r.close()
    _RANKS.clear()


# ---- training-step cases --------------------------------------------------------------------

def _step_cases(name: str, iters: int, warmup: int, doc_1: str, doc_2: str) -> None:
    """Registers `ddp/<name> 1 proc` (the model's step without DDP: the baseline of the scaling
    efficiency) and `ddp/<name> 2 procs` (its DDP step), each timing `iters` steps."""
    case(f"ddp/{name} 1 proc", unit="ms", check=False, repeats=(7, 3), doc=doc_1)(
        lambda fw: _step_case(fw, name, "local", iters, warmup))
    case(f"ddp/{name} 2 procs", unit="ms", check=False, target=1 / 1.2, repeats=(7, 3),
         doc=doc_2)(lambda fw: _step_case(fw, name, "ddp", iters, warmup))


_step_cases(
    "mlp", 40, 3,
    "baseline for scaling efficiency: MLP 784-512-512-10 step without DDP, batch 128, "
    "SGD momentum 0.9, 1 process x 1 thread",
    "DDP step of the MLP 784-512-512-10, batch 128 per rank, 2 processes x 1 thread: "
    "ember shm vs torch gloo (target: >= 1.2x torch's throughput)")
_step_cases(
    "resnet", 8, 1,
    "baseline for scaling efficiency: the small ResNet (32 ch, 2 blocks) step without DDP, "
    "batch 32 of 3x32x32, SGD momentum 0.9, 1 process x 1 thread",
    "DDP step of the small ResNet, batch 32 per rank, 2 processes x 1 thread: ember shm "
    "vs torch gloo (target: >= 1.2x torch's throughput)")


# ---- spawn + init_process_group -------------------------------------------------------------

def _group_up_and_down(rank: int, framework: str, port: int) -> None:
    """A spawned worker: join the group, barrier, leave it."""
    mod, dist, backend = _import(framework)
    mod.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=_GROUP_TIMEOUT)
    dist.barrier()
    dist.destroy_process_group()


@case("ddp/spawn 2 + init_process_group", unit="s", check=False, target=0.5, repeats=(5, 2),
      doc="wall time of <fw>.multiprocessing.spawn of 2 workers that each run "
          "init_process_group (tcp://; ember shm, torch gloo), barrier and "
          "destroy_process_group, until spawn returns (target: <= 0.5x torch's time)")  # fmt: skip
def _spawn(fw):
    try:
        mpx = importlib.import_module(f"{fw.name}.multiprocessing")
        importlib.import_module(f"{fw.name}.distributed")
    except ImportError as e:
        raise NotImplementedError(f"{fw.name}.multiprocessing / .distributed: {e}") from e

    def once() -> float:
        port = _free_port()
        with _one_thread_env():
            t0 = time.perf_counter()
            mpx.spawn(_group_up_and_down, args=(fw.name, port), nprocs=WORLD, join=True)
            return time.perf_counter() - t0

    return SelfTimed(once)
