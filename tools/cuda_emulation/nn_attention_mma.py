"""Emulation of packages/core/csrc/cuda/nn_attention_mma.cu (the mma.sync fused attention:
sdpa_mma_forward_kernel, sdpa_mma_grad_q_kernel, sdpa_mma_grad_kv_kernel, MmaLayout and the
host's grids; the operand rule tc_view and tc_problem are nn_attention_tc.py's) against a
float64 NumPy attention (outputs, logsumexp and the three gradients).

Level of detail: lane by lane, vectorized over the 32 lanes of a warp, with the PTX ISA's
fragment layouts of mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (g = lane >> 2,
t = lane & 3; A: 4 b32 registers {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}; B: 2
{(2t..2t+1, g), (2t+8..2t+9, g)}; C / D: 4 floats {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}):
an mma assembles the 16 x 16, 16 x 8 and 16 x 8 matrices from the lanes' registers, multiplies
in float64 and hands each lane its four floats back (rounded to float32). ldmatrix
(.m8n8.x4.b16, plain and .trans) reads the 16-byte row that lane 8 i + r supplies for row r of
matrix i at its exact shared byte address (16-byte aligned, in bounds), and gives lane 4 r + w
the pair (r, 2w..2w+1) of matrix i (.trans: (2w, r), (2w+1, r)). cp.async (16 bytes, zero fill
for src-size 0) lands at cp.async.wait_group: a read or write of its destination before the
wait is an error. Shared memory is race-checked per 2-byte granule (nn_attention_tc.Smem: a
conflicting access by another thread, or ldmatrix of another warp, without a __syncthreads /
__syncwarp between); a cp.async is checked as a write both when issued and when it lands.
Global reads are bounds-checked (16-byte loads aligned), every output element is written
exactly once. Bank conflicts are counted for ldmatrix (a phase per 8 x 8 matrix), cp.async
stores (16 bytes: a phase per 8 lanes) and the epilogue's 4-byte stores / 16-byte loads.
ex2.approx.ftz is np.exp2 in float32 with subnormal results flushed to zero.

Run: python3 nn_attention_mma.py [-q] [--plant]   (--plant: shows that planted bugs are caught)"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from nn_attention_tc import (
    BF16,
    HALF,
    OPTIN_SMEM,
    TOL,
    WORST,
    Operand,
    Out,
    Smem,
    check_close,
    contiguous_strides,
    make_operands,
    ref_attention,
    rowdot,
    tc_problem,
    tc_view,
)
from nn_sim import EmulationError

K_WARPS = 4
K_THREADS = 128
K_ROWS = 64
K_WARP_ROWS = 16
LOG2E = np.float32(1.4426950408889634)
LN2 = np.float32(0.6931471805599453)
LANE = np.arange(32)
G, T4 = LANE >> 2, LANE & 3
NEG_INF = np.float32(-np.inf)
POS_INF = np.float32(np.inf)
F32 = np.float32

PLANT = set()  # names of planted bugs (the self-test of the emulation)

# ---- fragment layouts (PTX ISA, m16n8k16, 16-bit A / B, float C / D) --------------------------

_H = np.arange(2)
# A: [lane, reg, half] -> (row, col)
A_ROW = (G[:, None, None] + np.array([0, 8, 0, 8])[None, :, None] + 0 * _H).astype(np.int64)
A_COL = (2 * T4[:, None, None] + np.array([0, 0, 8, 8])[None, :, None] + _H).astype(np.int64)
# B: [lane, reg, half] -> (k, n)
B_K = (2 * T4[:, None, None] + np.array([0, 8])[None, :, None] + _H).astype(np.int64)
B_N = (G[:, None, None] + 0 * B_K).astype(np.int64)
# C / D: [lane, e] -> (row, col)
C_ROW = (G[:, None] + np.array([0, 0, 8, 8])[None, :]).astype(np.int64)
C_COL = (2 * T4[:, None] + np.array([0, 1, 0, 1])[None, :]).astype(np.int64)


def _check_layouts():
    for rows, cols, shape in ((A_ROW, A_COL, (16, 16)), (B_K, B_N, (16, 8)),
                              (C_ROW, C_COL, (16, 8))):
        cnt = np.zeros(shape, np.int64)
        np.add.at(cnt, (rows, cols), 1)
        assert np.all(cnt == 1), "a fragment layout does not cover its matrix once"


_check_layouts()


def mma(ty, d, a, b):
    """mma.sync m16n8k16 on nb independent accumulators: d [nb, 32, 4] floats, a [32, 4, 2] (or
    [nb, 32, 4, 2]) and b [nb, 32, 2, 2] 16-bit patterns; returns the new d."""
    nb = d.shape[0]
    A = np.zeros(a.shape[:-3] + (16, 16))
    A[..., A_ROW, A_COL] = ty.value(a)
    B = np.zeros((nb, 16, 8))
    B[:, B_K, B_N] = ty.value(b)
    C = np.zeros((nb, 16, 8))
    C[:, C_ROW, C_COL] = d
    out = (A @ B + C).astype(np.float32)
    return out[:, C_ROW, C_COL]


def pack(ty, lo, hi):
    """Mma<T>::pack: two floats -> one b32 register (round to nearest even), as [..., 2] bits."""
    return np.stack([ty.bits(ty.round(lo)), ty.bits(ty.round(hi))], axis=-1)


def a_from_acc(ty, x, kk):
    """The A fragment (k16 block kk) from the accumulators x [N/8, 32, 4] of n8 tiles 2kk, 2kk+1,
    as accumulate() packs it."""
    x0, x1 = x[2 * kk], x[2 * kk + 1]
    regs = [pack(ty, x0[:, 0], x0[:, 1]), pack(ty, x0[:, 2], x0[:, 3]),
            pack(ty, x1[:, 0], x1[:, 1]), pack(ty, x1[:, 2], x1[:, 3])]
    if "a_frag_swap" in PLANT:
        regs[1], regs[2] = regs[2], regs[1]
    return np.stack(regs, axis=1)  # [32, 4, 2]


def pairs_to_ntiles(fb):
    """ldmatrix x4 results [np, 32, 4, 2] whose registers (0, 1) / (2, 3) are the B fragments
    of n8 tiles 2 np / 2 np + 1 -> [2 np, 32, 2, 2]."""
    n = fb.shape[0]
    return fb.reshape(n, 32, 2, 2, 2).transpose(0, 2, 1, 3, 4).reshape(2 * n, 32, 2, 2)


def ex2(x):
    """ex2.approx.ftz.f32 (exact here), subnormal results flushed."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp2(np.asarray(x, dtype=np.float32)).astype(np.float32)
    return np.where(np.abs(y) < np.float32(2.0 ** -126), F32(0), y).astype(np.float32)


# ---- MmaLayout ---------------------------------------------------------------------------------

class Layout:
    def __init__(self, D):
        self.D = D
        self.pitch = (D + 8) * 2
        if "no_pad" in PLANT:
            self.pitch = D * 2
        self.tile = K_ROWS * self.pitch
        self.qt = 64 if D <= 64 else 32
        self.qtile = self.qt * self.pitch
        t, qt = self.tile, self.qtile
        self.fwd_bytes = 5 * t
        self.dq_do = t
        self.dq_bytes = 6 * t
        self.kv_v = t
        self.kv_stats = 2 * t + 4 * qt
        self.kv_bytes = self.kv_stats + 4 * self.qt * 4

    def fwd_k(self, b):
        return self.tile + b * 2 * self.tile

    def fwd_v(self, b):
        return 2 * self.tile + b * 2 * self.tile

    def dq_k(self, b):
        return 2 * self.tile + b * 2 * self.tile

    def dq_v(self, b):
        return 3 * self.tile + b * 2 * self.tile

    def kv_q(self, b):
        return 2 * self.tile + b * 2 * self.qtile

    def kv_do(self, b):
        return 2 * self.tile + self.qtile + b * 2 * self.qtile

    def kv_lse(self, b):
        return self.kv_stats + b * 2 * self.qt * 4

    def kv_d(self, b):
        return self.kv_stats + b * 2 * self.qt * 4 + self.qt * 4

    def regions(self, kernel):
        t, qt = self.tile, self.qtile
        if kernel == "forward":
            return [("Q", 0, t)] + [(f"{n}{b}", f(b), f(b) + t) for b in (0, 1)
                                    for n, f in (("K", self.fwd_k), ("V", self.fwd_v))]
        if kernel == "dq":
            return [("Q", 0, t), ("dO", t, 2 * t)] + [
                (f"{n}{b}", f(b), f(b) + t) for b in (0, 1)
                for n, f in (("K", self.dq_k), ("V", self.dq_v))]
        return [("K", 0, t), ("V", t, 2 * t)] + [
            (f"{n}{b}", f(b), f(b) + s) for b in (0, 1)
            for n, f, s in (("Q", self.kv_q, qt), ("dO", self.kv_do, qt),
                            ("lse", self.kv_lse, self.qt * 4), ("D", self.kv_d, self.qt * 4))]

    def bytes(self, kernel):
        return {"forward": self.fwd_bytes, "dq": self.dq_bytes, "dkv": self.kv_bytes}[kernel]


def check_layout(lay, kernel):
    nbytes = lay.bytes(kernel)
    regs = sorted(lay.regions(kernel), key=lambda r: r[1])
    for (n0, s0, e0), (n1, s1, e1) in zip(regs, regs[1:]):
        if e0 > s1:
            raise EmulationError(f"{kernel} D={lay.D}: regions {n0} and {n1} overlap")
    for n, s, e in regs:
        if s % 16 or e > nbytes:
            raise EmulationError(f"{kernel} D={lay.D}: region {n} [{s}, {e}) misplaced")
    if nbytes > OPTIN_SMEM:
        raise EmulationError(f"{kernel} D={lay.D}: {nbytes} bytes of shared memory per block")


def a_lane(P):
    return (LANE & 15) * P + (LANE >> 4) * 16


def b_lane(P):
    return ((LANE & 7) + (LANE >> 4) * 8) * P + ((LANE >> 3) & 1) * 16


# ---- bank conflicts ----------------------------------------------------------------------------

class Banks:
    """Wavefronts counted against the ideal (one per phase), per kind of access."""

    def __init__(self):
        self.c = {}

    def add(self, kind, addrs, width):
        """One warp instruction: addrs [lanes] byte addresses of width 4 / 8 / 16 bytes."""
        addrs = np.asarray(addrs, dtype=np.int64).ravel()
        per = {4: 32, 8: 16, 16: 8}[width]
        got = ideal = 0
        for p0 in range(0, addrs.size, per):
            a = addrs[p0:p0 + per]
            words = np.unique((a[:, None] // 4 + np.arange(width // 4)).ravel())
            got += int(np.bincount(words % 32, minlength=32).max())
            ideal += 1
        c = self.c.setdefault(kind, [0, 0])
        c[0] += got
        c[1] += ideal

    def merge(self, other):
        for k, (g, i) in other.c.items():
            c = self.c.setdefault(k, [0, 0])
            c[0] += g
            c[1] += i

    def extra(self, kind):
        g, i = self.c.get(kind, (0, 0))
        return g - i


# ---- shared memory with cp.async ----------------------------------------------------------------

class CpSmem(Smem):
    """Smem plus cp.async: issued copies are in flight until the next wait_group 0 of the block
    (every thread runs the same commit / wait sequence); touching a granule in flight raises."""

    def __init__(self, nbytes, banks):
        super().__init__(nbytes)
        self.inflight = np.zeros((nbytes + 1) // 2, bool)
        self.pending = []   # (granules [n, 8], bits [n, 8], ids [n, 8]) of the open group
        self.groups = []
        self.banks = banks

    def _no_flight(self, g, what):
        if np.any(self.inflight[g]):
            raise EmulationError(f"{what} of a cp.async destination before its wait_group")

    def read(self, g, ids, what="read"):
        self._no_flight(g, what)
        super().read(g, ids, what)

    def write(self, g, ids, what="write"):
        self._no_flight(g, what)
        super().write(g, ids, what)

    def cp_async(self, dst, bits, tids):
        """cp.async.cg 16 bytes: dst [n] byte addresses, bits [n, 8], tids [n]."""
        dst = np.asarray(dst, dtype=np.int64)
        if np.any(dst % 16):
            raise EmulationError("cp.async destination not 16-byte aligned")
        off = dst[:, None] + 2 * np.arange(8)
        g = self._granules(off, 2, "cp.async")
        ids = np.broadcast_to(tids[:, None], g.shape)
        self._no_flight(g, "cp.async")
        # checked as a write now (it may land any time from here)
        saved = (self.w_id[g].copy(), self.w_b[g].copy(), self.w_w[g].copy(),
                 self.r_id[g].copy(), self.r_warp[g].copy())
        Smem.write(self, g, ids, "cp.async")
        self.w_id[g], self.w_b[g], self.w_w[g], self.r_id[g], self.r_warp[g] = saved
        self.inflight[g] = True
        self.pending.append((g, np.asarray(bits, np.uint16), ids))
        for w in range(K_WARPS):  # bank conflicts of the stores, per warp instruction
            sel = tids // 32 == w
            if sel.any():
                self.banks.add("cp.async store", dst[sel], 16)

    def commit(self):
        self.groups.append(self.pending)
        self.pending = []

    def wait_all(self):
        if "no_cp_wait" in PLANT:
            return
        for grp in self.groups:
            for g, bits, ids in grp:
                self.inflight[g] = False
                Smem.write(self, g, ids, "cp.async (landing)")
                self.mem.view(np.uint16)[g.ravel()] = bits.ravel()
        self.groups = []

    def finish(self):
        if self.pending or any(self.groups) or self.inflight.any():
            raise EmulationError("the block ends with cp.async copies in flight")


def ldmatrix(sm, addrs, warp, trans, kind):
    """ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 for several instructions of one warp:
    addrs [n, 32] byte addresses (lane 8 i + r: row r of matrix i). Returns [n, 32, 4, 2]."""
    addrs = np.asarray(addrs, dtype=np.int64).reshape(-1, 32)
    if np.any(addrs % 16):
        raise EmulationError("ldmatrix row address not 16-byte aligned")
    off = addrs[..., None] + 2 * np.arange(8)  # [n, 32, 8]
    data = sm.ld_u16(off, np.int64(1000 + warp)).reshape(-1, 4, 8, 8)  # [n, matrix, row, col]
    for a in addrs:
        for i in range(4):
            sm.banks.add(kind, a[8 * i:8 * i + 8], 16)
    r, w = LANE >> 2, LANE & 3
    if trans:
        lo, hi = data[:, :, 2 * w, r], data[:, :, 2 * w + 1, r]     # [n, 4, 32]
    else:
        lo, hi = data[:, :, r, 2 * w], data[:, :, r, 2 * w + 1]
    return np.stack([lo, hi], axis=-1).transpose(0, 2, 1, 3)  # [n, 32, 4, 2]


# ---- global memory -----------------------------------------------------------------------------

def load_tile(sm, D, N, dst, op, base, r0, limit):
    """load_tile<D, N>: the block's threads issue cp.async 16-byte copies, zero fill from row
    `limit` on (src-size 0: nothing read)."""
    chunks = D // 8
    P = (D + 8) * 2 if "no_pad" not in PLANT else D * 2
    assert N * chunks % K_THREADS == 0
    t = op.t
    for it in range(N * chunks // K_THREADS):
        idx = it * K_THREADS + np.arange(K_THREADS)
        r, c = idx // chunks, idx % chunks
        ok = r0 + r < limit
        bits = np.zeros((K_THREADS, 8), np.uint16)
        if ok.any():
            off = t.offset + base + (r0 + r[ok]) * op.row + c[ok] * 8
            if np.any((t.byte_addr + 2 * off) % 16):
                raise EmulationError("cp.async source not 16-byte aligned")
            if off.min() < 0 or off.max() + 8 > t.bits.size:
                raise EmulationError("cp.async source out of bounds")
            bits[ok] = t.bits[off[:, None] + np.arange(8)]
        sm.cp_async(dst + r * P + c * 16, bits, np.arange(K_THREADS))


def gread(arr, idx):
    idx = np.asarray(idx, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= arr.size):
        raise EmulationError("global read out of bounds")
    return arr[idx]


def lse2(sv, b, L, i):
    """lse2: base-2 logsumexp of rows i; +inf past L or for -inf."""
    i = np.asarray(i, dtype=np.int64)
    ok = i < L
    x = np.full(i.shape, POS_INF, np.float32)
    if ok.any():
        v = gread(sv["lse"], b * L + i[ok])
        x[ok] = np.where(v == NEG_INF, POS_INF, (v * LOG2E).astype(np.float32))
    return x


def dsum_of(sv, b, L, i):
    i = np.asarray(i, dtype=np.int64)
    ok = i < L
    x = np.zeros(i.shape, np.float32)
    if ok.any():
        x[ok] = gread(sv["dsum"], b * L + i[ok])
    return x


# ---- device helpers ----------------------------------------------------------------------------

def scores(sm, ty, D, N, a, b, w):
    """scores<T, D, N>: [N/8, 32, 4] = the warp's 16 rows at a times the N rows at b, ^T."""
    P = sm.pitch
    acc = np.zeros((N // 8, 32, 4), np.float32)
    for kk in range(D // 16):
        fa = ldmatrix(sm, a + a_lane(P) + kk * 32, w, False, "ldmatrix")[0]
        fb = ldmatrix(sm, [b + np_ * 16 * P + b_lane(P) + kk * 32 for np_ in range(N // 16)], w,
                      False, "ldmatrix")
        acc = mma(ty, acc, fa, pairs_to_ntiles(fb))
    return acc


def accumulate(sm, ty, D, N, acc, x, b, w):
    """accumulate<T, D, N>: acc [D/8, 32, 4] += x (rounded) times the N x D tile at b (.trans)."""
    P = sm.pitch
    trans = "no_trans" not in PLANT
    for kk in range(N // 16):
        fa = a_from_acc(ty, x, kk)
        fb = ldmatrix(sm, [b + kk * 16 * P + a_lane(P) + dp * 32 for dp in range(D // 16)], w,
                      trans, "ldmatrix.trans")
        acc = mma(ty, acc, fa, pairs_to_ntiles(fb))
    return acc


def write_rows(sm, ty, D, dst, dst_base, acc, st, mul, row0, nrows, w):
    """write_rows<T, D>: stage the warp's rows (rounded) at shared byte st, then 16-byte stores."""
    P = sm.pitch
    chunks = D // 8
    tid = w * 32 + LANE
    sm.syncwarp(w)
    for n in range(D // 8):
        x = (acc[n] * mul).astype(np.float32)
        for half, rows in ((0, G), (1, G + 8)):
            bits = pack(ty, x[:, 2 * half], x[:, 2 * half + 1])   # [32, 2]
            addr = st + rows * P + n * 16 + T4 * 4
            sm.banks.add("epilogue st.shared.b32", addr, 4)
            off = addr[:, None] + 2 * np.arange(2)
            sm.st_u16(off, bits, np.broadcast_to(tid[:, None], off.shape))
    if "no_epilogue_syncwarp" not in PLANT:
        sm.syncwarp(w)
    for it in range(K_WARP_ROWS * chunks // 32):
        idx = it * 32 + LANE
        rr, c = idx // chunks, idx % chunks
        addr = st + rr * P + c * 16
        sm.banks.add("epilogue ld.shared.v4", addr, 16)
        ok = row0 + rr < nrows
        if not ok.any():
            continue
        off = addr[ok][:, None] + 2 * np.arange(8)
        bits = sm.ld_u16(off, np.broadcast_to(tid[ok][:, None], off.shape))
        cols = (c[ok] * 8)[:, None] + np.arange(8)
        dst.store(dst_base + ((row0 + rr[ok]) * D)[:, None] + cols, ty.value(bits), align=8)


def new_smem(lay, kernel, banks):
    check_layout(lay, kernel)
    sm = CpSmem(lay.bytes(kernel), banks)
    sm.pitch = lay.pitch
    return sm


# ---- kernels -----------------------------------------------------------------------------------

def forward_block(p, ty, D, bid, out, lse, rng, banks):
    lay = Layout(D)
    P = lay.pitch
    sm = new_smem(lay, "forward", banks)
    ntiles = (p.L + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    tile = bid - b * ntiles
    if p.causal:
        tile = ntiles - 1 - tile
    i0 = tile * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    nkeys = min(p.S, i1) if p.causal else p.S
    nk = (nkeys + K_ROWS - 1) // K_ROWS
    koff, voff = p.k.batch_offset(b), p.v.batch_offset(b)
    load_tile(sm, D, K_ROWS, 0, p.q, p.q.batch_offset(b), i0, p.L)
    load_tile(sm, D, K_ROWS, lay.fwd_k(0), p.k, koff, 0, nkeys)
    load_tile(sm, D, K_ROWS, lay.fwd_v(0), p.v, voff, 0, nkeys)
    sm.commit()
    sm.wait_all()
    sm.syncthreads()
    st = {}
    for w in rng.permutation(K_WARPS):
        qf = ldmatrix(sm, [w * K_WARP_ROWS * P + a_lane(P) + kk * 32 for kk in range(D // 16)],
                      w, False, "ldmatrix")
        st[w] = dict(qf=qf, o=np.zeros((D // 8, 32, 4), np.float32),
                     m=np.full((32, 2), NEG_INF), l=np.zeros((32, 2), np.float32),
                     w0=i0 + w * K_WARP_ROWS)
    j_ = np.arange(K_ROWS // 8)[:, None, None]
    e_ = np.arange(4)[None, None, :]
    for n in range(nk):
        buf = n & 1
        if n + 1 < nk:
            load_tile(sm, D, K_ROWS, lay.fwd_k(buf ^ 1), p.k, koff, (n + 1) * K_ROWS, nkeys)
            load_tile(sm, D, K_ROWS, lay.fwd_v(buf ^ 1), p.v, voff, (n + 1) * K_ROWS, nkeys)
        sm.commit()
        k0 = n * K_ROWS
        for w in rng.permutation(K_WARPS):
            s_ = st[w]
            w0 = s_["w0"]
            if p.causal and k0 > w0 + K_WARP_ROWS - 1:
                continue
            kb = lay.fwd_k(buf)
            s = np.zeros((K_ROWS // 8, 32, 4), np.float32)
            for kk in range(D // 16):
                fb = ldmatrix(sm, [kb + np_ * 16 * P + b_lane(P) + kk * 32
                                   for np_ in range(K_ROWS // 16)], w, False, "ldmatrix")
                s = mma(ty, s, s_["qf"][kk], pairs_to_ntiles(fb))
            mask = k0 + K_ROWS > nkeys or (p.causal and k0 + K_ROWS - 1 > w0)
            if "mask_causal_only" in PLANT:
                mask = p.causal and k0 + K_ROWS - 1 > w0
            s = (s * p.scale_log2).astype(np.float32)
            if mask:
                col = k0 + j_ * 8 + 2 * T4[None, :, None] + (e_ & 1)
                row = w0 + G[None, :, None] + (e_ >> 1) * 8
                cut = col >= nkeys
                if p.causal:
                    cut = cut | ((col >= row) if "causal_off_by_one" in PLANT else (col > row))
                if "mask_causal_only" in PLANT:
                    cut = (col > row) if p.causal else np.zeros_like(cut)
                s = np.where(cut, NEG_INF, s).astype(np.float32)
            for r in range(2):
                mx = np.fmax(s_["m"][:, r], s[:, :, 2 * r:2 * r + 2].max(axis=(0, 2)))
                mx = np.fmax(mx, mx[LANE ^ 1])
                mx = np.fmax(mx, mx[LANE ^ 2])
                shift = np.where(mx == NEG_INF, F32(0), mx).astype(np.float32)
                alpha = ex2(s_["m"][:, r] - shift)
                s_["m"][:, r] = mx
                tot = np.zeros(32, np.float32)
                for j in range(K_ROWS // 8):
                    s[j, :, 2 * r] = ex2(s[j, :, 2 * r] - shift)
                    s[j, :, 2 * r + 1] = ex2(s[j, :, 2 * r + 1] - shift)
                    tot = (tot + (s[j, :, 2 * r] + s[j, :, 2 * r + 1])).astype(np.float32)
                s_["l"][:, r] = (s_["l"][:, r] * alpha + tot).astype(np.float32)
                if "no_rescale" in PLANT:
                    alpha = np.ones_like(alpha)
                s_["o"][:, :, 2 * r:2 * r + 2] *= alpha[None, :, None]
            s_["o"] = accumulate(sm, ty, D, K_ROWS, s_["o"], s, lay.fwd_v(buf), w)
        sm.wait_all()
        if "no_loop_sync" not in PLANT:
            sm.syncthreads()
    sm.finish()
    for w in rng.permutation(K_WARPS):
        s_ = st[w]
        ll = s_["l"].copy()
        for r in range(2):
            ll[:, r] = (ll[:, r] + ll[LANE ^ 1, r]).astype(np.float32)
            ll[:, r] = (ll[:, r] + ll[LANE ^ 2, r]).astype(np.float32)
        none = ll == 0
        inv = np.where(none, F32(0), F32(1) / np.where(none, F32(1), ll)).astype(np.float32)
        o = s_["o"].copy()
        o[:, :, 0:2] *= inv[None, :, 0:1]
        o[:, :, 2:4] *= inv[None, :, 1:2]
        write_rows(sm, ty, D, out, b * p.L * D, o, w * K_WARP_ROWS * P, F32(1), s_["w0"], p.L,
                   w)
        for r in range(2):
            row = s_["w0"] + G + r * 8
            wr = (T4 == 0) & (row < p.L)
            val = np.where(none[:, r], NEG_INF,
                           (s_["m"][:, r] + np.log2(np.where(none[:, r], F32(1), ll[:, r])))
                           * LN2).astype(np.float32)
            lse.store(b * p.L + row[wr], val[wr])


def grad_q_block(p, ty, D, bid, sv, gq, rng, banks):
    lay = Layout(D)
    P = lay.pitch
    sm = new_smem(lay, "dq", banks)
    ntiles = (p.L + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    tile = bid - b * ntiles
    if p.causal:
        tile = ntiles - 1 - tile
    i0 = tile * K_ROWS
    i1 = min(i0 + K_ROWS, p.L)
    nkeys = min(p.S, i1) if p.causal else p.S
    nk = (nkeys + K_ROWS - 1) // K_ROWS
    koff, voff = p.k.batch_offset(b), p.v.batch_offset(b)
    load_tile(sm, D, K_ROWS, 0, p.q, p.q.batch_offset(b), i0, p.L)
    load_tile(sm, D, K_ROWS, lay.dq_do, sv["go"], sv["go"].batch_offset(b), i0, p.L)
    load_tile(sm, D, K_ROWS, lay.dq_k(0), p.k, koff, 0, nkeys)
    load_tile(sm, D, K_ROWS, lay.dq_v(0), p.v, voff, 0, nkeys)
    sm.commit()
    st = {}
    for w in range(K_WARPS):
        w0 = i0 + w * K_WARP_ROWS
        rows = w0 + G[:, None] + np.array([0, 8])[None, :]  # [32, 2]
        st[w] = dict(w0=w0, lse=lse2(sv, b, p.L, rows), d=dsum_of(sv, b, p.L, rows),
                     dq=np.zeros((D // 8, 32, 4), np.float32))
    sm.wait_all()
    sm.syncthreads()
    j_ = np.arange(K_ROWS // 8)[:, None, None]
    e_ = np.arange(4)[None, None, :]
    for n in range(nk):
        buf = n & 1
        if n + 1 < nk:
            load_tile(sm, D, K_ROWS, lay.dq_k(buf ^ 1), p.k, koff, (n + 1) * K_ROWS, nkeys)
            load_tile(sm, D, K_ROWS, lay.dq_v(buf ^ 1), p.v, voff, (n + 1) * K_ROWS, nkeys)
        sm.commit()
        k0 = n * K_ROWS
        for w in rng.permutation(K_WARPS):
            s_ = st[w]
            w0 = s_["w0"]
            if p.causal and k0 > w0 + K_WARP_ROWS - 1:
                continue
            s = scores(sm, ty, D, K_ROWS, w * K_WARP_ROWS * P, lay.dq_k(buf), w)
            dp = scores(sm, ty, D, K_ROWS, lay.dq_do + w * K_WARP_ROWS * P, lay.dq_v(buf), w)
            mask = k0 + K_ROWS > nkeys or (p.causal and k0 + K_ROWS - 1 > w0)
            lse_e = s_["lse"][:, e_[0, 0] >> 1][None]   # [1, 32, 4]
            d_e = s_["d"][:, e_[0, 0] >> 1][None]
            pij = ex2((s * p.scale_log2).astype(np.float32) - lse_e)
            if mask:
                col = k0 + j_ * 8 + 2 * T4[None, :, None] + (e_ & 1)
                row = w0 + G[None, :, None] + (e_ >> 1) * 8
                cut = (col >= nkeys) | ((col > row) if p.causal else False)
                pij = np.where(cut, F32(0), pij).astype(np.float32)
            ds = (pij * (dp - d_e)).astype(np.float32)
            s_["dq"] = accumulate(sm, ty, D, K_ROWS, s_["dq"], ds, lay.dq_k(buf), w)
        sm.wait_all()
        sm.syncthreads()
    sm.finish()
    for w in rng.permutation(K_WARPS):
        s_ = st[w]
        write_rows(sm, ty, D, gq, b * p.L * D, s_["dq"], w * K_WARP_ROWS * P, p.scale,
                   s_["w0"], p.L, w)


def grad_kv_block(p, ty, D, bid, sv, gk, gv, rng, banks):
    lay = Layout(D)
    P, QT = lay.pitch, lay.qt
    sm = new_smem(lay, "dkv", banks)
    ntiles = (p.S + K_ROWS - 1) // K_ROWS
    b = bid // ntiles
    j0 = (bid - b * ntiles) * K_ROWS
    qoff, gooff = p.q.batch_offset(b), sv["go"].batch_offset(b)
    qstart = j0 if p.causal else 0
    if "dkv_qstart" in PLANT and p.causal:
        qstart = j0 + K_ROWS
    nq = (p.L - qstart + QT - 1) // QT if qstart < p.L else 0
    load_tile(sm, D, K_ROWS, 0, p.k, p.k.batch_offset(b), j0, p.S)
    load_tile(sm, D, K_ROWS, lay.kv_v, p.v, p.v.batch_offset(b), j0, p.S)
    if nq > 0:
        load_tile(sm, D, QT, lay.kv_q(0), p.q, qoff, qstart, p.L)
        load_tile(sm, D, QT, lay.kv_do(0), sv["go"], gooff, qstart, p.L)
    sm.commit()
    tid = np.arange(QT)
    sm.st_f32(lay.kv_lse(0) + tid * 4, lse2(sv, b, p.L, qstart + tid), tid)
    sm.st_f32(lay.kv_d(0) + tid * 4, dsum_of(sv, b, p.L, qstart + tid), tid)
    st = {w: dict(w0=j0 + w * K_WARP_ROWS, dk=np.zeros((D // 8, 32, 4), np.float32),
                  dv=np.zeros((D // 8, 32, 4), np.float32)) for w in range(K_WARPS)}
    sm.wait_all()
    sm.syncthreads()
    j_ = np.arange(QT // 8)[:, None, None]
    e_ = np.arange(4)[None, None, :]
    for n in range(nq):
        buf = n & 1
        q0 = qstart + n * QT
        pre = None
        if n + 1 < nq:
            load_tile(sm, D, QT, lay.kv_q(buf ^ 1), p.q, qoff, q0 + QT, p.L)
            load_tile(sm, D, QT, lay.kv_do(buf ^ 1), sv["go"], gooff, q0 + QT, p.L)
            pre = (lse2(sv, b, p.L, q0 + QT + tid), dsum_of(sv, b, p.L, q0 + QT + tid))
        sm.commit()
        for w in rng.permutation(K_WARPS):
            s_ = st[w]
            w0 = s_["w0"]
            if p.causal and q0 + QT - 1 < w0:
                continue
            s = scores(sm, ty, D, QT, w * K_WARP_ROWS * P, lay.kv_q(buf), w)
            dp = scores(sm, ty, D, QT, lay.kv_v + w * K_WARP_ROWS * P, lay.kv_do(buf), w)
            # float2 loads of the statistics: lane reads columns j * 8 + 2t, + 1
            cols = j_[:, :, 0] * 8 + 2 * T4[None, :]             # [QT/8, 32]
            ids = np.broadcast_to((w * 32 + LANE)[None, :, None], cols.shape + (2,))
            for j in range(QT // 8):
                sm.banks.add("stats ld.shared.v2", lay.kv_lse(buf) + cols[j] * 4, 8)
            lc = sm.ld_f32(lay.kv_lse(buf) + (cols[..., None] + np.arange(2)) * 4, ids)
            dc = sm.ld_f32(lay.kv_d(buf) + (cols[..., None] + np.arange(2)) * 4, ids)
            lse_e = lc[:, :, e_[0, 0] & 1]   # [QT/8, 32, 4]
            d_e = dc[:, :, e_[0, 0] & 1]
            pij = ex2((s * p.scale_log2).astype(np.float32) - lse_e)
            if p.causal and q0 < w0 + K_WARP_ROWS - 1:
                col = q0 + j_ * 8 + 2 * T4[None, :, None] + (e_ & 1)
                row = w0 + G[None, :, None] + (e_ >> 1) * 8
                pij = np.where(row > col, F32(0), pij).astype(np.float32)
            ds = (pij * (dp - d_e)).astype(np.float32)
            s_["dv"] = accumulate(sm, ty, D, QT, s_["dv"], pij, lay.kv_do(buf), w)
            s_["dk"] = accumulate(sm, ty, D, QT, s_["dk"], ds, lay.kv_q(buf), w)
        if pre is not None:
            sm.st_f32(lay.kv_lse(buf ^ 1) + tid * 4, pre[0], tid)
            sm.st_f32(lay.kv_d(buf ^ 1) + tid * 4, pre[1], tid)
        sm.wait_all()
        sm.syncthreads()
    sm.finish()
    for w in rng.permutation(K_WARPS):
        s_ = st[w]
        write_rows(sm, ty, D, gv, b * p.S * D, s_["dv"], lay.kv_v + w * K_WARP_ROWS * P, F32(1),
                   s_["w0"], p.S, w)
        write_rows(sm, ty, D, gk, b * p.S * D, s_["dk"], w * K_WARP_ROWS * P, p.scale,
                   s_["w0"], p.S, w)


# ---- cases -------------------------------------------------------------------------------------

BANKS = {}  # D -> Banks over every case


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
    if layout in ("packed", "rowpad") and stats["copies"]:
        fails.append(f"{name}: a {layout} operand was copied")
    banks = BANKS.setdefault(D, Banks())
    nblocks = B * ((L + K_ROWS - 1) // K_ROWS)
    out, lse = Out(B * L * D), Out(B * L)
    for bid in rng.permutation(nblocks):
        forward_block(p, ty, D, int(bid), out, lse, rng, banks)
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
    go = Operand(ty.bits(g).ravel(), 0, batch + (L, D), contiguous_strides(list(batch) + [L, D]))
    sv = {"go": tc_view(go, ty, stats), "lse": ls.ravel().astype(np.float32),
          "dsum": rowdot(g, o.astype(np.float32), B * L, D)}
    gq, gk, gv = Out(B * L * D), Out(B * S * D), Out(B * S * D)
    for bid in rng.permutation(nblocks):
        grad_q_block(p, ty, D, int(bid), sv, gq, rng, banks)
    for bid in rng.permutation(B * ((S + K_ROWS - 1) // K_ROWS)):
        grad_kv_block(p, ty, D, int(bid), sv, gk, gv, rng, banks)
    for nm, got, ref, n in (("dq", gq, r_dq, L), ("dk", gk, r_dk, S), ("dv", gv, r_dv, S)):
        check_close(fails, f"{name} {nm}", got.check(f"{name} {nm}").reshape(batch + (n, D)),
                    ref, tol * 2, (ty.name, nm))


def cases(quick=False):
    C = []
    sizes = (1, 15, 64, 65, 130, 1000)
    pairs = [(n, n) for n in sizes] + [(15, 130), (130, 15), (65, 1), (1, 65), (64, 1000),
                                       (1000, 65)]
    for D in (64, 128):
        for (L, S) in pairs:
            if quick and max(L, S) == 1000:
                continue
            for causal in (False, True):
                both = max(L, S) < 1000 or (D == 64 and L == S)  # GPT-2's size: both dtypes
                for ty in ((HALF, BF16) if both else ((BF16,) if causal else (HALF,))):
                    C.append(dict(name=f"D={D} L={L} S={S} causal={causal} {ty}", batch=(2,)
                                  if max(L, S) < 1000 else (1,), L=L, S=S, D=D, ty=ty,
                                  causal=causal))
    for D in (32, 96):
        C.append(dict(name=f"D={D} causal", batch=(1, 2), L=70, S=70, D=D, ty=HALF, causal=True))
        C.append(dict(name=f"D={D} L!=S", batch=(2,), L=33, S=100, D=D, ty=BF16, causal=False))
        C.append(dict(name=f"D={D} L!=S causal", batch=(1,), L=130, S=65, D=D, ty=HALF,
                      causal=True))
    C.append(dict(name="GPT-2 layout (packed heads) causal", batch=(2, 3), L=100, S=100, D=64,
                  ty=BF16, causal=True, layout="packed"))
    C.append(dict(name="GPT-2 layout (packed heads) D=128", batch=(1, 2), L=70, S=70, D=128,
                  ty=HALF, causal=False, layout="packed"))
    C.append(dict(name="rows padded", batch=(2,), L=40, S=77, D=64, ty=HALF, causal=False,
                  layout="rowpad"))
    C.append(dict(name="misaligned key (copied)", batch=(2,), L=40, S=50, D=128, ty=BF16,
                  causal=True, layout="misaligned"))
    for s_ in (0.05, 1.5):
        for causal in (False, True):
            C.append(dict(name=f"scale={s_} causal={causal}", batch=(1,), L=80, S=90, D=64,
                          ty=BF16 if causal else HALF, causal=causal, scale=s_))
    return C


PLANTS = {  # planted bug -> a case that must fail with it
    "causal_off_by_one": dict(batch=(1,), L=70, S=70, D=64, ty=HALF, causal=True,
                              backward=False),
    "no_rescale": dict(batch=(1,), L=20, S=200, D=64, ty=HALF, causal=False, backward=False),
    "no_cp_wait": dict(batch=(1,), L=20, S=130, D=64, ty=HALF, causal=False, backward=False),
    "no_loop_sync": dict(batch=(1,), L=20, S=130, D=64, ty=HALF, causal=False, backward=False),
    "mask_causal_only": dict(batch=(1,), L=20, S=100, D=64, ty=HALF, causal=False,
                             backward=False),
    "a_frag_swap": dict(batch=(1,), L=20, S=40, D=64, ty=HALF, causal=False, backward=False),
    "no_trans": dict(batch=(1,), L=20, S=40, D=64, ty=HALF, causal=False, backward=False),
    "dkv_qstart": dict(batch=(1,), L=130, S=130, D=64, ty=HALF, causal=True),
    "no_epilogue_syncwarp": dict(batch=(1,), L=20, S=40, D=64, ty=HALF, causal=False,
                                 backward=False),
    "no_pad": dict(batch=(1,), L=20, S=40, D=64, ty=HALF, causal=False, backward=False),
}


def bank_failures(D):
    """The bank-conflict rule: ldmatrix conflict-free at every D; the 16-byte stores too at
    D = 64 / 128 (rows of 8 / 16 chunks; at D = 32 / 96 a phase of 8 lanes spans two rows)."""
    bk = BANKS.get(D)
    if bk is None:
        return []
    bad = [k for k in ("ldmatrix", "ldmatrix.trans", "epilogue st.shared.b32")
           if bk.extra(k)]
    if D in (64, 128):
        bad += [k for k in ("cp.async store", "epilogue ld.shared.v4") if bk.extra(k)]
    return [f"D={D}: {k}: {bk.extra(k)} extra wavefronts" for k in bad]


def run_plants():
    ok = True
    for bug, case in PLANTS.items():
        PLANT.clear()
        PLANT.add(bug)
        BANKS.clear()
        fails = []
        try:
            run_case(fails, f"plant {bug}", **case)
            fails += bank_failures(case["D"])
        except EmulationError as e:
            fails.append(str(e))
        PLANT.clear()
        caught = bool(fails)
        print(f"planted bug {bug}: {'caught' if caught else 'NOT CAUGHT'}"
              + (f" ({fails[0][:110]})" if caught else ""))
        ok &= caught
    BANKS.clear()
    return ok


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    if "--plant" in sys.argv:
        return 0 if run_plants() else 1
    fails = []
    n = 0
    for c in cases(quick="--quick" in sys.argv):
        c = dict(c)
        name = c.pop("name")
        n += 1
        try:
            t1 = time.time()
            run_case(fails, name, **c)
            if not quiet:
                print(f"ok  {name} ({time.time() - t1:.1f} s)", flush=True)
        except EmulationError as e:
            fails.append(f"{name}: {e}")
            print(f"ERROR {name}: {e}", flush=True)
    for D in sorted(BANKS):
        bf = bank_failures(D)
        fails += bf
        for f in bf:
            print(f"  FAIL bank conflicts {f}")
        summary = ", ".join(f"{k} {g - i}/{i}" for k, (g, i) in sorted(BANKS[D].c.items()))
        print(f"D={D}: extra bank wavefronts / ideal: {summary}")
    for D in (32, 64, 96, 128):
        lay = Layout(D)
        print(f"D={D}: shared memory per block: forward {lay.fwd_bytes}, dQ {lay.dq_bytes}, "
              f"dK/dV {lay.kv_bytes} bytes")
    for (dt, what), e in sorted(WORST.items()):
        print(f"worst {dt} {what}: {e:.2e} of max(1, max |reference|)")
    print(f"nn_attention_mma: {n} cases, {len(fails)} failures, {time.time() - t0:.1f} s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
