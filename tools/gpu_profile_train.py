"""Where a training step's GPU time goes, per op, on ember or on torch (for the GPU machine).

One framework per run (``--framework ember|torch``), the same model, batch and optimizer, so the
two tables compare op by op. Device times come from the profiler's CUDA activity when the build
records it (torch: always; ember: when its CUPTI activity is available); otherwise run ember with
``CUDA_LAUNCH_BLOCKING=1``: every launch then waits for its kernel, so an op's host time is about
the GPU time of the kernels it launched, and the table ranks by that. After
``tools/gpu_check.sh`` has built ember::

    CUDA_LAUNCH_BLOCKING=1 python3 tools/gpu_profile_train.py resnet50 --batch 32
    python3 tools/gpu_profile_train.py resnet50 --batch 32 --framework torch

Models are benchmarks/paper/models.py's at full size (ImageNet shapes; SGD with momentum), or
``gpt2`` (benchmarks/cuda_train.py's GPT-2-small, AdamW; add ``--bf16`` for its autocast); fp32,
TF32 off, cuDNN benchmark mode on (as benchmarks/cuda_train.py measures them). ``--device cpu --image 64`` runs the same
script on the CPU (a dry run).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _models() -> Any:
    spec = importlib.util.spec_from_file_location("_ember_bench_paper_models",
                                                  BENCH / "paper" / "models.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _device_activity(fw: Any, device: str) -> bool:
    """Whether fw's profiler records CUDA kernel times here."""
    if device != "cuda":
        return False
    acts = fw.profiler.supported_activities()
    return fw.profiler.ProfilerActivity.CUDA in acts and (
        fw.__name__ == "torch" or fw._C._profiler_has_device_activity("cuda"))


def _report_syncs_and_raw_allocs(fw: Any, step: Any) -> None:
    """One more step with the sync debug mode on ("warn"): the operations that made the host
    wait for the GPU; and the device allocations / frees (cudaMalloc / cudaFree, which
    synchronize) that step made."""
    import warnings

    stats = fw.cuda.memory_stats()
    keys = [k for k in ("num_raw_alloc", "num_raw_free", "num_device_alloc", "num_device_free")
            if k in stats]
    before = {k: stats[k] for k in keys}
    fw.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step()
            fw.cuda.synchronize()
    finally:
        fw.cuda.set_sync_debug_mode(0)
    msgs: dict[str, int] = {}
    for w in caught:
        text = str(w.message).splitlines()[0][:120]
        msgs[text] = msgs.get(text, 0) + 1
    stats = fw.cuda.memory_stats()
    print(f"one step: {sum(msgs.values())} synchronizing operations "
          f"{sorted(msgs.items(), key=lambda kv: -kv[1])[:6]}; "
          + ", ".join(f"{k} +{stats[k] - before[k]}" for k in keys))


def _report_host_costs(fw: Any, step: Any, sync: Any, args: Any, n: int = 5) -> None:
    """The host's share of a step: n steps timed without waiting for the GPU between them (the
    host's pace, when the GPU keeps up) and each followed by a synchronize (the step's time);
    the counters that move per step (ember: its cuDNN statistics; the allocator's cudaMalloc /
    cudaFree calls)."""

    def counters() -> dict[str, float]:
        out: dict[str, float] = {}
        if args.device == "cuda":
            st = fw.cuda.memory_stats()
            for k in ("num_device_alloc", "num_device_free", "num_alloc_retries"):
                if k in st:
                    out[k] = st[k]
        if fw.__name__ == "ember" and args.device == "cuda":
            ext = importlib.import_module("ember._C_cuda")
            for k, v in dict(ext._cudnn_stats()).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[f"cudnn.{k}"] = v
        return out

    c0 = counters()
    t0 = time.perf_counter()
    host = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        host.append(time.perf_counter() - t)
    sync()
    pipelined = (time.perf_counter() - t0) / n
    synced = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        sync()
        synced.append(time.perf_counter() - t)
    c1 = counters()
    moved = {k: (c1[k] - c0.get(k, 0)) / (2 * n) for k in c1 if c1[k] != c0.get(k, 0)}
    host.sort()
    synced.sort()
    print(f"{args.framework}: step {pipelined * 1e3:.1f} ms pipelined, {synced[n // 2] * 1e3:.1f} ms "
          f"with a synchronize after it; the host returns from step() after "
          f"{host[n // 2] * 1e3:.1f} ms (medians of {n})")
    print("per step: " + (", ".join(f"{k} {v:+.1f}" for k, v in sorted(moved.items()))
                          or "no counter moved"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="resnet50")
    ap.add_argument("--framework", default="ember", choices=("ember", "torch"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bf16", action="store_true", help="the step under autocast(bfloat16)")
    ap.add_argument("--shapes", action="store_true",
                    help="one row per (op, input shapes): which convolutions / norms cost most")
    ap.add_argument("--host", action="store_true",
                    help="where the host's time goes: the step's time with and without waiting "
                         "for the GPU, per-step counters (ember: cuDNN queries, cudaMalloc), "
                         "and the table ranked by host time (no CUDA activity)")
    ap.add_argument("--switch", action="append", default=[], metavar="NAME=0|1",
                    help="ember only: ember._C_cuda._set_NAME(bool) first, e.g. "
                         "depthwise_native=0 (repeatable)")
    args = ap.parse_args()
    fw = importlib.import_module(args.framework)
    for spec in args.switch:
        name, _, v = spec.partition("=")
        if v not in ("0", "1") or not name.isidentifier():
            ap.error(f"--switch {spec!r}: expected NAME=0 or NAME=1")
        if args.framework == "ember":
            ext = importlib.import_module("ember._C_cuda")
            if not hasattr(ext, f"_set_{name}"):
                ap.error(f"--switch {name}: ember._C_cuda has no _set_{name}")
            getattr(ext, f"_set_{name}")(v == "1")
    if args.device == "cuda":
        fw.backends.cuda.matmul.allow_tf32 = False
        fw.backends.cudnn.allow_tf32 = False
        fw.backends.cudnn.benchmark = True  # as benchmarks/cuda_train.py (the warm-up steps tune)
    if args.model == "gpt2":  # benchmarks/cuda_train.py's GPT-2-small case, AdamW
        sys.path.insert(0, str(BENCH))
        from cuda_train import _gpt2

        built = _gpt2(fw, args.device == "cpu", args.batch)
        model, x, y, loss_fn = built.model, built.inputs, built.targets, built.loss_fn
        model.to(args.device).train()
        opt = built.make_opt(model.parameters())
    else:
        m = _models()
        size = m.Size(image=args.image, batch=args.batch, width=1.0, hidden=4096, classes=1000)
        model, batch, loss_fn, _ = m.build(args.model, fw, size)
        model.to(args.device).train()
        x, y = batch()
        opt = fw.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = x.to(args.device), y.to(args.device)

    def step() -> None:
        opt.zero_grad()
        with fw.autocast(args.device, dtype=fw.bfloat16, enabled=args.bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    sync = fw.cuda.synchronize if args.device == "cuda" else (lambda: None)
    sync()
    if args.host:
        _report_host_costs(fw, step, sync, args)
    device = _device_activity(fw, args.device) and not args.host
    acts = [fw.profiler.ProfilerActivity.CPU]
    if device:
        acts.append(fw.profiler.ProfilerActivity.CUDA)
    t0 = time.perf_counter()
    with fw.profiler.profile(activities=acts, record_shapes=args.shapes) as prof:
        for _ in range(args.steps):
            step()
        sync()
    dt = (time.perf_counter() - t0) / args.steps
    if args.device == "cuda":
        _report_syncs_and_raw_allocs(fw, step)
    how = ("CUDA activity" if device else "host times" if args.host else
           "host times (run with CUDA_LAUNCH_BLOCKING=1 on a GPU)")
    switches = "".join(f", {s}" for s in args.switch) if args.framework == "ember" else ""
    print(f"{args.framework} {args.model}{' bf16' if args.bf16 else ''} batch {args.batch}"
          f"{switches}: {dt * 1e3:.1f} ms/step under the profiler, {args.steps} steps; ranked by "
          f"{how}")
    key = "self_cuda_time_total" if device else "self_cpu_time_total"
    print(prof.key_averages(group_by_input_shape=args.shapes).table(sort_by=key,
                                                                    row_limit=args.rows))


if __name__ == "__main__":
    main()
