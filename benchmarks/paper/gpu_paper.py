"""The paper's GPU experiments (issue 14), for the GPU machine: Fig. 1's timeline of one training
step with the host's ops against the device's kernels (the host running ahead of the GPU), the
ablation of asynchronous execution against a wait after every kernel launch, and Table 1 at full
size from benchmarks/cuda_train.py's results; ember and PyTorch on the same GPU.

    python3 benchmarks/paper/gpu_paper.py --out docs/paper/gpu --train-json results.json

writes README.md, results.json, the chrome traces and (with matplotlib) fig1_gpu_timeline.png.
``tools/gpu_check.sh`` runs it (PHASES="... paper"). ``--device cpu --image 32 --batch 2`` is a
dry run of the same code on the CPU (no device rows; the ablation has nothing to compare).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import models  # noqa: E402  (benchmarks/paper/models.py)


def _setup(fw: Any, args: Any) -> Any:
    """The model's training step in fw on args.device (SGD with momentum, fp32, TF32 off, cuDNN
    benchmark mode as benchmarks/cuda_train.py)."""
    if args.device == "cuda":
        fw.backends.cuda.matmul.allow_tf32 = False
        fw.backends.cudnn.allow_tf32 = False
        fw.backends.cudnn.benchmark = True
    size = models.Size(image=args.image, batch=args.batch, width=1.0, hidden=4096, classes=1000)
    model, batch, loss_fn, _ = models.build(args.model, fw, size)
    model.to(args.device).train()
    x, y = batch()
    x, y = x.to(args.device), y.to(args.device)
    opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _sync(fw: Any, device: str) -> Any:
    return fw.cuda.synchronize if device == "cuda" else (lambda: None)


def _is_device(e: Any) -> bool:
    return "cuda" in str(getattr(e, "device_type", "cpu")).lower()


def _span(e: Any) -> tuple[float, float]:
    r = e.time_range
    return float(r.start), float(r.end)


def timeline(fw: Any, args: Any, out: Path) -> dict[str, Any]:
    """One profiled training step (after warm-up) of fw: the host's top-level ops and the
    device's kernels on one clock; how far the GPU trails the host when the host is done."""
    step = _setup(fw, args)
    sync = _sync(fw, args.device)
    for _ in range(3):
        step()
    sync()
    prof_mod = fw.profiler
    acts = [prof_mod.ProfilerActivity.CPU]
    if args.device == "cuda":
        acts.append(prof_mod.ProfilerActivity.CUDA)
    with prof_mod.profile(activities=acts) as prof:
        with prof_mod.record_function("step"):
            step()
        sync()
    name = fw.__name__
    trace = out / f"fig1_gpu_trace_{name}.json"
    prof.export_chrome_trace(str(trace))
    events = list(prof.events())
    marks = [e for e in events if e.name == "step" and not _is_device(e)]
    s0, s1 = _span(marks[0])
    host_thread = marks[0].thread

    def top_level(e: Any) -> bool:
        p = e.cpu_parent
        return p is not None and p.name == "step"

    ops = [_span(e) for e in events
           if not _is_device(e) and e.thread == host_thread and top_level(e)]
    kernels = sorted(_span(e) for e in events if _is_device(e))
    busy = 0.0
    end = None
    for a, b in kernels:  # the union of the kernels' intervals: the GPU's busy time
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    last_kernel = max((b for _, b in kernels), default=s1)
    return {
        "framework": name,
        "trace": trace.name,
        "host_ms": (s1 - s0) / 1e3,  # the host's time issuing the step
        "step_ms": (max(s1, last_kernel) - s0) / 1e3,  # until the last kernel ended
        "gpu_lag_ms": max(0.0, last_kernel - s1) / 1e3,  # GPU work left when the host was done
        "gpu_busy_ms": busy / 1e3,
        "ops": len(ops),
        "kernels": len(kernels),
        "host_ops": [((a - s0) / 1e3, (b - s0) / 1e3) for a, b in ops],
        "device_kernels": [((a - s0) / 1e3, (b - s0) / 1e3) for a, b in kernels],
    }


def plot(rows: list[dict[str, Any]], args: Any, out: Path) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(12, 1.1 + 1.1 * len(rows)))
    ticks, labels = [], []
    y = 0.0
    for r in reversed(rows):
        ax.broken_barh([(a, max(b - a, 1e-3)) for a, b in r["device_kernels"]], (y, 0.8),
                       facecolors="#DD8452")
        ticks.append(y + 0.4)
        labels.append(f"{r['framework']} GPU kernels")
        y += 1.0
        ax.broken_barh([(a, max(b - a, 1e-3)) for a, b in r["host_ops"]], (y, 0.8),
                       facecolors="#4C72B0", edgecolors="white", linewidth=0.2)
        ax.axvline(r["host_ms"], ymin=0, ymax=1, color="#4C72B0", linewidth=0.6, linestyle=":")
        ticks.append(y + 0.4)
        labels.append(f"{r['framework']} host ops")
        y += 1.4
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("time since the step began (ms)")
    ax.set_title(f"one training step of {args.model}, batch {args.batch}, {args.image}x{args.image}"
                 f" ({args.device}): the host issues the step ahead of the GPU", fontsize=9)
    fig.tight_layout()
    path = out / "fig1_gpu_timeline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def async_child(args: Any) -> None:
    """In a fresh process (the launch-blocking switches are read at start): the median step time,
    each step followed by a synchronize."""
    fw = importlib.import_module(args.child)
    step = _setup(fw, args)
    sync = _sync(fw, args.device)
    for _ in range(3):
        step()
    sync()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"step_s": statistics.median(times)}))


def async_ablation(frameworks: list[str], args: Any) -> list[dict[str, Any]]:
    """Step time with asynchronous launches against a wait after every launch
    (EMBER_LAUNCH_BLOCKING=1 / CUDA_LAUNCH_BLOCKING=1), per framework."""
    rows = []
    for name in frameworks:
        row: dict[str, Any] = {"framework": name}
        for key, blocking in (("async_s", "0"), ("blocking_s", "1")):
            env = dict(os.environ, EMBER_LAUNCH_BLOCKING=blocking, CUDA_LAUNCH_BLOCKING=blocking)
            cmd = [sys.executable, __file__, "--_child", name, "--device", args.device,
                   "--model", args.model, "--batch", str(args.batch), "--image", str(args.image),
                   "--steps", str(args.steps)]
            try:
                p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                   timeout=args.child_timeout, check=True)
                row[key] = json.loads(p.stdout.strip().splitlines()[-1])["step_s"]
            except (subprocess.SubprocessError, ValueError, IndexError, KeyError) as e:
                row[key] = None
                row[f"{key}_error"] = str(e)[-300:]
        rows.append(row)
    return rows


def _ms(s: Optional[float]) -> str:
    return "n/a" if s is None else f"{s * 1e3:.1f} ms"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(r) + " |" for r in rows]]


def _meta(frameworks: list[str], args: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "python": platform.python_version(), "device": args.device}
    for name in frameworks:
        meta[name] = getattr(importlib.import_module(name), "__version__", "?")
    if args.device == "cuda":
        try:
            p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=30)
            meta["gpu"] = p.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            meta["gpu"] = "?"
    return meta


def write_readme(out: Path, meta: dict[str, Any], tl: list[dict[str, Any]], png: Optional[str],
                 ab: list[dict[str, Any]], train: Optional[dict[str, Any]], args: Any) -> None:
    stamp = ", ".join(f"{k}: {v}" for k, v in meta.items())
    lines = ["# The paper's GPU experiments", "",
             f"Produced by `benchmarks/paper/gpu_paper.py` ({stamp}).", "",
             "## Fig. 1: one training step, host ops against GPU kernels", "",
             f"{args.model}, batch {args.batch}, {args.image}x{args.image}, SGD with momentum, "
             f"fp32 (TF32 off), after three warm-up steps; each framework's own profiler "
             f"(ember: its CUPTI activity) on one clock. `host` is the time the host took to "
             f"issue the step, `GPU lag` how much GPU work was still queued when it was done "
             f"(the host running ahead), `GPU busy` the union of the kernels' intervals.", ""]
    if png:
        lines += [f"![Fig. 1 on the GPU]({png})", ""]
    lines += _table(["framework", "host", "step (last kernel)", "GPU lag", "GPU busy", "ops",
                     "kernels", "trace"],
                    [[r["framework"], f"{r['host_ms']:.1f} ms", f"{r['step_ms']:.1f} ms",
                      f"{r['gpu_lag_ms']:.1f} ms", f"{r['gpu_busy_ms']:.1f} ms", str(r["ops"]),
                      str(r["kernels"]), f"[{r['trace']}]({r['trace']})"] for r in tl])
    lines += ["", "## Asynchronous execution vs a wait after every launch", "",
              "Median step time (each step followed by a synchronize) with launches queued "
              "asynchronously and with `EMBER_LAUNCH_BLOCKING=1` / `CUDA_LAUNCH_BLOCKING=1` "
              f"(the host waits for every kernel), {args.steps} steps, fresh process each.", ""]
    lines += _table(["framework", "async", "blocking", "blocking / async"],
                    [[r["framework"], _ms(r.get("async_s")), _ms(r.get("blocking_s")),
                      "n/a" if not (r.get("async_s") and r.get("blocking_s"))
                      else f"{r['blocking_s'] / r['async_s']:.2f}"] for r in ab])
    if train:
        lines += ["", "## Table 1 at full size on the GPU", "",
                  f"From benchmarks/cuda_train.py ({train.get('meta', {}).get('gpu', '?')}): "
                  "training throughput, ember / torch, peak memory, GPU busy.", ""]
        rows = []
        for c in train.get("cases", []):
            e, t = c.get("ember", {}), c.get("torch", {})
            et, tt = e.get("throughput"), t.get("throughput")
            rows.append([c.get("case", "?"), str(c.get("batch", "")),
                         f"{et:,.0f}" if et else str(e.get("status", "n/a")),
                         f"{tt:,.0f}" if tt else str(t.get("status", "n/a")),
                         f"{et / tt:.2f}" if et and tt else "-"])
        lines += _table(["case", "batch", "ember (items/s)", "torch (items/s)", "ember/torch"],
                        rows)
    (out / "README.md").write_text("\n".join(lines) + "\n")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "paper" / "gpu"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--steps", type=int, default=10, help="timed steps of the ablation")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--train-json", help="benchmarks/cuda_train.py --json output (Table 1)")
    ap.add_argument("--child-timeout", type=int, default=240)
    ap.add_argument("--_child", dest="child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        async_child(args)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    frameworks = ["ember"]
    if not args.no_torch:
        try:
            importlib.import_module("torch")
            frameworks.append("torch")
        except ImportError:
            pass
    tl = [timeline(importlib.import_module(name), args, out) for name in frameworks]
    png = plot(tl, args, out)
    ab = async_ablation(frameworks, args)
    train = None
    if args.train_json and Path(args.train_json).exists():
        train = json.loads(Path(args.train_json).read_text())
    meta = _meta(frameworks, args)
    write_readme(out, meta, tl, png, ab, train, args)
    slim = [{k: v for k, v in r.items() if k not in ("host_ops", "device_kernels")} for r in tl]
    (out / "results.json").write_text(json.dumps(
        {"meta": meta, "fig1": slim, "async": ab, "table1": train}, indent=1))
    print((out / "README.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
