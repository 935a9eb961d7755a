"""GPU benchmarks (issue 11): ember's CUDA backend against PyTorch on the same GPU, same process.

Every case is self-timed: ``synchronize(); t0; <iters calls>; synchronize(); t1`` and reports
(t1 - t0) / iters per call (the harness takes the median of the repeats and the ratio
ember / torch). Each framework synchronizes with its own ``<fw>.cuda.synchronize()``; the
harness's first call of a case is the warm-up.

* ``cuda/launch add 8 floats``: Python-to-queued cost of a tiny op (no sync inside the loop).
* ``cuda/add 256M floats``: ``a + b`` with a fresh output; GB/s counts 3 * 4 bytes per element.
* ``cuda/copy 256M floats (d2d)``: ``y.copy_(x)``, the device-to-device reference bandwidth (2 * 4
  bytes per element); the standalone summary reports the add's bandwidth as % of torch's copy.
* ``cuda/sum 256M``, ``cuda/max dim=1 (4096, 32768)``, ``cuda/sum dim=-1 (4096, 32768)``,
  ``cuda/sum dim=0 (8192, 3072) bf16`` (a bias gradient: a column reduction),
  ``cuda/softmax dim=-1 (4096, 32768)`` (ember: "missing" until it has a CUDA softmax).
* ``cuda/matmul 4096 fp32``, ``... fp32 tf32``, ``... bf16``: GFLOP/s from 2 * 4096^3.
* ``cuda/sdpa causal bf16 (8,12,1024,64) fwd+bwd``: GPT-2 small's fused attention, forward and
  backward (``ember._C_cuda._set_sdpa_mma(False)`` before the run gives the WMMA kernels).
* ``cuda/alloc-free mixed sizes``: ``empty`` of 1 KiB .. 64 MiB (powers of two, cycling),
  freed at once, 1000 per call (the caching allocator's hot path).
* ``cuda/h2d 256MB pinned`` (ember: "missing" while it has no pinned host memory) and
  ``cuda/h2d 256MB pageable``.
* ``cuda/nccl all_reduce 64MB (world size 1)``: ember.distributed's nccl backend against
  torch.distributed's on a one-rank group (the per-call cost: NCCL has nothing to move).

Without a CUDA device (for ember or torch) no case is registered, so CPU runs are unchanged;
with a device but no ember CUDA build the ember side reports "missing".

Run only these (well under 90 s on an H100):

    PYTHONPATH=build/dev/site python3 benchmarks/cases_cuda.py          # table + GPU summary
    PYTHONPATH=build/dev/site python3 benchmarks/run.py --filter cuda/  # the plain runner
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable

import numpy as np
from harness import SelfTimed, case

N_BIG = 256 * 1024 * 1024  # 256M floats (1 GiB per tensor)
ROWS, COLS = 4096, 32768  # 128M floats: "softmax-sized" rows
MM = 4096
H2D_BYTES = 256 * 1000 * 1000
REPEATS = (7, 3)  # (full, quick): each call below runs for ~5-60 ms


@functools.lru_cache(maxsize=None)
def _gpu_present() -> bool:
    """Whether ember or torch sees a CUDA device (cases are registered only then).
    EMBER_BENCH_CUDA_CASES=1 registers them regardless (to check that they skip cleanly)."""
    if os.environ.get("EMBER_BENCH_CUDA_CASES") == "1":
        return True
    try:
        import ember

        if ember.cuda.is_available():
            return True
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def _require_cuda(fw) -> None:
    mod = fw.mod
    cuda = getattr(mod, "cuda", None)
    if cuda is None or not cuda.is_available():
        raise NotImplementedError(f"{fw.name} has no usable CUDA device (or no CUDA build)")


def _sync(fw) -> Callable[[], None]:
    return fw.mod.cuda.synchronize


def _timed(fw, fn: Callable[[], Any], iters: int) -> SelfTimed:
    """Per-call seconds of `iters` calls of fn between two synchronizations."""
    sync = _sync(fw)

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        return (time.perf_counter() - t0) / iters

    return SelfTimed(once)


def _on_device(fw, host: Any) -> Any:
    """A CUDA copy of a CPU tensor of the framework."""
    return host.to("cuda")


def _full(fw, shape: tuple[int, ...], value: float) -> Any:
    """A float32 CUDA tensor filled with value: made on the device when the framework can, else
    on the host and copied."""
    mod = fw.mod
    try:
        return mod.full(shape, value, dtype=mod.float32, device="cuda")
    except (RuntimeError, NotImplementedError, TypeError):
        return _on_device(fw, mod.full(shape, value, dtype=mod.float32))


def _filled(fw, n: int, value: float) -> Any:
    return _full(fw, (n,), value)


def _cuda_case(name: str, **kw: Any):
    if not _gpu_present():
        return lambda setup: setup  # not registered: no GPU here
    kw.setdefault("repeats", REPEATS)
    kw.setdefault("check", False)
    return case(name, **kw)


# ---- (1) launch overhead ----------------------------------------------------------------------


@_cuda_case("cuda/launch add 8 floats", unit="us",
            doc="a + b on 8 float32 on the GPU: Python to queued, synchronized only at the end")
def _(fw):
    _require_cuda(fw)
    a, b = _on_device(fw, fw.randn(8, seed=1)), _on_device(fw, fw.randn(8, seed=2))
    return _timed(fw, lambda: a + b, 3000)


@_cuda_case("cuda/launch floor (_sleep(0))", unit="us",
            doc="cuda._sleep(0): one trivial kernel per Python call, the floor under any op's "
                "launch (binding + cudaLaunchKernel); add's time above it is the op's own cost")
def _(fw):
    _require_cuda(fw)
    sleep = fw.mod.cuda._sleep
    return _timed(fw, lambda: sleep(0), 3000)


# ---- (2) bandwidth ----------------------------------------------------------------------------


@_cuda_case("cuda/add 256M floats", unit="ms", bytes=3 * 4 * N_BIG,
            doc="c = a + b on 256M float32 with a fresh output (3 * 4 bytes per element)")
def _(fw):
    _require_cuda(fw)
    a, b = _filled(fw, N_BIG, 1.0), _filled(fw, N_BIG, 2.0)
    return _timed(fw, lambda: a + b, 20)


@_cuda_case("cuda/copy 256M floats (d2d)", unit="ms", bytes=2 * 4 * N_BIG,
            doc="y.copy_(x) on 256M float32: the device-to-device copy bandwidth (reference)")
def _(fw):
    _require_cuda(fw)
    x, y = _filled(fw, N_BIG, 1.0), _filled(fw, N_BIG, 0.0)
    return _timed(fw, lambda: y.copy_(x), 20)


# ---- (3) reductions ---------------------------------------------------------------------------


@_cuda_case("cuda/sum 256M", unit="ms", bytes=4 * N_BIG, doc="x.sum() over 256M float32")
def _(fw):
    _require_cuda(fw)
    x = _filled(fw, N_BIG, 0.5)
    return _timed(fw, lambda: x.sum(), 20)


def _rows(fw) -> Any:
    return _full(fw, (ROWS, COLS), 0.25)


@_cuda_case("cuda/max dim=1 (4096, 32768)", unit="ms", bytes=4 * ROWS * COLS,
            doc="x.max(dim=1) (values and indices) of a (4096, 32768) float32")
def _(fw):
    _require_cuda(fw)
    x = _rows(fw)
    return _timed(fw, lambda: x.max(dim=1), 20)


@_cuda_case("cuda/sum dim=-1 (4096, 32768)", unit="ms", bytes=4 * ROWS * COLS,
            doc="x.sum(dim=-1) of a (4096, 32768) float32 (softmax-sized rows)")
def _(fw):
    _require_cuda(fw)
    x = _rows(fw)
    return _timed(fw, lambda: x.sum(dim=-1), 20)


@_cuda_case("cuda/sum dim=0 (8192, 3072) bf16", unit="ms", bytes=2 * 8192 * 3072,
            doc="x.sum(dim=0) of an (8192, 3072) bfloat16: a bias gradient (GPT-2's MLP, batch 8 x "
                "seq 1024): a column reduction")
def _(fw):
    _require_cuda(fw)
    x = _full(fw, (8192, 3072), 0.25).to(fw.mod.bfloat16)
    return _timed(fw, lambda: x.sum(dim=0), 20)


@_cuda_case("cuda/softmax dim=-1 (4096, 32768)", unit="ms", bytes=2 * 4 * ROWS * COLS,
            doc="softmax over the last dim of a (4096, 32768) float32 (read + write)")
def _(fw):
    _require_cuda(fw)
    x = _rows(fw)
    mod = fw.mod
    try:
        mod.softmax(x, dim=-1)
        _sync(fw)()
    except (RuntimeError, TypeError) as e:  # no CUDA kernel yet (issue 12)
        raise NotImplementedError(f"softmax on cuda: {str(e).splitlines()[0][:100]}") from e
    return _timed(fw, lambda: mod.softmax(x, dim=-1), 20)


# ---- (4) matmul ---------------------------------------------------------------------------------


def _matmul(fw, dtype_name: str, tf32: bool, iters: int) -> SelfTimed:
    _require_cuda(fw)
    mod = fw.mod
    dtype = getattr(mod, dtype_name)
    a = _on_device(fw, fw.randn(MM, MM, seed=1).to(dtype))
    b = _on_device(fw, fw.randn(MM, MM, seed=2).to(dtype))
    flags = mod.backends.cuda.matmul
    inner = _timed(fw, lambda: a @ b, iters)

    def once() -> float:
        prev = flags.allow_tf32
        flags.allow_tf32 = tf32
        try:
            return inner.fn()
        finally:
            flags.allow_tf32 = prev

    return SelfTimed(once)


@_cuda_case("cuda/matmul 4096 fp32", unit="ms", flops=2 * MM**3,
            doc="a @ b, (4096, 4096) float32, TF32 off (full float32)")
def _(fw):
    return _matmul(fw, "float32", False, 10)


@_cuda_case("cuda/matmul 4096 fp32 tf32", unit="ms", flops=2 * MM**3,
            doc="a @ b, (4096, 4096) float32 with TF32 allowed")
def _(fw):
    return _matmul(fw, "float32", True, 30)


@_cuda_case("cuda/matmul 4096 bf16", unit="ms", flops=2 * MM**3,
            doc="a @ b, (4096, 4096) bfloat16")
def _(fw):
    return _matmul(fw, "bfloat16", False, 50)


# ---- (4b) fused attention ----------------------------------------------------------------------

SDPA_SHAPE = (8, 12, 1024, 64)  # GPT-2 small's attention: batch 8, 12 heads, seq 1024, head 64


@_cuda_case("cuda/sdpa causal bf16 (8,12,1024,64) fwd+bwd", unit="ms",
            flops=7 * 8 * 12 * 1024**2 * 64,
            doc="F.scaled_dot_product_attention(q, k, v, is_causal=True) then backward, "
                "bfloat16 (8, 12, 1024, 64) (GPT-2 small); FLOPs: the causal half of 4 B H L^2 D "
                "forward + 2.5x that backward")
def _(fw):
    _require_cuda(fw)
    mod = fw.mod
    F = mod.nn.functional
    q, k, v = (_on_device(fw, fw.randn(*SDPA_SHAPE, seed=s).to(mod.bfloat16)).requires_grad_(True)
               for s in (1, 2, 3))
    g = _on_device(fw, fw.randn(*SDPA_SHAPE, seed=4).to(mod.bfloat16))

    def step() -> None:
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

    return _timed(fw, step, 20)


# ---- (5) allocator ----------------------------------------------------------------------------

_ALLOC_SIZES = [(1024 << i) // 4 for i in range(17)]  # 1 KiB .. 64 MiB, in float32 elements


@_cuda_case("cuda/alloc-free mixed sizes", unit="ms",
            doc="1000 x (empty(n, device='cuda') then free), n cycling over 1 KiB .. 64 MiB")
def _(fw):
    _require_cuda(fw)
    mod = fw.mod
    sizes = [_ALLOC_SIZES[i % len(_ALLOC_SIZES)] for i in range(1000)]

    def loop() -> None:
        for n in sizes:
            t = mod.empty(n, dtype=mod.float32, device="cuda")
            del t

    return _timed(fw, loop, 1)


# ---- (6) host -> device -----------------------------------------------------------------------


def _pinned(fw, nbytes: int) -> Any:
    mod = fw.mod
    try:
        t = mod.empty(nbytes, dtype=mod.uint8, pin_memory=True)
    except TypeError:  # no pin_memory= argument: pin a pageable tensor
        t = mod.empty(nbytes, dtype=mod.uint8).pin_memory()
    if not (hasattr(t, "is_pinned") and t.is_pinned()):
        raise NotImplementedError(f"{fw.name} has no pinned host memory (pin_memory() returned a "
                                  "pageable tensor)")
    return t


@_cuda_case("cuda/h2d 256MB pinned", unit="ms", bytes=H2D_BYTES,
            doc="dst.copy_(src) of 256 MB from pinned host memory to the GPU")
def _(fw):
    _require_cuda(fw)
    mod = fw.mod
    src = _pinned(fw, H2D_BYTES)
    src.fill_(1)
    dst = mod.empty(H2D_BYTES, dtype=mod.uint8, device="cuda")
    return _timed(fw, lambda: dst.copy_(src), 5)


@_cuda_case("cuda/h2d 256MB pageable", unit="ms", bytes=H2D_BYTES,
            doc="dst.copy_(src) of 256 MB from ordinary (pageable) host memory to the GPU")
def _(fw):
    _require_cuda(fw)
    mod = fw.mod
    src = fw.from_numpy(np.ones(H2D_BYTES, dtype=np.uint8))
    dst = mod.empty(H2D_BYTES, dtype=mod.uint8, device="cuda")
    return _timed(fw, lambda: dst.copy_(src), 3)


# ---- standalone ---------------------------------------------------------------------------------


# ---- (7) NCCL (ember.distributed's nccl backend) ----------------------------------------------


def _nccl_world(fw) -> Any:
    """fw's distributed module with a world-size-1 nccl default group (made once per process)."""
    import importlib

    _require_cuda(fw)
    d = importlib.import_module(fw.mod.__name__ + ".distributed")
    if not d.is_nccl_available():
        raise NotImplementedError(f"{fw.name} has no usable NCCL")
    if not d.is_initialized():
        d.init_process_group("nccl", store=d.HashStore(), rank=0, world_size=1)
    return d


@_cuda_case("cuda/nccl all_reduce 64MB (world size 1)", unit="ms",
            doc="dist.all_reduce of 16M float32 on a one-rank nccl group: NCCL has nothing to "
                "move, so this is the per-call cost (streams, events, launch)")
def _(fw):
    d = _nccl_world(fw)
    x = _filled(fw, 16 * 1024 * 1024, 1.0)
    return _timed(fw, lambda: d.all_reduce(x), 200)


def _summary(doc: dict) -> str:
    """GPU-specific figures from run.py's JSON: bandwidths, % of the d2d copy, TFLOP/s."""
    cases = {c["name"]: c for c in doc["cases"]}

    def tp(name: str, side: str) -> float | None:
        c = cases.get(name)
        return None if c is None else c[side]["throughput"]

    lines = ["", "GPU summary (throughputs from the medians; ratio = ember / torch throughput):", ""]
    copy_bw = tp("cuda/copy 256M floats (d2d)", "torch")
    for name, c in cases.items():
        e, t = tp(name, "ember"), tp(name, "torch")
        if e is None and t is None:
            continue
        unit = c["ember"]["throughput_unit"] or c["torch"]["throughput_unit"]
        scale, label = (1e-3, "TFLOP/s") if unit == "GFLOP/s" else (1.0, unit)
        fmt = lambda v: "-" if v is None else f"{v * scale:.1f} {label}"  # noqa: E731
        line = f"- {name}: ember {fmt(e)}, torch {fmt(t)}"
        if e is not None and t is not None and t > 0:
            line += f", ember/torch {e / t:.2f}"
        if name == "cuda/add 256M floats" and copy_bw:
            pct = lambda v: "-" if v is None else f"{100 * v / copy_bw:.0f}%"  # noqa: E731
            line += f"; of torch's d2d copy bandwidth ({copy_bw:.0f} GB/s): ember {pct(e)}, torch {pct(t)}"
        lines.append(line)
    launch = cases.get("cuda/launch add 8 floats")
    if launch and launch["ratio"] is not None:
        lines.append(f"- launch overhead ember/torch time: {launch['ratio']:.2f}")
    floor = cases.get("cuda/launch floor (_sleep(0))")
    if launch and floor:
        # Per-call microseconds: the op's own host cost is its time above the launch floor.
        def us(c: dict, side: str) -> float | None:
            t = c[side].get("median_s")
            return None if t is None else 1e6 * t

        parts = []
        for side in ("ember", "torch"):
            a, f = us(launch, side), us(floor, side)
            if a is not None and f is not None:
                parts.append(f"{side} add {a:.2f} us = floor {f:.2f} + op {a - f:.2f}")
        if parts:
            lines.append("- launch breakdown: " + "; ".join(parts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import json
    import sys
    import tempfile
    from pathlib import Path

    import harness
    import run

    if not _gpu_present():
        print("no CUDA device visible to ember or torch: the GPU cases are skipped")
        return 0
    # This file runs as __main__; run.load_cases imports it again as cases_cuda and registers
    # the cases there, so start from an empty registry.
    harness.REGISTRY.clear()
    argv = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cuda.json"
        rc = run.main(["--filter", "cuda/", "--json", str(out), *argv])
        if rc == 0 and out.exists():
            print(_summary(json.loads(out.read_text())))
    return rc


if __name__ == "__main__":
    import sys

    sys.exit(main())
