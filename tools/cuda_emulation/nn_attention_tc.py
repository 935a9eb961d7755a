"""Emulation of packages/core/csrc/cuda/nn_attention_tc.cu (the tensor-core fused attention:
sdpa_tc_forward_kernel, sdpa_tc_grad_q_kernel, sdpa_tc_grad_kv_kernel and their host code: the
operand rule tc_operand / tc_view, tc_problem's float scales, TcLayout's shared-memory layout,
the grids) against a float64 NumPy attention (outputs, logsumexp and the three gradients).

Level of detail: each WMMA call is a NumPy matrix op on the exact shared-memory bytes the kernel
names (load_matrix_sync reads the 16 x 16 tile at the pointer with its ldm and row / column
layout; store_matrix_sync writes one; mma_sync is a float product of the 16-bit inputs added to
the float accumulator), and checks the WMMA rules: ldm a multiple of 8 (16-bit) or 4 (float),
tile pointers 32-byte aligned. The per-thread code (16-byte tile loads, the online softmax of the
lane pairs, the rescale of O, the P / dS staging, the epilogues, the shuffles) is transcribed
lane by lane, vectorized over the 32 lanes of a warp. Shared memory is one byte array of exactly
the bytes the host asks for, filled with NaN bit patterns; every access goes through a race
checker per 2-byte granule: a read or write ordered with an earlier conflicting access by
another thread only when a __syncthreads (any two threads) or a __syncwarp (two lanes of one
warp) came between; a WMMA call is a collective access of its warp. Global reads are 16-byte
loads from the operands' flat storage (bounds and alignment checked); every output element must
be written exactly once. Blocks run in a shuffled order, warps in a shuffled order between
barriers.

Run: python3 nn_attention_tc.py [-q] [--plant]   (--plant: shows that planted bugs are caught)"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from nn_sim import EmulationError, bf16_round

K_WARPS = 4
K_THREADS = 128
K_ROWS = 64          # kTcRows
K_WARP_ROWS = 16     # kTcWarpRows
K_SCORE_LD = K_ROWS + 4
K_PROB_LD = K_ROWS + 8
K_MAX_BATCH_DIMS = 8
LOG2E = np.float32(1.4426950408889634)
LN2 = np.float32(0.6931471805599453)
OPTIN_SMEM = 232448  # H100 / H200 cudaDevAttrMaxSharedMemoryPerBlockOptin
LANE = np.arange(32)
NEG_INF = np.float32(-np.inf)
F32 = np.float32

PLANT = set()  # names of planted bugs (the self-test of the emulation)


# ---- 16-bit types -----------------------------------------------------------------------------

class Ty16:
    def __init__(self, name):
        self.name = name

    def round(self, x):
        """float values rounded to this type (round to nearest even), as float32."""
        x = np.asarray(x, dtype=np.float32)
        if self.name == "float16":
            return x.astype(np.float16).astype(np.float32)
        return bf16_round(x)

    def bits(self, x):
        """float32 values (already representable) -> uint16 bit patterns."""
        x = np.asarray(x, dtype=np.float32)
        if self.name == "float16":
            return x.astype(np.float16).view(np.uint16)
        return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)

    def value(self, bits):
        bits = np.asarray(bits, dtype=np.uint16)
        if self.name == "float16":
            return bits.view(np.float16).astype(np.float32)
        return (bits.astype(np.uint32) << 16).view(np.float32)

    def __repr__(self):
        return self.name


HALF, BF16 = Ty16("float16"), Ty16("bfloat16")


# ---- TcLayout ---------------------------------------------------------------------------------

class Layout:
    def __init__(self, D):
        self.D = D
        self.ldh = D + 8
        self.ldo = D + 4
        self.tile16 = K_ROWS * self.ldh * 2
        self.a0 = 0
        self.a1 = self.a0 + self.tile16
        self.a2 = self.a1 + self.tile16
        self.a3 = self.a2 + self.tile16
        self.fwd_s = self.a3
        self.fwd_p = self.fwd_s + K_ROWS * K_SCORE_LD * 4
        self.fwd_o = self.fwd_p + K_ROWS * K_PROB_LD * 2
        self.fwd_bytes = self.fwd_o + K_ROWS * self.ldo * 4
        self.sf = self.a3 + self.tile16
        self.df = self.sf + K_ROWS * K_SCORE_LD * 4
        self.dh = self.df + K_ROWS * K_SCORE_LD * 4
        self.ph = self.dh + K_ROWS * K_PROB_LD * 2
        self.stats = self.ph + K_ROWS * K_PROB_LD * 2
        self.dq_bytes = self.ph
        self.dkv_bytes = self.stats + 2 * K_ROWS * 4

    def regions(self, kernel):
        """(name, start, end) of every region the kernel uses."""
        t = self.tile16
        if kernel == "forward":
            return [("Q", self.a0, self.a0 + t), ("K", self.a1, self.a1 + t),
                    ("V", self.a2, self.a2 + t), ("S", self.fwd_s, self.fwd_p),
                    ("P", self.fwd_p, self.fwd_o), ("O", self.fwd_o, self.fwd_bytes)]
        if kernel == "dq":
            return [("Q", self.a0, self.a1), ("dO", self.a1, self.a2), ("K", self.a2, self.a3),
                    ("V", self.a3, self.a3 + t), ("S", self.sf, self.df), ("dP", self.df, self.dh),
                    ("dS", self.dh, self.ph)]
        return [("K", self.a0, self.a1), ("V", self.a1, self.a2), ("Q", self.a2, self.a3),
                ("dO", self.a3, self.a3 + t), ("S", self.sf, self.df), ("dP", self.df, self.dh),
                ("dS", self.dh, self.ph), ("P", self.ph, self.stats),
                ("stats", self.stats, self.dkv_bytes)]


def check_layout(lay, kernel, nbytes):
    regs = sorted(lay.regions(kernel), key=lambda r: r[1])
    for (n0, s0, e0), (n1, s1, e1) in zip(regs, regs[1:]):
        if e0 > s1:
            raise EmulationError(f"{kernel} D={lay.D}: regions {n0} and {n1} overlap")
    for n, s, e in regs:
        if s % 32 or e > nbytes:
            raise EmulationError(f"{kernel} D={lay.D}: region {n} [{s}, {e}) misplaced "
                                 f"({nbytes} bytes)")
    if nbytes > OPTIN_SMEM:
        raise EmulationError(f"{kernel} D={lay.D}: {nbytes} bytes of shared memory per block")


# ---- shared memory with race checks ------------------------------------------------------------

def warp_of(ids):
    ids = np.asarray(ids)
    return np.where(ids >= 1000, ids - 1000, ids // 32)


class Smem:
    """The block's dynamic shared memory: `nbytes` bytes (NaN patterns), race-checked per 2-byte
    granule. Accessor ids: thread warp * 32 + lane, or 1000 + warp for a WMMA call."""

    def __init__(self, nbytes):
        self.n = nbytes
        self.mem = np.full((nbytes + 3) // 4 * 4, 0xFF, dtype=np.uint8)
        g = (nbytes + 1) // 2
        self.w_id = np.full(g, -1, np.int64)
        self.w_b = np.full(g, -1, np.int64)
        self.w_w = np.full(g, -1, np.int64)
        self.r_id = np.full(g, -1, np.int64)   # -2: several readers
        self.r_warp = np.full(g, -1, np.int64)  # -2: readers of several warps
        self.r_b = np.full(g, -1, np.int64)
        self.r_w = np.full(g, -1, np.int64)
        self.B = 0
        self.W = np.zeros(K_WARPS, np.int64)

    def syncthreads(self):
        self.B += 1

    def syncwarp(self, w):
        self.W[w] += 1

    def _granules(self, byte_off, size, what):
        byte_off = np.asarray(byte_off, dtype=np.int64)
        if byte_off.size and (byte_off.min() < 0 or byte_off.max() + size > self.n):
            raise EmulationError(f"shared {what} out of bounds: [{byte_off.min()}, "
                                 f"{byte_off.max() + size}) of {self.n} bytes")
        if byte_off.size and np.any(byte_off % size):
            raise EmulationError(f"shared {what} misaligned ({size}-byte elements)")
        g = byte_off // 2
        if size == 4:
            g = np.stack([g, g + 1], axis=-1)
        return g

    def _check_after_write(self, g, ids, what):
        """Whether the last write of each granule is ordered before this access by ids."""
        w = warp_of(ids)
        now = self.w_b[g] == self.B
        same_warp = warp_of(self.w_id[g]) == w
        unsynced = now & (~same_warp | (self.w_w[g] == self.W[w]))
        bad = unsynced & ((self.w_id[g] != ids) | (ids >= 1000))
        if np.any(bad):
            raise EmulationError(f"shared memory race: {what} of a granule written in this "
                                 f"interval by another thread (or WMMA call) without a barrier")

    def read(self, g, ids, what="read"):
        ids = np.broadcast_to(np.asarray(ids, dtype=np.int64), g.shape)
        self._check_after_write(g, ids, what)
        w = warp_of(ids)
        gf, idf, wf = g.ravel(), ids.ravel(), w.ravel()
        now = (self.r_b[gf] == self.B) & (self.r_id[gf] != -1)
        other = now & (self.r_id[gf] != idf)
        new_id = np.where(other, -2, idf)
        new_warp = np.where(now & (self.r_warp[gf] != wf), -2, wf)
        # a read in a newer warp interval of the same warp replaces the record only when older
        self.r_id[gf] = new_id
        self.r_warp[gf] = new_warp
        self.r_b[gf] = self.B
        self.r_w[gf] = np.where(new_warp >= 0, self.W[np.maximum(new_warp, 0)], -1)

    def write(self, g, ids, what="write"):
        ids = np.broadcast_to(np.asarray(ids, dtype=np.int64), g.shape)
        self._check_after_write(g, ids, what + " (write after write)")
        w = warp_of(ids)
        now = self.r_b[g] == self.B
        rw = self.r_warp[g]
        unsynced = now & ((rw == -2) | (rw != w) | (self.r_w[g] == self.W[w]))
        bad = unsynced & (self.r_id[g] != ids) & (self.r_id[g] != -1)
        if np.any(bad):
            raise EmulationError(f"shared memory race: {what} of a granule another thread read "
                                 f"in this interval without a barrier")
        gf, idf = g.ravel(), ids.ravel()
        order = np.argsort(gf, kind="stable")
        sg, si = gf[order], idf[order]
        if sg.size > 1 and np.any((sg[1:] == sg[:-1]) & (si[1:] != si[:-1])):
            raise EmulationError(f"shared memory race: two threads {what} one granule at once")
        self.w_id[gf] = idf
        self.w_b[gf] = self.B
        self.w_w[gf] = self.W[warp_of(idf)]
        self.r_id[gf] = -1
        self.r_warp[gf] = -1

    # typed access (byte offsets)
    def ld_f32(self, off, ids):
        off = np.asarray(off, dtype=np.int64)
        self.read(self._granules(off, 4, "float read"), ids[..., None] if np.ndim(ids) else ids)
        return self.mem.view(np.float32)[off // 4]

    def st_f32(self, off, vals, ids):
        off = np.asarray(off, dtype=np.int64)
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float32), off.shape)
        self.write(self._granules(off, 4, "float write"),
                   ids[..., None] if np.ndim(ids) else ids)
        self.mem.view(np.float32)[off.ravel() // 4] = vals.ravel()

    def ld_u16(self, off, ids):
        off = np.asarray(off, dtype=np.int64)
        self.read(self._granules(off, 2, "16-bit read"), ids)
        return self.mem.view(np.uint16)[off // 2]

    def st_u16(self, off, bits, ids):
        off = np.asarray(off, dtype=np.int64)
        bits = np.broadcast_to(np.asarray(bits, dtype=np.uint16), off.shape)
        self.write(self._granules(off, 2, "16-bit write"), ids)
        self.mem.view(np.uint16)[off.ravel() // 2] = bits.ravel()


# ---- WMMA -------------------------------------------------------------------------------------

R16, C16 = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")


def _tile_offsets(ptr, ldm, layout, size, what):
    if ptr % 32:
        raise EmulationError(f"WMMA {what}: pointer {ptr} is not 32-byte aligned")
    if ldm % (8 if size == 2 else 4):
        raise EmulationError(f"WMMA {what}: ldm {ldm} is not a multiple of "
                             f"{8 if size == 2 else 4}")
    if layout == "row":
        return ptr + (R16 * ldm + C16) * size
    return ptr + (C16 * ldm + R16) * size


def wmma_load16(sm, ty, ptr, ldm, layout, warp):
    """load_matrix_sync of a matrix_a / matrix_b fragment (16-bit) at byte `ptr`."""
    off = _tile_offsets(ptr, ldm, layout, 2, "load (16-bit)")
    return ty.value(sm.ld_u16(off, 1000 + warp))


def wmma_load_acc(sm, ptr, ldm, warp):
    off = _tile_offsets(ptr, ldm, "row", 4, "load (accumulator)")
    return sm.ld_f32(off, np.int64(1000 + warp)).astype(np.float32)


def wmma_store_acc(sm, ptr, acc, ldm, warp):
    off = _tile_offsets(ptr, ldm, "row", 4, "store (accumulator)")
    sm.st_f32(off, acc, np.int64(1000 + warp))


def mma(a, b, c):
    """mma_sync: the exact products of the 16-bit inputs summed into the float accumulator."""
    return (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)


# ---- operands (host: tc_operand / tc_view) ----------------------------------------------------

class Operand:
    """A (batch..., rows, D) tensor in a flat 16-bit storage: bits (uint16), element offset,
    sizes, strides; byte_addr: its data pointer modulo 256 (for the alignment rule)."""

    def __init__(self, bits, offset, sizes, strides, byte_addr=0):
        self.bits, self.offset = bits, offset
        self.sizes, self.strides = list(sizes), list(strides)
        self.byte_addr = byte_addr

    def values(self, ty):
        idx = np.full(self.sizes, self.offset, dtype=np.int64)
        for d, (s, st) in enumerate(zip(self.sizes, self.strides)):
            sh = [1] * len(self.sizes)
            sh[d] = s
            idx = idx + (np.arange(s) * st).reshape(sh)
        return ty.value(self.bits[idx])


def contiguous_strides(sizes):
    st, acc = [], 1
    for s in reversed(sizes):
        st.append(acc)
        acc *= s
    return list(reversed(st))


class TcOperand:
    def __init__(self, t, nd, size, stride):
        self.t, self.nd, self.size, self.stride = t, nd, size, stride
        self.row = t.strides[-2]

    def batch_offset(self, b):
        o = 0
        for d in range(self.nd - 1, -1, -1):
            o += (b % self.size[d]) * self.stride[d]
            b //= self.size[d]
        return o


def tc_operand(t):
    """tc_operand: the TcOperand of t, or None when its layout is not one."""
    d = len(t.sizes)
    if t.strides[d - 1] != 1 or t.strides[d - 2] % 8:
        return None
    if (t.byte_addr + 2 * t.offset) % 16:
        return None
    sz, st = [], []
    for i in range(d - 2):
        if t.sizes[i] == 1:
            continue
        if t.strides[i] % 8:
            return None
        if sz and st[-1] == t.strides[i] * t.sizes[i]:
            sz[-1] *= t.sizes[i]
            st[-1] = t.strides[i]
        else:
            if len(sz) == K_MAX_BATCH_DIMS:
                return None
            sz.append(t.sizes[i])
            st.append(t.strides[i])
    return TcOperand(t, len(sz), sz, st)


def tc_view(t, ty, stats):
    """tc_view: t's TcOperand, or that of a fresh contiguous copy (256-byte aligned)."""
    v = tc_operand(t)
    if v is not None:
        return v
    stats["copies"] += 1
    vals = t.values(ty)
    c = Operand(ty.bits(vals).ravel(), 0, t.sizes, contiguous_strides(t.sizes), 0)
    v = tc_operand(c)
    if v is None:
        raise EmulationError("a fresh contiguous tensor is not a tensor-core operand")
    return v


def gload16(op, base, row, c):
    """A 16-byte global load: the 8 elements from base + row * op.row + c (alignment checked)."""
    t = op.t
    off = t.offset + base + np.asarray(row, dtype=np.int64) * op.row + np.asarray(c)
    if np.any((t.byte_addr + 2 * off) % 16):
        raise EmulationError("16-byte global load misaligned")
    if off.size and (off.min() < 0 or off.max() + 8 > t.bits.size):
        raise EmulationError("global load out of bounds")
    return t.bits[off[..., None] + np.arange(8)]


class Out:
    """A contiguous 16-bit (or float32) output whose every element is written exactly once."""

    def __init__(self, n):
        self.a = np.full(n, np.nan, dtype=np.float64)
        self.count = np.zeros(n, dtype=np.int64)

    def store(self, idx, vals, align=None):
        idx = np.asarray(idx, dtype=np.int64)
        if align and np.any(idx[..., 0] % align):
            raise EmulationError("vector store misaligned")
        idx, vals = idx.ravel(), np.broadcast_to(vals, idx.shape).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.a.size):
            raise EmulationError("global store out of bounds")
        np.add.at(self.count, idx, 1)
        self.a[idx] = vals

    def check(self, what):
        if np.any(self.count != 1):
            bad = np.nonzero(self.count != 1)[0][:5]
            raise EmulationError(f"{what}: elements written {self.count[bad].tolist()} times at "
                                 f"{bad.tolist()}")
        return self.a


# ---- device code ------------------------------------------------------------------------------

def load_rows(sm, ty, dst, ld, D, op, base, r0, limit, nrows=K_ROWS):
    """tc_load_rows: 16-byte chunks, thread idx % 128 of the block, zeros from row `limit`."""
    chunks = D // 8
    idx = np.arange(nrows * chunks)
    r, c = idx // chunks, (idx % chunks) * 8
    tid = idx % K_THREADS
    vals = np.zeros((idx.size, 8), dtype=np.uint16)
    ok = r0 + r < limit
    if ok.any():
        vals[ok] = gload16(op, base, r0 + r[ok], c[ok])
    off = dst + ((r * ld + c)[:, None] + np.arange(8)) * 2
    if np.any(off[:, 0] % 16):
        raise EmulationError("16-byte shared store misaligned")
    sm.st_u16(off, vals, np.broadcast_to(tid[:, None], off.shape))


def tc_scores(sm, ty, out, a, bt, D, warp):
    """out (16 x 64 floats at byte `out`, ld kScoreLd) = A (16 x D at a) B^T (64 x D at bt)."""
    ldh = D + 8
    for n in range(K_ROWS // 16):
        acc = np.zeros((16, 16), np.float32)
        for kk in range(D // 16):
            fa = wmma_load16(sm, ty, a + kk * 16 * 2, ldh, "row", warp)
            fb = wmma_load16(sm, ty, bt + (n * 16 * ldh + kk * 16) * 2, ldh, "col", warp)
            acc = mma(fa, fb, acc)
        wmma_store_acc(sm, out + n * 16 * 4, acc, K_SCORE_LD, warp)


def ids_of(warp, shape_lanes_first):
    """Thread ids of the warp's lanes, broadcast over trailing dims."""
    ids = warp * 32 + LANE
    return np.broadcast_to(ids.reshape((32,) + (1,) * (len(shape_lanes_first) - 1)),
                           shape_lanes_first)


class Problem:
    pass


def tc_problem(B, L, S, causal, scale):
    p = Problem()
    p.B, p.L, p.S, p.causal = B, L, S, causal
    p.scale = np.float32(scale)
    p.scale_log2 = np.float32(scale * 1.4426950408889634)
    return p


def tile_of(p, bid, n):
    ntiles = (n + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    t = bid - b * ntiles
    return b, t, ntiles


def forward_block(p, ty, D, bid, out, lse, rng):
    lay = Layout(D)
    ldh, ldo = lay.ldh, lay.ldo
    sm = Smem(lay.fwd_bytes)
    b, t, ntiles = tile_of(p, bid, p.L)
    if p.causal:
        t = ntiles - 1 - t
    i0 = t * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    nkeys = min(p.S, i1) if p.causal else p.S
    koff, voff = p.k.batch_offset(b), p.v.batch_offset(b)
    load_rows(sm, ty, lay.a0, ldh, D, p.q, p.q.batch_offset(b), i0, p.L)
    lane = LANE
    r, h = lane >> 1, lane & 1
    st = {}
    for w in range(K_WARPS):
        sw = lay.fwd_s + w * K_WARP_ROWS * K_SCORE_LD * 4
        pw = lay.fwd_p + w * K_WARP_ROWS * K_PROB_LD * 2
        ow = lay.fwd_o + w * K_WARP_ROWS * ldo * 4
        idx = np.arange(K_WARP_ROWS * D).reshape(-1, 32).T  # [lane, step]
        sm.st_f32(ow + ((idx // D) * ldo + idx % D) * 4, 0.0, ids_of(w, idx.shape))
        st[w] = dict(sw=sw, pw=pw, ow=ow, i=i0 + w * K_WARP_ROWS + r,
                     m=np.full(32, NEG_INF), l=np.zeros(32, np.float32))
    ldp = 68 if "ldp68" in PLANT else K_PROB_LD
    for k0 in range(0, nkeys, K_ROWS):
        if "no_loop_sync" not in PLANT:
            sm.syncthreads()
        load_rows(sm, ty, lay.a1, ldh, D, p.k, koff, k0, nkeys)
        load_rows(sm, ty, lay.a2, ldh, D, p.v, voff, k0, nkeys)
        sm.syncthreads()
        for w in rng.permutation(K_WARPS):
            s = st[w]
            sw, pw, ow, i = s["sw"], s["pw"], s["ow"], s["i"]
            tc_scores(sm, ty, sw, lay.a0 + w * K_WARP_ROWS * ldh * 2, lay.a1, D, w)
            if "no_syncwarp" not in PLANT:
                sm.syncwarp(w)
            tt = np.arange(K_ROWS // 2)
            c = 2 * tt[None, :] + h[:, None]           # [lane, tt]
            j = k0 + c
            seen = (j < nkeys) & ((not p.causal) | (j <= i[:, None]))
            if "causal_off_by_one" in PLANT and p.causal:
                seen = (j < nkeys) & (j < i[:, None])
            sv = sm.ld_f32(sw + (r[:, None] * K_SCORE_LD + c) * 4, ids_of(w, c.shape))
            x = np.where(seen, sv * p.scale_log2, NEG_INF).astype(np.float32)
            mx = x.max(axis=1)
            mx = np.fmax(mx, mx[lane ^ 1])
            mnew = np.fmax(s["m"], mx)
            shift = np.where(mnew == NEG_INF, F32(0), mnew).astype(np.float32)
            alpha = np.exp2(s["m"] - shift).astype(np.float32)
            e = np.exp2(x - shift[:, None]).astype(np.float32)
            ssum = e.sum(axis=1, dtype=np.float32)
            sm.st_u16(pw + (r[:, None] * ldp + c) * 2, ty.bits(ty.round(e)), ids_of(w, c.shape))
            ssum = (ssum + ssum[lane ^ 1]).astype(np.float32)
            s["l"] = (s["l"] * alpha + ssum).astype(np.float32)
            s["m"] = mnew
            cc = np.arange(0, D, 2)[None, :] + h[:, None]
            oo = ow + (r[:, None] * ldo + cc) * 4
            ov = sm.ld_f32(oo, ids_of(w, cc.shape))
            if "no_rescale" in PLANT:
                alpha = np.ones_like(alpha)
            sm.st_f32(oo, ov * alpha[:, None], ids_of(w, cc.shape))
            sm.syncwarp(w)
            for n in range(D // 16):
                acc = wmma_load_acc(sm, ow + n * 16 * 4, ldo, w)
                for kk in range(K_ROWS // 16):
                    fa = wmma_load16(sm, ty, pw + kk * 16 * 2, ldp, "row", w)
                    fb = wmma_load16(sm, ty, lay.a2 + (kk * 16 * ldh + n * 16) * 2, ldh, "row", w)
                    acc = mma(fa, fb, acc)
                wmma_store_acc(sm, ow + n * 16 * 4, acc, ldo, w)
    for w in rng.permutation(K_WARPS):
        s = st[w]
        sm.syncwarp(w)
        none = s["l"] == 0
        inv = np.where(none, F32(0), F32(1) / np.where(none, F32(1), s["l"])).astype(np.float32)
        chunks = D // 8
        n_idx = K_WARP_ROWS * chunks
        assert n_idx % 32 == 0
        for base in range(0, n_idx, 32):
            idx = base + LANE
            rr, c0 = idx // chunks, (idx % chunks) * 8
            inv_r = inv[2 * rr]
            row = i0 + w * K_WARP_ROWS + rr
            ok = row < p.L
            if not ok.any():
                continue
            cols = c0[ok][:, None] + np.arange(8)
            ids = np.broadcast_to((w * 32 + LANE[ok])[:, None], cols.shape)
            x8 = sm.ld_f32(s["ow"] + (rr[ok][:, None] * ldo + cols) * 4, ids)
            x8 = (x8 * inv_r[ok][:, None]).astype(np.float32)
            out.store(((b * p.L + row[ok]) * D)[:, None] + cols, ty.round(x8), align=8)
        wr = (h == 0) & (s["i"] < p.L)
        vals = np.where(none, NEG_INF,
                        (s["m"] + np.log2(np.where(none, F32(1), s["l"]))) * LN2)
        lse.store(b * p.L + s["i"][wr], vals[wr].astype(np.float32))


def write_rows(sm, ty, D, dst_out, dst_base, acc, sw, mul, row0, nrows, w):
    """tc_write_rows: passes of 4 fragments through the float scratch sw."""
    nfr = D // 16
    for g in range(0, nfr, 4):
        sm.syncwarp(w)
        for n in range(g, min(g + 4, nfr)):
            wmma_store_acc(sm, sw + (n - g) * 16 * 4, acc[n], K_SCORE_LD, w)
        sm.syncwarp(w)
        width = 64 if g + 4 < nfr else (nfr - g) * 16
        chunks = width // 8
        total = K_WARP_ROWS * chunks
        assert total % 32 == 0
        for base in range(0, total, 32):
            idx = base + LANE
            rr, c0 = idx // chunks, (idx % chunks) * 8
            row = row0 + rr
            ok = row < nrows  # the other lanes `continue` before reading
            if not ok.any():
                continue
            cols = c0[ok][:, None] + np.arange(8)
            ids = np.broadcast_to((w * 32 + LANE[ok])[:, None], cols.shape)
            x8 = sm.ld_f32(sw + (rr[ok][:, None] * K_SCORE_LD + cols) * 4, ids)
            x8 = (x8 * mul).astype(np.float32)
            dst_out.store(dst_base + (row[ok] * D)[:, None] + g * 16 + cols, ty.round(x8),
                          align=8)


def grad_q_block(p, ty, D, bid, sv, gq, rng):
    lay = Layout(D)
    ldh = lay.ldh
    sm = Smem(lay.dq_bytes)
    b, t, ntiles = tile_of(p, bid, p.L)
    if p.causal:
        t = ntiles - 1 - t
    i0 = t * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    nkeys = min(p.S, i1) if p.causal else p.S
    koff, voff = p.k.batch_offset(b), p.v.batch_offset(b)
    load_rows(sm, ty, lay.a0, ldh, D, p.q, p.q.batch_offset(b), i0, p.L)
    load_rows(sm, ty, lay.a1, ldh, D, sv["go"], sv["go"].batch_offset(b), i0, p.L)
    r, h = LANE >> 1, LANE & 1
    st = {}
    for w in range(K_WARPS):
        i = i0 + w * K_WARP_ROWS + r
        inr = i < p.L
        lse_i = np.where(inr, sv["lse"][np.where(inr, b * p.L + i, 0)] * LOG2E, F32(0))
        d_i = np.where(inr, sv["dsum"][np.where(inr, b * p.L + i, 0)], F32(0))
        st[w] = dict(i=i, lse=lse_i.astype(np.float32), d=d_i.astype(np.float32),
                     acc=[np.zeros((16, 16), np.float32) for _ in range(D // 16)],
                     sw=lay.sf + w * K_WARP_ROWS * K_SCORE_LD * 4,
                     dw=lay.df + w * K_WARP_ROWS * K_SCORE_LD * 4,
                     dsw=lay.dh + w * K_WARP_ROWS * K_PROB_LD * 2)
    for k0 in range(0, nkeys, K_ROWS):
        sm.syncthreads()
        load_rows(sm, ty, lay.a2, ldh, D, p.k, koff, k0, nkeys)
        load_rows(sm, ty, lay.a3, ldh, D, p.v, voff, k0, nkeys)
        sm.syncthreads()
        for w in rng.permutation(K_WARPS):
            s = st[w]
            tc_scores(sm, ty, s["sw"], lay.a0 + w * K_WARP_ROWS * ldh * 2, lay.a2, D, w)
            tc_scores(sm, ty, s["dw"], lay.a1 + w * K_WARP_ROWS * ldh * 2, lay.a3, D, w)
            sm.syncwarp(w)
            tt = np.arange(K_ROWS // 2)
            c = 2 * tt[None, :] + h[:, None]
            j = k0 + c
            i = s["i"][:, None]
            seen = (i < p.L) & (j < nkeys) & ((not p.causal) | (j <= i)) & \
                (s["lse"][:, None] != NEG_INF)
            ids = ids_of(w, c.shape)
            sv_ = sm.ld_f32(s["sw"] + (r[:, None] * K_SCORE_LD + c) * 4, ids)
            dp = sm.ld_f32(s["dw"] + (r[:, None] * K_SCORE_LD + c) * 4, ids)
            pij = np.where(seen, np.exp2(sv_ * p.scale_log2 - s["lse"][:, None]), F32(0))
            ds = (pij.astype(np.float32) * (dp - s["d"][:, None])).astype(np.float32)
            sm.st_u16(s["dsw"] + (r[:, None] * K_PROB_LD + c) * 2, ty.bits(ty.round(ds)), ids)
            sm.syncwarp(w)
            for n in range(D // 16):
                for kk in range(K_ROWS // 16):
                    fa = wmma_load16(sm, ty, s["dsw"] + kk * 16 * 2, K_PROB_LD, "row", w)
                    fb = wmma_load16(sm, ty, lay.a2 + (kk * 16 * ldh + n * 16) * 2, ldh, "row", w)
                    s["acc"][n] = mma(fa, fb, s["acc"][n])
    for w in rng.permutation(K_WARPS):
        s = st[w]
        write_rows(sm, ty, D, gq, b * p.L * D, s["acc"], s["sw"], p.scale,
                   i0 + w * K_WARP_ROWS, p.L, w)


def grad_kv_block(p, ty, D, bid, sv, gk, gv, rng):
    lay = Layout(D)
    ldh = lay.ldh
    sm = Smem(lay.dkv_bytes)
    b, t, ntiles = tile_of(p, bid, p.S)
    j0 = t * K_ROWS
    qoff, gooff = p.q.batch_offset(b), sv["go"].batch_offset(b)
    load_rows(sm, ty, lay.a0, ldh, D, p.k, p.k.batch_offset(b), j0, p.S)
    load_rows(sm, ty, lay.a1, ldh, D, p.v, p.v.batch_offset(b), j0, p.S)
    r, h = LANE >> 1, LANE & 1
    st = {}
    for w in range(K_WARPS):
        st[w] = dict(j=j0 + w * K_WARP_ROWS + r,
                     dk=[np.zeros((16, 16), np.float32) for _ in range(D // 16)],
                     dv=[np.zeros((16, 16), np.float32) for _ in range(D // 16)],
                     sw=lay.sf + w * K_WARP_ROWS * K_SCORE_LD * 4,
                     dw=lay.df + w * K_WARP_ROWS * K_SCORE_LD * 4,
                     pw=lay.ph + w * K_WARP_ROWS * K_PROB_LD * 2,
                     dsw=lay.dh + w * K_WARP_ROWS * K_PROB_LD * 2)
    qstart = j0 if p.causal else 0
    if "dkv_qstart" in PLANT and p.causal:
        qstart = j0 + K_ROWS
    for q0 in range(qstart, p.L, K_ROWS):
        sm.syncthreads()
        load_rows(sm, ty, lay.a2, ldh, D, p.q, qoff, q0, p.L)
        load_rows(sm, ty, lay.a3, ldh, D, sv["go"], gooff, q0, p.L)
        tid = np.arange(K_ROWS)
        ii = q0 + tid
        ok = ii < p.L
        src = np.where(ok, b * p.L + ii, 0)
        sm.st_f32(lay.stats + tid * 4, np.where(ok, sv["lse"][src] * LOG2E, F32(0)), tid)
        sm.st_f32(lay.stats + (K_ROWS + tid) * 4, np.where(ok, sv["dsum"][src], F32(0)), tid)
        sm.syncthreads()
        for w in rng.permutation(K_WARPS):
            s = st[w]
            tc_scores(sm, ty, s["sw"], lay.a0 + w * K_WARP_ROWS * ldh * 2, lay.a2, D, w)
            tc_scores(sm, ty, s["dw"], lay.a1 + w * K_WARP_ROWS * ldh * 2, lay.a3, D, w)
            sm.syncwarp(w)
            tt = np.arange(K_ROWS // 2)
            c = 2 * tt[None, :] + h[:, None]
            ii = q0 + c
            j = s["j"][:, None]
            ids = ids_of(w, c.shape)
            lse_c = sm.ld_f32(lay.stats + c * 4, ids)
            d_c = sm.ld_f32(lay.stats + (K_ROWS + c) * 4, ids)
            seen = (ii < p.L) & (j < p.S) & ((not p.causal) | (j <= ii)) & (lse_c != NEG_INF)
            sv_ = sm.ld_f32(s["sw"] + (r[:, None] * K_SCORE_LD + c) * 4, ids)
            dp = sm.ld_f32(s["dw"] + (r[:, None] * K_SCORE_LD + c) * 4, ids)
            pij = np.where(seen, np.exp2(sv_ * p.scale_log2 - lse_c), F32(0)).astype(np.float32)
            ds = (pij * (dp - d_c)).astype(np.float32)
            sm.st_u16(s["pw"] + (r[:, None] * K_PROB_LD + c) * 2, ty.bits(ty.round(pij)), ids)
            sm.st_u16(s["dsw"] + (r[:, None] * K_PROB_LD + c) * 2, ty.bits(ty.round(ds)), ids)
            sm.syncwarp(w)
            for n in range(D // 16):
                for kk in range(K_ROWS // 16):
                    fa = wmma_load16(sm, ty, s["pw"] + kk * 16 * 2, K_PROB_LD, "row", w)
                    fb = wmma_load16(sm, ty, lay.a3 + (kk * 16 * ldh + n * 16) * 2, ldh, "row", w)
                    s["dv"][n] = mma(fa, fb, s["dv"][n])
                    fa = wmma_load16(sm, ty, s["dsw"] + kk * 16 * 2, K_PROB_LD, "row", w)
                    fb = wmma_load16(sm, ty, lay.a2 + (kk * 16 * ldh + n * 16) * 2, ldh, "row", w)
                    s["dk"][n] = mma(fa, fb, s["dk"][n])
    for w in rng.permutation(K_WARPS):
        s = st[w]
        row0 = j0 + w * K_WARP_ROWS
        write_rows(sm, ty, D, gv, b * p.S * D, s["dv"], s["sw"], F32(1), row0, p.S, w)
        write_rows(sm, ty, D, gk, b * p.S * D, s["dk"], s["sw"], p.scale, row0, p.S, w)


def rowdot(go, o, rows, D):
    """sdpa_rowdot_kernel (nn_attention.cu): D[row] = sum dO * O in float (lane-strided, then a
    butterfly; here a float32 sum)."""
    return (go.reshape(rows, D).astype(np.float32) * o.reshape(rows, D)).sum(
        axis=1, dtype=np.float32)


# ---- reference and cases ----------------------------------------------------------------------

def ref_attention(q, k, v, causal, scale, dout):
    """float64 attention (top-left causal, as the CPU kernel) and its gradients."""
    L, S = q.shape[-2], k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones((L, S), dtype=bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    tot = e.sum(-1, keepdims=True)
    pr = e / tot
    out = pr @ v
    lse = (m + np.log(tot))[..., 0]
    dv = np.swapaxes(pr, -1, -2) @ dout
    dp = dout @ np.swapaxes(v, -1, -2)
    ds = pr * (dp - (pr * dp).sum(-1, keepdims=True))
    return out, lse, ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv


def make_operands(batch, L, S, D, ty, layout, rng):
    """q, k, v as Operands in a layout: 'contig' (batch..., n, D), 'packed' (heads split off a
    (B, n, 3, H, D) projection, GPT-2 style: one buffer, offsets 0 / H D / 2 H D), 'misaligned'
    (contiguous but the data 2 bytes off 16: the host copies), 'rowpad' (rows D + 8 apart)."""
    vals = []
    ops = []
    B = int(np.prod(batch))
    for n in (L, S, S):
        vals.append(ty.round(rng.standard_normal(batch + (n, D)).astype(np.float32)))
    if layout == "packed":
        assert L == S and len(batch) == 2
        Bb, H = batch
        buf = np.zeros((Bb, L, 3, H, D), np.float32)
        for w in range(3):
            buf[:, :, w] = np.transpose(vals[w], (0, 2, 1, 3))
        bits = ty.bits(buf).ravel()
        strides = [L * 3 * H * D, D, 3 * H * D, 1]
        for w in range(3):
            ops.append(Operand(bits, w * H * D, batch + (L, D), strides))
        return vals, ops
    for w, (n, a) in enumerate(zip((L, S, S), vals)):
        sizes = batch + (n, D)
        if layout == "rowpad":
            pad = np.zeros(batch + (n, D + 8), np.float32)
            pad[..., :D] = a
            st = contiguous_strides(list(batch) + [n, D + 8])
            st[-1] = 1
            ops.append(Operand(ty.bits(pad).ravel(), 0, sizes, st))
        elif layout == "misaligned" and w == 1:
            bits = np.concatenate([np.zeros(1, np.uint16), ty.bits(a).ravel()])
            ops.append(Operand(bits, 1, sizes, contiguous_strides(sizes)))
        else:
            ops.append(Operand(ty.bits(a).ravel(), 0, sizes, contiguous_strides(sizes)))
    del B
    return vals, ops


TOL = {"float16": 6e-3, "bfloat16": 3e-2}


WORST = {}  # (dtype, quantity) -> the largest error relative to max(1, max |reference|)


def check_close(fails, what, got, ref, tol, key=None):
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(got - ref).max()) if ref.size else 0.0
    if key is not None:
        WORST[key] = max(WORST.get(key, 0.0), err / scale)
    if not np.all(np.isfinite(got)) or err > tol * scale:
        fails.append(f"{what}: max error {err:.3g} > {tol * scale:.3g}")
        print(f"  FAIL {what}: max error {err:.3g} (tolerance {tol * scale:.3g})")


def run_case(fails, name, batch, L, S, D, ty, causal, layout="contig", scale=None, seed=0,
             backward=True):
    rng = np.random.default_rng(seed)
    batch = tuple(batch)
    B = int(np.prod(batch))
    sc = 1.0 / math.sqrt(D) if scale is None else scale
    (qv, kv, vv), (qo, ko, vo) = make_operands(batch, L, S, D, ty, layout, rng)
    stats = {"copies": 0}
    p = tc_problem(B, L, S, causal, sc)
    p.q, p.k, p.v = (tc_view(t, ty, stats) for t in (qo, ko, vo))
    if layout == "misaligned" and stats["copies"] != 1:
        fails.append(f"{name}: the misaligned key was not copied")
    if layout in ("packed", "rowpad") and stats["copies"]:
        fails.append(f"{name}: a {layout} operand was copied")
    lay = Layout(D)
    check_layout(lay, "forward", lay.fwd_bytes)
    nblocks = B * ((L + K_ROWS - 1) // K_ROWS)
    out, lse = Out(B * L * D), Out(B * L)
    for bid in rng.permutation(nblocks):
        forward_block(p, ty, D, int(bid), out, lse, rng)
    o = out.check(f"{name} out").reshape(batch + (L, D))
    ls = lse.check(f"{name} lse").reshape(batch + (L,))
    g = ty.round(rng.standard_normal(batch + (L, D)).astype(np.float32))
    r_out, r_lse, r_dq, r_dk, r_dv = ref_attention(*(x.astype(np.float64) for x in (qv, kv, vv)),
                                                   causal, sc, g.astype(np.float64))
    tol = TOL[ty.name]
    check_close(fails, f"{name} out", o, r_out, tol, (ty.name, "out"))
    check_close(fails, f"{name} lse", ls, r_lse, 2e-3, (ty.name, "lse"))
    if not backward:
        return
    check_layout(lay, "dq", lay.dq_bytes)
    check_layout(lay, "dkv", lay.dkv_bytes)
    go = Operand(ty.bits(g).ravel(), 0, batch + (L, D), contiguous_strides(list(batch) + [L, D]))
    sv = {"go": tc_view(go, ty, stats), "lse": ls.ravel().astype(np.float32),
          "dsum": rowdot(g, o.astype(np.float32), B * L, D)}
    gq, gk, gv = Out(B * L * D), Out(B * S * D), Out(B * S * D)
    for bid in rng.permutation(nblocks):
        grad_q_block(p, ty, D, int(bid), sv, gq, rng)
    for bid in rng.permutation(B * ((S + K_ROWS - 1) // K_ROWS)):
        grad_kv_block(p, ty, D, int(bid), sv, gk, gv, rng)
    for nm, got, ref, n in (("dq", gq, r_dq, L), ("dk", gk, r_dk, S), ("dv", gv, r_dv, S)):
        check_close(fails, f"{name} {nm}", got.check(f"{name} {nm}").reshape(batch + (n, D)),
                    ref, tol * 2, (ty.name, nm))


def cases():
    C = []
    for D in (64, 128):
        for (L, S) in ((1, 1), (15, 15), (64, 64), (65, 65), (130, 130), (15, 130), (130, 15),
                       (65, 1), (1, 65)):
            for causal in (False, True):
                C.append(dict(name=f"D={D} L={L} S={S} causal={causal}", batch=(2,), L=L, S=S,
                              D=D, ty=BF16 if (L + S) % 2 else HALF, causal=causal))
    for D in (32, 96):
        C.append(dict(name=f"D={D} causal", batch=(1, 2), L=70, S=70, D=D, ty=HALF, causal=True))
        C.append(dict(name=f"D={D} L!=S", batch=(2,), L=33, S=100, D=D, ty=BF16, causal=False))
    C.append(dict(name="GPT-2 layout (packed heads) causal", batch=(2, 3), L=100, S=100, D=64,
                  ty=BF16, causal=True, layout="packed"))
    C.append(dict(name="rows padded", batch=(2,), L=40, S=77, D=64, ty=HALF, causal=False,
                  layout="rowpad"))
    C.append(dict(name="misaligned key (copied)", batch=(2,), L=40, S=50, D=128, ty=BF16,
                  causal=True, layout="misaligned"))
    C.append(dict(name="scale=0.05", batch=(1,), L=80, S=80, D=64, ty=HALF, causal=False,
                  scale=0.05))
    C.append(dict(name="scale=1.5 causal", batch=(1,), L=80, S=90, D=64, ty=BF16, causal=True,
                  scale=1.5))
    for ty in (HALF, BF16):
        for causal in (False, True):
            C.append(dict(name=f"long {ty} causal={causal}", batch=(1,), L=1000, S=1000, D=64,
                          ty=ty, causal=causal))
    C.append(dict(name="long D=128 L!=S causal", batch=(1,), L=520, S=1030, D=128, ty=BF16,
                  causal=True))
    return C


PLANTS = {  # planted bug -> a case that must fail with it
    "causal_off_by_one": dict(batch=(1,), L=70, S=70, D=64, ty=HALF, causal=True,
                              backward=False),
    "no_rescale": dict(batch=(1,), L=20, S=200, D=64, ty=HALF, causal=False, backward=False),
    "no_loop_sync": dict(batch=(1,), L=20, S=130, D=64, ty=HALF, causal=False, backward=False),
    "no_syncwarp": dict(batch=(1,), L=20, S=20, D=64, ty=HALF, causal=False, backward=False),
    "ldp68": dict(batch=(1,), L=20, S=20, D=64, ty=HALF, causal=False, backward=False),
    "dkv_qstart": dict(batch=(1,), L=130, S=130, D=64, ty=HALF, causal=True),
}


def run_plants():
    ok = True
    for bug, case in PLANTS.items():
        PLANT.clear()
        PLANT.add(bug)
        fails = []
        try:
            run_case(fails, f"plant {bug}", **case)
        except EmulationError as e:
            fails.append(str(e))
        PLANT.clear()
        caught = bool(fails)
        print(f"planted bug {bug}: {'caught' if caught else 'NOT CAUGHT'}"
              + (f" ({fails[0][:100]})" if caught else ""))
        ok &= caught
    return ok


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    if "--plant" in sys.argv:
        return 0 if run_plants() else 1
    fails = []
    n = 0
    for c in cases():
        c = dict(c)
        name = c.pop("name")
        n += 1
        try:
            run_case(fails, name, **c)
            if not quiet:
                print(f"ok  {name}")
        except EmulationError as e:
            fails.append(f"{name}: {e}")
            print(f"ERROR {name}: {e}")
    for D in (32, 64, 96, 128):
        lay = Layout(D)
        print(f"D={D}: shared memory per block: forward {lay.fwd_bytes}, dQ {lay.dq_bytes}, "
              f"dK/dV {lay.dkv_bytes} bytes")
    for (dt, what), e in sorted(WORST.items()):
        print(f"worst {dt} {what}: {e:.2e} of max(1, max |reference|)")
    print(f"nn_attention_tc: {n} cases, {len(fails)} failures, {time.time() - t0:.1f} s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
