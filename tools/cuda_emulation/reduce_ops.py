"""Emulation of packages/core/csrc/cuda/reduce_ops.cu (and reduce_utils.cuh): the reduction engine
(reduce::make_geometry, the thread / block / two-pass / contiguous / column paths (by 16-byte
packs or element by element, with race-checked shared memory) and their launch decisions), every
reducer (sum, nansum, mean, nanmean, prod, max/min/argmax/argmin/amax/amin, var/std/var_mean with
corrections, norms, all/any/count_nonzero) and the scans (cumsum, cumprod, cummax, cummin).

The kernels are transcribed per block and per thread: a block's 256 threads are a numpy axis,
the strided loads use the kernel's own offset arithmetic over a flat buffer, block_combine's
shared memory starts as NaN (garbage for integers) and its tree steps are the barriers. Results
are compared with ember's CPU ops on many shapes and layouts (contiguous, transposed, sliced
with a step, broadcast with stride 0).

    python3 tools/cuda_emulation/reduce_ops.py [--columns | --plant]
"""

from __future__ import annotations

import math
import sys

import numpy as np
from common import (
    K_BLOCK,
    Report,
    blocks_for,
    close,
    ember,
    layouts,
    nan_shared,
    offset_of,
    strided,
    to_ember,
)

# ---- reduce::make_geometry (kernels/reduce_rules.h) ---------------------------------------------


def coalesce(sizes, strides):
    s, t = [], []
    for n, st in zip(sizes, strides):
        if s and t[-1] == st * n:
            s[-1] *= n
            t[-1] = st
        else:
            s.append(n)
            t.append(st)
    return s, t


def make_geometry(sizes, strides, mask, ordered):
    ks, kt, rs, rt = [], [], [], []
    nout = nred = 1
    for n, st, m in zip(sizes, strides, mask):
        if m:
            nred *= n
        else:
            nout *= n
        if n == 1:
            continue
        (rs if m else ks).append(n)
        (rt if m else kt).append(st)
    if not ordered and len(rs) > 1:
        pairs = sorted(zip(rt, rs), key=lambda p: -p[0])  # stable: Python's sort is stable
        rt = [p[0] for p in pairs]
        rs = [p[1] for p in pairs]
    ks, kt = coalesce(ks, kt)
    rs, rt = coalesce(rs, rt)
    return dict(ks=ks, kt=kt, rs=rs, rt=rt, nout=nout, nred=nred)


# ---- loads ---------------------------------------------------------------------------------------


def opmath(dtype):
    dt = np.dtype(dtype)
    if dt == np.float16:
        return np.float32
    return dt.type


def ld(x):
    """red::ld: the compute type (float for half; bool bytes as 0/1)."""
    if x.dtype == np.float16:
        return x.astype(np.float32)
    return x


# ---- reducers (vectorized over lanes; `act` masks the lanes that step) ---------------------------


WIDE_UINTS = (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


def sum_acc(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.float32 if dt == np.float16 else np.float64
    return np.uint64 if dt in WIDE_UINTS else np.int64  # (uint64 wraps to int64's bits)


class SumR:
    def __init__(self, dtype, mode="sum", div=1.0):
        self.T = np.dtype(dtype)
        self.A = sum_acc(dtype)
        self.mode = mode
        self.div = div

    def identity(self, shape):
        return [np.full(shape, 1 if self.mode == "prod" else 0, dtype=self.A)]

    def step(self, a, x, j, act):
        v = x.astype(self.A)
        if self.mode == "prod":
            a[0] = np.where(act, a[0] * v, a[0])
        else:
            if self.mode == "nansum" and self.T.kind == "f":
                v = np.where(np.isnan(v), self.A(0), v)
            a[0] = np.where(act, a[0] + v, a[0])

    def combine(self, a, b):
        return [a[0] * b[0] if self.mode == "prod" else a[0] + b[0]]

    def write(self, a):
        if self.T.kind == "f":
            v = a[0] if self.div == 1.0 else (a[0].astype(np.float64) / self.div).astype(self.A)
            return v.astype(np.float32).astype(self.T) if self.T == np.float16 else v.astype(self.T)
        return a[0].astype(np.int64)


class NanMeanR:
    def __init__(self, dtype):
        self.T = np.dtype(dtype)
        self.A = sum_acc(dtype)

    def identity(self, shape):
        return [np.zeros(shape, self.A), np.zeros(shape, np.int64)]

    def step(self, a, x, j, act):
        ok = act & ~np.isnan(x)
        a[0] = np.where(ok, a[0] + x.astype(self.A), a[0])
        a[1] = np.where(ok, a[1] + 1, a[1])

    def combine(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]

    def write(self, a):
        with np.errstate(invalid="ignore", divide="ignore"):
            return (a[0].astype(np.float64) / a[1].astype(np.float64)).astype(self.T)


class ExtR:
    def __init__(self, dtype, is_max):
        self.T = np.dtype(dtype)
        self.V = opmath(dtype)
        self.is_max = is_max

    def identity(self, shape):
        return [np.zeros(shape, self.V), np.full(shape, -1, np.int64)]

    def beats(self, x, ix, c, ic):
        if np.dtype(self.V).kind == "f":
            xn, cn = np.isnan(x), np.isnan(c)
        else:
            xn = cn = np.zeros(np.shape(x), bool)
        nanres = xn & (~cn | (ix < ic))
        cmp = (x > c) if self.is_max else (x < c)
        return np.where(xn | cn, nanres, np.where(x == c, ix < ic, cmp))

    def step(self, a, x, j, act):
        take = act & ((a[1] < 0) | self.beats(x, j, a[0], a[1]))
        a[0] = np.where(take, x, a[0])
        a[1] = np.where(take, j, a[1])

    def combine(self, a, b):
        a_empty, b_empty = a[1] < 0, b[1] < 0
        pick_b = np.where(a_empty, True, np.where(b_empty, False,
                                                  self.beats(b[0], b[1], a[0], a[1])))
        return [np.where(pick_b, b[0], a[0]), np.where(pick_b, b[1], a[1])]

    def write(self, a):
        return a[0].astype(self.T), a[1]


class VarR:
    def __init__(self, dtype, correction, take_sqrt):
        self.T = np.dtype(dtype)
        self.correction = correction
        self.take_sqrt = take_sqrt

    def identity(self, shape):
        return [np.zeros(shape), np.zeros(shape), np.zeros(shape)]

    def step(self, a, x, j, act):
        v = x.astype(np.float64)
        n = np.where(act, a[0] + 1, a[0])
        with np.errstate(invalid="ignore", divide="ignore"):
            d = v - a[1]
            mean = np.where(act, a[1] + d / np.where(act, n, 1), a[1])
            m2 = np.where(act, a[2] + d * (v - mean), a[2])
        a[0], a[1], a[2] = n, mean, m2

    def combine(self, a, b):
        with np.errstate(invalid="ignore", divide="ignore"):
            n = a[0] + b[0]
            d = b[1] - a[1]
            mean = a[1] + d * (b[0] / n)
            m2 = a[2] + b[2] + d * d * (a[0] * b[0] / n)
        mean = np.where(a[0] == 0, b[1], np.where(b[0] == 0, a[1], mean))
        m2 = np.where(a[0] == 0, b[2], np.where(b[0] == 0, a[2], m2))
        n = np.where(a[0] == 0, b[0], np.where(b[0] == 0, a[0], n))
        return [n, mean, m2]

    def write(self, a):
        with np.errstate(invalid="ignore", divide="ignore"):
            var = a[2] / np.fmax(0.0, a[0] - self.correction)
            out = np.sqrt(var) if self.take_sqrt else var
        mean = np.where(a[0] == 0, np.nan, a[1])
        return out.astype(self.T), mean.astype(self.T)


class NormR:
    def __init__(self, dtype, p):
        self.T = np.dtype(dtype)
        self.p = p
        if p == 2:
            self.kind = "two"
        elif p == 1:
            self.kind = "one"
        elif p == math.inf:
            self.kind = "inf"
        elif p == -math.inf:
            self.kind = "neginf"
        elif p == 0:
            self.kind = "zero"
        else:
            self.kind = "p"

    def identity(self, shape):
        return [np.full(shape, np.inf if self.kind == "neginf" else 0.0)]

    @staticmethod
    def pick(is_max, a, x):
        better = (x > a) if is_max else (x < a)
        return np.where(better | np.isnan(x), x, a)

    def step(self, a, x, j, act):
        v = np.abs(x.astype(np.float64))
        k = self.kind
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if k == "two":
                r = a[0] + v * v
            elif k == "one":
                r = a[0] + v
            elif k == "inf":
                r = self.pick(True, a[0], v)
            elif k == "neginf":
                r = self.pick(False, a[0], v)
            elif k == "zero":
                r = a[0] + (v != 0)
            else:
                r = a[0] + np.power(v, self.p)
        a[0] = np.where(act, r, a[0])

    def combine(self, a, b):
        if self.kind == "inf":
            return [self.pick(True, a[0], b[0])]
        if self.kind == "neginf":
            return [self.pick(False, a[0], b[0])]
        return [a[0] + b[0]]

    def write(self, a):
        v = a[0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.kind == "two":
                v = np.sqrt(v)
            if self.kind == "p":
                v = np.power(v, 1.0 / self.p)
        return v.astype(self.T)


class NonzeroR:
    def __init__(self, mode, nred, out_dtype):
        self.mode = mode
        self.nred = nred
        self.out_dtype = out_dtype

    def identity(self, shape):
        return [np.zeros(shape, np.int64)]

    def step(self, a, x, j, act):
        a[0] = np.where(act, a[0] + (x != 0), a[0])

    def combine(self, a, b):
        return [a[0] + b[0]]

    def write(self, a):
        if self.mode == "count":
            return a[0]
        r = (a[0] == self.nred) if self.mode == "all" else (a[0] > 0)
        return r.astype(self.out_dtype)


# ---- the engine ----------------------------------------------------------------------------------


K_WARP = 32
K_ACCS = 4     # reduce_contig_kernel: accumulators per thread
K_UNROLL = 4   # reduce_contig_kernel: packs per thread per iteration
SMS = 132      # the SM count the launch geometry uses (H100 SXM / H200); main() also tries others


def shuffles(acc):
    """shuffles_v<Acc>: one plain arithmetic accumulator (sum, norm, count) moves through warp
    shuffles; struct accumulators (argmax, nanmean, Welford) through the shared-memory tree."""
    return len(acc) == 1


def warp_combine(acc, r):
    """warp_combine on (rows, warps, 32) lanes: __shfl_down_sync(acc, s) gives lane l the value of
    lane l + s, or its own when l + s >= 32; only lane 0's result is used."""
    lanes = np.arange(K_WARP)
    s = K_WARP // 2
    while s > 0:
        src = np.where(lanes + s < K_WARP, lanes + s, lanes)
        acc = r.combine(acc, [c[..., src] for c in acc])
        s >>= 1
    return acc


def block_combine(acc, r):
    """block_combine. Shuffles: each warp's lane 0 writes warp_acc[warp] (NaN / garbage before),
    barrier, warp 0 reads lanes < 8 (identity above) and shuffles again: thread 0's result.
    Tree: shared memory (NaN / garbage first), one write per thread, __syncthreads, then the
    tree; each step reads only slots written before the previous barrier."""
    rows = acc[0].shape[0]
    if shuffles(acc):
        nw = K_BLOCK // K_WARP
        w = warp_combine([c.reshape(rows, nw, K_WARP) for c in acc], r)
        warp_acc = [nan_shared(rows * nw, c.dtype).reshape(rows, nw) for c in acc]
        for sh, c in zip(warp_acc, w):
            sh[:, :] = c[:, :, 0]  # lane 0 of each warp; __syncthreads()
        ident = r.identity((rows, K_WARP))
        lanes = np.arange(K_WARP)
        first = [np.where(lanes[None, :] < nw, np.pad(sh, ((0, 0), (0, K_WARP - nw))), i)
                 for sh, i in zip(warp_acc, ident)]
        first = [f.astype(i.dtype) for f, i in zip(first, ident)]
        res = warp_combine(first, r)
        return [c[:, 0].copy() for c in res]
    sh = []
    for comp in acc:
        s = nan_shared(rows * K_BLOCK, comp.dtype).reshape(rows, K_BLOCK)
        s[:, :] = comp  # sh[threadIdx.x] = acc; __syncthreads()
        sh.append(s)
    s = K_BLOCK // 2
    while s > 0:
        lo = [c[:, :s].copy() for c in sh]
        hi = [c[:, s:2 * s].copy() for c in sh]
        new = r.combine(lo, hi)
        for c, v in zip(sh, new):
            c[:, :s] = v
        s >>= 1  # __syncthreads()
    return [c[:, 0].copy() for c in sh]


def split_reduction(nout, nred, sms):
    """split_reduction: chunks per output (about four waves of 8 blocks per SM), chunk a multiple
    of 64 elements when split."""
    k_min_chunk, align = 8192, 64
    target = 32 * sms
    nchunks = 1
    if nout < target:
        nchunks = max(1, min((nred + k_min_chunk - 1) // k_min_chunk, target // nout))
    chunk = (nred + nchunks - 1) // nchunks
    if nchunks > 1:
        chunk = (chunk + align - 1) // align * align
        nchunks = (nred + chunk - 1) // chunk
    return nchunks, chunk


def contig_items(base, rowstart, lo, hi, r):
    """reduce_contig_kernel's per-thread accumulators (kAccs lists of (items, 256)) over the
    contiguous runs base[rowstart + j], j in [lo, hi) of each item (step_run: head, tail, packs),
    with the kernel's own alignment arithmetic (the buffer's element 0 is 16-byte aligned) and a
    check that each element of each item is stepped exactly once, with its own j."""
    isz = base.itemsize
    kn = 16 // isz
    nitems = lo.size
    t = np.arange(K_BLOCK, dtype=np.int64)
    accs = [r.identity((nitems, K_BLOCK)) for _ in range(K_ACCS)]
    width = int(np.max(hi - lo)) if nitems else 0
    hits = np.zeros((nitems, max(width, 1)), np.int64)

    def step(a, j, act):
        jj = np.where(act, j, 0)
        x = ld(base[rowstart[:, None] + jj])
        r.step(accs[a], x, jj, act)
        rows = np.nonzero(act)[0]
        np.add.at(hits, (rows, (j - lo[:, None])[act]), 1)

    nonempty = hi > lo
    addr = (rowstart + lo) * isz
    head = np.where(nonempty, np.minimum(hi - lo, ((16 - addr % 16) % 16) // isz), 0)
    start = lo + head
    npacks = np.where(nonempty, (hi - start) // kn, 0)
    tail = start + npacks * kn
    assert np.all(((rowstart + start) * isz % 16 == 0) | (npacks == 0)), "pack unaligned"
    assert np.all(np.where(nonempty, hi - tail, 0) < kn) and np.all(head < kn)
    step(0, lo[:, None] + t[None, :], t[None, :] < head[:, None])
    step(1, tail[:, None] + t[None, :], (t[None, :] < (hi - tail)[:, None]) & nonempty[:, None])
    maxp = int(np.max(npacks)) if nitems else 0
    for k0 in range(0, maxp, K_BLOCK * K_UNROLL):
        for u in range(K_UNROLL):
            k = (k0 + u * K_BLOCK + t)[None, :]
            act = k < npacks[:, None]
            for e in range(kn):
                step((u * kn + e) % K_ACCS, start[:, None] + k * kn + e, act)
    for i in range(nitems):
        n = int(hi[i] - lo[i])
        assert np.all(hits[i, :n] == 1) and np.all(hits[i, n:] == 0), f"coverage of item {i}"
    return accs


# ---- column reductions ---------------------------------------------------------------------------

K_COL_LANES = K_WARP                # reduce_column_packs_kernel: packs per tile (a warp's lanes)
K_COL_ROWS = K_BLOCK // K_COL_LANES  # row slices (the block's warps)
K_COL_UNROLL = 4                    # rows a thread loads before stepping them
COL_PER_SM = 4  # split_column_packs' per_sm: the occupancy API's resident blocks (64 registers)
PLANT = set()                       # --plant: bugs planted into the transcriptions below


class RaceError(AssertionError):
    pass


class TrackedShared:
    """A block's __shared__ array per item (items x slots), NaN / garbage at first, that checks
    every access against the barrier intervals: reading a slot nobody wrote, reading a slot
    another thread wrote in the current interval, writing a slot another thread wrote or read in
    the current interval, or two threads writing one slot in one access all raise."""

    def __init__(self, items, slots, dtype, name):
        self.v = nan_shared(items * slots, dtype).reshape(items, slots)
        self.w_ep = np.full((items, slots), -1, np.int64)
        self.w_th = np.full((items, slots), -1, np.int64)
        self.r_ep = np.full((items, slots), -1, np.int64)
        self.r_th = np.full((items, slots), -1, np.int64)
        self.ep = 0
        self.name = name
        self.slots = slots

    def sync(self):
        self.ep += 1

    def _where(self, slot, thread, act):
        items = np.broadcast_to(np.arange(self.v.shape[0]).reshape((-1,) + (1,) * (slot.ndim - 1)),
                                slot.shape)
        i, sl, th = items[act], slot[act], np.broadcast_to(thread, slot.shape)[act]
        if sl.size and (sl.min() < 0 or sl.max() >= self.slots):
            raise RaceError(f"{self.name}: slot out of bounds")
        return i, sl, th

    def write(self, slot, thread, val, act):
        i, sl, th = self._where(slot, thread, act)
        key = i * self.slots + sl
        if np.unique(key).size != key.size:
            raise RaceError(f"{self.name}: two threads write one slot in one access")
        if np.any((self.w_ep[i, sl] == self.ep) & (self.w_th[i, sl] != th)):
            raise RaceError(f"{self.name}: write after another thread's write, no barrier")
        if np.any((self.r_ep[i, sl] == self.ep) & (self.r_th[i, sl] != th)):
            raise RaceError(f"{self.name}: write after another thread's read, no barrier")
        self.v[i, sl] = np.broadcast_to(val, slot.shape)[act]
        self.w_ep[i, sl] = self.ep
        self.w_th[i, sl] = th

    def read(self, slot, thread, act):
        """The values at slot (where act; anything elsewhere)."""
        i, sl, th = self._where(slot, thread, act)
        if np.any(self.w_ep[i, sl] < 0):
            raise RaceError(f"{self.name}: read of a slot never written")
        if np.any((self.w_ep[i, sl] == self.ep) & (self.w_th[i, sl] != th)):
            raise RaceError(f"{self.name}: read of another thread's write, no barrier")
        self.r_ep[i, sl] = self.ep
        self.r_th[i, sl] = th
        out = np.zeros(slot.shape, self.v.dtype)
        out[act] = self.v[i, sl]
        return out


def combine_slices(acc, r, kn):
    """combine_slices<kN>: acc[e] (kN reducer states, each a list of (items, kColRows, kColLanes)
    arrays) combined over the slices by the halving tree in shared memory laid out
    [slice][e][lane]; returns slice 0's totals, acc[e] as (items, kColLanes) arrays."""
    items = acc[0][0].shape[0]
    slice_ = np.arange(K_COL_ROWS).reshape(1, -1, 1)
    lane = np.arange(K_COL_LANES).reshape(1, 1, -1)
    thread = slice_ * K_COL_LANES + lane
    shape = (items, K_COL_ROWS, K_COL_LANES)
    slots = (K_COL_ROWS // 2) * kn * K_COL_LANES
    sh = [TrackedShared(items, slots, comp.dtype, f"combine_slices[{k}]")
          for k, comp in enumerate(acc[0])]
    h = K_COL_ROWS // 2
    while h > 0:
        wr = np.broadcast_to((slice_ >= h) & (slice_ < 2 * h), shape)
        for e in range(kn):
            slot = np.broadcast_to(((slice_ - h) * kn + e) * K_COL_LANES + lane, shape)
            for s_, comp in zip(sh, acc[e]):
                s_.write(np.where(wr, slot, 0), thread, comp, wr)
        if "no_tree_sync" not in PLANT:
            for s_ in sh:
                s_.sync()
        rd = np.broadcast_to(slice_ < h, shape)
        for e in range(kn):
            slot = np.broadcast_to((slice_ * kn + e) * K_COL_LANES + lane, shape)
            other = [s_.read(np.where(rd, slot, 0), thread, rd) for s_ in sh]
            comb = r.combine(acc[e], other)
            acc[e] = [np.where(rd, c, a) for c, a in zip(comb, acc[e])]
        for s_ in sh:
            s_.sync()
        h //= 2
    return [[c[:, 0, :] for c in a] for a in acc]


def split_columns(nout, nred, sms):
    """split_columns (the element-wise column kernel): tiles of 32 outputs, chunks of at least
    256 rows when the tiles are fewer than 32 blocks per SM."""
    k_min_rows = 256
    ntiles = (nout + K_WARP - 1) // K_WARP
    target = 32 * sms
    nchunks = 1
    if ntiles < target:
        nchunks = max(1, min((nred + k_min_rows - 1) // k_min_rows, (target + ntiles - 1) // ntiles))
    chunk = (nred + nchunks - 1) // nchunks
    nchunks = (nred + chunk - 1) // chunk
    return nchunks, chunk, ntiles


def split_column_packs(npacks, nred, sms, per_sm):
    k_min_rows = K_COL_ROWS * K_COL_UNROLL * 4
    ntiles = (npacks + K_COL_LANES - 1) // K_COL_LANES
    target = max(per_sm, 1) * sms
    nchunks = 1
    if ntiles < target:
        nchunks = max(1, min((nred + k_min_rows - 1) // k_min_rows, (target + ntiles - 1) // ntiles))
    chunk = (nred + nchunks - 1) // nchunks
    nchunks = (nred + chunk - 1) // chunk
    return nchunks, chunk, ntiles


def columns_by_packs(offset, isz, g):
    """columns_by_packs: the base 16-byte aligned (the emulated buffer's element 0 is), the
    innermost kept size and every other stride a multiple of a pack, half a warp of packs."""
    kn = 16 // isz
    if (offset * isz) % 16 != 0 or g["ks"][-1] % kn != 0:
        return False
    if any(st % kn != 0 for st in g["kt"][:-1]) or any(st % kn != 0 for st in g["rt"]):
        return False
    return g["nout"] // kn >= K_COL_LANES // 2


def stepped_rows(r, acc, load, j0, hi, act, stride, unroll, hits_fn):
    """A thread's row loop of the column kernels: `for (; j + (U-1)*S < hi; j += U*S)` loading
    U rows (load(j) -> kN values) then stepping them in order, then `for (; j < hi; j += S)`;
    vectorized over threads (the loops are per thread: masks)."""
    j = j0.copy()
    while True:
        cond = act & (j + (unroll - 1) * stride < hi)
        if not cond.any():
            break
        bufs = [load(j + u * stride, cond) for u in range(unroll)]
        for u in range(unroll):
            jj = j + u * stride
            for e, x in enumerate(bufs[u]):
                r.step(acc[e], x, jj, cond)
                hits_fn(e, jj, cond)
        j = np.where(cond, j + unroll * stride, j)
    while True:
        cond = act & (j < hi)
        if "tail_skips_last" in PLANT:
            cond = act & (j + stride < hi)
        if not cond.any():
            break
        vals = load(j, cond)
        for e, x in enumerate(vals):
            r.step(acc[e], x, j, cond)
            hits_fn(e, j, cond)
        j = np.where(cond, j + stride, j)


class WriteOnce:
    """An output array (per reducer component) whose every element must be written once."""

    def __init__(self, n, comps, name):
        self.vals = [nan_shared(n, c.dtype) for c in comps]
        self.count = np.zeros(n, np.int64)
        self.name = name

    def write(self, idx, comps, act):
        i = idx[act]
        np.add.at(self.count, i, 1)
        for v, c in zip(self.vals, comps):
            v[i] = c[act]

    def check(self):
        if not np.all(self.count == 1):
            raise AssertionError(f"{self.name}: outputs written {set(self.count.tolist())} times")
        return self.vals


def column_packs(base, offset, g, r, sms, stats):
    """reduce_column_packs_kernel (+ reduce_column_partials_kernel): the per-output states."""
    ks, kt, rs, rt = g["ks"], g["kt"], g["rs"], g["rt"]
    nout, nred = g["nout"], g["nred"]
    isz = base.itemsize
    kn = 16 // isz
    npacks = nout // kn
    nchunks, chunk, ntiles = split_column_packs(npacks, nred, sms, COL_PER_SM)
    grid = min(ntiles * nchunks, 1 << 20)
    assert 1 <= grid <= (1 << 31) - 1
    if stats is not None:
        stats.add("column packs" if nchunks == 1 else "column packs two-pass")
    b = np.arange(ntiles * nchunks, dtype=np.int64)  # the grid-stride items, one block each
    lane = np.arange(K_COL_LANES).reshape(1, 1, -1)
    slice_ = np.arange(K_COL_ROWS).reshape(1, -1, 1)
    shape = (b.size, K_COL_ROWS, K_COL_LANES)
    pk = np.broadcast_to((b // nchunks).reshape(-1, 1, 1) * K_COL_LANES + lane, shape)
    c = np.broadcast_to((b % nchunks).reshape(-1, 1, 1), shape)
    ok = pk < npacks
    acc = [r.identity(shape) for _ in range(kn)]
    rowbase = offset + offset_of(ks, kt, np.where(ok, pk, 0) * kn)  # element index of the pack
    hi = np.minimum(nred, (c + 1) * chunk)
    hits = np.zeros((nout, max(nred, 1)), np.int64)

    def load(j, act):
        jj = np.where(act, j, 0)
        addr = rowbase + offset_of(rs, rt, jj)
        if np.any((addr[act] * isz) % 16 != 0):
            raise AssertionError("reduce_column_packs_kernel: unaligned pack load")
        if np.any(addr[act] < 0) or np.any(addr[act] + kn > base.size):
            raise AssertionError("reduce_column_packs_kernel: pack out of bounds")
        a = np.where(act, addr, 0)
        return [ld(base[np.minimum(a + e, base.size - 1)]) for e in range(kn)]

    def hit(e, j, act):
        np.add.at(hits, ((pk * kn + e)[act], j[act]), 1)

    j0 = c * chunk + slice_
    if "chunk_starts_early" in PLANT:  # a chunk re-reads its predecessor's last slice of rows
        j0 = np.maximum(j0 - K_COL_ROWS, 0)
    stepped_rows(r, acc, load, j0, hi, ok, K_COL_ROWS, K_COL_UNROLL, hit)
    if not np.all(hits[:, :nred] == 1):
        raise AssertionError(f"reduce_column_packs_kernel: elements stepped {set(hits.ravel().tolist())} times")
    tot = combine_slices(acc, r, kn)  # kn states of (items, lanes)
    pk0, c0 = pk[:, 0, :], c[:, 0, :]
    act0 = pk0 < npacks
    if nchunks == 1:
        out = WriteOnce(nout, tot[0], "reduce_column_packs_kernel outputs")
        for e in range(kn):
            out.write(pk0 * kn + e, tot[e], act0)
        return out.check()
    parts = WriteOnce(nchunks * nout, tot[0], "reduce_column_packs_kernel partials")
    for e in range(kn):
        if "partials_transposed" in PLANT:  # written (output, chunk)-major, read chunk-major
            parts.write((pk0 * kn + e) * nchunks + c0, tot[e], act0)
        else:
            parts.write(c0 * nout + pk0 * kn + e, tot[e], act0)
    pv = parts.check()
    # reduce_column_partials_kernel: tiles of 32 outputs x 8 chunk slices
    ntiles2 = (nout + K_COL_LANES - 1) // K_COL_LANES
    t = np.arange(ntiles2, dtype=np.int64)
    shape2 = (t.size, K_COL_ROWS, K_COL_LANES)
    o = np.broadcast_to(t.reshape(-1, 1, 1) * K_COL_LANES + lane, shape2)
    ok2 = o < nout
    acc2 = [r.identity(shape2)]
    seen = np.zeros((nchunks, nout), np.int64)

    def load2(cc, act):
        idx = np.where(act, cc * nout + o, 0)
        if np.any(cc[act] >= nchunks):
            raise AssertionError("reduce_column_partials_kernel: partial out of bounds")
        np.add.at(seen, (cc[act], o[act]), 1)
        return [[p[idx] for p in pv]]

    class Comb:  # the second pass combines partial states instead of stepping elements
        def step(self, a, x, j, act):
            comb = r.combine(a, x)
            a[:] = [np.where(act, n, v) for n, v in zip(comb, a)]

    stepped_rows(Comb(), acc2, load2, np.broadcast_to(slice_, shape2).astype(np.int64),
                 np.full(shape2, nchunks, np.int64), ok2, K_COL_ROWS, K_COL_UNROLL,
                 lambda e, j, act: None)
    if not np.all(seen == 1):
        raise AssertionError("reduce_column_partials_kernel: partials not combined once each")
    tot2 = combine_slices(acc2, r, 1)
    out = WriteOnce(nout, tot2[0], "reduce_column_partials_kernel outputs")
    out.write(o[:, 0, :], tot2[0], ok2[:, 0, :])
    return out.check()


def column_elements(base, offset, g, r, sms, stats):
    """reduce_columns_kernel (element by element) + reduce_partials_kernel."""
    ks, kt, rs, rt = g["ks"], g["kt"], g["rs"], g["rt"]
    nout, nred = g["nout"], g["nred"]
    nchunks, chunk, ntiles = split_columns(nout, nred, sms)
    if stats is not None:
        stats.add("columns" if nchunks == 1 else "columns two-pass")
    b = np.arange(ntiles * nchunks, dtype=np.int64)
    lane = np.arange(K_WARP).reshape(1, 1, -1)
    slice_ = np.arange(K_BLOCK // K_WARP).reshape(1, -1, 1)
    shape = (b.size, K_BLOCK // K_WARP, K_WARP)
    o = np.broadcast_to((b // nchunks).reshape(-1, 1, 1) * K_WARP + lane, shape)
    c = np.broadcast_to((b % nchunks).reshape(-1, 1, 1), shape)
    ok = o < nout
    acc = [r.identity(shape)]
    rowbase = offset + offset_of(ks, kt, np.where(ok, o, 0))
    hits = np.zeros((nout, max(nred, 1)), np.int64)

    def load(j, act):
        jj = np.where(act, j, 0)
        return [ld(base[rowbase + offset_of(rs, rt, jj)])]

    def hit(e, j, act):
        np.add.at(hits, (o[act], j[act]), 1)

    stepped_rows(r, acc, load, c * chunk + slice_, np.minimum(nred, (c + 1) * chunk), ok,
                 K_BLOCK // K_WARP, 4, hit)
    if not np.all(hits[:, :nred] == 1):
        raise AssertionError("reduce_columns_kernel: elements not stepped once")
    # sh[threadIdx.x] = acc; __syncthreads(); slice 0 combines slices 1..7 of its lane
    thread = slice_ * K_WARP + lane
    sh = [TrackedShared(b.size, K_BLOCK, comp.dtype, "reduce_columns_kernel sh") for comp in acc[0]]
    for s_, comp in zip(sh, acc[0]):
        s_.write(np.broadcast_to(thread, shape), thread, comp, np.ones(shape, bool))
        s_.sync()
    a0 = [comp[:, 0, :] for comp in acc[0]]
    l0 = np.broadcast_to(np.arange(K_WARP).reshape(1, -1), (b.size, K_WARP))
    ok0 = ok[:, 0, :]
    for k in range(1, K_BLOCK // K_WARP):
        other = [s_.read(k * K_WARP + l0, l0, ok0) for s_ in sh]
        comb = r.combine(a0, other)
        a0 = [np.where(ok0, n, v) for n, v in zip(comb, a0)]
    o0, c0 = o[:, 0, :], c[:, 0, :]
    if nchunks == 1:
        out = WriteOnce(nout, a0, "reduce_columns_kernel outputs")
        out.write(o0, a0, ok0)
        return out.check()
    parts = WriteOnce(nout * nchunks, a0, "reduce_columns_kernel partials")
    parts.write(o0 * nchunks + c0, a0, ok0)
    pv = parts.check()
    return partials_pass([p.reshape(nout, nchunks) for p in pv], nout, nchunks, r)


def partials_pass(parts, nout, nchunks, r):
    """reduce_partials_kernel: block o, thread t combines partials t, t+256, ... of output o."""
    t = np.arange(K_BLOCK, dtype=np.int64)
    acc2 = r.identity((nout, K_BLOCK))
    for k in range((nchunks + K_BLOCK - 1) // K_BLOCK):
        cc = t + K_BLOCK * k
        act = cc < nchunks
        ccs = np.where(act, cc, 0)
        comb = r.combine(acc2, [p[:, ccs] for p in parts])
        acc2 = [np.where(act[None, :], n, a) for n, a in zip(comb, acc2)]
    return block_combine(acc2, r)


def run_reduction(base, offset, sizes, strides, mask, r, ordered, stats=None, sms=None):
    """run_reduction: returns the reducer's accumulators per output (row-major over kept dims),
    or None when there are no outputs."""
    g = make_geometry(sizes, strides, mask, ordered)
    nout, nred = g["nout"], g["nred"]
    if nout == 0:
        return None
    ks, kt, rs, rt = g["ks"], g["kt"], g["rs"], g["rt"]
    columns = len(ks) > 0 and kt[-1] == 1 and len(rs) > 0 and rt[-1] != 1
    kbase = offset + offset_of(ks, kt, np.arange(nout))
    if nred <= 32:
        if stats is not None:
            stats.add("thread")
        # reduce_thread_kernel: one thread per output (grid-stride), j = 0 .. nred-1 in order.
        acc = r.identity((nout,))
        act = np.ones(nout, bool)
        for j in range(nred):
            x = ld(base[kbase + offset_of(rs, rt, np.int64(j))])
            r.step(acc, x, np.full(nout, j, np.int64), act)
        return acc
    sms = SMS if sms is None else sms
    if columns and columns_by_packs(offset, base.itemsize, g):
        return column_packs(base, offset, g, r, sms, stats)
    if columns and nout >= K_WARP // 2:
        return column_elements(base, offset, g, r, sms, stats)
    nchunks, chunk = split_reduction(nout, nred, sms)
    nitems = nout * nchunks
    grid = min(nitems, 1 << 20)
    assert grid >= 1
    b = np.arange(nitems, dtype=np.int64)
    o, c = b // nchunks, b % nchunks
    lo = c * chunk
    hi = np.minimum(nred, lo + chunk)
    if len(rs) == 1 and rt[0] == 1:
        if stats is not None:
            stats.add("contig" if nchunks == 1 else "contig two-pass")
        # reduce_contig_kernel: block b = (output o, chunk c), row start offset_of(kept, o).
        a = contig_items(base, kbase[o], lo, hi, r)
        acc = r.combine(r.combine(a[0], a[1]), r.combine(a[2], a[3]))
    else:
        if stats is not None:
            stats.add("block" if nchunks == 1 else "two-pass")
        # reduce_block_kernel: thread t steps j = lo + t, lo + t + 256, ... < hi.
        t = np.arange(K_BLOCK, dtype=np.int64)
        acc = r.identity((nitems, K_BLOCK))
        steps = (chunk + K_BLOCK - 1) // K_BLOCK
        ib = kbase[o]
        for k in range(steps):
            j = lo[:, None] + t[None, :] + K_BLOCK * k
            act = j < hi[:, None]
            jj = np.where(act, j, 0)
            x = ld(base[ib[:, None] + offset_of(rs, rt, jj)])
            r.step(acc, x, jj, act)
    acc = block_combine(acc, r)
    if nchunks == 1:
        return acc
    # partials[b] then reduce_partials_kernel
    return partials_pass([a.reshape(nout, nchunks) for a in acc], nout, nchunks, r)


class Stats:
    def __init__(self):
        self.paths = {}

    def add(self, p):
        self.paths[p] = self.paths.get(p, 0) + 1


# ---- op bodies (the host code of reduce_ops.cu) ---------------------------------------------------


def reduced_shape(sizes, mask, keepdim):
    return tuple(1 if m else s for s, m in zip(sizes, mask) if keepdim or not m)


def dim_mask(ndim, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return [True] * ndim
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    m = [False] * ndim
    for d in dims:
        if ndim:
            m[d % ndim] = True
    return m


def emulate(op, base, offset, sizes, strides, dim, keepdim=False, stats=None, **kw):
    """The CUDA op's result(s) as numpy arrays."""
    T = base.dtype
    mask = dim_mask(len(sizes), dim)
    shape = reduced_shape(sizes, mask, keepdim)
    nred = int(np.prod([s for s, m in zip(sizes, mask) if m])) if any(mask) else 1
    if op in ("sum", "nansum", "prod", "mean"):
        r = SumR(T, {"mean": "sum"}.get(op, op), float(nred) if op == "mean" else 1.0)
        out_dt = T if T.kind == "f" else np.int64
    elif op == "nanmean":
        r = NanMeanR(T)
        out_dt = T
    elif op in ("amax", "amin", "max", "min", "argmax", "argmin"):
        r = ExtR(T, op in ("amax", "max", "argmax"))
        out_dt = None
    elif op in ("var", "std", "var_mean"):
        r = VarR(T, kw.get("correction", 1), op == "std")
        out_dt = T
    elif op == "norm":
        r = NormR(T, kw["p"])
        out_dt = T
    elif op in ("all", "any", "count_nonzero"):
        out_dt = np.int64 if op == "count_nonzero" else (np.uint8 if T == np.uint8 else np.bool_)
        r = NonzeroR({"count_nonzero": "count"}.get(op, op), nred, out_dt)
        if op == "count_nonzero":
            shape = reduced_shape(sizes, mask, False)
    else:
        raise ValueError(op)
    acc = run_reduction(base, offset, sizes, strides, mask, r,
                        op in ("max", "min", "argmax", "argmin", "amax", "amin"), stats)
    nout = int(np.prod(shape)) if shape else 1
    if acc is None:
        if isinstance(r, (ExtR, VarR)):
            return (np.zeros(shape, T), np.zeros(shape, np.int64 if isinstance(r, ExtR) else T))
        return np.zeros(shape, out_dt)
    w = r.write(acc)
    if isinstance(w, tuple):
        return tuple(x.reshape(shape) for x in w)
    assert w.size == nout
    return w.reshape(shape)


def cpu(op, x, dim, keepdim=False, **kw):
    """ember's CPU op."""
    if op == "norm":
        return ember.linalg.vector_norm(x, ord=kw["p"], dim=dim, keepdim=keepdim)
    if op in ("var", "std"):
        return getattr(x, op)(dim=dim, keepdim=keepdim, correction=kw.get("correction", 1))
    if op == "var_mean":
        return ember.var_mean(x, dim=dim, keepdim=keepdim, correction=kw.get("correction", 1))
    if op in ("max", "min"):
        return getattr(x, op)(dim=dim, keepdim=keepdim)
    if op in ("argmax", "argmin"):
        return getattr(x, op)(dim=dim, keepdim=keepdim)
    if op == "count_nonzero":
        return x.count_nonzero(dim=dim)
    if op in ("amax", "amin"):
        return getattr(x, op)(dim=() if dim is None else dim, keepdim=keepdim)
    if dim is None:
        return getattr(x, op)() if not keepdim else getattr(x, op)(dim=None, keepdim=True)
    return getattr(x, op)(dim=dim, keepdim=keepdim)


def as_list(r):
    if isinstance(r, (tuple, list)):
        return [t for t in r]
    return [r]


def make_base(n, dtype, rng, nan_frac=0.0, ties=False):
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, n).astype(np.bool_)
    if np.dtype(dtype) in WIDE_UINTS:  # small values and values near the top (sums wrap)
        top = np.array(np.iinfo(dtype).max, dtype=dtype)
        a = rng.integers(0, 6, n).astype(dtype)
        big = rng.random(n) < 0.3
        a[big] = top - rng.integers(0, 6, int(big.sum())).astype(dtype)
        return a
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else -5
        return rng.integers(lo, 6, n).astype(dtype)
    a = rng.integers(-4, 5, n).astype(np.float64) if ties else rng.standard_normal(n)
    if nan_frac:
        a[rng.random(n) < nan_frac] = np.nan
    return a.astype(dtype)


TOL = {np.dtype(np.float16): (4e-3, 4e-3), np.dtype(np.float32): (2e-5, 1e-5),
       np.dtype(np.float64): (1e-10, 1e-10)}


def compare_op(rep, op, base, offset, sizes, strides, dim, keepdim, what, stats, **kw):
    view = strided(base, offset, sizes, strides)
    x = to_ember(view)
    try:
        want = [t.numpy() if t.dtype != ember.float16 else t.numpy() for t in
                as_list(cpu(op, x, dim, keepdim, **kw))]
    except Exception:  # the CPU refuses (empty max, ...): the CUDA host code refuses too
        rep.check(True, "")
        return
    got = as_list(emulate(op, base, offset, sizes, strides, dim, keepdim, stats, **kw))
    if op in ("argmax", "argmin"):
        got = [got[1]]
    elif op in ("var", "std"):
        got = [got[0]]
    elif op in ("amax", "amin"):
        got = [got[0]]
    rep.check(len(got) == len(want), f"{what}: {len(got)} results vs {len(want)}")
    for g, w in zip(got, want):
        g = np.asarray(g)
        w = np.asarray(w)
        if g.shape != w.shape:
            rep.check(False, f"{what}: shape {g.shape} vs {w.shape}")
            continue
        if w.dtype.kind in "iub":
            rep.check(np.array_equal(g.astype(w.dtype), w), f"{what}: {g.ravel()[:8]} vs {w.ravel()[:8]}")
        else:
            rt, at = TOL.get(np.dtype(base.dtype), (1e-6, 1e-6)) if base.dtype.kind == "f" else (1e-10, 1e-10)
            if op == "norm" and kw.get("p") not in (1, 2, math.inf, -math.inf, 0):
                rt, at = max(rt, 1e-5), max(at, 1e-5)
            rep.check(close(g, w, rt, at), f"{what}: max diff {np.nanmax(np.abs(g.astype(float) - w.astype(float))) if g.size else 0}")


SHAPES = [
    ((), [None]),
    ((7,), [None, 0]),
    ((33,), [0]),
    ((4, 5, 6), [None, 0, -1, 1, [0, 2], [-1, 0, 1]]),
    ((3, 300), [1, 0]),
    ((3, 9000), [1]),              # rows: two chunks each
    ((20000,), [0]),               # whole tensor: two-pass, 3 chunks
    ((3000, 5), [0]),              # columns, few outputs: block path, strided reads
    ((40, 1100), [0]),             # columns, many outputs: thread path
    ((2, 3, 40, 50), [[1, 3], [0, 2]]),
    ((0, 5), [0, 1, None]),
    ((5, 0), [0, 1]),
    ((1, 1, 70), [None, 2]),
]


def main():
    rng = np.random.default_rng(0)
    rep = Report("reduce_ops.cu reductions")
    stats = Stats()
    floats = [np.float32, np.float64, np.float16]
    # (uint16/32/64: sum, prod, all and any compute; the CPU refuses the other ops, and so do
    # the CUDA kernels: compare_op counts a refusal as agreement)
    ints = [np.int64, np.int32, np.uint8, np.int8, np.bool_, np.uint16, np.uint32, np.uint64]
    urng = np.random.default_rng(10)
    for shape, dims in SHAPES:
        for (lname, _b, off, sizes, strides) in layouts(shape, rng):
            nbase = _b.size
            for dt in floats + ints:
                fl = np.dtype(dt).kind == "f"
                big = int(np.prod(shape)) > 5000 if shape else False
                wide = np.dtype(dt) in WIDE_UINTS  # (own generator: the others' data unchanged)
                base = make_base(nbase, dt, urng if wide else rng, nan_frac=0.0,
                                 ties=not fl or rng.random() < 0.5)
                ops = ["sum", "prod", "amax", "argmax", "argmin", "max", "all", "any",
                       "count_nonzero"]
                if fl:
                    ops += ["nansum", "mean", "nanmean", "var", "std", "var_mean", "norm", "min",
                            "amin"]
                if big:
                    ops = [o for o in ops if o in ("sum", "argmax", "max", "var", "norm",
                                                   "count_nonzero", "nanmean", "amin")]
                    if dt not in (np.float32, np.float16, np.int32, np.uint64):
                        continue
                for op in ops:
                    for dim in dims:
                        for keepdim in ([False, True] if not big else [False]):
                            kws = [{}]
                            if op in ("var", "std", "var_mean"):
                                kws = [{"correction": 1}, {"correction": 0},
                                       {"correction": 2.5}]
                            if op == "norm":
                                kws = [{"p": p} for p in (2, 1, math.inf, -math.inf, 0, 3, 0.5)]
                            if big:
                                kws = kws[:2]
                            for kw in kws:
                                what = f"{op}{kw} {np.dtype(dt).name} {shape} {lname} dim={dim} keepdim={keepdim}"
                                compare_op(rep, op, base, off, sizes, strides, dim, keepdim, what,
                                           stats, **kw)
            # NaN propagation and NaN/tie rules on floats
            for dt in floats:
                base = make_base(nbase, dt, rng, nan_frac=0.05, ties=True)
                for op in ("sum", "nansum", "nanmean", "amax", "argmax", "argmin", "max", "min",
                           "var", "norm"):
                    for dim in dims[:3]:
                        kw = {"p": math.inf} if op == "norm" else {}
                        compare_op(rep, op, base, off, sizes, strides, dim, False,
                                   f"NaN {op} {np.dtype(dt).name} {shape} {lname} dim={dim}",
                                   stats, **kw)
    ok = rep.close(f"(paths: {stats.paths})")
    ok &= column_cases()
    ok &= contig_edges()
    ok &= scans()
    ok &= geometry_limits()
    return ok


def contig_edges():
    """reduce_contig_kernel's edges: run lengths around the packs, the kUnroll x 256-pack
    iterations and the chunks; rows starting at each misalignment (element offsets 0, 1, 3 and
    a pack - 1, so the head takes 0 .. kN - 1 elements); NaNs and ties; two SM counts (the
    second makes a different split)."""
    global SMS
    rng = np.random.default_rng(2)
    rep = Report("reduce_ops.cu contiguous path")
    stats = Stats()
    saved = SMS
    lengths = [33, 34, 37, 40, 63, 64, 65, 257, 1023, 1025, 4097, 4 * 256 * 4 * 2 + 3, 8192 * 3 + 5]
    try:
        for sms in (132, 1):
            SMS = sms
            for n in lengths:
                for dt in (np.float32, np.float64, np.float16, np.int64, np.int8, np.bool_):
                    if n > 5000 and dt not in (np.float32, np.float16, np.bool_):
                        continue
                    fl = np.dtype(dt).kind == "f"
                    kn = 16 // np.dtype(dt).itemsize
                    for off in sorted({0, 1, 3, kn - 1}):
                        rows = 3
                        base = make_base(off + rows * n + 5, dt, rng,
                                         nan_frac=0.01 if fl and n % 2 else 0.0, ties=True)
                        ops = ["sum", "argmax", "argmin", "max", "count_nonzero"]
                        if fl:
                            ops += ["var", "nansum", "norm", "nanmean"]
                        for op in ops:
                            for dim in (1, None):
                                if op == "max" and dim is None:
                                    continue
                                if op == "nanmean" and dt == np.float16 and rows * n > 65504:
                                    continue  # the CPU's float16 count overflows (as torch's)
                                kw = {"p": 2} if op == "norm" else {}
                                what = f"contig {op} {np.dtype(dt).name} n={n} off={off} dim={dim} sms={sms}"
                                compare_op(rep, op, base, off, (rows, n), (n, 1), dim, False, what,
                                           stats, **kw)
    finally:
        SMS = saved
    return rep.close(f"(paths: {stats.paths})")


COL_OPS_ALL = ["sum", "prod", "amax", "argmax", "argmin", "max", "all", "any", "count_nonzero"]
COL_OPS_FLOAT = ["nansum", "mean", "nanmean", "var", "std", "var_mean", "norm", "min", "amin"]


def column_layouts(rows, cols, dt, rng):
    """(name, base, offset, sizes, strides, dims) of column reductions around the pack rules."""
    kn = 16 // np.dtype(dt).itemsize
    n = rows * cols
    out = [
        ("contiguous dim=0", n, 0, (rows, cols), (cols, 1), [0]),
        ("base off by 1", n + 1, 1, (rows, cols), (cols, 1), [0]),
        ("base off by a pack", n + kn, kn, (rows, cols), (cols, 1), [0]),
        # a column slice: rows strided by cols + kn (aligned) or cols + 1 (not)
        ("slice, aligned row stride", rows * (cols + kn), 0, (rows, cols), (cols + kn, 1), [0]),
        ("slice, odd row stride", rows * (cols + 1), 0, (rows, cols), (cols + 1, 1), [0]),
        # the transpose of a (cols, rows) reduced over its dim 1 (memory: columns)
        ("transposed dim=1", n, 0, (cols, rows), (1, cols), [1]),
        # a broadcast row (reduced stride 0)
        ("expanded rows", cols, 0, (rows, cols), (0, 1), [0]),
    ]
    if rows % 2 == 0:
        # (2, rows / 2, cols): reduce dims 0 and 1 (coalesced), or dim 1 only (kept: 2 x cols)
        h = rows // 2
        out.append(("3-d dims (0, 1)", n, 0, (2, h, cols), (h * cols, cols, 1), [[0, 1]]))
        out.append(("3-d dim 1", n, 0, (2, h, cols), (h * cols, cols, 1), [1]))
    return out


def column_cases(quick=False):
    """The column kernels (reduce_column_packs_kernel + reduce_column_partials_kernel, and the
    element-wise reduce_columns_kernel + reduce_partials_kernel when the packs do not apply):
    every reducer and dtype, widths around the pack and tile sizes (odd, not a multiple of a
    pack, under half a warp of packs), bases and row strides aligned or not, transposed /
    broadcast / 3-d layouts, 1 and many rows, three SM counts and resident blocks per SM
    (different splits)."""
    global SMS, COL_PER_SM
    rng = np.random.default_rng(5)
    rep = Report("reduce_ops.cu column reductions")
    stats = Stats()
    saved = SMS, COL_PER_SM
    shapes = [(1, 64), (33, 64), (40, 68), (100, 36), (100, 65), (257, 128), (64, 1024),
              (130, 520), (40, 256), (600, 512), (2000, 64), (20, 4096), (20000, 32), (20000, 64)]
    dtypes = [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.int8, np.bool_]
    try:
        for sms, per_sm in ((132, 4),) if quick else ((132, 4), (7, 2), (1, 1)):
            SMS, COL_PER_SM = sms, per_sm
            for rows, cols in shapes:
                for dt in dtypes:
                    fl = np.dtype(dt).kind == "f"
                    big = rows * cols > 20000
                    if big and dt not in (np.float32, np.float16, np.int8):
                        continue
                    for (lname, nbase, off, sizes, strides, dims) in column_layouts(rows, cols, dt, rng):
                        if big and lname not in ("contiguous dim=0", "base off by 1", "3-d dim 1"):
                            continue
                        base = make_base(nbase, dt, rng, nan_frac=0.01 if fl and rng.random() < 0.3 else 0.0,
                                         ties=not fl or rng.random() < 0.5)
                        ops = COL_OPS_ALL + (COL_OPS_FLOAT if fl else [])
                        if big or sms != 132:
                            ops = [o for o in ops if o in ("sum", "argmax", "var", "norm", "nanmean",
                                                           "count_nonzero", "min")]
                        if rows > 200:  # products of hundreds of elements: overflow to inf / wrap
                            ops = [o for o in ops if o != "prod"]
                        for op in ops:
                            if op == "nanmean" and dt == np.float16 and rows > 2000:
                                continue  # the CPU's float16 count overflows (as torch's)
                            for dim in dims:
                                kws = [{}]
                                if op in ("var", "std", "var_mean"):
                                    kws = [{"correction": 1}, {"correction": 0}][: 1 if big else 2]
                                if op == "norm":
                                    kws = [{"p": p} for p in ((2,) if big else (2, 1, math.inf, 0, 3))]
                                for kw in kws:
                                    what = (f"columns {op}{kw} {np.dtype(dt).name} {sizes} {lname} "
                                            f"dim={dim} sms={sms}")
                                    compare_op(rep, op, base, off, sizes, strides, dim, False, what,
                                               stats, **kw)
    finally:
        SMS, COL_PER_SM = saved
    return rep.close(f"(paths: {stats.paths})")


def plant_checks():
    """--plant: each planted bug must make the column checks fail (an exception or a mismatch)."""
    global PLANT
    ok = True
    for bug in ("no_tree_sync", "tail_skips_last", "chunk_starts_early", "partials_transposed"):
        PLANT = {bug}
        caught = False
        try:
            caught = not column_cases(quick=True)
        except AssertionError as e:
            caught = True
            print(f"  planted {bug}: raised {type(e).__name__}: {e}")
        finally:
            PLANT = set()
        print(f"planted bug {bug}: {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    return ok


# ---- scans (cum_kernel / cumext_kernel over the contiguous (outer, n, inner) copy) ---------------


def emulate_cum(a, dim, op):
    """cum_impl / cumext_impl on a contiguous array a (the host makes that copy)."""
    shape = a.shape
    if a.ndim == 0:
        outer, n, inner = 1, 1, 1
    else:
        d = dim % a.ndim
        outer = int(np.prod(shape[:d])) if d else 1
        n = shape[d]
        inner = int(np.prod(shape[d + 1:])) if d + 1 < a.ndim else 1
    flat = a.ravel()
    if flat.size == 0:  # the host returns the empty outputs before any launch
        return (a.copy(), np.zeros(shape, np.int64)) if op in ("cummax", "cummin") else a.copy()
    nlines = outer * inner
    lines = np.arange(nlines, dtype=np.int64)  # one thread per line (grid-stride)
    off = (lines // inner) * n * inner + lines % inner
    if op in ("cumsum", "cumprod"):
        T = flat.dtype
        A = np.float64 if T.kind == "f" else np.int64
        is_prod = op == "cumprod"
        acc = np.full(nlines, 1 if is_prod else 0, A)
        out = np.empty_like(flat)
        for i in range(n):
            x = ld(flat[off + i * inner]).astype(A)
            acc = acc * x if is_prod else acc + x
            # through the compute type (float for half)
            v = acc.astype(np.float32) if T == np.float16 else acc
            out[off + i * inner] = v.astype(T)
        return out.reshape(shape)
    is_max = op == "cummax"
    best = ld(flat[off])
    bi = np.zeros(nlines, np.int64)
    vo = np.empty_like(flat)
    io = np.empty(flat.size, np.int64)
    for i in range(n):
        x = ld(flat[off + i * inner])
        if x.dtype.kind == "f":
            xn, bn = np.isnan(x), np.isnan(best)
        else:
            xn = bn = np.zeros(nlines, bool)
        cmp = (x >= best) if is_max else (x <= best)
        take = xn | (~bn & cmp)
        best = np.where(take, x, best)
        bi = np.where(take, i, bi)
        vo[off + i * inner] = best.astype(flat.dtype)
        io[off + i * inner] = bi
    return vo.reshape(shape), io.reshape(shape)


def scans():
    rng = np.random.default_rng(1)
    rep = Report("reduce_ops.cu scans")
    shapes = [((), [0, -1]), ((9,), [0]), ((4, 5, 6), [0, 1, 2, -1]), ((3, 1000), [1, 0]),
              ((0, 4), [0, 1]), ((2, 1, 3), [1])]
    for shape, dims in shapes:
        for dt in (np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.int8,
                   np.bool_):
            n = int(np.prod(shape)) if shape else 1
            for nan in ((0.0, 0.1) if np.dtype(dt).kind == "f" else (0.0,)):
                a = make_base(n, dt, rng, nan_frac=nan, ties=True).reshape(shape)
                if np.dtype(dt).kind == "f" and not nan:
                    a = (rng.random(n) * 0.5 + 0.75).astype(dt).reshape(shape)  # prod stays finite
                x = to_ember(a)
                for dim in dims:
                    for op in ("cumsum", "cumprod", "cummax", "cummin"):
                        want = getattr(x, op)(dim=dim)
                        want = [want.values.numpy(), want.indices.numpy()] if op in (
                            "cummax", "cummin") else [want.numpy()]
                        ot = a.dtype if a.dtype.kind == "f" else np.int64
                        src = a.astype(ot) if op in ("cumsum", "cumprod") else a
                        got = emulate_cum(np.array(src, order="C"), dim, op)
                        got = list(got) if isinstance(got, tuple) else [got]
                        for g, w in zip(got, want):
                            what = f"{op} {np.dtype(dt).name} {shape} dim={dim} nan={nan}"
                            if w.dtype.kind == "f":
                                rt = 2e-3 if w.dtype == np.float16 else 1e-6
                                rep.check(close(g, w, rt, rt), what)
                            else:
                                rep.check(g.shape == w.shape and np.array_equal(g, w), what)
    return rep.close()


def s_ok(nchunks, chunk):
    return nchunks == 1 or chunk % 64 == 0


def geometry_limits():
    """Launch-geometry decisions for shapes too large to emulate element by element: every grid
    within CUDA's limits, 64-bit index math where products pass 2^31, items covered."""
    rep = Report("reduce_ops.cu launch geometry")
    cases = [
        ((1 << 33,), [True]),
        ((1 << 31, 3), [True, False]),
        ((3, 1 << 31), [False, True]),
        ((1 << 20, 4096), [False, True]),
        ((4096, 1 << 20), [True, False]),
        ((1 << 16, 1 << 16), [True, True]),
        ((5, 1 << 31), [True, False]),
        ((1 << 31, 64), [True, False]),     # columns by packs, rows split over blocks
        ((1 << 31, 36), [True, False]),     # columns element by element
        ((8192, 3072), [True, False]),      # GPT-2's bias gradient
    ]
    for sizes, mask in cases:
        strides = list(reversed(np.cumprod([1] + list(reversed(sizes[1:]))).tolist()))
        g = make_geometry(sizes, strides, mask, False)
        nout, nred = g["nout"], g["nred"]
        columns = len(g["ks"]) > 0 and g["kt"][-1] == 1 and len(g["rs"]) > 0 and g["rt"][-1] != 1
        if nred <= 32:
            grid = blocks_for(nout)
            rep.check(1 <= grid <= (1 << 31) - 1, f"thread grid {grid} for {sizes}")
            rep.check(grid * K_BLOCK >= min(nout, grid * K_BLOCK), "")
            continue
        if columns and (columns_by_packs(0, 4, g) or nout >= K_WARP // 2):
            # float32: by packs of 4 when the widths allow, else element by element
            if columns_by_packs(0, 4, g):
                nchunks, chunk, ntiles = split_column_packs(nout // 4, nred, SMS, COL_PER_SM)
                rep.check(nchunks <= COL_PER_SM * SMS, f"chunks {nchunks} for {sizes}")
            else:
                nchunks, chunk, ntiles = split_columns(nout, nred, SMS)
            grid = min(ntiles * nchunks, 1 << 20)
            rep.check(1 <= grid <= (1 << 31) - 1, f"column grid {grid} for {sizes}")
            rep.check((nchunks - 1) * chunk < nred <= nchunks * chunk,
                      f"column chunks {nchunks}x{chunk} cover {nred} for {sizes}")
            rep.check(nout * nchunks < (1 << 62), f"partials {nout * nchunks}")
            continue
        nchunks, chunk = split_reduction(nout, nred, SMS)
        nitems = nout * nchunks
        grid = min(nitems, 1 << 20)
        rep.check(1 <= grid <= (1 << 31) - 1, f"block grid {grid} for {sizes}")
        # every chunk start fits int64 and the last chunk reaches nred
        rep.check((nchunks - 1) * chunk < nred <= nchunks * chunk or nred == 0,
                  f"chunks {nchunks}x{chunk} cover {nred} for {sizes}")
        rep.check(nitems < (1 << 62), f"items {nitems}")
        rep.check(s_ok(nchunks, chunk), f"chunk {chunk} not a multiple of 64 for {sizes}")
    return rep.close()


if __name__ == "__main__":
    if "--plant" in sys.argv:
        sys.exit(0 if plant_checks() else 1)
    if "--columns" in sys.argv:
        sys.exit(0 if column_cases() else 1)
    sys.exit(0 if main() else 1)
