"""Shared pieces of the CUDA kernel emulations: launch geometry (cuda_context.h), strided
views of a flat buffer, shared memory that starts as NaN / garbage, and the comparison with
ember's CPU ops. Each kernel file has its own module (reduce_ops.py, sort_ops.py, ...)."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_site = os.path.join(ROOT, "build", "dev", "site")
# build/dev/site only when PYTHONPATH does not already give an ember (gpu_check sets its own).
if os.path.isdir(_site) and _site not in sys.path and importlib.util.find_spec("ember") is None:
    sys.path.insert(0, _site)

import ember  # noqa: E402

K_BLOCK = 256  # cuda::kBlockSize


def blocks_for(n, per_thread=1):
    """cuda::blocks_for: blocks of a grid-stride loop over n items, capped at 2^30."""
    b = (n + K_BLOCK * per_thread - 1) // (K_BLOCK * per_thread)
    return int(min(max(b, 1), 1 << 30))


def grid_stride(n, grid, block=K_BLOCK):
    """The items each (block, thread) of a 1-d grid-stride loop visits, as one array: every item
    exactly once (asserted), in the order thread-id-major of the first sweep."""
    total = grid * block
    items = np.arange(n, dtype=np.int64)
    owner = items % total
    assert np.all(np.bincount(owner, minlength=total)[: min(total, n)] >= 1)
    return items


def offset_of(sizes, strides, flat):
    """red::offset_of / ix::walk_offset: element offset of row-major flat indices (vectorized)."""
    flat = np.asarray(flat, dtype=np.int64)
    if len(sizes) == 0:
        return np.zeros_like(flat)
    off = np.zeros_like(flat)
    rem = flat.copy()
    for d in range(len(sizes) - 1, -1, -1):
        s = int(sizes[d])
        if s == 0:
            return off  # no element exists; callers never reach here with n > 0
        off += (rem % s) * int(strides[d])
        rem //= s
    return off


def nan_shared(n, dtype):
    """Shared memory before any write: NaN for floats, a garbage pattern for integers, so a read
    of an unwritten slot shows in the result."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(n, np.nan, dtype=dt)
    if dt.kind == "b":
        return np.ones(n, dtype=dt)
    return np.full(n, np.iinfo(dt).min + 123, dtype=dt)


def strided(base, offset, sizes, strides):
    """A numpy view of `base` (1-d) with element strides (any of them may be 0)."""
    it = base.itemsize
    return np.lib.stride_tricks.as_strided(
        base[offset:], shape=tuple(sizes), strides=tuple(s * it for s in strides))


def layouts(shape, rng):
    """(name, base, offset, sizes, strides) for several layouts of one logical shape: contiguous,
    dims reversed in memory (a transpose of the reversed shape), a slice with a step, and a
    broadcast (stride 0) dim when one has size > 1."""
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    out = []
    base = rng.standard_normal(n)
    cs = contig_strides(shape)
    out.append(("contiguous", base, 0, shape, cs))
    if len(shape) >= 2:
        rev = tuple(reversed(shape))
        rs = contig_strides(rev)
        out.append(("transposed", rng.standard_normal(n), 0, shape, tuple(reversed(rs))))
    if len(shape) >= 1:
        big = tuple(s * 2 if i == len(shape) - 1 else s for i, s in enumerate(shape))
        bs = contig_strides(big)
        nb = int(np.prod(big))
        st = list(bs)
        st[-1] = 2
        out.append(("step2", rng.standard_normal(max(nb, 1) + 1), 1, shape, tuple(st)))
    if len(shape) >= 2 and shape[0] > 1:
        inner = shape[1:]
        ns = contig_strides(inner)
        out.append(("expanded", rng.standard_normal(max(int(np.prod(inner)), 1)), 0, shape,
                    (0,) + tuple(ns)))
    return out


def contig_strides(shape):
    st = []
    acc = 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(st))


def to_ember(a):
    """A CPU ember tensor holding numpy array a (copied, contiguous)."""
    return ember.from_numpy(np.array(a, copy=True, order="C"))  # (ascontiguousarray makes 0-d 1-d)


def to_np(t):
    if t.dtype in (ember.float16,):
        return t.numpy()
    if t.dtype == ember.bfloat16:
        return t.float().numpy()
    return t.numpy()


class Report:
    """Counts checks; prints the failures (first few) and raises at the end if any."""

    def __init__(self, name):
        self.name = name
        self.checks = 0
        self.fails = []

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.fails.append(what)
            if len(self.fails) <= 20:
                print(f"  FAIL {self.name}: {what}")

    def close(self, extra=""):
        print(f"{self.name}: {self.checks} checks, {len(self.fails)} failures {extra}")
        return len(self.fails) == 0


def close(a, b, rtol, atol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
