"""Emulation of packages/core/csrc/cuda/nn_attention.cu (the fused scaled dot product attention:
sdpa_forward_kernel, sdpa_rowdot_kernel, sdpa_grad_q_kernel, sdpa_grad_kv_kernel and the host
code: coalesce_batch / make_view, plan's scale, the dynamic shared memory sizes, the grids, the
head-dim buckets) against ember's CPU _scaled_dot_product_fused_attention(_backward).

A block is emulated as 4 warps x 32 lanes (numpy axes); every warp-level shuffle is uniform in
these kernels (all lanes run the same loops), so a shuffle is an index along the lane axis and a
butterfly (warp_sum / warp_max) is done step by step. The dynamic shared memory is one flat array
of exactly the bytes the host asks for, filled with NaN; every read and write goes through it
with bounds checks and a race check (a read of a word written by another thread in the same
barrier interval, or two threads writing one word in one interval, raises). Global reads go
through the views' strides into the tensors' flat storage (bounds checked); every output element
must be written exactly once. Blocks run in a shuffled order.

The tensor-core kernels of nn_attention_tc.cu (float16 / bfloat16 without a mask) have their own
emulation: nn_attention_tc.py.

Run: PYTHONPATH=<build>/site python3 nn_attention.py [-q]"""

from __future__ import annotations

import math
import sys
import time

import ember
import numpy as np
from nn_sim import BF16, F16, F32, F64, TOL, EmulationError, close, report

RNG = np.random.default_rng(5)
K_WARPS, K_ROWS_PER_WARP = 4, 4
K_ROWS = K_WARPS * K_ROWS_PER_WARP
K_THREADS = K_WARPS * 32
K_COLS = 32
K_MAX_HEAD = 256
K_MAX_BATCH_DIMS = 8
OPTIN_SMEM = 232448  # H100 / H200 cudaDevAttrMaxSharedMemoryPerBlockOptin
LANE = np.arange(32)
WARP = np.arange(K_WARPS)
ROWR = np.arange(K_ROWS_PER_WARP)
# tid of (warp, lane): (4, 32)
TID_WL = WARP[:, None] * 32 + LANE[None, :]


# ---- memory ----------------------------------------------------------------------------------


class Shared:
    """The block's dynamic shared memory (`words` elements of the compute type) with race checks."""

    def __init__(self, words, acc):
        self.a = np.full(words, np.nan, dtype=acc)
        self.stamp = np.full(words, -1, dtype=np.int64)
        self.writer = np.full(words, -1, dtype=np.int64)
        self.interval = 0
        self.n = words

    def barrier(self):
        self.interval += 1

    def _bounds(self, idx, what):
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise EmulationError(f"shared memory {what} out of bounds: [{idx.min()}, {idx.max()}] "
                                 f"of {self.n} words")

    def write(self, idx, vals, tid):
        idx = np.asarray(idx, dtype=np.int64).ravel()
        tid = np.broadcast_to(tid, idx.shape).ravel() if np.ndim(tid) else np.full(idx.shape, tid)
        vals = np.broadcast_to(vals, idx.shape).ravel()
        self._bounds(idx, "write")
        same = self.stamp[idx] == self.interval
        if np.any(same & (self.writer[idx] != tid)):
            raise EmulationError("shared memory write race (two threads, one interval)")
        order = np.argsort(idx, kind="stable")
        si = idx[order]
        if si.size > 1 and np.any((si[1:] == si[:-1]) & (tid[order][1:] != tid[order][:-1])):
            raise EmulationError("shared memory write race within one store")
        self.a[idx] = vals
        self.stamp[idx] = self.interval
        self.writer[idx] = tid

    def read(self, idx, tid):
        idx = np.asarray(idx, dtype=np.int64)
        self._bounds(idx, "read")
        tid = np.broadcast_to(tid, idx.shape)
        if np.any((self.stamp[idx] == self.interval) & (self.writer[idx] != tid)):
            raise EmulationError("shared memory read races a write of this barrier interval")
        return self.a[idx]


class GView:
    """View: a (batch..., rows, cols) operand in a flat storage buffer read through its strides."""

    def __init__(self, buf, offset, sizes, strides, ty):
        self.buf, self.offset, self.ty = buf, offset, ty
        self.sizes, self.strides = list(sizes), list(strides)
        self.nd, self.bsize, self.bstride = coalesce_batch(sizes, strides)
        self.row, self.col = strides[-2], strides[-1]
        if self.nd is None:
            raise EmulationError("not coalescible (make_view copies: emulated by the caller)")

    def batch_offset(self, b):
        o = 0
        for d in range(self.nd - 1, -1, -1):
            o += (b % self.bsize[d]) * self.bstride[d]
            b //= self.bsize[d]
        return o

    def load(self, base, r, c):
        """Element offsets base + r * row + c * col (bounds checked); the values as stored."""
        off = self.offset + base + np.asarray(r, dtype=np.int64) * self.row + \
            np.asarray(c, dtype=np.int64) * self.col
        if off.size and (off.min() < 0 or off.max() >= self.buf.size):
            raise EmulationError(f"global read out of bounds: [{off.min()}, {off.max()}] of "
                                 f"{self.buf.size}")
        return self.buf[off]

    def elem(self, base, r, c):
        return self.load(base, r, c).astype(self.ty.acc)


def coalesce_batch(sizes, strides):
    """coalesce_batch: (nd, size, stride) or (None, ...) past kMaxBatchDims."""
    sz, st = [], []
    for d in range(len(sizes) - 2):
        if sizes[d] == 1:
            continue
        if sz and st[-1] == strides[d] * sizes[d]:
            sz[-1] *= sizes[d]
            st[-1] = strides[d]
        else:
            sz.append(sizes[d])
            st.append(strides[d])
    if len(sz) > K_MAX_BATCH_DIMS:
        return None, None, None
    return len(sz), sz, st


class Out:
    """A contiguous output buffer whose every element must be written exactly once."""

    def __init__(self, n, ty):
        self.ty = ty
        self.a = np.full(n, np.nan, dtype=np.float64)
        self.count = np.zeros(n, dtype=np.int64)

    def store(self, idx, vals):
        idx = np.asarray(idx, dtype=np.int64).ravel()
        vals = np.broadcast_to(vals, idx.shape).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.a.size):
            raise EmulationError(f"global write out of bounds [{idx.min()}, {idx.max()}] of "
                                 f"{self.a.size}")
        np.add.at(self.count, idx, 1)
        self.a[idx] = self.ty.mem(vals) if self.ty is not None else vals

    def check(self, what):
        if np.any(self.count != 1):
            bad = np.nonzero(self.count != 1)[0][:5]
            raise EmulationError(f"{what}: elements written {self.count[bad].tolist()} times at "
                                 f"{bad.tolist()}")
        return self.a


# ---- device helpers --------------------------------------------------------------------------


def warp_sum(v):
    """Butterfly sum over the last axis (32 lanes), every lane the same rounding as the GPU."""
    v = v.copy()
    o = 16
    while o > 0:
        v = v + v[..., LANE ^ o]
        o >>= 1
    return v


def warp_max(v):
    v = v.copy()
    o = 16
    while o > 0:
        v = np.fmax(v, v[..., LANE ^ o])
        o >>= 1
    return v


def odd_ld(n):
    return n | 1


def load_tile(sm, dst, ld, view, base, r0, nrows, ncols, limit, acc):
    """load_tile: the block's 128 threads stride over nrows * ncols."""
    n = nrows * ncols
    if n == 0:
        return
    idx = np.arange(n)
    r, c = idx // ncols, idx % ncols
    tid = idx % K_THREADS
    vals = np.zeros(n, dtype=acc)
    ok = r0 + r < limit
    if ok.any():
        vals[ok] = view.elem(base, r0 + r[ok], c[ok])
    sm.write(dst + r * ld + c, vals, tid)


def masked_score(p, moff, i, j, dot, valid):
    """masked_score over broadcast index arrays i, j (only where valid is read)."""
    A = p.acc
    with np.errstate(all="ignore"):
        s = (dot * A(p.scale)).astype(A)
    if p.causal:
        s = np.where(j > i, A(-np.inf), s)
    elif p.mask_kind == 1:
        ii, jj = np.broadcast_arrays(i, j)
        m = np.ones(s.shape, dtype=bool)
        sel = np.broadcast_to(valid, s.shape)
        m[sel] = p.mask.load(moff, ii[sel], jj[sel]) != 0
        s = np.where(m, s, A(-np.inf))
    elif p.mask_kind == 2:
        ii, jj = np.broadcast_arrays(i, j)
        add = np.zeros(s.shape, dtype=A)
        sel = np.broadcast_to(valid, s.shape)
        add[sel] = p.mask.elem(moff, ii[sel], jj[sel])
        with np.errstate(all="ignore"):
            s = (s + add).astype(A)
    return s


def row_dots(sm, rows_base, rows_ld, tile_base, tile_ld, width):
    """s[w, r, lane] = sum_c sm[rows_base + (w*4+r)*rows_ld + c] * sm[tile_base + lane*tile_ld + c]
    (the kernels' inner products: the rows broadcast to the warp, the lane's row of the tile)."""
    if width == 0:
        return np.zeros((K_WARPS, K_ROWS_PER_WARP, 32), dtype=sm.a.dtype)
    c = np.arange(width)
    wr = (WARP[:, None] * K_ROWS_PER_WARP + ROWR[None, :])  # (4, 4)
    # readers for the race check: lane 0 of each warp stands for the warp's broadcast row reads,
    # lane j of warp 0 for the (identical) tile reads of every warp
    qv = sm.read(rows_base + wr[:, :, None] * rows_ld + c, tids_rows()[:, :, None])  # (4,4,width)
    kv = sm.read(tile_base + LANE[:, None] * tile_ld + c, LANE[:, None])  # (32, width)
    acc = np.zeros((K_WARPS, K_ROWS_PER_WARP, 32), dtype=sm.a.dtype)
    with np.errstate(all="ignore"):
        for cc in range(width):  # the kernel's order: c outer, a fused multiply-add per step
            acc = (acc + qv[:, :, cc][:, :, None] * kv[None, None, :, cc]).astype(sm.a.dtype)
    return acc


def tids_rows():
    """Every thread of warp w reads the row words: tid per (w, r) is any lane of the warp; the race
    check needs one reader per word per warp, the lane-0 thread stands for the warp (its lanes
    all read the same word, after the same barrier)."""
    return np.repeat((WARP * 32)[:, None], K_ROWS_PER_WARP, axis=1)


def accumulate_tile(sm, acc, coef, tile, ld, width, jn):
    """accumulate_tile: acc[w, r, lane, t] += coef[w, r, jj] * tile[jj * ld + lane + 32 t]."""
    NH = acc.shape[-1]
    e = LANE[:, None] + 32 * np.arange(NH)[None, :]  # (32, NH)
    inside = e < width
    A = acc.dtype
    for jj in range(jn):
        cj = coef[:, :, jj]  # (4, 4): the shuffle from lane jj
        x = np.zeros((K_WARPS, 32, NH), dtype=A)
        idx = np.broadcast_to(tile + jj * ld + e, (K_WARPS, 32, NH))
        tid = np.broadcast_to(TID_WL[:, :, None], (K_WARPS, 32, NH))
        sel = np.broadcast_to(inside, (K_WARPS, 32, NH))
        x[sel] = sm.read(idx[sel], tid[sel])
        with np.errstate(all="ignore"):
            acc += cj[:, :, None, None] * x[:, None, :, :]
    return acc


# ---- the problem -----------------------------------------------------------------------------


class Problem:
    pass


def head_bucket(h):
    return 1 if h <= 32 else 2 if h <= 64 else 4 if h <= 128 else 8


def forward_smem(p):
    return K_ROWS * p.E + K_COLS * odd_ld(p.E) + K_COLS * p.Ev


def grad_q_smem(p):
    return K_ROWS * (p.E + p.Ev) + K_COLS * (odd_ld(p.E) + odd_ld(p.Ev))


def grad_kv_smem(p):
    return K_ROWS * (p.E + p.Ev) + K_COLS * (odd_ld(p.E) + odd_ld(p.Ev)) + 2 * K_COLS


def check_smem(words, p):
    nbytes = words * np.dtype(p.acc).itemsize
    if nbytes > OPTIN_SMEM:
        raise EmulationError(f"{nbytes} bytes of shared memory (E={p.E}, Ev={p.Ev})")


def grid_for(B, n):
    blocks = B * ((n + K_ROWS - 1) // K_ROWS)
    assert blocks <= 0x7FFFFFFF
    return blocks


def forward_block(p, bid, out, lse, NH):
    A = p.acc
    ninf = A(-np.inf)
    ntiles = (p.L + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    i0 = (bid - b * ntiles) * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    E, Ev, ldk = p.E, p.Ev, odd_ld(p.E)
    sm = Shared(forward_smem(p), A)
    qs, ks = 0, K_ROWS * E
    vs = ks + K_COLS * ldk
    qoff, koff, voff = p.q.batch_offset(b), p.k.batch_offset(b), p.v.batch_offset(b)
    moff = 0 if p.mask_kind == 0 else p.mask.batch_offset(b)
    load_tile(sm, qs, E, p.q, qoff, i0, K_ROWS, E, p.L, A)
    acc = np.zeros((K_WARPS, K_ROWS_PER_WARP, 32, NH), dtype=A)
    m = np.full((K_WARPS, K_ROWS_PER_WARP, 32), ninf, dtype=A)
    lsum = np.zeros((K_WARPS, K_ROWS_PER_WARP, 32), dtype=A)
    nkeys = min(p.S, i1) if p.causal else p.S
    i = i0 + WARP[:, None, None] * K_ROWS_PER_WARP + ROWR[None, :, None]  # (4,4,1)
    for k0 in range(0, nkeys, K_COLS):
        sm.barrier()
        load_tile(sm, ks, ldk, p.k, koff, k0, K_COLS, E, nkeys, A)
        load_tile(sm, vs, Ev, p.v, voff, k0, K_COLS, Ev, nkeys, A)
        sm.barrier()
        j = k0 + LANE[None, None, :]
        s = row_dots(sm, qs, E, ks, ldk, E)
        valid = (i < p.L) & (j < nkeys)
        x = np.where(valid, masked_score(p, moff, i, j, s, valid), ninf).astype(A)
        with np.errstate(all="ignore"):
            mnew = np.fmax(m, warp_max(x))
            shift = np.where(mnew == ninf, A(0), mnew).astype(A)
            alpha = np.exp((m - shift).astype(A)).astype(A)
            pr = np.exp((x - shift).astype(A)).astype(A)
            lsum = (lsum * alpha + warp_sum(pr)).astype(A)
            m = mnew
            acc = (acc * alpha[..., None]).astype(A)
        left = nkeys - k0
        # lane jj's pr of row r (all lanes agree on m, l): coef[w, r, jj] = pr[w, r, jj]
        acc = accumulate_tile(sm, acc, pr, vs, Ev, Ev, min(left, K_COLS))
    e = LANE[:, None] + 32 * np.arange(NH)[None, :]
    for w in range(K_WARPS):
        for r in range(K_ROWS_PER_WARP):
            ii = i0 + w * K_ROWS_PER_WARP + r
            if ii >= p.L:
                continue
            row = b * p.L + ii
            for lane in range(32):
                lv = lsum[w, r, lane]
                none = lv == A(0)
                with np.errstate(all="ignore"):
                    inv = A(0) if none else A(1) / lv
                    vals = np.zeros(NH, dtype=A) if none else (acc[w, r, lane] * inv).astype(A)
                sel = e[lane] < Ev
                out.store(row * Ev + e[lane][sel], vals[sel])
                if lane == 0:
                    with np.errstate(all="ignore"):
                        lse.store([row], [ninf if none else A(m[w, r, lane] + np.log(lv))])


def rowdot(p, go, o, rows):
    """sdpa_rowdot_kernel: a warp per row, lane strides over Ev, then the butterfly."""
    A = p.acc
    d = np.zeros(rows, dtype=A)
    nblocks = min(max((rows * 32 + 255) // 256, 1), 1 << 30)
    assert nblocks * 256 // 32 >= rows
    for row in range(rows):
        s = np.zeros(32, dtype=A)
        for e0 in range(0, p.Ev, 32):
            e = e0 + LANE
            ok = e < p.Ev
            with np.errstate(all="ignore"):
                s[ok] = (s[ok] + go[row * p.Ev + e[ok]].astype(A) * o[row * p.Ev + e[ok]].astype(A))
        d[row] = warp_sum(s)[0]
    return d


def prob(s, lse):
    A = s.dtype.type
    with np.errstate(all="ignore"):
        return np.where(lse == A(-np.inf), A(0), np.exp((s - lse).astype(A))).astype(A)


def grad_q_block(p, bid, sv, gq, NH):
    A = p.acc
    ntiles = (p.L + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    i0 = (bid - b * ntiles) * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    E, Ev, ldk, ldv = p.E, p.Ev, odd_ld(p.E), odd_ld(p.Ev)
    sm = Shared(grad_q_smem(p), A)
    qs = 0
    dos = qs + K_ROWS * E
    ks = dos + K_ROWS * Ev
    vs = ks + K_COLS * ldk
    qoff, koff, voff = p.q.batch_offset(b), p.k.batch_offset(b), p.v.batch_offset(b)
    moff = 0 if p.mask_kind == 0 else p.mask.batch_offset(b)
    load_tile(sm, qs, E, p.q, qoff, i0, K_ROWS, E, p.L, A)
    go, lse_all, d_all = sv
    gob = b * p.L * Ev
    n = K_ROWS * Ev
    if n:
        idx = np.arange(n)
        r, c = idx // Ev, idx % Ev
        vals = np.zeros(n, dtype=A)
        ok = i0 + r < p.L
        vals[ok] = go[gob + (i0 + r[ok]) * Ev + c[ok]].astype(A)
        sm.write(dos + idx, vals, idx % K_THREADS)
    i = i0 + WARP[:, None, None] * K_ROWS_PER_WARP + ROWR[None, :, None]  # (4,4,1)
    inrow = i < p.L
    lse_r = np.where(inrow, lse_all[np.minimum(b * p.L + i, b * p.L + p.L - 1)], A(0)).astype(A)
    d_r = np.where(inrow, d_all[np.minimum(b * p.L + i, b * p.L + p.L - 1)], A(0)).astype(A)
    acc = np.zeros((K_WARPS, K_ROWS_PER_WARP, 32, NH), dtype=A)
    nkeys = min(p.S, i1) if p.causal else p.S
    for k0 in range(0, nkeys, K_COLS):
        sm.barrier()
        load_tile(sm, ks, ldk, p.k, koff, k0, K_COLS, E, nkeys, A)
        load_tile(sm, vs, ldv, p.v, voff, k0, K_COLS, Ev, nkeys, A)
        sm.barrier()
        j = k0 + LANE[None, None, :]
        s = row_dots(sm, qs, E, ks, ldk, E)
        dp = row_dots(sm, dos, Ev, vs, ldv, Ev)
        valid = inrow & (j < nkeys)
        with np.errstate(all="ignore"):
            pij = prob(masked_score(p, moff, i, j, s, valid), lse_r)
            ds = np.where(valid, (pij * (dp - d_r) * A(p.scale)).astype(A), A(0)).astype(A)
        left = nkeys - k0
        acc = accumulate_tile(sm, acc, ds, ks, ldk, E, min(left, K_COLS))
    e = LANE[:, None] + 32 * np.arange(NH)[None, :]
    for w in range(K_WARPS):
        for r in range(K_ROWS_PER_WARP):
            ii = i0 + w * K_ROWS_PER_WARP + r
            if ii >= p.L:
                continue
            for lane in range(32):
                sel = e[lane] < E
                gq.store((b * p.L + ii) * E + e[lane][sel], acc[w, r, lane][sel])


def grad_kv_block(p, bid, sv, gk, gv, NH):
    A = p.acc
    ntiles = (p.S + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    j0 = (bid - b * ntiles) * K_ROWS
    E, Ev, ldq, ldo = p.E, p.Ev, odd_ld(p.E), odd_ld(p.Ev)
    sm = Shared(grad_kv_smem(p), A)
    ks = 0
    vs = ks + K_ROWS * E
    qs = vs + K_ROWS * Ev
    dos = qs + K_COLS * ldq
    ls = dos + K_COLS * ldo
    dsum = ls + K_COLS
    qoff, koff, voff = p.q.batch_offset(b), p.k.batch_offset(b), p.v.batch_offset(b)
    moff = 0 if p.mask_kind == 0 else p.mask.batch_offset(b)
    load_tile(sm, ks, E, p.k, koff, j0, K_ROWS, E, p.S, A)
    load_tile(sm, vs, Ev, p.v, voff, j0, K_ROWS, Ev, p.S, A)
    go, lse_all, d_all = sv
    gk_acc = np.zeros((K_WARPS, K_ROWS_PER_WARP, 32, NH), dtype=A)
    gv_acc = np.zeros_like(gk_acc)
    gob = b * p.L * Ev
    qstart = j0 if p.causal else 0
    j = j0 + WARP[:, None, None] * K_ROWS_PER_WARP + ROWR[None, :, None]  # (4,4,1)
    e = LANE[:, None] + 32 * np.arange(NH)[None, :]  # (32, NH)
    for q0 in range(qstart, p.L, K_COLS):
        sm.barrier()
        load_tile(sm, qs, ldq, p.q, qoff, q0, K_COLS, E, p.L, A)
        n = K_COLS * Ev
        if n:
            idx = np.arange(n)
            r, c = idx // Ev, idx % Ev
            vals = np.zeros(n, dtype=A)
            ok = q0 + r < p.L
            vals[ok] = go[gob + (q0 + r[ok]) * Ev + c[ok]].astype(A)
            sm.write(dos + r * ldo + c, vals, idx % K_THREADS)
        t = np.arange(K_COLS)
        ii = q0 + t
        okr = ii < p.L
        sm.write(ls + t, np.where(okr, lse_all[np.minimum(b * p.L + ii, b * p.L + p.L - 1)], 0), t)
        sm.write(dsum + t, np.where(okr, d_all[np.minimum(b * p.L + ii, b * p.L + p.L - 1)], 0), t)
        sm.barrier()
        i = q0 + LANE[None, None, :]
        s = row_dots(sm, ks, E, qs, ldq, E)
        dp = row_dots(sm, vs, Ev, dos, ldo, Ev)
        lsl = sm.read(ls + TID_WL % 32, TID_WL)[:, None, :]  # (4,1,32)
        dsl = sm.read(dsum + TID_WL % 32, TID_WL)[:, None, :]
        valid = (i < p.L) & (j < p.S)
        with np.errstate(all="ignore"):
            pij = np.where(valid, prob(masked_score(p, moff, i, j, s, valid), lsl), A(0)).astype(A)
            ds = np.where(valid, (pij * (dp - dsl) * A(p.scale)).astype(A), A(0)).astype(A)
        inn = min(p.L - q0, K_COLS)
        for q in range(inn):
            pi = pij[:, :, q]  # (4,4)
            di = ds[:, :, q]
            qv = np.zeros((K_WARPS, 32, NH), dtype=A)
            ov = np.zeros((K_WARPS, 32, NH), dtype=A)
            tid = np.broadcast_to(TID_WL[:, :, None], (K_WARPS, 32, NH))
            selq = np.broadcast_to(e < E, (K_WARPS, 32, NH))
            selo = np.broadcast_to(e < Ev, (K_WARPS, 32, NH))
            qv[selq] = sm.read(np.broadcast_to(qs + q * ldq + e, (K_WARPS, 32, NH))[selq], tid[selq])
            ov[selo] = sm.read(np.broadcast_to(dos + q * ldo + e, (K_WARPS, 32, NH))[selo],
                               tid[selo])
            with np.errstate(all="ignore"):
                gk_acc += di[:, :, None, None] * qv[:, None, :, :]
                gv_acc += pi[:, :, None, None] * ov[:, None, :, :]
    for w in range(K_WARPS):
        for r in range(K_ROWS_PER_WARP):
            jj = j0 + w * K_ROWS_PER_WARP + r
            if jj >= p.S:
                continue
            for lane in range(32):
                se, sv_ = e[lane] < E, e[lane] < Ev
                gk.store((b * p.S + jj) * E + e[lane][se], gk_acc[w, r, lane][se])
                gv.store((b * p.S + jj) * Ev + e[lane][sv_], gv_acc[w, r, lane][sv_])


# ---- driver ----------------------------------------------------------------------------------


def make_operand(shape, layout, ty, rng, scale=1.0):
    """(values as stored (full logical array, float64), GView) of a layout of shape."""
    shape = tuple(shape)
    n = int(np.prod(shape))
    if layout == "contiguous":
        sizes, perm = shape, list(range(len(shape)))
    elif layout == "heads_transposed":  # (B, L, H, E) storage viewed as (B, H, L, E)
        perm = list(range(len(shape)))
        if len(shape) >= 3:
            perm[-3], perm[-2] = perm[-2], perm[-3]
        sizes = tuple(shape[k] for k in perm)
    elif layout == "last_strided":  # columns with step 2 (padded storage)
        perm = list(range(len(shape)))
        sizes = shape[:-1] + (shape[-1] * 2,)
    elif layout == "rows_transposed":  # (.., E, L) storage viewed as (.., L, E)
        perm = list(range(len(shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        sizes = tuple(shape[k] for k in perm)
    else:
        raise ValueError(layout)
    store_n = int(np.prod(sizes)) + 3
    buf = ty.mem(rng.standard_normal(store_n) * scale)
    offset = 3 if layout != "contiguous" else 0
    cst = []
    acc = 1
    for s in reversed(sizes):
        cst.append(acc)
        acc *= s
    cst = list(reversed(cst))
    if layout == "last_strided":
        strides = cst[:-1] + [2]
    else:
        inv = [perm.index(k) for k in range(len(shape))]
        strides = [cst[inv[k]] for k in range(len(shape))]
    if layout == "contiguous":
        strides = cst
    # logical values
    idx = np.zeros(shape, dtype=np.int64) + offset
    for d, (s, st) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[d] = s
        idx = idx + (np.arange(s) * st).reshape(sh)
    vals = buf[idx].astype(np.float64) if n else np.zeros(shape)
    return vals, buf, offset, list(shape), strides


def expand_mask(mshape, mbuf, moffset, mstrides, full):
    """dispatch::expand of the mask to `full`: leading dims added, size-1 dims broadcast
    (stride 0)."""
    nd = len(full)
    sizes = [1] * (nd - len(mshape)) + list(mshape)
    strides = [0] * (nd - len(mshape)) + list(mstrides)
    out_s, out_st = [], []
    for s, st, f in zip(sizes, strides, full):
        if s == f:
            out_s.append(s)
            out_st.append(st)
        else:
            out_s.append(f)
            out_st.append(0)
    return out_s, out_st


def et(vals, ty):
    t = ember.tensor(np.asarray(vals, dtype=np.float64))
    if ty is F64:
        return t
    return t.to(ember.float32)


def run_case(fails, name, batch, L, S, E, Ev, ty, causal=False, mask=None, scale=None,
             layouts=("contiguous", "contiguous", "contiguous"), seed=0, nan_row=False,
             backward=True):
    rng = np.random.default_rng(seed)
    A = ty.acc
    qv, qb, qo, qsz, qst = make_operand(batch + (L, E), layouts[0], ty, rng)
    kv, kb, ko, ksz, kst = make_operand(batch + (S, E), layouts[1], ty, rng)
    vv, vb, vo, vsz, vst = make_operand(batch + (S, Ev), layouts[2], ty, rng)
    p = Problem()
    p.acc = A
    p.B = int(np.prod(batch)) if batch else 1
    p.L, p.S, p.E, p.Ev = L, S, E, Ev
    p.causal = causal
    sc = 1.0 / math.sqrt(E) if scale is None and E > 0 else (scale if scale is not None else 1.0)
    p.scale = 1.0 if E == 0 else sc
    p.q = GView(qb, qo, qsz, qst, ty)
    p.k = GView(kb, ko, ksz, kst, ty)
    p.v = GView(vb, vo, vsz, vst, ty)
    p.mask_kind = 0
    mvals = None
    if mask is not None:
        mshape, mkind = mask
        full = list(batch) + [L, S]
        if mkind == "bool":
            mb = (rng.random(int(np.prod(mshape)) + 1) < 0.7).astype(np.uint8)
            if nan_row:  # some fully masked rows
                mb[: min(S, mb.size)] = 0
            mty = None
        else:
            raw = rng.standard_normal(int(np.prod(mshape)) + 1)
            raw[rng.random(raw.size) < 0.2] = -np.inf
            if nan_row:
                raw[: min(S, raw.size)] = -np.inf
            mb = ty.mem(raw)
            mty = ty
        cst = []
        acc = 1
        for s in reversed(mshape):
            cst.append(acc)
            acc *= s
        mst = list(reversed(cst))
        es, est = expand_mask(mshape, mb, 1, mst, full)
        p.mask = GView(mb, 1, es, est, ty if mty is not None else F32)
        p.mask_kind = 1 if mkind == "bool" else 2
        idx = np.ones(full, dtype=np.int64)
        for d, (s, st) in enumerate(zip(es, est)):
            sh = [1] * len(full)
            sh[d] = s
            idx = idx + (np.arange(s) * st).reshape(sh)
        mvals = mb[idx]
    # CPU reference on the values as stored (float32 for the 16-bit types)
    cty = F64 if ty is F64 else F32
    q_t, k_t, v_t = et(qv, cty), et(kv, cty), et(vv, cty)
    m_t = None
    if mvals is not None:
        m_t = ember.tensor(mvals.astype(bool)) if p.mask_kind == 1 else et(mvals, cty)
    out_ref, lse_ref = ember._C._scaled_dot_product_fused_attention([q_t, k_t, v_t], m_t, causal,
                                                                    sc)
    NH = head_bucket(Ev)
    rows = p.B * L
    out = Out(rows * Ev, ty)
    lse = Out(rows, None)
    check_smem(forward_smem(p), p)
    blocks = list(range(grid_for(p.B, L)))
    rng.shuffle(blocks)
    for bid in blocks:
        forward_block(p, bid, out, lse, NH)
    tol = TOL[ty.name] * (3 if ty in (F16, BF16) else 1)
    o_np = out.check(f"{name} out").reshape(batch + (L, Ev))
    l_np = lse.check(f"{name} lse").reshape(batch + (L,))
    close(f"{name} out", o_np, out_ref.numpy(), tol, tol * 3, fails)
    close(f"{name} lse", l_np, lse_ref.numpy(), tol, tol * 3, fails)
    if not backward:
        return
    gov = ty.mem(rng.standard_normal(rows * Ev))
    # the backward reads contig(out) / contig(lse) in the compute type: the emulated forward's
    osto = ty.mem(o_np.ravel())
    d = rowdot(p, gov, osto, rows)
    sv = (gov, l_np.ravel().astype(A), d)
    gq, gk, gv = Out(rows * E, ty), Out(p.B * S * E, ty), Out(p.B * S * Ev, ty)
    NH2 = head_bucket(max(E, Ev))
    check_smem(grad_q_smem(p), p)
    check_smem(grad_kv_smem(p), p)
    blocks = list(range(grid_for(p.B, L)))
    rng.shuffle(blocks)
    for bid in blocks:
        grad_q_block(p, bid, sv, gq, NH2)
    blocks = list(range(grid_for(p.B, S)))
    rng.shuffle(blocks)
    for bid in blocks:
        grad_kv_block(p, bid, sv, gk, gv, NH2)
    go_t = et(gov.astype(np.float64).reshape(batch + (L, Ev)), cty)
    o_t = et(osto.astype(np.float64).reshape(batch + (L, Ev)), cty)
    l_t = et(l_np, cty)
    rq, rk, rv = ember._C._scaled_dot_product_fused_attention_backward(
        go_t, q_t, k_t, v_t, m_t, o_t, l_t, causal, sc)
    for nm, got, ref, shp in (("dq", gq, rq, (L, E)), ("dk", gk, rk, (S, E)), ("dv", gv, rv, (S, Ev))):
        g = got.check(f"{name} {nm}").reshape(batch + shp)
        r = ref.numpy()
        sc_ = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(r), r, 0)))) if r.size else 1)
        close(f"{name} {nm}", g, r, tol, tol * 3 * sc_, fails)


def cases():
    C = []
    # head dims: every bucket, odd widths, E != Ev, E = 0
    for (E, Ev) in ((3, 5), (32, 32), (33, 17), (64, 64), (65, 128), (100, 7), (129, 200),
                    (256, 256), (0, 9), (8, 1)):
        C.append(dict(name=f"heads E={E} Ev={Ev}", batch=(2,), L=19, S=37, E=E, Ev=Ev, ty=F32))
    # sequence lengths around the tiles, L != S both ways, causal both ways
    for (L, S) in ((1, 1), (16, 32), (17, 33), (47, 5), (5, 70), (64, 64), (33, 100)):
        for causal in (False, True):
            C.append(dict(name=f"L={L} S={S} causal={causal}", batch=(1, 2), L=L, S=S, E=24, Ev=40,
                          ty=F32, causal=causal))
    # masks: bool / additive, broadcast from (L, S), (B, 1, L, S), (H, 1, S); fully masked rows
    for kind in ("bool", "add"):
        for mshape in ("LS", "B1LS", "H1S"):
            for nan_row in (False, True):
                B, H, L, S = 2, 3, 21, 35
                ms = {"LS": (L, S), "B1LS": (B, 1, L, S), "H1S": (H, 1, S)}[mshape]
                C.append(dict(name=f"mask {kind} {mshape} fully-masked={nan_row}", batch=(B, H),
                              L=L, S=S, E=16, Ev=20, ty=F32, mask=(ms, kind), nan_row=nan_row))
    # layouts (heads split off a packed projection; strided last dim; transposed rows)
    for lay in (("heads_transposed",) * 3, ("last_strided", "rows_transposed", "heads_transposed"),
                ("rows_transposed", "last_strided", "last_strided")):
        C.append(dict(name=f"layouts {lay}", batch=(2, 3), L=18, S=40, E=20, Ev=12, ty=F32,
                      layouts=lay))
    C.append(dict(name="many batch dims", batch=(2, 1, 2, 1, 2, 1, 2, 2, 2, 2), L=3, S=4, E=4, Ev=4,
                  ty=F32, layouts=("heads_transposed",) * 3))
    C.append(dict(name="scale=0.3", batch=(2,), L=20, S=20, E=8, Ev=8, ty=F32, scale=0.3))
    C.append(dict(name="scale=7 causal", batch=(2,), L=40, S=20, E=8, Ev=8, ty=F32, scale=7.0,
                  causal=True))
    # dtypes
    for ty in (F64, F16, BF16):
        C.append(dict(name=f"{ty.name}", batch=(2,), L=23, S=45, E=40, Ev=24, ty=ty,
                      mask=((23, 45), "add")))
        C.append(dict(name=f"{ty.name} causal", batch=(3,), L=40, S=33, E=64, Ev=70, ty=ty,
                      causal=True))
    C.append(dict(name="float64 E=256 Ev=256", batch=(1,), L=17, S=33, E=256, Ev=256, ty=F64))
    return C


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    for c in cases():
        c = dict(c)
        name = c.pop("name")
        try:
            run_case(fails, name, **c)
        except EmulationError as e:
            fails.append(f"{name}: {e}")
            print(f"ERROR {name}: {e}")
    return report("nn_attention", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
