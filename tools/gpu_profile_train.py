"""Where a training step's GPU time goes, per op, on ember (for the GPU machine).

With ``CUDA_LAUNCH_BLOCKING=1`` every kernel launch waits for its kernel, so ember.profiler's host
time of an op is about the GPU time of the kernels it launched: the table then ranks the ops of
a step by GPU time. Run on the GPU machine after ``tools/gpu_check.sh`` has built ember::

    CUDA_LAUNCH_BLOCKING=1 python3 tools/gpu_profile_train.py resnet50 --batch 32 --steps 2

Models are benchmarks/paper/models.py's at full size (ImageNet shapes); SGD with momentum, fp32,
TF32 off (as benchmarks/cuda_train.py measures them).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import ember

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _models():
    spec = importlib.util.spec_from_file_location("_ember_bench_paper_models",
                                                  BENCH / "paper" / "models.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    ember.backends.cuda.matmul.allow_tf32 = False
    ember.backends.cudnn.allow_tf32 = False
    m = _models()
    size = m.Size(image=args.image, batch=args.batch, width=1.0, hidden=4096, classes=1000)
    model, batch, loss_fn, _ = m.build(args.model, ember, size)
    model.to(args.device).train()
    x, y = batch()
    x, y = x.to(args.device), y.to(args.device)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(2):
        step()
    sync = ember.cuda.synchronize if args.device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    with ember.profiler.profile(activities=[ember.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
        sync()
    dt = (time.perf_counter() - t0) / args.steps
    print(f"{args.model} batch {args.batch}: {dt * 1e3:.1f} ms/step under the profiler")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
