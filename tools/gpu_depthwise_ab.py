"""A/B timing of MobileNetV2's depthwise convolutions (for the GPU machine): ember's native
depthwise kernels (csrc/cuda/nn_conv_depthwise.cu) against the same convolutions with the private
switch off (cuDNN, or the GEMM kernels without it), and torch's when torch with CUDA is importable.

Every 3x3 depthwise layer of MobileNetV2 at 224x224 (channels, input size, stride, count in the
network), float32 (``--dtype`` for others), TF32 off; per layer the median time of the forward,
the input gradient and the weight gradient (ember.convolution_backward with one output asked for;
torch's aten convolution_backward the same way), and the step total weighted by the counts.
A quick correctness check (native against switch-off, float64 on the CPU reference for the first
layer) runs first. After tools/gpu_check.sh has built ember:

    python3 tools/gpu_depthwise_ab.py                  # batch 128, ~1 minute on an H100
    python3 tools/gpu_depthwise_ab.py --batch 32 --iters 10
    python3 tools/gpu_depthwise_ab.py --device cpu --batch 1 --iters 1   # a dry run of the script
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import ember
import numpy as np

# (channels, input size, stride, layers of MobileNetV2 with this shape)
LAYERS = [
    (32, 112, 1, 1),
    (96, 112, 2, 1),
    (144, 56, 1, 1),
    (144, 56, 2, 1),
    (192, 28, 1, 2),
    (192, 28, 2, 1),
    (384, 14, 1, 4),
    (576, 14, 1, 2),
    (576, 14, 2, 1),
    (960, 7, 1, 3),
]


def _sync(device):
    if device == "cuda":
        ember.cuda.synchronize()


def _time(fn, device, iters):
    fn()  # warm-up (cuDNN's algorithm choice, allocations)
    _sync(device)
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def _ember_passes(C, size, stride, batch, dtype, device):
    rng = np.random.default_rng(0)
    dt = getattr(ember, dtype)
    x = ember.tensor(rng.standard_normal((batch, C, size, size)), dtype=dt).to(device)
    w = ember.tensor(rng.standard_normal((C, 1, 3, 3)), dtype=dt).to(device)
    args = ([stride, stride], [1, 1], [1, 1], False, [0, 0], C)
    y = ember.convolution(x, w, None, *args)
    go = ember.ones_like(y)
    return {
        "fwd": lambda: ember.convolution(x, w, None, *args),
        "bwd_in": lambda: ember.convolution_backward(go, x, w, *args, True, False, False),
        "bwd_w": lambda: ember.convolution_backward(go, x, w, *args, False, True, False),
    }


def _torch_passes(C, size, stride, batch, dtype):
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dt = getattr(torch, dtype)
    x = torch.randn(batch, C, size, size, device="cuda", dtype=dt)
    w = torch.randn(C, 1, 3, 3, device="cuda", dtype=dt)
    y = torch.nn.functional.conv2d(x, w, None, stride, 1, 1, C)
    go = torch.ones_like(y)
    cb = torch.ops.aten.convolution_backward

    def bwd(mask):
        return lambda: cb(go, x, w, None, [stride] * 2, [1, 1], [1, 1], False, [0, 0], C, mask)

    return {
        "fwd": lambda: torch.nn.functional.conv2d(x, w, None, stride, 1, 1, C),
        "bwd_in": bwd([True, False, False]),
        "bwd_w": bwd([False, True, False]),
        "sync": torch.cuda.synchronize,
    }


def _set_native(on, device):
    if device == "cuda":
        from ember import _C_cuda

        _C_cuda._set_depthwise_native(on)


def _check(batch, dtype, device):
    """The first layer's three results, native against switch-off, agree."""
    C, size, stride, _ = LAYERS[0]
    res = []
    for on in (True, False):
        _set_native(on, device)
        p = _ember_passes(C, size, stride, min(batch, 4), dtype, device)
        res.append([p["fwd"](), p["bwd_in"]()[0], p["bwd_w"]()[1]])
    _set_native(True, device)
    for name, a, b in zip(("fwd", "bwd_in", "bwd_w"), *res):
        a, b = a.cpu().float().numpy(), b.cpu().float().numpy()
        err = float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))
        print(f"check {name}: native vs switch-off max relative difference {err:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.device == "cuda" and not ember.cuda.is_available():
        sys.exit("no CUDA device (use --device cpu for a dry run)")
    ember.backends.cuda.matmul.allow_tf32 = False
    ember.backends.cudnn.allow_tf32 = False
    ember.backends.cudnn.benchmark = True
    _check(a.batch, a.dtype, a.device)
    cols = ["native", "switch off"]
    has_torch = a.device == "cuda" and _torch_passes(8, 8, 1, 1, a.dtype) is not None
    if has_torch:
        cols.append("torch")
    print(f"MobileNetV2 depthwise 3x3, batch {a.batch}, {a.dtype}, {a.device}; median ms")
    print(f"{'layer':>18} {'pass':>7} " + " ".join(f"{c:>11}" for c in cols))
    totals = {c: 0.0 for c in cols}
    for C, size, stride, count in LAYERS:
        row = {}
        for col in cols:
            if col == "torch":
                p = _torch_passes(C, size, stride, a.batch, a.dtype)
                dev_sync = "cuda"
            else:
                _set_native(col == "native", a.device)
                p = _ember_passes(C, size, stride, a.batch, a.dtype, a.device)
                dev_sync = a.device
            for name in ("fwd", "bwd_in", "bwd_w"):
                if col == "torch":
                    fn = p[name]
                    t = _time(lambda fn=fn: (fn(), p["sync"]()), "cpu", a.iters)
                else:
                    t = _time(p[name], dev_sync, a.iters)
                row[(col, name)] = t
                totals[col] += t * count
        _set_native(True, a.device)
        for name in ("fwd", "bwd_in", "bwd_w"):
            label = f"{C}@{size} s{stride} x{count}" if name == "fwd" else ""
            print(f"{label:>18} {name:>7} " + " ".join(f"{row[(c, name)]:11.3f}" for c in cols))
    print(f"{'step total':>18} {'':>7} " + " ".join(f"{totals[c]:11.2f}" for c in cols))


if __name__ == "__main__":
    main()
