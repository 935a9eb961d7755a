"""Memory history of ember's CPU caching allocator, in the format of torch.cuda.memory's.

``_record_memory_history()`` starts recording every allocator event (alloc, free_requested,
free_completed, segment_alloc, segment_free, oom) with its address, size, stream and time, and
optionally the Python (and C++) stack that caused it; ``_snapshot()`` returns the allocator's
segments and blocks with the recorded trace, the dict that https://pytorch.org/memory_viz reads,
and ``_dump_snapshot(path)`` pickles it. ``plot_memory_over_time`` draws allocated and reserved
memory against time (needs matplotlib). The same API for the GPU is ``ember.cuda.memory``.

Example:
    >>> import ember, ember.memory
    >>> ember.memory._record_memory_history(max_entries=10000)
    >>> x = ember.ones(1000)
    >>> del x
    >>> snap = ember.memory._snapshot()
    >>> ember.memory._record_memory_history(enabled=None)
    >>> "alloc" in [e["action"] for e in snap["device_traces"][0]]
    True
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any, Literal, Optional, Union

from ember import _C

__all__ = ["_record_memory_history", "_snapshot", "_dump_snapshot", "memory_over_time",
           "plot_memory_over_time"]

_Enabled = Union[Literal["state", "all"], bool, None]


def _history_args(fn: str, enabled: _Enabled, context: Optional[str], stacks: str,
                  max_entries: int) -> tuple[bool, bool, str, bool, int]:
    if enabled is True:
        enabled = "all"
    elif enabled is False:
        enabled = None
    if enabled not in (None, "state", "all"):
        raise ValueError(f"{fn}: enabled must be None, 'state' or 'all', got {enabled!r}")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"{fn}: context must be None, 'state', 'alloc' or 'all', got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"{fn}: stacks must be 'python' or 'all', got {stacks!r}")
    if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 0:
        raise ValueError(f"{fn}: max_entries must be a non-negative int, got {max_entries!r}")
    return (enabled is not None, enabled == "all", context or "none", stacks == "all",
            min(max_entries, sys.maxsize))


def _record_history_for(device_type: str, fn: str, enabled: _Enabled, context: Optional[str],
                        stacks: str, max_entries: int, clear_history: bool) -> None:
    on, trace, ctx, cpp, n = _history_args(fn, enabled, context, stacks, max_entries)
    _C._record_memory_history(device_type, on, trace, ctx, cpp, n, bool(clear_history))


def _record_memory_history(enabled: _Enabled = "all", context: Optional[str] = "all",
                           stacks: str = "all", max_entries: int = sys.maxsize,
                           device: Any = None, clear_history: bool = False) -> None:
    """Starts (or with ``enabled=None`` stops) recording the CPU allocator's history.

    enabled: "all" keeps a trace of every event (the newest ``max_entries``); "state" only the
    stacks of the blocks alive at snapshot time; None stops recording (what was recorded stays
    until ``clear_history``). context: where stacks are captured: None, "state" (live blocks
    only), "alloc" (allocations) or "all" (allocations and frees). stacks: "python", or "all" for
    Python and C++ frames (the C++ ones come from unwinding the call stack: tens of
    microseconds per allocation). Python stacks are captured only on threads that hold the GIL
    and cost a few microseconds per allocation; ``context=None`` records the trace alone, at
    well under a microsecond per event.

    >>> ember.memory._record_memory_history(context=None)
    >>> ember.memory._record_memory_history(enabled=None)
    """
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"ember.memory._record_memory_history: device must be 'cpu' (use "
                         f"ember.cuda.memory for GPUs), got {device!r}")
    _record_history_for("cpu", "ember.memory._record_memory_history", enabled, context, stacks,
                        max_entries, clear_history)


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The CPU allocator's segments (with their blocks) and recorded trace:
    ``{"segments": [...], "device_traces": [[...]]}``, as torch.cuda.memory._snapshot.

    >>> sorted(ember.memory._snapshot())
    ['device_traces', 'segments']
    """
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"ember.memory._snapshot: device must be 'cpu' (use ember.cuda.memory "
                         f"for GPUs), got {device!r}")
    return _C._memory_history_snapshot("cpu")


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickles ``_snapshot()`` to ``filename``; drag the file onto https://pytorch.org/memory_viz.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "snap.pickle")
    >>> ember.memory._dump_snapshot(path)
    >>> os.path.getsize(path) > 0
    True
    """
    _write_snapshot(_snapshot(), filename)


def _write_snapshot(snapshot: dict[str, Any], filename: str) -> None:
    with open(os.fspath(filename), "wb") as f:
        pickle.dump(snapshot, f)


def _load(snapshot_or_path: Union[dict[str, Any], str, os.PathLike]) -> dict[str, Any]:
    if isinstance(snapshot_or_path, dict):
        return snapshot_or_path
    with open(os.fspath(snapshot_or_path), "rb") as f:
        snap = pickle.load(f)
    if not isinstance(snap, dict) or "device_traces" not in snap or "segments" not in snap:
        raise ValueError(f"{snapshot_or_path!r} does not hold a memory snapshot (a dict with "
                         f"'segments' and 'device_traces')")
    return snap


def memory_over_time(snapshot_or_path: Union[dict[str, Any], str, os.PathLike],
                     device: int = 0) -> tuple[list[float], list[int], list[int]]:
    """From a snapshot's trace: times (seconds from its first event) and the allocated and
    reserved bytes after each event. The curves end at the snapshot's state: bytes allocated
    before recording began are the difference between the segments and the trace.

    >>> ember.memory._record_memory_history()
    >>> x = ember.ones(100)
    >>> t, allocated, reserved = ember.memory.memory_over_time(ember.memory._snapshot())
    >>> ember.memory._record_memory_history(enabled=None)
    >>> len(t) == len(allocated) == len(reserved) > 0
    True
    """
    snap = _load(snapshot_or_path)
    traces = snap["device_traces"]
    trace = traces[device] if device < len(traces) else []
    segs = [s for s in snap["segments"] if s.get("device", 0) == device]
    final_alloc = sum(s["allocated_size"] for s in segs)
    final_reserved = sum(s["total_size"] for s in segs)
    delta_alloc = {"alloc": 1, "free_completed": -1}
    delta_reserved = {"segment_alloc": 1, "segment_free": -1}
    alloc = reserved = 0
    times: list[float] = []
    allocs: list[int] = []
    reserves: list[int] = []
    t0 = trace[0]["time_us"] if trace else 0
    for e in trace:
        alloc += delta_alloc.get(e["action"], 0) * e["size"]
        reserved += delta_reserved.get(e["action"], 0) * e["size"]
        times.append((e["time_us"] - t0) / 1e6)
        allocs.append(alloc)
        reserves.append(reserved)
    # Shift to the absolute level: the last point is the snapshot's state.
    a0 = final_alloc - alloc
    r0 = final_reserved - reserved
    return times, [a + a0 for a in allocs], [r + r0 for r in reserves]


def plot_memory_over_time(snapshot_or_path: Union[dict[str, Any], str, os.PathLike],
                          out_png: Union[str, os.PathLike], device: int = 0,
                          title: Optional[str] = None,
                          marks: Optional[list[float]] = None) -> str:
    """Draws allocated and reserved memory over time from a snapshot (or its pickle) into
    ``out_png`` (like the seed paper's Fig. 2); ``marks`` draws vertical lines (seconds from the
    first event, iteration boundaries say). Needs matplotlib, an optional dependency.

    >>> ember.memory.plot_memory_over_time(snap, "memory.png")  # doctest: +SKIP
    'memory.png'
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("ember.memory.plot_memory_over_time needs matplotlib "
                          "(pip install matplotlib)") from e
    times, allocated, reserved = memory_over_time(snapshot_or_path, device)
    fig, ax = plt.subplots(figsize=(8, 4))
    mib = 1 << 20
    ax.step(times, [a / mib for a in allocated], where="post", label="allocated")
    ax.step(times, [r / mib for r in reserved], where="post", label="reserved")
    for m in marks or []:
        ax.axvline(m, color="grey", linewidth=0.5, linestyle="--")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("memory (MiB)")
    ax.set_title(title or "memory over time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.fspath(out_png), dpi=100)
    plt.close(fig)
    return os.fspath(out_png)
