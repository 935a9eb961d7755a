"""Allocator benchmarks: how much memory the CPU allocator holds for a given live peak.

The "time" of these cases is a ratio, reserved bytes / peak live bytes (the unit column says
"x"); lower is better, 1.0 means the allocator holds nothing beyond what is alive.

The workload (issue 16): tensors of random sizes between 1 and 50 MB, two alive at a time (the
older is freed before the next is made), each filled once so its pages are really in use.

* ember: the caching allocator's ``max_memory_reserved()`` during the run (after
  ``empty_cache()`` and ``reset_peak_memory_stats()``), over the peak of the live bytes.
* torch: PyTorch's CPU allocator does not cache (every tensor is malloc'd and freed), so what it
  holds is the process's resident memory: the peak of the resident set size sampled after every
  allocation, minus its value at the start, over the peak of the live bytes.
"""

from __future__ import annotations

import gc

import harness
import numpy as np
from harness import SelfTimed, case

harness.UNITS.setdefault("x", 1.0)
harness.UNIT_LABELS.setdefault("x", "x")

ITERS = 300
MB = 1_000_000


def _sizes(n: int) -> list[int]:
    rng = np.random.default_rng(16)
    return [int(s) for s in rng.integers(1 * MB, 50 * MB, n)]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _run(fw, reserved_now) -> float:
    """Runs the workload; returns max over the run of reserved_now() - start, / peak live."""
    mod = fw.mod
    gc.collect()
    start = reserved_now()
    live: list = []
    peak_live = peak_reserved = 0
    for n in _sizes(ITERS):
        if len(live) == 2:
            live.pop(0)
        t = mod.empty(n, dtype=mod.uint8)
        t.fill_(1)
        live.append(t)
        peak_live = max(peak_live, sum(x.numel() for x in live))
        peak_reserved = max(peak_reserved, reserved_now() - start)
    del live, t
    return peak_reserved / peak_live


@case("memory/random large sizes reserved/peak", unit="x", target_abs=1.5, check=False,
      repeats=(3, 1),
      doc=f"{ITERS} tensors of 1-50 MB, two alive at a time: bytes the allocator holds over "
          "the live peak (ember: caching allocator's reserve; torch: resident set growth)")
def _ember(fw):
    def measure() -> float:
        fw.mod.empty_cache()
        fw.mod.reset_peak_memory_stats()
        base = fw.mod.memory_reserved()
        _run(fw, fw.mod.memory_reserved)  # peak_reserved sampled; the allocator's peak is exact
        ratio_peak = (fw.mod.max_memory_reserved() - base) / max(1, _peak_live())
        fw.mod.empty_cache()
        return ratio_peak

    return SelfTimed(measure)


def _peak_live() -> int:
    peak, live = 0, []
    for n in _sizes(ITERS):
        if len(live) == 2:
            live.pop(0)
        live.append(n)
        peak = max(peak, sum(live))
    return peak


@_ember.override("torch")
def _torch(fw):
    return SelfTimed(lambda: _run(fw, _rss))
