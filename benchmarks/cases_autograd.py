"""Autograd benchmarks: the fixed cost of a tiny forward+backward, the engine's cost per graph
node, and peak memory of training-style forward+backward (targets of the autograd issue).

Peak memory is reported in MiB through the same table (the "time" of those cases is a byte
count; the unit column says MiB). How each side measures it:

* ember: the CPU caching allocator's statistics, ``max_memory_allocated()`` after
  ``reset_peak_memory_stats()``, minus ``memory_allocated()`` before the forward pass.
* torch: PyTorch keeps no allocator statistics on the CPU, so its profiler records every
  allocation and free (``profile_memory=True``); the memory timeline built from those records
  (``torch.profiler._memory_profiler.MemoryProfileTimeline``, the data behind
  ``export_memory_timeline``) gives the bytes alive at each instant, and the peak is its
  maximum minus its value at the start. The profiler's own bookkeeping is not in that timeline.
  If a PyTorch version lacks that (private) module, the torch side reports "missing".

Both sides count tensors created during forward+backward only (weights and inputs exist before),
including the gradients accumulated into ``.grad`` (reset to None before each run).
"""

from __future__ import annotations

import gc
import time

import harness
from harness import SelfTimed, Stmt, case

# Memory cases put a byte count where the harness expects seconds: register the unit.
harness.UNITS.setdefault("MiB", float(1 << 20))
harness.UNIT_LABELS.setdefault("MiB", "MiB")


def _leaf(fw, *shape, seed=0):
    return fw.randn(*shape, seed=seed).requires_grad_()


# ---- (a) fixed overhead: a tiny graph built and run ----------------------------------------------


@case("autograd/small fwd+bwd", unit="us", target=0.5, check=False,
      doc="(x*y + y).sum().backward() on 8 float32 (graph building + engine overhead)")
def _small(fw):
    return Stmt("(x * y + y).sum().backward()", x=_leaf(fw, 8, seed=1), y=_leaf(fw, 8, seed=2))


# ---- (b) engine cost per node --------------------------------------------------------------------

CHAIN = 1000


def _chain_backward(fw, x) -> float:
    """Seconds per node of backward through a 1,000-op chain (the forward is not timed)."""
    total = 0.0
    runs = 5
    for _ in range(runs):
        h = x
        for i in range(CHAIN // 2):
            h = h * 0.999 + 0.001 if i % 2 else (h + 0.5) * 0.5
        loss = h.sum()
        gc.disable()
        t0 = time.perf_counter()
        loss.backward()
        total += time.perf_counter() - t0
        gc.enable()
        x.grad = None
        del h, loss
    return total / runs / CHAIN


@case("autograd/chain bwd per node", unit="us", target=0.7,
      doc=f"backward of a {CHAIN}-op chain of pointwise ops on 8 float32, per node")
def _chain(fw):
    x = _leaf(fw, 8)
    return SelfTimed(lambda: _chain_backward(fw, x))


# ---- (c) peak memory of forward+backward through an MLP ------------------------------------------

LAYERS, WIDTH = 50, 256


def _mlp(fw, batch: int):
    ws = [(fw.randn(WIDTH, WIDTH, seed=i) * (1.0 / WIDTH ** 0.5)).detach().requires_grad_()
          for i in range(LAYERS)]
    bs = [_leaf(fw, WIDTH, seed=1000 + i) for i in range(LAYERS)]
    x = fw.randn(batch, WIDTH, seed=7)

    def step():
        h = x
        for w, b in zip(ws, bs):
            h = (h @ w + b).tanh()
        h.sum().backward()

    def reset():
        for p in ws + bs:
            p.grad = None

    return step, reset


def _ember_peak(fw, step, reset) -> float:
    reset()
    gc.collect()
    base = fw.mod.memory_allocated()
    fw.mod.reset_peak_memory_stats()
    step()
    return float(fw.mod.max_memory_allocated() - base)


def _torch_peak(fw, step, reset) -> float:
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    reset()
    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
        fw.mod.device("cpu"))
    totals = [sum(s) for s in sizes]
    return float(max(totals) - totals[0]) if totals else 0.0


def _peak_case(batch: int, what: str) -> None:
    @case(f"autograd/MLP peak memory b{batch}", unit="MiB", target=1.0, check=False,
          repeats=(3, 1),
          doc=f"peak bytes of forward+backward, {LAYERS}-layer MLP (matmul + add + tanh), "
              f"{batch}x{WIDTH} float32 ({what}; see the module docstring for the method)")
    def _ember(fw):
        step, reset = _mlp(fw, batch)
        return SelfTimed(lambda: _ember_peak(fw, step, reset))

    @_ember.override("torch")
    def _torch(fw):
        step, reset = _mlp(fw, batch)
        return SelfTimed(lambda: _torch_peak(fw, step, reset))


_peak_case(64, "the weights' gradients dominate")
_peak_case(512, "saved activations dominate")
