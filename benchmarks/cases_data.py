"""ember.data DataLoader vs torch.utils.data.DataLoader (the data-loading issue's cases).

Dataset: 20,000 samples of a 3x32x32 float32 tensor and an int label, batch 64, shuffled; an
epoch per call (workers started per epoch, as with persistent_workers=False).
"""

from __future__ import annotations

import gc
import os
import time

import numpy as np
from harness import SelfTimed, case

N = 20_000
BATCH = 64


def _data(fw):
    import importlib

    return importlib.import_module("ember.data" if fw.name == "ember" else "torch.utils.data")


class Images:
    """Map-style: (3x32x32 float32 tensor, int label). Works for either framework."""

    def __init__(self, x, n: int) -> None:
        self.x = x
        self.y = [i % 10 for i in range(n)]

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


class NumpyWork:
    """Samples that cost ~0.2 ms of NumPy work each (FFTs and sorts of a 3x32x32 image)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.base = np.random.default_rng(0).standard_normal((3, 32, 32), dtype=np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        a = self.base + np.float32(i)
        for _ in range(REPS):
            spectrum = np.abs(np.fft.rfft2(a))
            a = np.sort(a, axis=-1) + np.float32(1e-3) * spectrum.mean()
        return a, i % 10


REPS = 4  # ~0.2 ms of CPU per sample on the 2-core reference machine


def _images(fw):
    key = ("data-images", N)
    if key not in fw.data_cache:
        fw.data_cache[key] = np.random.default_rng(0).standard_normal((N, 3, 32, 32),
                                                                       dtype=np.float32)
    return Images(fw.from_numpy(fw.data_cache[key]), N)


def _epoch(fw, dataset, **kw):
    data = _data(fw)
    g = fw.mod.Generator()
    g.manual_seed(0)

    def run():
        n = 0
        for x, _ in data.DataLoader(dataset, batch_size=BATCH, shuffle=True, generator=g, **kw):
            n += x.shape[0]
        assert n == len(dataset)

    return run


@case("data/epoch 0 workers", unit="ms", target=1.0, check=False, repeats=(5, 2),
      doc="one epoch, 20k x (3x32x32 f32, int), batch 64, shuffled, num_workers=0 "
          "(target: >= 1.0x torch's samples/s)")  # fmt: skip
def _epoch0(fw):
    return _epoch(fw, _images(fw))


@case("data/epoch 2 workers", unit="ms", target=0.5, check=False, repeats=(5, 2),
      doc="the same epoch with num_workers=2, workers started per epoch "
          "(target: >= 2x torch's samples/s)")  # fmt: skip
def _epoch2(fw):
    return _epoch(fw, _images(fw), num_workers=2)


# ~0.8 s per 0-worker epoch, so that starting the workers (~10 ms) does not dominate the rate.
NUMPY_N = 4_000


@case("data/numpy 0.2ms 0 workers", unit="ms", check=False, repeats=(3, 1),
      doc="4k samples costing ~0.2 ms of NumPy each, num_workers=0 (reference for the next)")  # fmt: skip
def _numpy0(fw):
    return _epoch(fw, NumpyWork(NUMPY_N))


@case("data/numpy 0.2ms 2 workers", unit="ms", target=1.0, check=False, repeats=(3, 1),
      doc="the same with num_workers=2 (targets: >= 1.0x torch's 2-worker rate and >= 1.8x "
          "ember's own 0-worker rate: compare with the row above)")  # fmt: skip
def _numpy2(fw):
    return _epoch(fw, NumpyWork(NUMPY_N), num_workers=2)


def _first_batch(fw, method: str):
    data = _data(fw)
    ds = _images(fw)

    def once() -> float:
        gc.collect()
        t0 = time.perf_counter()
        it = iter(data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=2,
                                  multiprocessing_context=method))
        next(it)
        dt = time.perf_counter() - t0
        del it
        gc.collect()
        return dt

    return SelfTimed(once)


@case("data/first batch fork", unit="ms", target=1.0, check=False, repeats=(5, 2),
      doc="time to the first batch with 2 fork workers (target: <= torch's)")  # fmt: skip
def _first_fork(fw):
    return _first_batch(fw, "fork")


@case("data/first batch spawn", unit="ms", target=1.0, check=False, repeats=(3, 1),
      doc="time to the first batch with 2 spawn workers (target: <= torch's)")  # fmt: skip
def _first_spawn(fw):
    return _first_batch(fw, "spawn")


def _shm_bytes() -> int:
    try:
        return sum(os.path.getsize(os.path.join("/dev/shm", n)) for n in os.listdir("/dev/shm"))
    except OSError:
        return 0


ABANDONED = 200


class _Abandon:
    """Creates `n` iterators with 2 workers, takes one batch from each and drops it, then checks
    that no /dev/shm bytes and no worker processes are left (AssertionError: the row says
    `error` with the numbers). The first call, the harness's warm-up, abandons 10."""

    def __init__(self, data, ds) -> None:
        self.data, self.ds, self.calls = data, ds, 0

    def __call__(self) -> float:
        import multiprocessing as mp

        n = 10 if self.calls == 0 else ABANDONED
        self.calls += 1
        gc.collect()
        before = _shm_bytes()
        t0 = time.perf_counter()
        dl = self.data.DataLoader(self.ds, batch_size=BATCH, shuffle=True, num_workers=2)
        for _ in range(n):
            it = iter(dl)
            next(it)
            del it
        gc.collect()
        dt = time.perf_counter() - t0
        left_bytes, left_procs = max(0, _shm_bytes() - before), len(mp.active_children())
        assert left_bytes == 0 and left_procs == 0, (
            f"{n} abandoned iterators left {left_bytes} bytes in /dev/shm and {left_procs} "
            "worker processes"
        )
        return dt


@case("data/200 abandoned iterators", unit="ms", check=False, repeats=(1, 1),
      doc="create 200 iterators with 2 workers, take one batch, drop them; the time of all 200, "
          "and an error if any /dev/shm bytes or worker processes are left (target: 0, 0)")  # fmt: skip
def _abandoned(fw):
    data = _data(fw)
    ds = Images(_images(fw).x[:2000], 2000)
    return SelfTimed(_Abandon(data, ds))


# ---- worker memory (a measurement, not a timed case): python3 benchmarks/cases_data.py ---------


def _private_dirty(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


class _ListDataset:
    """Reads one element of a big Python list per sample (works for either framework)."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> int:
        self.items[i]
        return i


def worker_memory_growth(framework: str, kind: str, n: int = 2_000_000) -> list[float]:
    """MiB each of 2 fork workers writes (Private_Dirty) over one shuffled epoch of a dataset
    holding a list of `n` ints, strings or dicts: copy-on-write copies of the shared list."""
    import warnings

    data = __import__("ember.data" if framework == "ember" else "torch.utils.data",
                      fromlist=["DataLoader"])  # fmt: skip
    make = {"ints": lambda i: i * 1000 + 7, "strings": lambda i: f"/data/train/{i:08d}.jpg",
            "dicts": lambda i: {"file": f"{i}.jpg", "label": i + 1000}}[kind]  # fmt: skip
    ds = _ListDataset([make(i) for i in range(n)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ember's advice to wrap the list of dicts
        dl = data.DataLoader(ds, batch_size=1024, shuffle=True, num_workers=2,
                             persistent_workers=True, collate_fn=len,
                             multiprocessing_context="fork")  # fmt: skip
        it = iter(dl)
        next(it)
    workers = it._pool.workers if framework == "ember" else it._workers
    before = [_private_dirty(w.pid) for w in workers]
    for _ in it:
        pass
    return [(_private_dirty(w.pid) - b) / 2**20 for w, b in zip(workers, before)]


if __name__ == "__main__":
    print("| list of 2M | ember: MiB per worker | torch: MiB per worker |")
    print("| --- | ---: | ---: |")
    for kind in ("ints", "strings", "dicts"):
        cells = []
        for framework in ("ember", "torch"):
            try:
                growth = worker_memory_growth(framework, kind)
                cells.append(" / ".join(f"{g:.1f}" for g in growth))
            except ImportError as e:
                cells.append(f"n/a ({e.name})")
            gc.collect()
        print(f"| {kind} | {cells[0]} | {cells[1]} |")
