"""What a profile recorded: FunctionEvent (one op or range), EventList (with key_averages,
table, export_chrome_trace) and FunctionEventAvg (one row of key_averages).

Times are in microseconds, as in torch.profiler. The events come from ember._C._profiler_stop
(autograd/profiler.h), converted once when the profile ends.

Example:
    >>> import ember
    >>> from ember.profiler import profile
    >>> with profile() as prof:
    ...     y = ember.ones(4) + 1
    >>> "aten::add" in prof.key_averages().table(sort_by="cpu_time_total")
    True
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Interval", "MemoryRecord", "DeviceKernel"]

# Kinds of recorded ranges (profiler::Kind in autograd/profiler.h), and of device activity (a
# kernel, copy or fill timed on a device: a FunctionEvent whose device_type is not "cpu").
_KIND_OP, _KIND_USER, _KIND_BACKWARD, _KIND_DEVICE = 0, 1, 2, 3
_CATEGORY = {_KIND_OP: "cpu_op", _KIND_USER: "user_annotation", _KIND_BACKWARD: "cpu_op"}


def _device_category(name: str) -> str:
    """The trace category of device activity, as PyTorch's traces name them."""
    if name.startswith("Memcpy"):
        return "gpu_memcpy"
    if name.startswith("Memset"):
        return "gpu_memset"
    return "kernel"


@dataclass
class MemoryRecord:
    """One allocation (bytes > 0) or free (bytes < 0) seen while profile_memory was on."""

    thread: int
    time_us: float
    addr: int
    bytes: int
    total_allocated: int
    total_reserved: int
    device_type: str
    device_index: int
    op_id: int  # the FunctionEvent open on the thread then, -1: none


@dataclass
class DeviceKernel:
    """A kernel (or copy, or fill) timed on a device, from a registered device activity (CUPTI
    on CUDA; none on a CPU build)."""

    name: str
    device_type: str
    device_index: int
    stream: int
    start_us: float
    end_us: float
    op_id: int  # the op that launched it, -1: unknown
    correlation_id: int = -1  # the device activity's id of the launch (CUPTI's correlationId)
    launch_thread: int = -1  # the thread that launched it, -1: unknown
    launch_us: float = -1.0  # when the launch call began (µs since the profile began)

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class Interval:
    """A start and end in microseconds (FunctionEvent.time_range)."""

    start: float
    end: float

    def elapsed_us(self) -> float:
        return self.end - self.start


@dataclass(eq=False)
class FunctionEvent:
    """One recorded op, autograd node or record_function range.

    ``cpu_time_total`` is its duration, ``self_cpu_time_total`` that minus the events directly
    inside it (its ``cpu_children``). ``sequence_nr`` links a forward op that created an autograd
    node with the node's backward event; -1 when there is none.
    """

    id: int
    name: str
    thread: int
    start_us: float
    end_us: float
    kind: int = _KIND_OP
    sequence_nr: int = -1
    input_shapes: list = field(default_factory=list)
    input_types: list = field(default_factory=list)
    stack: list = field(default_factory=list)
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    children_us: float = 0.0
    cpu_parent: Optional["FunctionEvent"] = None
    cpu_children: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    fwd_thread: int = 0
    device_type: str = "cpu"  # "cuda": a kernel, copy or fill on a device (kind _KIND_DEVICE)
    device_index: int = -1
    count: int = 1
    # The device time of the ops inside it (their kernels), filled when the profile ends.
    children_device_us: float = 0.0

    @property
    def key(self) -> str:
        return self.name

    @property
    def time_range(self) -> Interval:
        return Interval(self.start_us, self.end_us)

    @property
    def cpu_time_total(self) -> float:
        if self.device_type != "cpu":  # device activity takes no host time
            return 0.0
        return self.end_us - self.start_us

    @property
    def self_cpu_time_total(self) -> float:
        if self.device_type != "cpu":
            return 0.0
        return self.cpu_time_total - self.children_us

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def device_time_total(self) -> float:
        """A host op: the device time of the kernels it and the ops inside it launched; device
        activity: its own duration."""
        if self.device_type != "cpu":
            return self.end_us - self.start_us
        return self.self_device_time_total + self.children_device_us

    @property
    def self_device_time_total(self) -> float:
        """A host op: the device time of the kernels it launched itself."""
        if self.device_type != "cpu":
            return self.end_us - self.start_us
        return sum(k.duration_us for k in self.kernels)

    @property
    def device_time(self) -> float:
        return self.device_time_total

    # PyTorch's older names for the device columns.
    cuda_time_total = device_time_total
    self_cuda_time_total = self_device_time_total
    cuda_time = device_time

    @property
    def is_async(self) -> bool:
        return False

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time_total={_format_time(self.cpu_time_total)} "
                f"self_cpu_time_total={_format_time(self.self_cpu_time_total)} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes or stack when grouped by them) added up:
    a row of ``key_averages()``."""

    def __init__(self) -> None:
        self.key: Optional[str] = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.input_shapes: Optional[list] = None
        self.stack: Optional[list] = None
        self.node_id = 0
        self.is_async = False
        self.device_type = "cpu"

    def add(self, other: "FunctionEvent | FunctionEventAvg") -> "FunctionEventAvg":
        if self.key is None:
            self.key = other.key
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.device_type = other.device_type
        elif other.key != self.key:
            raise ValueError(f"FunctionEventAvg.add: key {other.key!r} differs from {self.key!r}")
        return self._accumulate(other)

    def _accumulate(self, other: "FunctionEvent | FunctionEventAvg") -> "FunctionEventAvg":
        """Adds other's count, times and memory into this row (whatever its key)."""
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        return self

    def __iadd__(self, other: "FunctionEvent | FunctionEventAvg") -> "FunctionEventAvg":
        return self.add(other)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    @property
    def device_time(self) -> float:
        return self.device_time_total / max(self.count, 1)

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"self_cpu_time_total={_format_time(self.self_cpu_time_total)} "
                f"cpu_time_total={_format_time(self.cpu_time_total)} "
                f"input_shapes={self.input_shapes}>")


_SORT_KEYS = (
    "cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cpu_memory_usage",
    "self_cpu_memory_usage", "device_time", "device_time_total", "self_device_time_total",
    "cuda_time", "cuda_time_total", "self_cuda_time_total",
)


class EventList(list):
    """A list of FunctionEvent (``prof.events()``) or FunctionEventAvg (``key_averages()``)."""

    def __init__(self, events: Iterable = (), *, profile_memory: bool = False,
                 with_device: bool = False, memory: Optional[list] = None,
                 kernels: Optional[list] = None, threads: Optional[dict] = None,
                 base_time_ns: int = 0) -> None:
        super().__init__(events)
        self._profile_memory = profile_memory
        self._with_device = with_device
        self._memory = memory or []
        self._kernels = kernels or []
        self._threads = threads or {}
        self._base_time_ns = base_time_ns

    @property
    def self_cpu_time_total(self) -> float:
        """The self CPU time of every event (each microsecond counted once)."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> "EventList":
        """One FunctionEventAvg per name (and per input shapes, or per the innermost
        ``group_by_stack_n`` stack frames, when asked), in order of first appearance."""
        rows: dict[tuple, FunctionEventAvg] = {}
        for e in self:
            k: tuple = (e.key,)
            if group_by_input_shape:
                k += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                k += tuple(e.stack[:group_by_stack_n])
            row = rows.get(k)
            if row is None:
                row = rows[k] = FunctionEventAvg()
            row.add(e)
            if group_by_stack_n > 0:
                row.stack = e.stack[:group_by_stack_n]
        out = EventList(rows.values(), profile_memory=self._profile_memory,
                        with_device=self._with_device)
        out._grouped_by_shape = group_by_input_shape  # type: ignore[attr-defined]
        out._grouped_by_stack = group_by_stack_n  # type: ignore[attr-defined]
        return out

    def total_average(self) -> FunctionEventAvg:
        """Every event added into one row (key "Total")."""
        total = FunctionEventAvg()
        total.key = "Total"
        for e in self:
            total._accumulate(e)
        return total

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80,
              max_src_column_width: int = 75, header: Optional[str] = None,
              top_level_events_only: bool = False) -> str:
        """The events as a text table like torch.profiler's: Name, Self CPU %, Self CPU,
        CPU total %, CPU total, CPU time avg, (CPU Mem, Self CPU Mem with profile_memory),
        # of Calls, (Input Shapes when grouped by them; Source Location when by stack)."""
        return _build_table(self, sort_by=sort_by, row_limit=row_limit,
                            max_name_column_width=max_name_column_width,
                            max_shapes_column_width=max_shapes_column_width,
                            max_src_column_width=max_src_column_width, header=header,
                            top_level_events_only=top_level_events_only)

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Writes the events as a Chrome trace (JSON that Perfetto and chrome://tracing open)."""
        trace = _chrome_trace(self)
        with open(path, "w") as f:
            json.dump(trace, f)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Writes one line per recorded stack, "frame;frame;...;op value" (flame graph input,
        outermost frame first); needs a profile with with_stack=True."""
        if metric not in ("self_cpu_time_total", "self_device_time_total", "self_cuda_time_total"):
            raise ValueError(f"export_stacks: metric must be 'self_cpu_time_total' or "
                             f"'self_device_time_total', got {metric!r}")
        with open(path, "w") as f:
            for e in self:
                if not e.stack:
                    continue
                frames = ";".join(reversed([s.replace(";", "_") for s in e.stack]))
                value = int(getattr(e, metric))
                if value > 0:
                    f.write(f"{frames};{e.name.replace(' ', '_')} {value}\n")


def _format_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_percent(part: float, whole: float) -> str:
    return f"{(100.0 * part / whole if whole > 0 else 0.0):.2f}%"


def _format_memory(nbytes: int) -> str:
    for unit, scale in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} b"


def _clip(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 3] + "..."


def _build_table(events: EventList, *, sort_by: Optional[str], row_limit: int,
                 max_name_column_width: int, max_shapes_column_width: int,
                 max_src_column_width: int, header: Optional[str],
                 top_level_events_only: bool) -> str:
    rows = list(events)
    if top_level_events_only:
        rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {', '.join(_SORT_KEYS)}; "
                             f"got {sort_by!r}")
        rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]
    with_shapes = bool(getattr(events, "_grouped_by_shape", False))
    with_stack = bool(getattr(events, "_grouped_by_stack", 0))
    with_memory = events._profile_memory
    with_device = events._with_device or any(e.device_time_total > 0 for e in events)
    self_cpu_total = sum(e.self_cpu_time_total for e in events)
    # The device time, each microsecond once: the rows of device activity (kernels) when the
    # list has them (the ops that launched those kernels count the same time again), else the
    # ops' own kernels.
    device_rows = [e for e in events if getattr(e, "device_type", "cpu") != "cpu"]
    self_device_total = sum(e.self_device_time_total for e in (device_rows or events))

    name_w = min(max([len(e.key) for e in rows] + [4]) + 4, max_name_column_width)
    columns: list[tuple[str, int]] = [("Name", name_w)]
    num_w = 12
    columns += [("Self CPU %", num_w), ("Self CPU", num_w), ("CPU total %", num_w),
                ("CPU total", num_w), ("CPU time avg", num_w)]
    if with_device:
        columns += [("Self CUDA", num_w), ("Self CUDA %", num_w), ("CUDA total", num_w),
                    ("CUDA time avg", num_w)]
    if with_memory:
        columns += [("CPU Mem", num_w), ("Self CPU Mem", num_w)]
    columns.append(("# of Calls", num_w))
    shapes_w = 0
    if with_shapes:
        shapes_w = min(max([len(str(e.input_shapes)) for e in rows] + [12]) + 4,
                       max_shapes_column_width)
        columns.append(("Input Shapes", shapes_w))
    if with_stack:
        columns.append(("Source Location", max_src_column_width))

    def line(cells: list[str]) -> str:
        parts = []
        for i, ((_, w), c) in enumerate(zip(columns, cells)):
            left = i == 0 or (with_shapes and columns[i][0] == "Input Shapes") or \
                columns[i][0] == "Source Location"
            parts.append(c.ljust(w) if left else c.rjust(w))
        return "  ".join(parts).rstrip() + "  "

    sep = "  ".join("-" * w for _, w in columns) + "  "
    out = []
    if header:
        out += ["=" * len(sep), header]
    out += [sep, line([name for name, _ in columns]), sep]
    for e in rows:
        cells = [_clip(e.key, name_w - 1),
                 _format_percent(e.self_cpu_time_total, self_cpu_total),
                 _format_time(e.self_cpu_time_total),
                 _format_percent(e.cpu_time_total, self_cpu_total),
                 _format_time(e.cpu_time_total),
                 _format_time(e.cpu_time_total / max(e.count, 1))]
        if with_device:
            cells += [_format_time(e.self_device_time_total),
                      _format_percent(e.self_device_time_total, self_device_total),
                      _format_time(e.device_time_total),
                      _format_time(e.device_time_total / max(e.count, 1))]
        if with_memory:
            cells += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        cells.append(str(e.count))
        if with_shapes:
            cells.append(_clip(str(e.input_shapes), shapes_w - 1))
        if with_stack:
            cells.append(_clip(e.stack[0] if e.stack else "", max_src_column_width))
        out.append(line(cells))
    out.append(sep)
    out.append(f"Self CPU time total: {_format_time(self_cpu_total)}")
    if with_device:
        out.append(f"Self CUDA time total: {_format_time(self_device_total)}")
    return "\n".join(out) + "\n"


def _chrome_trace(events: EventList) -> dict[str, Any]:
    """The trace-event JSON: "X" events for the ranges (ts and dur in µs since the profile
    began, "baseTimeNanoseconds" saying when that was), "i" events for memory, "s"/"f" flow
    arrows from a forward op to its backward node, and "M" events naming the process and
    threads."""
    pid = os.getpid()
    out: list[dict[str, Any]] = []
    threads: dict[int, str] = dict(events._threads)
    forward: dict[int, FunctionEvent] = {}
    for e in events:
        if e.device_type != "cpu":
            continue  # device activity: from events._kernels below, on its device's track
        threads.setdefault(e.thread, "")
        args: dict[str, Any] = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
            args["Input type"] = e.input_types
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
            args["Fwd thread id"] = e.fwd_thread
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        out.append({"ph": "X", "cat": _CATEGORY.get(e.kind, "cpu_op"), "name": e.name,
                    "pid": pid, "tid": e.thread, "ts": round(e.start_us, 3),
                    "dur": round(e.end_us - e.start_us, 3), "args": args})
        if e.kind == _KIND_OP and e.sequence_nr >= 0:
            prev = forward.get(e.sequence_nr)
            # The innermost op that made the node (the last one to close) starts the arrow.
            if prev is None or prev.start_us <= e.start_us:
                forward[e.sequence_nr] = e
    for e in events:
        if e.kind == _KIND_BACKWARD and e.sequence_nr in forward and \
                e.name.startswith("autograd::engine::evaluate_function"):
            f = forward[e.sequence_nr]
            flow = {"id": e.sequence_nr, "cat": "fwdbwd", "name": "fwdbwd", "pid": pid}
            out.append({**flow, "ph": "s", "tid": f.thread, "ts": round(f.start_us, 3)})
            out.append({**flow, "ph": "f", "bp": "e", "tid": e.thread,
                        "ts": round(e.start_us, 3)})
    for m in events._memory:
        out.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                    "pid": pid, "tid": m.thread, "ts": round(m.time_us, 3),
                    "args": {"Total Reserved": m.total_reserved,
                             "Total Allocated": m.total_allocated, "Bytes": m.bytes,
                             "Addr": m.addr, "Device Type": m.device_type,
                             "Device Id": m.device_index}})
    # Device kernels: a process per device (pid: the device index, as PyTorch's traces), a
    # thread per stream; a flow arrow ("ac2g") from the launch on the host thread (the op open
    # there then) to the kernel.
    device_pids: dict[tuple[str, int], int] = {}
    streams: set[tuple[int, int]] = set()
    for i, k in enumerate(events._kernels):
        dpid = device_pids.setdefault((k.device_type, k.device_index), max(k.device_index, 0))
        streams.add((dpid, k.stream))
        args: dict[str, Any] = {"External id": k.op_id, "device": k.device_index,
                                "stream": k.stream}
        if k.correlation_id >= 0:
            args["correlation"] = k.correlation_id
        out.append({"ph": "X", "cat": _device_category(k.name), "name": k.name, "pid": dpid,
                    "tid": k.stream, "ts": round(k.start_us, 3), "dur": round(k.duration_us, 3),
                    "args": args})
        if k.launch_thread >= 0 and k.launch_us >= 0:
            threads.setdefault(k.launch_thread, "")
            flow_id = k.correlation_id if k.correlation_id >= 0 else i
            flow = {"id": flow_id, "cat": "ac2g", "name": "ac2g"}
            out.append({**flow, "ph": "s", "pid": pid, "tid": k.launch_thread,
                        "ts": round(k.launch_us, 3)})
            out.append({**flow, "ph": "f", "bp": "e", "pid": dpid, "tid": k.stream,
                        "ts": round(k.start_us, 3)})
    host = socket.gethostname()
    out.append({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                "args": {"name": f"python {pid} ({host})"}})
    out.append({"name": "process_labels", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
                "args": {"labels": "CPU"}})
    for i, (tid, name) in enumerate(sorted(threads.items())):
        label = f"thread {tid} ({name})" if name else f"thread {tid}"
        out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tid,
                    "args": {"name": label}})
        out.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": tid,
                    "args": {"sort_index": i}})
    for (dtype, index), dpid in device_pids.items():
        out.append({"name": "process_name", "ph": "M", "ts": 0, "pid": dpid, "tid": 0,
                    "args": {"name": f"{dtype} {index}"}})
    for dpid, stream in sorted(streams):
        out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": dpid, "tid": stream,
                    "args": {"name": f"stream {stream}"}})
    return {"schemaVersion": 1, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": events._base_time_ns, "traceEvents": out}
