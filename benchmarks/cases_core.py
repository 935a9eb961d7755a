"""Core tensor benchmarks: per-op overhead, large pointwise, reductions, matmul, import time.

Targets are the ones of the performance issue, for a 2-core CPU with 2 threads.
"""

from __future__ import annotations

import os
import subprocess
import sys

from harness import SelfTimed, Stmt, case

TINY = 8
LARGE = 16 * 1024 * 1024  # 16M float32 = 64 MiB per array
F32 = 4

# ---- per-op overhead on tiny tensors (dominated by dispatch, not arithmetic) ------------------

TINY_TARGET = 0.8


@case("tiny/add", unit="us", target=TINY_TARGET, doc="a + b, 8 float32")
def _tiny_add(fw):
    return Stmt("a + b", a=fw.randn(TINY, seed=1), b=fw.randn(TINY, seed=2))


@case("tiny/add()", unit="us", target=TINY_TARGET, doc="add(a, b) (the function form), 8 float32")
def _tiny_add_fn(fw):
    return Stmt("add(a, b)", add=fw.add, a=fw.randn(TINY, seed=1), b=fw.randn(TINY, seed=2))


@case("tiny/mul", unit="us", target=TINY_TARGET, doc="a * b, 8 float32")
def _tiny_mul(fw):
    return Stmt("a * b", a=fw.randn(TINY, seed=1), b=fw.randn(TINY, seed=2))


@case("tiny/relu", unit="us", target=TINY_TARGET, doc="relu(x), 8 float32")
def _tiny_relu(fw):
    return Stmt("relu(x)", relu=fw.relu, x=fw.randn(TINY))


@case("tiny/sum", unit="us", target=TINY_TARGET, rtol=1e-5, doc="x.sum(), 8 float32")
def _tiny_sum(fw):
    return Stmt("x.sum()", x=fw.randn(TINY))


@case("tiny/getitem", unit="us", target=TINY_TARGET, doc="x[0], 8 float32 (a 0-d view)")
def _tiny_getitem(fw):
    return Stmt("x[0]", x=fw.randn(TINY))


# ---- large pointwise: memory bandwidth, allocation of the fresh output -----------------------

POINTWISE_BYTES = 3 * LARGE * F32  # read a, read b, write the result


@case(
    "large/add",
    unit="ms",
    target=1 / 3,
    bytes=POINTWISE_BYTES,
    doc="a + b, 16M float32, fresh output each call",
)
def _large_add(fw):
    return Stmt("a + b", a=fw.randn(LARGE, seed=1), b=fw.randn(LARGE, seed=2))


@case(
    "large/add out=",
    unit="ms",
    bytes=POINTWISE_BYTES,
    doc="add(a, b, out=c), 16M float32, preallocated output (no target: for reference)",
)
def _large_add_out(fw):
    a, b = fw.randn(LARGE, seed=1), fw.randn(LARGE, seed=2)
    c = a + b  # an output of the right size, already touched
    return Stmt("add(a, b, out=c)", add=fw.add, a=a, b=b, c=c)


# ---- mid-size pointwise (20-200 us): one parallel region each, so the thread pool's dispatch
# latency (waking workers, waiting for them) is a visible share of the time. No targets.

MID_200K, MID_70K, MID_1M = 200_000, 70_000, 1_000_000


@case("mid/clone 200k", unit="us", bytes=2 * MID_200K * F32,
      doc="x.clone(), 200k float32 (fresh output each call)")  # fmt: skip
def _mid_clone_200k(fw):
    return Stmt("x.clone()", x=fw.randn(MID_200K))


@case("mid/clone 1M", unit="us", bytes=2 * MID_1M * F32,
      doc="x.clone(), 1M float32 (fresh output each call)")  # fmt: skip
def _mid_clone_1m(fw):
    return Stmt("x.clone()", x=fw.randn(MID_1M))


@case("mid/exp 70k", unit="us", bytes=2 * MID_70K * F32, rtol=1e-5,
      doc="exp(x), 70k float32: just above two grains, the smallest op that goes parallel")  # fmt: skip
def _mid_exp_70k(fw):
    return Stmt("exp(x)", exp=fw.exp, x=fw.randn(MID_70K))


@case("mid/add 1M", unit="us", bytes=3 * MID_1M * F32,
      doc="a + b, 1M float32 (fresh output each call)")  # fmt: skip
def _mid_add_1m(fw):
    return Stmt("a + b", a=fw.randn(MID_1M, seed=1), b=fw.randn(MID_1M, seed=2))


@case("mid/clamp 1M", unit="us", bytes=2 * MID_1M * F32,
      doc="clamp(x, -1, 1), 1M float32 (scalar bounds, fresh output)")  # fmt: skip
def _mid_clamp_1m(fw):
    return Stmt("clamp(x, -1.0, 1.0)", clamp=fw.clamp, x=fw.randn(MID_1M, seed=3))


@case("mid/add_ 1M", unit="us", bytes=2 * MID_1M * F32,
      doc="x.add_(1.0), 1M float32 (in place)")  # fmt: skip
def _mid_add_inplace_1m(fw):
    return Stmt("x.add_(1.0)", x=fw.randn(MID_1M, seed=4))


# ---- reductions: throughput >= 0.9x torch, i.e. time ratio <= 1/0.9 ---------------------------

REDUCE_TARGET = 1 / 0.9
REDUCE_BYTES = LARGE * F32


@case("reduce/sum", unit="ms", target=REDUCE_TARGET, bytes=REDUCE_BYTES, rtol=1e-3,
      doc="x.sum(), 16M float32")  # fmt: skip
def _reduce_sum(fw):
    return Stmt("x.sum()", x=fw.randn(LARGE))


@case("reduce/mean dim=1", unit="ms", target=REDUCE_TARGET, bytes=REDUCE_BYTES, rtol=1e-3,
      doc="x.mean(dim=1), (4096, 4096) float32")  # fmt: skip
def _reduce_mean_dim1(fw):
    return Stmt("x.mean(dim=1)", x=fw.randn(4096, 4096))


@case("reduce/argmax", unit="ms", target=REDUCE_TARGET, bytes=REDUCE_BYTES,
      doc="x.argmax(), 16M float32")  # fmt: skip
def _reduce_argmax(fw):
    return Stmt("x.argmax()", x=fw.randn(LARGE))


# ---- matmul: GFLOP/s >= 0.9x torch -----------------------------------------------------------

MM = 1024
BMM_B, BMM_N = 128, 64


@case("matmul 1024", unit="ms", target=1 / 0.9, flops=2 * MM**3, rtol=1e-3, atol=1e-3,
      doc="matmul(a, b), (1024, 1024) @ (1024, 1024) float32")  # fmt: skip
def _matmul(fw):
    return Stmt("mm(a, b)", mm=fw.matmul, a=fw.randn(MM, MM, seed=1), b=fw.randn(MM, MM, seed=2))


@case("bmm 128x64", unit="ms", target=1 / 0.9, flops=2 * BMM_B * BMM_N**3, rtol=1e-3,
      atol=1e-3, doc="bmm(a, b), 128 x (64, 64) @ (64, 64) float32")  # fmt: skip
def _bmm(fw):
    a = fw.randn(BMM_B, BMM_N, BMM_N, seed=1)
    b = fw.randn(BMM_B, BMM_N, BMM_N, seed=2)
    return Stmt("bmm(a, b)", bmm=fw.bmm, a=a, b=b)


# ---- import time in a fresh interpreter --------------------------------------------------------

_IMPORT_SNIPPET = (
    "import time; t = time.perf_counter(); import {mod}; print(time.perf_counter() - t)"
)


def _import_time(module: str) -> float:
    """Seconds `import module` takes in a fresh interpreter (its own startup excluded)."""
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_SNIPPET.format(mod=module)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"import {module} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return float(proc.stdout.strip().splitlines()[-1])


@case("import", unit="s", target_abs=0.15, check=False, repeats=(5, 1),
      doc="`import X` in a fresh interpreter (python -c), interpreter startup excluded")  # fmt: skip
def _import(fw):
    return SelfTimed(lambda: _import_time(fw.name))
