"""The seed paper's experiments, measured for ember (and PyTorch beside it) on this machine.

Writes ``<out>/README.md`` (Markdown tables, figure links) and, when matplotlib is installed, the
PNGs of Fig. 1 (profiler timeline of one training step) and Fig. 2 (memory over the first
iterations with the caching allocator on and off), plus Fig. 1's Chrome trace and the raw
numbers (``results.json``). Table 1 is the training throughput of six models (reduced sizes on a
CPU, stated in the table), then the ablations the reviewers asked for.

    python3 -m nox -s paper                           # full CPU run into docs/paper/
    PYTHONPATH=build/dev/site python3 benchmarks/paper/run_paper.py --quick
    python3 benchmarks/paper/run_paper.py --smoke --out /tmp/paper   # seconds: the CI smoke test

Each number is the median of repeats from one run; ratios compare runs side by side in the same
process (ember / torch time: < 1 means ember is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # benchmarks/: bench_models

import bench_models  # noqa: E402
from models import MODELS, NAMES, UNITS, Size, build  # noqa: E402

MIB = 1 << 20


# ---- modes ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mode:
    name: str
    table1: Size
    warmup: int  # untimed training steps before the timed ones
    steps: int  # timed steps (median)
    fig_image: int  # side of the images of the small ResNet (Fig. 1, Fig. 2, ablations)
    fig_batch: int
    fig_width: int  # channels of the small ResNet
    mem_iters: int  # iterations of Fig. 2
    loader_items: int
    loader_repeats: int
    ipc_sizes: tuple  # float32 elements per message
    ipc_messages: int


MODES = {
    "smoke": Mode("smoke", Size(image=64, batch=2, width=1 / 16, hidden=32, seq=4, vocab=100,
                                rnn=32, rnn_batch=2, ncf_users=100, ncf_items=100, ncf_batch=64),
                  warmup=0, steps=1, fig_image=16, fig_batch=2, fig_width=8, mem_iters=2,
                  loader_items=16, loader_repeats=1, ipc_sizes=(16 * 1024,), ipc_messages=2),
    "quick": Mode("quick", Size(image=64, batch=8, width=1 / 2, hidden=512),
                  warmup=1, steps=5, fig_image=32, fig_batch=16, fig_width=32, mem_iters=5,
                  loader_items=512, loader_repeats=3, ipc_sizes=(256 * 1024, 4 * MIB),
                  ipc_messages=5),
    "full": Mode("full", Size(image=64, batch=8, width=1 / 2, hidden=1024),
                 warmup=2, steps=7, fig_image=64, fig_batch=32, fig_width=64, mem_iters=5,
                 loader_items=512, loader_repeats=5, ipc_sizes=(16 * 1024, MIB, 16 * MIB),
                 ipc_messages=11),
}


# ---- environment ----------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=10, check=False)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info(ember: Any, torch: Any, mode: Mode, threads: int) -> dict[str, Any]:
    commit = _git("rev-parse", "--short=12", "HEAD")
    # The generated report itself does not make the sources dirty.
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/paper")
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "loadavg": [round(x, 2) for x in load],
        "python": platform.python_version(), "platform": platform.platform(),
        "ember_commit": commit + ("+dirty" if dirty not in ("", "unknown") else ""),
        "ember_version": getattr(ember, "__version__", "?"),
        "torch_version": torch.__version__ if torch is not None else "not installed",
        "numpy_version": np.__version__, "threads": threads, "mode": mode.name,
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _stamp(meta: dict[str, Any]) -> str:
    return (f"_Machine: {meta['cpu']}, {meta['cores']} cores (load average "
            f"{meta['loadavg'][0]} at the start), {meta['threads']} intra-op thread(s). "
            f"ember {meta['ember_commit']}, torch {meta['torch_version']}, Python "
            f"{meta['python']}; mode `{meta['mode']}`, {meta['date_utc']}._")


def _ms(s: Optional[float]) -> str:
    return "n/a" if s is None else f"{s * 1e3:.2f} ms"


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def _mib(n: Optional[float]) -> str:
    return "n/a" if n is None else f"{n / MIB:.2f} MiB"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _median_time(fn: Callable[[], Any], warmup: int, steps: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, steps)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _train_step(model: Any, opt: Any, loss_fn: Any, batch: Callable) -> Callable[[], None]:
    def step() -> None:
        x, y = batch()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return step


def small_resnet(fw: Any, width: int) -> Any:
    """bench_models.small_resnet with ``width`` channels, seeded: the ResNet of Fig. 1, Fig. 2
    and the memory ablations."""
    fw.manual_seed(0)
    return bench_models.small_resnet(fw.nn, width)


def _resnet_setup(fw: Any, mode: Mode) -> tuple[Any, Any, Any, Callable]:
    model = small_resnet(fw, mode.fig_width)
    opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = fw.tensor(rng.standard_normal((mode.fig_batch, 3, mode.fig_image, mode.fig_image),
                                      dtype=np.float32))
    y = fw.tensor(rng.integers(0, 10, mode.fig_batch))
    return model, opt, fw.nn.CrossEntropyLoss(), (lambda: (x, y))


def _resnet_desc(mode: Mode) -> str:
    return (f"small ResNet (stem + 2 residual blocks of {mode.fig_width} channels), "
            f"{mode.fig_image}x{mode.fig_image} images, batch {mode.fig_batch}, SGD momentum 0.9")


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        return None


# ---- Fig. 1: profiler timeline ----------------------------------------------------------------

PHASES = ("forward", "backward", "optimizer")
PHASE_COLORS = {"forward": "#4C72B0", "backward": "#DD8452", "optimizer": "#55A868", None: "#999999"}


def fig1(ember: Any, torch: Any, mode: Mode, out: Path, plt: Any) -> dict[str, Any]:
    from ember.profiler import ProfilerActivity, profile, record_function

    model, opt, loss_fn, batch = _resnet_setup(ember, mode)

    def step() -> None:
        x, y = batch()
        with record_function("optimizer"):
            opt.zero_grad()
        with record_function("forward"):
            loss = loss_fn(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()

    for _ in range(2):  # warm-up: the allocator's cache (Fig. 2), lazily built state
        step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    trace_path = out / "fig1_trace.json"
    prof.export_chrome_trace(str(trace_path))
    events = list(prof.events())
    host = {e.thread for e in events if e.name == "forward"}
    t0 = min(e.start_us for e in events)

    def phase_of(e: Any) -> Optional[str]:
        p, found = e, None
        while p is not None:
            if p.name in PHASES:
                found = p.name
            p = p.cpu_parent
        return found

    def is_top_op(e: Any) -> bool:
        """An op with no op above it; the optimizer's step counts as one op."""
        if e.name.startswith("Optimizer.step#"):
            return True
        if e.kind == 1:  # record_function range
            return False
        p = e.cpu_parent
        while p is not None:
            if p.kind != 1 or p.name.startswith("Optimizer.step#"):
                return False
            p = p.cpu_parent
        return True

    ranges = [e for e in events if e.name in PHASES and e.thread in host]
    ops = [e for e in events if e.thread in host and is_top_op(e)]
    phase_ms: dict[str, float] = {}
    phase_ops: dict[str, int] = {}
    for r in ranges:
        phase_ms[r.name] = phase_ms.get(r.name, 0.0) + (r.end_us - r.start_us) / 1e3
    for o in ops:
        ph = phase_of(o) or "other"
        phase_ops[ph] = phase_ops.get(ph, 0) + 1
    all_ops = [e for e in events if e.kind != 1]
    total_ms = (max(e.end_us for e in events) - t0) / 1e3
    step_ember = _median_time(step, 1, mode.steps)
    step_torch = None
    if torch is not None:
        tm, topt, tloss, tbatch = _resnet_setup(torch, mode)
        step_torch = _median_time(_train_step(tm, topt, tloss, tbatch), 1, mode.steps)
    png = None
    if plt is not None:
        png = out / "fig1_timeline.png"
        fig, ax = plt.subplots(figsize=(12, 3.2))
        for r in ranges:
            ax.broken_barh([((r.start_us - t0) / 1e3, (r.end_us - r.start_us) / 1e3)], (1.6, 0.8),
                           facecolors=PHASE_COLORS[r.name], alpha=0.5)
        for i, o in enumerate(ops):
            ph = phase_of(o)
            ax.broken_barh([((o.start_us - t0) / 1e3, max((o.end_us - o.start_us) / 1e3, 1e-3))],
                           (0.2, 1.0), facecolors=PHASE_COLORS[ph],
                           edgecolors="white", linewidth=0.3, alpha=1.0 if i % 2 else 0.75)
        longest = sorted(ops, key=lambda e: e.end_us - e.start_us, reverse=True)[:8]
        for o in longest:
            name = o.name.replace("autograd::engine::evaluate_function: ", "").replace("aten::", "")
            ax.text((o.start_us - t0) / 1e3, 1.25, name, fontsize=6, rotation=30)
        ax.set_yticks([0.7, 2.0])
        ax.set_yticklabels(["host ops", "phases"])
        ax.set_ylim(0, 3.2)
        ax.set_xlabel("time (ms)")
        ax.set_title(f"ember: one training step of a {_resnet_desc(mode)} (CPU, host thread)",
                     fontsize=9)
        handles = [plt.Rectangle((0, 0), 1, 1, color=PHASE_COLORS[p]) for p in PHASES]
        ax.legend(handles, PHASES, loc="upper right", fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)
    top = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)
    return {"trace": trace_path.name, "png": png.name if png else None, "phase_ms": phase_ms,
            "phase_ops": phase_ops, "ops_total": len(all_ops), "top_level_ops": len(ops),
            "profiled_ms": total_ms, "step_ember_s": step_ember, "step_torch_s": step_torch,
            "key_averages": top}


# ---- Fig. 2 and the caching ablation: one child process per allocator setting -----------------

def alloc_child(mode: Mode, caching: bool, out_json: Path, threads: int) -> None:
    """Runs in a fresh process with EMBER_CPU_ALLOCATOR_CACHING set: records the memory history of
    the first ``mem_iters`` iterations, then times more steps without recording."""
    import ember
    import ember.memory

    ember.set_num_threads(threads)
    assert ember.allocator_caching() == caching, "EMBER_CPU_ALLOCATOR_CACHING was not honoured"
    model, opt, loss_fn, batch = _resnet_setup(ember, mode)
    step = _train_step(model, opt, loss_fn, batch)
    ember.reset_peak_memory_stats()
    ember.memory._record_memory_history(context=None)
    marks_wall, iter_s, iter_peak_alloc, iter_peak_res = [], [], [], []
    for _ in range(mode.mem_iters):
        marks_wall.append(time.time())
        ember.reset_peak_memory_stats()
        t0 = time.perf_counter()
        step()
        iter_s.append(time.perf_counter() - t0)
        iter_peak_alloc.append(ember.max_memory_allocated())
        iter_peak_res.append(ember.max_memory_reserved())
    marks_wall.append(time.time())
    snap = ember.memory._snapshot()
    ember.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    t_first = trace[0]["time_us"] / 1e6 if trace else marks_wall[0]
    seg_allocs = [0] * mode.mem_iters
    for e in trace:
        if e["action"] == "segment_alloc":
            t = e["time_us"] / 1e6
            for i in range(mode.mem_iters):
                if marks_wall[i] <= t < marks_wall[i + 1]:
                    seg_allocs[i] += 1
    times, allocated, reserved = ember.memory.memory_over_time(snap)
    if len(times) > 4000:  # keep the JSON small: every k-th point, and the last
        k = len(times) // 4000 + 1
        idx = list(range(0, len(times), k)) + [len(times) - 1]
        times, allocated, reserved = ([s[i] for i in idx] for s in (times, allocated, reserved))
    ember.reset_peak_memory_stats()
    steady = _median_time(step, 0, mode.steps)
    res = {"caching": caching, "iter_s": iter_s, "iter_peak_allocated": iter_peak_alloc,
           "iter_peak_reserved": iter_peak_res, "segment_allocs": seg_allocs,
           "marks": [m - t_first for m in marks_wall], "times": times, "allocated": allocated,
           "reserved": reserved, "steady_step_s": steady,
           "steady_peak_allocated": ember.max_memory_allocated(),
           "steady_peak_reserved": ember.max_memory_reserved()}
    out_json.write_text(json.dumps(res))


def fig2(mode: Mode, out: Path, plt: Any, threads: int, tmp: Path) -> dict[str, Any]:
    runs = {}
    for caching in (True, False):
        path = tmp / f"alloc_{int(caching)}.json"
        env = dict(os.environ, EMBER_CPU_ALLOCATOR_CACHING="1" if caching else "0")
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--mode", mode.name,
             "--threads", str(threads), "--_alloc-child", str(int(caching)), "--_child-out", str(path)],
            env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"allocator child (caching={caching}) failed:\n{proc.stderr[-3000:]}")
        runs["on" if caching else "off"] = json.loads(path.read_text())
    png = None
    if plt is not None:
        png = out / "fig2_memory.png"
        fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
        for ax, key in zip(axes, ("on", "off")):
            r = runs[key]
            ax.step(r["times"], [a / MIB for a in r["allocated"]], where="post", label="allocated")
            ax.step(r["times"], [a / MIB for a in r["reserved"]], where="post", label="reserved")
            for i, m in enumerate(r["marks"]):
                ax.axvline(m, color="grey", linewidth=0.6, linestyle="--")
                if i < len(r["marks"]) - 1:
                    ax.text(m, 0, f" it {i + 1}", fontsize=7, color="grey", va="bottom")
            ax.set_title(f"caching allocator {key}", fontsize=9)
            ax.set_xlabel("time (s)")
            ax.legend(fontsize=7)
        axes[0].set_ylabel("memory (MiB)")
        fig.suptitle(f"ember: memory over the first {mode.mem_iters} iterations, "
                     f"{_resnet_desc(mode)}", fontsize=9)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
        plt.close(fig)
    for r in runs.values():
        del r["times"], r["allocated"], r["reserved"]
    return {"png": png.name if png else None, "runs": runs}


# ---- Table 1 --------------------------------------------------------------------------------

def table1(ember: Any, torch: Any, mode: Mode) -> list[dict[str, Any]]:
    rows = []
    for name in MODELS:
        row: dict[str, Any] = {"model": name, "size": mode.table1.describe(name),
                               "unit": UNITS[name]}
        for fw in (ember, torch):
            if fw is None:
                continue
            key = "ember" if fw is ember else "torch"
            try:
                model, batch, loss_fn, items = build(name, fw, mode.table1)
                opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
                t = _median_time(_train_step(model, opt, loss_fn, batch), mode.warmup, mode.steps)
                row[key] = {"step_s": t, "throughput": items / t}
            except Exception as e:  # reported in the table, never fatal
                row[key] = {"error": f"{type(e).__name__}: {e}"[:200]}
            del fw
        rows.append(row)
    return rows


# ---- ablation: DataLoader workers and pinned memory --------------------------------------------

class SyntheticImages:
    """A map-style dataset: item i is a normalized 3x64x64 image made from seed i (a blur and a
    crop in NumPy stand in for decoding and augmentation) and its label."""

    def __init__(self, fw_name: str, n: int) -> None:
        self.fw_name, self.n = fw_name, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[Any, int]:
        import importlib

        fw = importlib.import_module(self.fw_name)
        img = np.random.default_rng(i).integers(0, 256, (3, 66, 66), dtype=np.uint8)
        x = img.astype(np.float32) / 255.0
        # A 3x3 box blur and a crop stand in for decoding and augmentation.
        x = sum(x[:, dy:dy + 64, dx:dx + 64] for dy in range(3) for dx in range(3)) / 9.0
        x = np.ascontiguousarray((x - 0.5) / 0.25, dtype=np.float32)
        return fw.from_numpy(x), i % 10


def loader_ablation(ember: Any, torch: Any, mode: Mode) -> list[dict[str, Any]]:
    from ember.utils.data import DataLoader as EmberLoader

    loaders: dict[str, Any] = {"ember": (ember, EmberLoader)}
    if torch is not None:
        from torch.utils.data import DataLoader as TorchLoader

        loaders["torch"] = (torch, TorchLoader)
    rows = []
    for workers in (0, 1, 2):
        for pin in (False, True):
            row: dict[str, Any] = {"workers": workers, "pin_memory": pin}
            for key, (fw, loader_cls) in loaders.items():
                ds = SyntheticImages(fw.__name__, mode.loader_items)

                def epoch() -> None:
                    kw = {"multiprocessing_context": "fork"} if workers else {}
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # "pin_memory without an accelerator"
                        for x, _ in loader_cls(ds, batch_size=32, num_workers=workers,
                                               pin_memory=pin, **kw):
                            assert x.shape[1:] == (3, 64, 64)

                try:
                    row[key] = _median_time(epoch, 0, mode.loader_repeats)
                except Exception as e:
                    row[key + "_error"] = f"{type(e).__name__}: {e}"[:200]
            rows.append(row)
    return rows


# ---- ablation: tensors between processes ---------------------------------------------------------

def _ipc_producer(fw_name: str, numel: int, how: str, signal: Any, queue: Any, conn: Any) -> None:
    import importlib

    fw = importlib.import_module(fw_name)
    fw.set_num_threads(1)
    template = fw.arange(numel, dtype=fw.float32)
    while True:
        t = template.clone()
        if signal.recv() is None:
            return
        if how == "shared":
            queue.put(t)
        else:
            conn.send_bytes(pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL))
        del t


def _ipc_time(fw: Any, numel: int, how: str, messages: int) -> float:
    import importlib

    mp = importlib.import_module(f"{fw.__name__}.multiprocessing")
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    signal, child_signal = ctx.Pipe()
    data_parent, data_child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_ipc_producer,
                       args=(fw.__name__, numel, how, child_signal, queue, data_child), daemon=True)
    proc.start()
    try:
        times = []
        for i in range(messages + 1):
            t0 = time.perf_counter()
            signal.send(True)
            if how == "shared":
                t = queue.get(timeout=120)
            else:
                if not data_parent.poll(120):
                    raise TimeoutError("no message from the producer in 120 s")
                t = pickle.loads(data_parent.recv_bytes())
            last = float(t[numel - 1])
            dt = time.perf_counter() - t0
            if last != float(numel - 1):
                raise RuntimeError(f"received a wrong tensor (last element {last})")
            del t
            if i:  # the first message pays the producer's start
                times.append(dt)
        return statistics.median(times)
    finally:
        signal.send(None)
        proc.join(30)
        if proc.is_alive():
            proc.kill()
            proc.join(5)


def ipc_ablation(ember: Any, torch: Any, mode: Mode) -> list[dict[str, Any]]:
    rows = []
    for numel in mode.ipc_sizes:
        for how in ("shared", "pickled"):
            row: dict[str, Any] = {"bytes": numel * 4, "how": how}
            for fw in (ember, torch):
                if fw is None:
                    continue
                key = "ember" if fw is ember else "torch"
                try:
                    row[key] = _ipc_time(fw, numel, how, mode.ipc_messages)
                except Exception as e:
                    row[key + "_error"] = f"{type(e).__name__}: {e}"[:200]
            rows.append(row)
    return rows


# ---- ablation: reference counting vs deferred freeing ------------------------------------------

def deferred_ablation(ember: Any, mode: Mode) -> dict[str, Any]:
    """Peak memory of one training step normally (each intermediate and its gradient freed when
    its last reference goes), and with every module output and every gradient flowing through it
    kept alive until the step ends (as a deferred / tracing collector would)."""
    model, opt, loss_fn, batch = _resnet_setup(ember, mode)
    held: list[Any] = []
    leaves = [m for m in model.modules() if not list(m.children())]

    def keep(_mod: Any, _inp: Any, out: Any) -> None:
        held.append(out)
        if getattr(out, "requires_grad", False):
            out.register_hook(lambda g: held.append(g))

    train = _train_step(model, opt, loss_fn, batch)

    def step() -> None:
        train()
        held.clear()  # the deferred frees happen here, at the end of the step

    res = {}
    for name in ("refcount", "deferred"):
        handles = [m.register_forward_hook(keep) for m in leaves] if name == "deferred" else []
        step()  # warm-up
        ember.reset_peak_memory_stats()
        base = ember.memory_allocated()
        t = _median_time(step, 0, mode.steps)
        res[name] = {"step_s": t, "peak_allocated": ember.max_memory_allocated() - base,
                     "peak_reserved": ember.max_memory_reserved()}
        for h in handles:
            h.remove()
    return res


# ---- report ---------------------------------------------------------------------------------

def write_readme(out: Path, meta: dict[str, Any], res: dict[str, Any],
                 no_plots: Optional[str]) -> None:
    mode = res["mode"]
    stamp = _stamp(meta)
    loaded = (f"**Measured on a shared, loaded {meta['cores']}-core machine in `{meta['mode']}` "
              f"mode**: absolute times are noisy (they move by 2x between runs); the ratios of "
              f"runs side by side mean more, and every number is the median of few repeats.")
    parts = [
        "# The seed paper's experiments, reproduced for ember",
        "",
        "Generated by `benchmarks/paper/run_paper.py` (`python3 -m nox -s paper`); do not edit by "
        "hand. Ratios are ember / torch *times* (< 1: ember faster) unless a column says otherwise.",
        "",
        loaded,
        "",
        stamp,
        "",
    ]
    if no_plots:
        parts += [f"_{no_plots}: tables only, no figures._", ""]

    # Fig. 1
    f1 = res["fig1"]
    parts += ["## Fig. 1: profiler timeline of one training step", "",
              f"One training step of a {_resnet_desc(mode)}, on the CPU, recorded by "
              f"`ember.profiler.profile` after two warm-up steps. The bars are the ops on the host "
              f"thread (top-level ops: the nested ones are in the trace), coloured by the phase "
              f"(`record_function` ranges) they belong to; backward ops run on the calling "
              f"thread in ember's engine.", ""]
    if f1["png"]:
        parts += [f"![Fig. 1]({f1['png']})", ""]
    parts += [f"Chrome trace of the same step: [{f1['trace']}]({f1['trace']}) (open it in "
              f"https://ui.perfetto.dev or chrome://tracing).", "",
              "The paper's version shows the host running ahead of the device (host ops vs device "
              "kernels, from ember's CUPTI activity): that needs a GPU. "
              "`benchmarks/paper/gpu_paper.py` draws it (with the async ablation and Table 1 at "
              "full size) on the GPU machine (`PHASES=\"build bench paper\" "
              "tools/gpu_check.sh`), into `docs/paper/gpu/`.", ""]
    rows = [[p, f"{f1['phase_ms'].get(p, 0):.2f} ms", str(f1["phase_ops"].get(p, 0))]
            for p in PHASES]
    parts += [_table(["phase", "time (profiled)", "top-level ops"], rows), "",
              f"{f1['ops_total']} op and autograd events in all. Step time without the profiler "
              f"(median of {mode.steps}): ember {_ms(f1['step_ember_s'])}, torch "
              f"{_ms(f1['step_torch_s'])}, ratio {_ratio(f1['step_ember_s'], f1['step_torch_s'])}; "
              f"with the profiler: {f1['profiled_ms']:.2f} ms.", "",
              "Ops by self CPU time in the profiled step:", "", "```",
              f1["key_averages"].rstrip(), "```", "", stamp, ""]

    # Fig. 2
    f2 = res["fig2"]
    on, off = f2["runs"]["on"], f2["runs"]["off"]
    parts += [f"## Fig. 2: memory over the first {mode.mem_iters} iterations, caching allocator "
              "on and off", "",
              f"The same training loop ({_resnet_desc(mode)}) in two fresh processes, with "
              f"`EMBER_CPU_ALLOCATOR_CACHING=1` and `=0`; the curves come from "
              f"`ember.memory._record_memory_history()` and `ember.memory.memory_over_time` "
              f"(dashed lines: iteration boundaries). With caching off every free returns its "
              f"segment to the system, so 'reserved' follows 'allocated' and every allocation is a "
              f"system allocation.", ""]
    if f2["png"]:
        parts += [f"![Fig. 2]({f2['png']})", ""]
    rows = []
    for key, r in (("on", on), ("off", off)):
        later = r["iter_s"][1:] or r["iter_s"]
        rows.append([key, _ms(r["iter_s"][0]), _ms(statistics.median(later)),
                     _mib(max(r["iter_peak_allocated"])), _mib(max(r["iter_peak_reserved"])),
                     str(r["segment_allocs"][0]),
                     f'{statistics.median(r["segment_allocs"][1:] or r["segment_allocs"]):g}'])
    parts += [_table(["caching", "iteration 1", "median of iterations 2+", "peak allocated",
                      "peak reserved", "system allocations, it. 1", "per later iteration"], rows),
              "", "Per iteration:", "",
              _table(["iteration", "time, caching on", "time, caching off", "off / on",
                      "peak reserved, on", "peak reserved, off", "system allocations, on",
                      "system allocations, off"],
                     [[str(i + 1), _ms(on["iter_s"][i]), _ms(off["iter_s"][i]),
                       _ratio(off["iter_s"][i], on["iter_s"][i]),
                       _mib(on["iter_peak_reserved"][i]), _mib(off["iter_peak_reserved"][i]),
                       str(on["segment_allocs"][i]), str(off["segment_allocs"][i])]
                      for i in range(len(on["iter_s"]))]),
              "", f"Times per iteration while the history is recorded (`context=None`: the "
              f"trace only). Off / on time ratio of the later iterations: "
              f"{_ratio(statistics.median(off['iter_s'][1:] or off['iter_s']), statistics.median(on['iter_s'][1:] or on['iter_s']))}.",
              "", stamp, ""]

    # Table 1
    sz = mode.table1
    parts += ["## Table 1: training throughput, ember vs PyTorch", "",
              f"One training step (forward, loss, backward, SGD momentum 0.9) on a fixed batch, "
              f"float32, CPU, {meta['threads']} thread(s); {mode.warmup} warm-up step(s), median "
              f"of {mode.steps}. **Reduced sizes** (the paper trains 224x224 images on a GPU): "
              f"the size column says what ran. Architectures as published, channel widths scaled "
              f"by {sz.width:g}, built from one definition (`benchmarks/paper/models.py`) with "
              f"each framework's own modules. Ratio: ember / torch throughput (> 1: ember "
              f"faster).", ""]
    rows = []
    for r in res["table1"]:
        cells = [NAMES[r["model"]], r["size"]]
        vals = {}
        for key in ("ember", "torch"):
            v = r.get(key)
            if v is None:
                cells.append("n/a")
            elif "error" in v:
                cells.append(f"error: {v['error'][:60]}")
            else:
                vals[key] = v["throughput"]
                cells.append(f"{v['throughput']:.1f} {r['unit']} ({v['step_s'] * 1e3:.1f} ms)")
        cells.append(_ratio(vals.get("ember"), vals.get("torch")))
        rows.append(cells)
    parts += [_table(["model", "size", "ember", "torch", "ember/torch throughput"], rows), "",
              stamp, ""]

    # Ablations
    parts += ["## Ablations", "", "### Caching allocator on / off", "",
              f"A training step of the {_resnet_desc(mode)}, after the recorded iterations of "
              f"Fig. 2 (history recording off), median of {mode.steps}.", ""]
    rows = [[k, _ms(r["steady_step_s"]), _mib(r["steady_peak_allocated"]),
             _mib(r["steady_peak_reserved"])] for k, r in (("on", on), ("off", off))]
    parts += [_table(["caching", "step time", "peak allocated", "peak reserved"], rows), "",
              f"Time ratio off / on: {_ratio(off['steady_step_s'], on['steady_step_s'])}. torch's "
              f"CPU allocator has no cache to switch off, so there is no torch column.", "",
              stamp, ""]

    parts += ["### DataLoader workers and pinned memory", "",
              f"One epoch of {mode.loader_items} synthetic 3x64x64 images (a blur and a crop "
              f"in NumPy per item), batch 32, worker processes started by fork for each epoch "
              f"(their start is included), median of {mode.loader_repeats}. **Pinned memory is a no-op without "
              f"CUDA**: `pin_memory=True` only shows the cost of the pinning thread here; on a GPU "
              f"machine it makes host-to-device copies asynchronous.", ""]
    rows = []
    base = {k: res["loader"][0].get(k) for k in ("ember", "torch")}
    for r in res["loader"]:
        e, t = r.get("ember"), r.get("torch")
        rows.append([str(r["workers"]), "yes" if r["pin_memory"] else "no",
                     _ms(e) if e is not None else f"error: {r.get('ember_error', '')[:60]}",
                     _ms(t) if t is not None else (f"error: {r['torch_error'][:60]}"
                                                   if "torch_error" in r else "n/a"),
                     _ratio(e, t), _ratio(e, base["ember"])])
    parts += [_table(["workers", "pin_memory", "ember epoch", "torch epoch", "ember/torch",
                      "ember vs 0 workers"], rows), "", stamp, ""]

    parts += ["### Tensors between processes: shared memory vs pickled bytes", "",
              f"A child process (fork) sends a fresh float32 tensor; the parent times request → "
              f"tensor received and its last element read. 'shared': through "
              f"`<framework>.multiprocessing`'s Queue (the storage moves to shared memory, only a "
              f"handle is pickled); 'pickled': `pickle.dumps(tensor)` through a `Pipe` "
              f"(`send_bytes`/`recv_bytes`, `pickle.loads`). Median of {mode.ipc_messages} "
              f"messages after one untimed.", ""]
    rows = []
    by_size: dict[int, dict[str, Any]] = {}
    for r in res["ipc"]:
        by_size.setdefault(r["bytes"], {})[r["how"]] = r
    for nbytes, d in by_size.items():
        for how in ("shared", "pickled"):
            r = d[how]
            e, t = r.get("ember"), r.get("torch")
            rows.append([_mib(nbytes), how,
                         _ms(e) if e is not None else f"error: {r.get('ember_error', '')[:60]}",
                         _ms(t) if t is not None else "n/a", _ratio(e, t),
                         _ratio(e, d["shared"].get("ember"))])
    parts += [_table(["tensor", "how", "ember", "torch", "ember/torch",
                      "ember vs shared"], rows), "", stamp, ""]

    d = res["deferred"]
    parts += ["### Reference counting vs deferred freeing", "",
              f"Peak memory allocated during a training step of the {_resnet_desc(mode)} above "
              f"what was allocated before it: normally (reference counting frees each "
              f"intermediate and each gradient as soon as its last use is over) and with every "
              f"module output and the gradient flowing through it held in a list until the step "
              f"ends (forward hooks and tensor hooks), as a deferred collector would. Median "
              f"step time of {mode.steps}.", ""]
    rows = [[k, _mib(d[k]["peak_allocated"]), _ms(d[k]["step_s"])]
            for k in ("refcount", "deferred")]
    parts += [_table(["freeing", "peak allocated in the step", "step time"], rows), "",
              f"Peak ratio deferred / refcount: "
              f"{_ratio(d['deferred']['peak_allocated'], d['refcount']['peak_allocated'])}.",
              "", stamp, ""]

    parts += ["### Asynchronous execution vs a sync after every op", "",
              "GPU only: on the CPU ember runs every op synchronously on the calling thread, so "
              "there is nothing to compare. The GPU measurement (and the GPU timeline of Fig. 1) "
              "is `benchmarks/paper/gpu_paper.py`'s (`docs/paper/gpu/`).", ""]
    (out / "README.md").write_text("\n".join(parts))


# ---- main -----------------------------------------------------------------------------------

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "paper"), help="output folder")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="short run (a few minutes on 2 cores)")
    g.add_argument("--smoke", action="store_true", help="tiny sizes, 1 iteration (CI)")
    ap.add_argument("--mode", choices=list(MODES), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads of both frameworks (default: 1 with --quick/--smoke, "
                         "all cores otherwise)")
    ap.add_argument("--no-torch", action="store_true", help="measure ember only")
    ap.add_argument("--no-plots", action="store_true", help="tables only, even with matplotlib")
    ap.add_argument("--_alloc-child", dest="alloc_child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_child-out", dest="child_out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    mode = MODES[args.mode or ("smoke" if args.smoke else "quick" if args.quick else "full")]
    if args.threads is None:
        # On a shared machine more threads than free cores make torch's OpenMP barriers wait for
        # descheduled threads (seconds per step): the quick modes use one.
        args.threads = (os.cpu_count() or 1) if mode.name == "full" else 1
    if args.alloc_child is not None:
        alloc_child(mode, bool(args.alloc_child), Path(args.child_out), args.threads)
        return 0

    import ember

    ember.set_num_threads(args.threads)
    torch = None
    if not args.no_torch:
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            print("torch is not installed: ember only", file=sys.stderr)
    plt = None if args.no_plots else _plt()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("fig1_timeline.png", "fig2_memory.png"):
        (out / stale).unlink(missing_ok=True)
    tmp_dir = tempfile.TemporaryDirectory(prefix="ember-paper-")
    tmp = Path(tmp_dir.name)
    meta = machine_info(ember, torch, mode, args.threads)
    res: dict[str, Any] = {"mode": mode}
    t_start = time.perf_counter()
    steps = [("fig1", lambda: fig1(ember, torch, mode, out, plt)),
             ("fig2", lambda: fig2(mode, out, plt, args.threads, tmp)),
             ("table1", lambda: table1(ember, torch, mode)),
             ("loader", lambda: loader_ablation(ember, torch, mode)),
             ("ipc", lambda: ipc_ablation(ember, torch, mode)),
             ("deferred", lambda: deferred_ablation(ember, mode))]
    for key, fn in steps:
        t0 = time.perf_counter()
        res[key] = fn()
        print(f"{key}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    tmp_dir.cleanup()
    no_plots = None
    if args.no_plots:
        no_plots = "Figures not drawn (--no-plots)"
    elif plt is None:
        no_plots = ("matplotlib is not installed (an optional extra: `pip install matplotlib` "
                    "and rerun to draw the figures)")
    write_readme(out, meta, res, no_plots)
    dump = {k: (asdict(v) if k == "mode" else v) for k, v in res.items()}
    dump["meta"] = meta
    dump["fig1"] = {k: v for k, v in res["fig1"].items() if k != "key_averages"}
    (out / "results.json").write_text(json.dumps(dump, indent=1, default=str) + "\n")
    print(f"wrote {out / 'README.md'} in {time.perf_counter() - t_start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
