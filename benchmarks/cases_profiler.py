"""Profiler overhead per op (issue 14): a + b on 8 float32, with the profiler off and on.

Each measurement runs a loop of ``N`` adds and returns the seconds per add: "off" is the op
alone (the profiler costs it one branch, shared with the other per-op hooks); "on" runs the loop
inside ``ember.profiler.profile()`` / ``torch.profiler.profile(activities=[CPU])``, so the time
includes recording each op (not the conversion of the events at the end, which is outside the
timed loop). The difference of the two rows is the per-op overhead of recording.
"""

from __future__ import annotations

import gc
import time

from harness import SelfTimed, case

N = 5000


def _loop(fw, profiled: bool) -> float:
    a, b = fw.randn(8, seed=1), fw.randn(8, seed=2)
    add = fw.mod.add
    prof = None
    if profiled:
        if fw.name == "torch":
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU])
        else:
            from ember.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(N):
            add(a, b)
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
        if prof is not None:
            prof.__exit__(None, None, None)
    return dt / N


@case("profiler/add 8 floats, off", unit="us", check=False, repeats=(11, 5),
      doc="add(a, b) on 8 float32 in a Python loop, no profiler running")
def _off(fw):
    return SelfTimed(lambda: _loop(fw, False))


@case("profiler/add 8 floats, on", unit="us", check=False, repeats=(11, 5),
      doc="the same loop inside profile(activities=[CPU]): each op recorded")
def _on(fw):
    return SelfTimed(lambda: _loop(fw, True))
