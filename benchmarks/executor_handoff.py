"""Hand-off latency of ember.distributed's per-group executor (ember only, no torch counterpart).

For each scenario, one async operation is submitted, the caller optionally works (holding the
GIL: Python; without it: a C++ computation, simulated by a sleep), then calls Work.wait().
Printed: submit -> the operation starts, the operation ends -> wait() returns, and submit ->
wait() returns, in microseconds (median and 90th percentile).

    PYTHONPATH=build/dev/site python3 benchmarks/executor_handoff.py [old_work.py ...]

Optional arguments are other versions of ``_work.py`` to compare with (A/B in one run).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from typing import Any


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_work_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _us(xs: list[float], q: float) -> float:
    return sorted(xs)[min(int(len(xs) * q), len(xs) - 1)] * 1e6


def measure(mod: Any, n: int = 400, gil_work: float = 0.0, nogil_work: float = 0.0,
            op_time: float = 0.0) -> dict[str, float]:
    """Latencies (us) of n submit/wait rounds on a fresh executor of module `mod`."""
    ex = mod._Executor("handoff")
    start, ret, total = [], [], []
    for _ in range(n):
        rec: dict[str, float] = {}

        def fn(rec: dict[str, float] = rec) -> None:
            rec["start"] = time.perf_counter()
            if op_time:
                time.sleep(op_time)  # a collective: the GIL is released
            rec["end"] = time.perf_counter()

        t0 = time.perf_counter()
        work = ex.run("op", fn, [], True)
        if gil_work:
            _spin(gil_work)
        if nogil_work:
            time.sleep(nogil_work)
        t_wait = time.perf_counter()
        work.wait()
        t1 = time.perf_counter()
        start.append(rec["start"] - t0)
        ret.append(t1 - max(rec["end"], t_wait))
        total.append(t1 - t0)
    ex.close()
    return {"start": statistics.median(start) * 1e6, "start90": _us(start, 0.9),
            "ret": statistics.median(ret) * 1e6, "ret90": _us(ret, 0.9),
            "total": statistics.median(total) * 1e6}


def main() -> None:
    from ember.distributed import _work

    impls = [("current", _work)] + [(p, _load(p)) for p in sys.argv[1:]]
    print("| impl | caller GIL work ms | caller no-GIL work ms | op ms | submit->start us "
          "(p90) | end->wait return us (p90) | submit->return us |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for gil, nogil, op in [(0, 0, 0), (0, 0, 0.5), (0, 1, 0.5), (0.2, 1, 0.5)]:
        for name, mod in impls:
            r = measure(mod, gil_work=gil / 1e3, nogil_work=nogil / 1e3, op_time=op / 1e3)
            print(f"| {name} | {gil} | {nogil} | {op} | {r['start']:.1f} ({r['start90']:.1f}) | "
                  f"{r['ret']:.1f} ({r['ret90']:.1f}) | {r['total']:.1f} |")


if __name__ == "__main__":
    main()
