"""ember.profiler: torch.profiler's API over ember's C++ profiler.

While a ``profile`` records, every op the dispatcher runs (named ``aten::<op>`` as in PyTorch,
nested when one runs inside another), every autograd node the engine runs
(``autograd::engine::evaluate_function: MulBackward0``, linked to its forward op by the sequence
number), every ``record_function`` range, DataLoader fetches and optimizer steps are recorded on
their thread, with input shapes and dtypes (``record_shapes``), allocations (``profile_memory``)
and Python stacks (``with_stack``). Off, it costs each op one relaxed atomic load.

``ProfilerActivity.CUDA`` records the kernels, copies and fills the GPU ran, through the device
activity the CUDA backend registers (autograd/profiler.h: DeviceActivity) over NVIDIA's CUPTI,
loaded at run time (csrc/cuda/cupti_activity.cpp): each appears as an event of device_type
"cuda" (a row of key_averages with its device time), is attributed to the host op that launched
it (whose ``device_time_total`` / ``cuda_time_total`` counts it), and is drawn on its stream's
track in the Chrome trace with an arrow from the launch. Without CUPTI (or a GPU) it warns and
records host ops only.

Example:
    >>> import ember
    >>> from ember.profiler import profile, record_function, ProfilerActivity
    >>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    ...     with record_function("model_inference"):
    ...         y = ember.ones(8, 8) @ ember.ones(8, 8)
    >>> table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    >>> "model_inference" in table and "aten::matmul" in table
    True
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import gzip
import os
import socket
import time
import warnings
import weakref
from typing import Any, Callable, Iterable, Optional

from ember import _C
from ember.profiler._events import (
    _KIND_DEVICE,
    DeviceKernel,
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    MemoryRecord,
)

__all__ = [
    "ProfilerActivity", "ProfilerAction", "profile", "schedule", "record_function",
    "tensorboard_trace_handler", "supported_activities", "is_profiler_enabled", "EventList",
    "FunctionEvent", "FunctionEventAvg",
]


class ProfilerActivity(enum.Enum):
    """What a profile records: host ops (CPU) and device kernels (CUDA)."""

    CPU = "CPU"
    CUDA = "CUDA"


class ProfilerAction(enum.Enum):
    """What a schedule asks for at a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _cuda_available() -> bool:
    try:
        from ember import cuda

        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001  (no CUDA build, or no driver)
        return False


def _cuda_extension() -> Any:
    """ember._C_cuda when it is built (importing it), else None."""
    try:
        from ember import _C_cuda
    except ImportError:
        return None
    return _C_cuda


def _cupti_status() -> dict:
    """ember._C_cuda._cupti_status() (see csrc/cuda/cupti_activity.cpp), {} without it."""
    m = _cuda_extension()
    if m is None or not hasattr(m, "_cupti_status"):
        return {}
    return dict(m._cupti_status())


def supported_activities() -> set[ProfilerActivity]:
    """The activities this build can record: CPU, and CUDA where ember has a GPU.

    >>> ProfilerActivity.CPU in supported_activities()
    True
    """
    acts = {ProfilerActivity.CPU}
    if _cuda_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


def is_profiler_enabled() -> bool:
    """Whether a profile is recording now (one check, for code that records only then)."""
    return _C._profiler_enabled()


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """A schedule for ``profile(schedule=...)``: after ``skip_first`` steps, cycles of ``wait``
    idle steps, ``warmup`` steps with the profiler on but discarded, and ``active`` recorded
    steps (the last one saves: ``on_trace_ready`` runs), ``repeat`` times (0: forever).

    >>> s = schedule(wait=1, warmup=1, active=2)
    >>> [s(i).name for i in range(4)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    for name, v in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                    ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"schedule: {name} must be a non-negative int, got {v!r}")
    if active < 1:
        raise ValueError(f"schedule: active must be at least 1, got {active}")
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise ValueError(f"schedule: step must be non-negative, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


def _always_record(_: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class record_function(contextlib.ContextDecorator):
    """A named range in the profile, around a block or (as a decorator) each call of a function;
    ranges and the ops inside them nest. Nothing is recorded when no profile runs.

    >>> with profile() as prof:
    ...     with record_function("step"):
    ...         _ = ember.zeros(2) * 2
    >>> [e.name for e in prof.events() if e.name == "step"]
    ['step']
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a str, got {type(name).__name__}")
        self.name = name
        self._handles: list[int] = []  # a decorator's instance may be entered recursively

    def __enter__(self) -> "record_function":
        self._handles.append(_C._profiler_push_range(self.name))
        return self

    def __exit__(self, *exc: Any) -> bool:
        if not self._handles:
            raise RuntimeError(f"record_function({self.name!r}): __exit__ without a matching "
                               "__enter__ (use it as a `with` block or a decorator)")
        _C._profiler_pop_range(self._handles.pop())
        return False


def tensorboard_trace_handler(dir_name: str, worker_name: Optional[str] = None,
                              use_gzip: bool = False) -> Callable[["profile"], None]:
    """An ``on_trace_ready`` that writes each saved trace to ``dir_name`` as
    ``<worker_name>.<time in ms>.pt.trace.json`` (``.gz`` with use_gzip), the layout the
    TensorBoard profiler plugin and HTA read. worker_name defaults to ``<host>_<pid>``.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with profile(on_trace_ready=tensorboard_trace_handler(d)):
    ...     _ = ember.ones(3) + 1
    >>> any(f.endswith(".pt.trace.json") for f in os.listdir(d))
    True
    """

    def handler(prof: "profile") -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        if use_gzip:
            name += ".gz"
        path = os.path.join(dir_name, name)
        if use_gzip:
            tmp = path[:-3]
            prof.export_chrome_trace(tmp)
            with open(tmp, "rb") as src, gzip.open(path, "wb") as dst:
                dst.write(src.read())
            os.remove(tmp)
        else:
            prof.export_chrome_trace(path)

    return handler


# The profile whose trace the (process-wide) C++ profiler records now, to name it when another
# one is started.
_owner: Optional[weakref.ref] = None


class profile:
    """Records what runs inside it (see the module docstring); torch.profiler.profile's API.

    Used as a context manager (or with ``start()`` / ``stop()``); with a ``schedule``, call
    ``step()`` at the end of each iteration and ``on_trace_ready(prof)`` runs whenever an active
    cycle ends. Afterwards ``events()``, ``key_averages()`` and ``export_chrome_trace()`` give the
    last saved cycle.

    >>> with profile(record_shapes=True) as prof:
    ...     _ = ember.ones(2, 3).sum()
    >>> row = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "aten::sum"][0]
    >>> row.input_shapes
    [[2, 3]]
    """

    def __init__(self, *, activities: Optional[Iterable[ProfilerActivity]] = None,
                 schedule: Optional[Callable[[int], ProfilerAction]] = None,
                 on_trace_ready: Optional[Callable[["profile"], Any]] = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False) -> None:
        acts = set(activities) if activities is not None else supported_activities()
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {a!r}")
        if with_flops:
            raise NotImplementedError("profile: with_flops is not supported by ember's profiler")
        if with_modules:
            raise NotImplementedError("profile: with_modules is not supported by ember's profiler")
        if schedule is not None and not callable(schedule):
            raise TypeError("profile: schedule must be a callable step -> ProfilerAction")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError("profile: on_trace_ready must be a callable taking the profile")
        self.activities = acts
        self.schedule = schedule if schedule is not None else _always_record
        self._record_steps = schedule is not None  # "ProfilerStep#N" ranges, as PyTorch's
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._running = False  # the C++ profiler was started by this profile
        self._started = False  # start() ran and stop() did not yet
        self._step_range = 0
        self._events: Optional[EventList] = None
        # _cuda_available() imports ember._C_cuda, which registers the CUDA activity (CUPTI).
        cuda_ok = ProfilerActivity.CUDA in acts and _cuda_available()
        self._device = ProfilerActivity.CUDA in acts and _C._profiler_has_device_activity("cuda")
        if cuda_ok and not self._device:
            reason = _cupti_status().get("error", "")
            warnings.warn("ember.profiler: no CUDA kernel timing is registered in this build; "
                          "ProfilerActivity.CUDA records nothing (host ops are still recorded)"
                          + (f": {reason}" if reason else ""), stacklevel=2)

    # ---- recording --------------------------------------------------------------------------

    def _records(self) -> bool:
        return ProfilerActivity.CPU in self.activities or self._device

    def _start_trace(self) -> None:
        global _owner
        if self._running or not self._records():
            return
        other = _owner() if _owner is not None else None
        if other is not None and other is not self and other._running:
            raise RuntimeError(
                "profile: a profiler is already running (one ember.profiler.profile at a time; "
                f"the other was started at step {other.step_num} and not stopped): leave its "
                "`with` block or call its stop() first")
        _C._profiler_start(self.record_shapes, self.profile_memory, self.with_stack, self._device)
        self._running = True
        _owner = weakref.ref(self)
        if self._record_steps:
            self._step_range = _C._profiler_push_range(f"ProfilerStep#{self.step_num}")

    def _stop_trace(self, save: bool) -> None:
        if not self._running:
            if save and not self._records():  # nothing this build can record was asked for
                self._events = EventList()
                if self.on_trace_ready is not None:
                    self.on_trace_ready(self)
            return
        _C._profiler_pop_range(self._step_range)
        self._step_range = 0
        sync_error: Optional[BaseException] = None
        if self._device:
            # The kernels still running end before the device activity collects them (as
            # torch.profiler synchronizes): their records are complete only then.
            try:
                from ember import cuda

                if cuda.is_initialized():
                    cuda.synchronize()
            except Exception as e:  # noqa: BLE001  (raised below, after the profiler stopped)
                sync_error = e
        raw = _C._profiler_stop()
        self._running = False
        launches: list = []
        if self._device:
            m = _cuda_extension()
            if m is not None and hasattr(m, "_cupti_take_launches"):
                launches = m._cupti_take_launches()
            problem = _cupti_status().get("last_error", "")
            if problem and save:
                # A failed start records no device events; dropped records leave some out.
                warnings.warn(f"ember.profiler: CUDA kernel timing is incomplete: {problem}",
                              stacklevel=3)
        if sync_error is not None:
            raise sync_error
        if save:
            self._events = _build_events(raw, self.profile_memory, self._device, launches)
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)

    def _transition(self, prev: ProfilerAction, cur: Optional[ProfilerAction]) -> None:
        A = ProfilerAction
        recording = (A.RECORD, A.RECORD_AND_SAVE)
        if prev == A.RECORD_AND_SAVE or (prev == A.RECORD and cur not in recording):
            self._stop_trace(save=True)
        elif prev == A.WARMUP and cur != A.WARMUP:
            self._stop_trace(save=False)  # warm-up events are not kept
        if cur in (A.WARMUP,) + recording:
            self._start_trace()

    def start(self) -> None:
        """Starts profiling (as entering the ``with`` block does)."""
        self.current_action = self.schedule(self.step_num)
        self._started = True
        self._transition(ProfilerAction.NONE, self.current_action)

    def stop(self) -> None:
        """Stops profiling; a cycle being recorded is saved (``on_trace_ready`` runs)."""
        prev = self.current_action
        if prev == ProfilerAction.RECORD:
            prev = ProfilerAction.RECORD_AND_SAVE
        self.current_action = ProfilerAction.NONE
        self._started = False
        self._transition(prev, None)

    def step(self) -> None:
        """Marks the end of an iteration: the schedule decides what the next one does."""
        A = ProfilerAction
        if not self._started:
            # stepping a profile never started would start the process-wide profiler with
            # nothing left to stop it (PyTorch: an AssertionError)
            raise RuntimeError("profile.step: the profiler is not started (enter its `with` "
                               "block or call start() first)")
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        same_trace = {(A.RECORD, A.RECORD), (A.RECORD, A.RECORD_AND_SAVE), (A.WARMUP, A.WARMUP)}
        if self._running and (prev, self.current_action) in same_trace:
            # The same trace goes on: this step's range ends and the next one's begins.
            if self._record_steps:
                _C._profiler_pop_range(self._step_range)
                self._step_range = _C._profiler_push_range(f"ProfilerStep#{self.step_num}")
            return
        self._transition(prev, self.current_action)

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False

    def __del__(self) -> None:
        # A profile dropped while recording (start() without stop()) would leave the
        # process-wide profiler running, refusing every later profile: stop it, unsaved.
        if getattr(self, "_running", False):
            try:
                _C._profiler_stop()
            except Exception:  # noqa: BLE001,S110  (interpreter shutdown: nothing to report to)
                pass
            self._running = False

    # ---- results ----------------------------------------------------------------------------

    def _require_events(self, what: str) -> EventList:
        if self._events is None:
            raise RuntimeError(f"profile.{what}: no trace has been saved yet (leave the `with` "
                               f"block, or let the schedule reach a RECORD_AND_SAVE step)")
        return self._events

    def events(self) -> EventList:
        """Every recorded event of the last saved trace, in order of start per thread."""
        return self._require_events("events")

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """The events added up per name (and input shapes, or stack), see EventList.table."""
        return self._require_events("key_averages").key_averages(group_by_input_shape,
                                                                 group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """Writes the last saved trace as Chrome trace JSON (open it in https://ui.perfetto.dev)."""
        self._require_events("export_chrome_trace").export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        """Writes stacks for a flame graph (needs with_stack=True)."""
        self._require_events("export_stacks").export_stacks(path, metric)

    def total_average(self) -> FunctionEventAvg:
        return self._require_events("total_average").total_average()


def _build_events(raw: dict, profile_memory: bool, with_device: bool,
                  launches: Optional[list] = None) -> EventList:
    """FunctionEvents from what ember._C._profiler_stop returned (times in µs since start).

    ``launches``: what the CUDA activity says of each device event (ember._C_cuda.
    _cupti_take_launches: event start_ns, end_ns, correlation id, launching thread, launch call
    start_ns, end_ns), in the order of raw["device_events"]; a device event with no op yet is
    attributed to the innermost host op open on the launching thread when the launch call
    began."""
    base = raw["start_ns"]
    events: list[FunctionEvent] = []
    by_id: dict[int, FunctionEvent] = {}
    for (eid, name, kind, tid, start, end, parent, seq, children_ns, shapes, dtypes, self_mem,
         total_mem, stack) in raw["events"]:
        e = FunctionEvent(id=eid, name=name, thread=tid, start_us=(start - base) / 1000.0,
                          end_us=(end - base) / 1000.0, kind=kind, sequence_nr=seq,
                          input_shapes=shapes or [], input_types=dtypes or [],
                          stack=stack or [], cpu_memory_usage=total_mem,
                          self_cpu_memory_usage=self_mem, children_us=children_ns / 1000.0)
        by_id[eid] = e
        events.append(e)
        if parent >= 0:
            p = by_id[parent]  # a parent is recorded (opened) before its children
            e.cpu_parent = p
            p.cpu_children.append(e)
    # The thread that ran each forward op, for its backward events ("Fwd thread id").
    fwd_thread = {e.sequence_nr: e.thread for e in events if e.kind == 0 and e.sequence_nr >= 0}
    for e in events:
        if e.kind == 2 and e.sequence_nr >= 0:
            e.fwd_thread = fwd_thread.get(e.sequence_nr, 0)
    memory = [MemoryRecord(thread=t, time_us=(ts - base) / 1000.0, addr=a, bytes=b,
                           total_allocated=al, total_reserved=rs, device_type=dt,
                           device_index=di, op_id=op)
              for (t, ts, a, b, al, rs, dt, di, op) in raw["memory"]]
    kernels = [DeviceKernel(name=n, device_type=dt, device_index=di, stream=st,
                            start_us=(s - base) / 1000.0, end_us=(e - base) / 1000.0, op_id=op)
               for (n, dt, di, st, s, e, op) in raw["device_events"]]
    cuda_kernels = [k for k in kernels if k.device_type == "cuda"]
    if launches and len(launches) == len(cuda_kernels):
        _attribute_launches(events, cuda_kernels, launches, base)
    for k in kernels:
        if k.op_id in by_id:
            by_id[k.op_id].kernels.append(k)
    # The device time of the ops inside each op: children are recorded after their parent
    # (higher ids), so one pass from the last event adds each op's total into its parent.
    for e in sorted(events, key=lambda e: e.id, reverse=True):
        if e.cpu_parent is not None:
            e.cpu_parent.children_device_us += e.device_time_total
    events.sort(key=lambda e: (e.thread, e.start_us))
    # Device activity as events of their own (device_type "cuda"), after the host events: rows
    # of key_averages with their device time, as in torch.profiler.
    next_id = max(by_id, default=-1) + 1
    for i, k in enumerate(kernels):
        events.append(FunctionEvent(id=next_id + i, name=k.name, thread=k.stream,
                                    start_us=k.start_us, end_us=k.end_us, kind=_KIND_DEVICE,
                                    device_type=k.device_type, device_index=k.device_index))
    return EventList(events, profile_memory=profile_memory, with_device=with_device,
                     memory=memory, kernels=kernels, threads=dict(raw["threads"]),
                     base_time_ns=raw["start_wall_us"] * 1000)


def _attribute_launches(events: list, kernels: list, launches: list, base: int) -> None:
    """Sets each kernel's launch (thread, time, correlation id) and, when it has no op yet, the
    innermost host event on the launching thread open when the launch call began."""
    by_thread: dict[int, list] = {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    starts: dict[int, list] = {}
    for tid, evs in by_thread.items():
        evs.sort(key=lambda e: (e.start_us, e.id))
        starts[tid] = [e.start_us for e in evs]
    for k, (ev_start, ev_end, corr, tid, call_start, _call_end) in zip(kernels, launches):
        if round((ev_start - base) / 1000.0, 6) != round(k.start_us, 6) or \
                round((ev_end - base) / 1000.0, 6) != round(k.end_us, 6):
            continue  # not the same event (should not happen): leave it unattributed
        k.correlation_id = corr
        if tid < 0 or call_start < 0:
            continue
        k.launch_thread = tid
        k.launch_us = (call_start - base) / 1000.0
        if k.op_id >= 0 or tid not in by_thread:
            continue
        # The last event on the thread that began at or before the launch, then out through
        # its parents to the first one still open then (an event open at the launch began
        # before it and contains every event that began after it: an ancestor of this one).
        evs = by_thread[tid]
        i = bisect.bisect_right(starts[tid], k.launch_us) - 1
        e = evs[i] if i >= 0 else None
        while e is not None and e.end_us < k.launch_us:
            e = e.cpu_parent
        if e is not None:
            k.op_id = e.id
