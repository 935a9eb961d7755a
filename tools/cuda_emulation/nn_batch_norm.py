"""Emulation of the batch norm section of packages/core/csrc/cuda/nn_norm.cu (native_batch_norm and
native_batch_norm_backward: bn_geom / bn_split / bn_reduce_plan, bn_reduce_planes_kernel and
bn_reduce_rows_kernel with the BnStats / BnSums policies, the two finalize kernels, the
elementwise bn_apply_planes_kernel / bn_apply_rows_kernel), thread by thread (nn_sim.py: warp
shuffles, barriers, shared memory starting as None so a read before a write fails), against
ember's CPU kernels.

Device memory is modelled per tensor (Mem): a byte address (for the 16-byte alignment of vector
accesses), bounds checks, and a count of reads and writes per element: every reduction must read
each input element exactly once, every elementwise launch write each output element exactly
once, each partial slot and each per-channel output (save_*, running statistics, grad_weight /
grad_bias) be written exactly once. Layouts: NCHW planes and channels_last / HW == 1 rows, sizes
around the vector widths and block shapes, misaligned base pointers, several splits per channel
(also forced with a smaller per-thread minimum than the kernel's: the plan logic is the same),
float32 / float64 / float16 / bfloat16 with float32 or float64 parameters and running statistics
(strided ones too), eval and training, every backward mask.

`--plant NAME` runs with one of the BUGS below planted (a transcription of a plausible kernel
mistake); `--self-test` runs each planted bug and fails unless the checks catch it.

Run: PYTHONPATH=<build>/site python3 nn_batch_norm.py [-q] [--plant NAME | --self-test]."""

from __future__ import annotations

import math
import sys
import time
from types import SimpleNamespace as NS

import numpy as np
from nn_sim import BF16, F16, F32, F64, SYNC, TOL, EmulationError, Shfl, close, launch, report

K_BN_THREADS = 256
K_BN_MIN_PER_THREAD = 16
K_BN_MAX_BLOCKS = 1024

PLANTABLE = {
    "planes_no_carry": "planes reduction: the (n, j) counter forgets the carry into n",
    "rows_tree_off": "rows reduction: the shared tree merges row h + 1 instead of h",
    "chan_merge": "Welford merge: weights the mean delta by a.n / n instead of b.n / n",
    "split_last": "bn_split: the last slice ends at splits * per - 1",
    "apply_rows_stride": "rows apply: steps rows by gridDim.y instead of gridDim.y * blockDim.y",
    "vec_no_align": "bn_vec ignores pointer alignment",
}
BUGS: set = set()

ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def acc_ty(T):
    return F64 if T is F64 else F32


# ---- device memory ------------------------------------------------------------------------------


class Mem:
    """One tensor's device memory: values stored as T, at byte address addr."""

    def __init__(self, values, T, addr=0, name="mem"):
        self.T, self.addr, self.name = T, addr, name
        self.data = T.mem(values) if values is not None else None
        self.itemsize = ITEMSIZE[T.name]
        n = self.data.size
        self.reads = np.zeros(n, np.int64)
        self.writes = np.zeros(n, np.int64)

    @classmethod
    def empty(cls, n, T, addr=0, name="mem"):
        m = cls(np.full(int(n), np.nan), T, addr, name)
        return m

    def _check(self, off, V):
        if off < 0 or off + V > self.data.size:
            raise EmulationError(f"{self.name}: access [{off}, {off + V}) outside {self.data.size}")
        if V > 1 and (self.addr + off * self.itemsize) % (V * self.itemsize) != 0:
            raise EmulationError(
                f"{self.name}: {V}-element vector access at byte {self.addr + off * self.itemsize} "
                "is misaligned"
            )

    def load(self, off, V):
        self._check(off, V)
        self.reads[off : off + V] += 1
        return [self.T.to_op(self.data[off + k]) for k in range(V)]

    def store(self, off, vals):
        V = len(vals)
        self._check(off, V)
        self.writes[off : off + V] += 1
        for k in range(V):
            self.data[off + k] = self.T.from_op(vals[k])


class Scratch:
    """The A arrays of red::scratch (partials, coefficients): NaN until written; write counts."""

    def __init__(self, n, A):
        self.A = A
        self.v = np.full(int(n), np.nan, dtype=A)
        self.writes = np.zeros(int(n), np.int64)

    def __getitem__(self, i):
        if not (0 <= i < self.v.size):
            raise EmulationError(f"scratch read {i} outside {self.v.size}")
        return self.A(self.v[i])

    def __setitem__(self, i, val):
        if not (0 <= i < self.v.size):
            raise EmulationError(f"scratch write {i} outside {self.v.size}")
        self.writes[i] += 1
        self.v[i] = val


class ChanVec:
    """A per-channel vector read / written in place in its dtype with a stride (elements);
    None plays the absent one (dt < 0)."""

    def __init__(self, values, T, stride=1):
        C = len(values)
        self.T, self.stride = T, stride
        self.data = np.full(max(C * stride, 1), np.nan, dtype=T.store)
        self.data[: C * stride : stride] = T.mem(values)
        self.writes = np.zeros(C, np.int64)

    def values(self):
        return self.data[:: self.stride][: self.writes.size].astype(np.float64)

    def get(self, c, absent):
        return float(self.data[c * self.stride])

    def set(self, c, v):
        self.writes[c] += 1
        with np.errstate(all="ignore"):
            self.data[c * self.stride] = self.T.from_op(np.float32(v) if self.T is not F64 else v)


def cv_get(cv, c, absent):
    return absent if cv is None else cv.get(c, absent)


def cv_set(cv, c, v):
    if cv is not None:
        cv.set(c, v)


# ---- policies and Welford -----------------------------------------------------------------------


def welford_add(s, x):
    n, mean, m2 = s
    A = type(n)
    with np.errstate(all="ignore"):
        n = n + A(1)
        d = x - mean
        mean = mean + d / n
        m2 = m2 + d * (x - mean)
    return (n, mean, m2)


def welford_merge(a, b):
    A = type(a[0])
    if b[0] == A(0):
        return a
    if a[0] == A(0):
        return b
    with np.errstate(all="ignore"):
        n = a[0] + b[0]
        f = (a[0] if "chan_merge" in BUGS else b[0]) / n
        d = b[1] - a[1]
        return (n, a[1] + d * f, a[2] + b[2] + d * d * a[0] * f)


class BnStats:
    K = 3

    def __init__(self, x, A):
        self.x, self.A = x, A

    def load(self, off, V):
        return self.x.load(off, V), [self.A(0)] * V

    def context(self, c):
        return self.A(0)

    def empty(self):
        return (self.A(0), self.A(0), self.A(0))

    def add(self, s, ctx, xv, gv):
        return welford_add(s, xv)

    merge = staticmethod(welford_merge)

    def store(self, part, slots, i, s):
        part[i], part[slots + i], part[2 * slots + i] = s

    def load_partial(self, part, slots, i):
        return (part[i], part[slots + i], part[2 * slots + i])


class BnSums:
    K = 2

    def __init__(self, g, x, mean, A):
        self.g, self.x, self.mean, self.A = g, x, mean, A

    def load(self, off, V):
        return self.x.load(off, V), self.g.load(off, V)

    def context(self, c):
        return self.A(cv_get(self.mean, c, 0.0))

    def empty(self):
        return (self.A(0), self.A(0))

    def add(self, s, m, xv, gv):
        with np.errstate(all="ignore"):
            return (s[0] + gv, s[1] + gv * (xv - m))

    @staticmethod
    def merge(a, b):
        with np.errstate(all="ignore"):
            return (a[0] + b[0], a[1] + b[1])

    def store(self, part, slots, i, s):
        part[i], part[slots + i] = s

    def load_partial(self, part, slots, i):
        return (part[i], part[slots + i])


# ---- kernels -----------------------------------------------------------------------------------


def bn_reduce_planes_kernel(c, pol, part, C, HW, HWv, total_v, per, V):
    ch, y = c.bx, c.by
    lo = y * per
    hi = lo + per if lo + per < total_v else total_v
    ctx = pol.context(ch)
    s = pol.empty()
    step = c.bdx
    q = lo + c.tx
    if q < hi:
        n = q // HWv
        j = q - n * HWv
        sn = step // HWv
        sj = step - sn * HWv
        while q < hi:
            xv, gv = pol.load((n * C + ch) * HW + j * V, V)
            for k in range(V):
                s = pol.add(s, ctx, xv[k], gv[k])
            n += sn
            j += sj
            if j >= HWv:
                j -= HWv
                if "planes_no_carry" not in BUGS:
                    n += 1
            q += step
    o = 16
    while o > 0:
        other = yield Shfl(s, o)
        s = pol.merge(s, other)
        o >>= 1
    warp_states = c.shared.setdefault("warp_states", [None] * (K_BN_THREADS // 32))
    lane, wid, nw = c.tx & 31, c.tx >> 5, c.bdx >> 5
    if lane == 0:
        warp_states[wid] = s
    yield SYNC
    if c.tx == 0:
        for w in range(1, nw):
            s = pol.merge(s, warp_states[w])
        pol.store(part, c.gdy * C, y * C + ch, s)


def bn_reduce_rows_kernel(c, pol, part, C, Cv, R, per, V):
    cv = c.bx * c.bdx + c.tx
    active = cv < Cv
    y = c.by
    lo = y * per
    hi = lo + per if lo + per < R else R
    s = [pol.empty() for _ in range(V)]
    ctx = [pol.context(cv * V + k) if active else pol.A(0) for k in range(V)]
    if active:
        for r in range(lo + c.ty, hi, c.bdy):
            xv, gv = pol.load(r * C + cv * V, V)
            for k in range(V):
                s[k] = pol.add(s[k], ctx[k], xv[k], gv[k])
    sh = c.shared.setdefault("sh", [None] * K_BN_THREADS)
    t = c.ty * c.bdx + c.tx
    for k in range(V):
        sh[t] = s[k]
        yield SYNC
        h = c.bdy // 2
        while h > 0:
            if c.ty < h:
                other = t + (h + 1 if "rows_tree_off" in BUGS else h) * c.bdx
                if other < K_BN_THREADS and sh[other] is not None:
                    sh[t] = pol.merge(sh[t], sh[other])
                elif "rows_tree_off" not in BUGS:
                    raise EmulationError("rows tree read an unwritten slot")
            yield SYNC
            h //= 2
        if c.ty == 0 and active:
            pol.store(part, c.gdy * C, y * C + cv * V + k, sh[c.tx])
        yield SYNC


def bn_merge_partials(c, pol, part, splits, C, ch, lane):
    slots = splits * C
    s = pol.empty()
    for y in range(lane, splits, 32):
        s = pol.merge(s, pol.load_partial(part, slots, y * C + ch))
    o = 16
    while o > 0:
        other = yield Shfl(s, o)
        s = pol.merge(s, other)
        o >>= 1
    return s


def _inv_sqrt(v):
    with np.errstate(all="ignore"):
        return float(np.float64(1.0) / np.sqrt(np.float64(v)))


def bn_forward_finalize_kernel(c, part, splits, C, count, eps, momentum, w, b, rm, rv, sm, si,
                               coef, T):
    A = acc_ty(T).acc
    ch = (c.bx * c.bdx + c.tx) >> 5
    lane = c.tx & 31
    if ch >= C:
        return
    if part is None:
        if lane == 0:
            cv_set(sm, ch, cv_get(rm, ch, 0.0))
            cv_set(si, ch, _inv_sqrt(cv_get(rv, ch, 0.0) + eps))
        return
    s = yield from bn_merge_partials(c, BnStats(None, A), part, splits, C, ch, lane)
    if lane != 0:
        return
    mean = float(s[1])
    v = float(s[2]) / count
    var = 0.0 if v < 0.0 else v
    invstd = _inv_sqrt(var + eps)
    scale = invstd * cv_get(w, ch, 1.0)
    coef[ch] = A(scale)
    coef[C + ch] = A(cv_get(b, ch, 0.0) - mean * scale)
    cv_set(sm, ch, mean)
    cv_set(si, ch, invstd)
    if rm is not None:
        rm.set(ch, (1 - momentum) * rm.get(ch, 0.0) + momentum * mean)
    if rv is not None:
        rv.set(ch, (1 - momentum) * rv.get(ch, 0.0) + momentum * var * count / (count - 1))


def bn_backward_finalize_kernel(c, part, splits, C, count, train, w, mean, invstd, gw, gb, coef, T):
    A = acc_ty(T).acc
    ch = (c.bx * c.bdx + c.tx) >> 5
    lane = c.tx & 31
    if ch >= C:
        return
    s = yield from bn_merge_partials(c, BnSums(None, None, None, A), part, splits, C, ch, lane)
    if lane != 0:
        return
    is_ = cv_get(invstd, ch, 0.0)
    sg = float(s[0])
    sgx = float(s[1]) * is_
    cv_set(gw, ch, sgx)
    cv_set(gb, ch, sg)
    if coef is None:
        return
    k = cv_get(w, ch, 1.0) * is_
    mg = sg / count if train else 0.0
    mgx = sgx / count if train else 0.0
    coef[ch] = A(k)
    coef[C + ch] = A(-k * is_ * mgx)
    coef[2 * C + ch] = A(-k * mg)
    coef[3 * C + ch] = A(cv_get(mean, ch, 0.0))


class BnCoef:
    """The elementwise step's coefficient source (BnCoef<A>)."""

    def __init__(self, pre, C, w, b, mean, var, save_mean, save_invstd, eps, A):
        self.pre, self.C, self.w, self.b = pre, C, w, b
        self.mean, self.var, self.save_mean, self.save_invstd = mean, var, save_mean, save_invstd
        self.eps, self.A = eps, A

    def get(self, c, backward):
        A, C, pre = self.A, self.C, self.pre
        k = c1 = c0 = m = A(0)
        if backward:
            if pre is not None:
                k, c1, c0, m = pre[c], pre[C + c], pre[2 * C + c], pre[3 * C + c]
            else:
                k = A(cv_get(self.w, c, 1.0) * cv_get(self.var, c, 0.0))
        elif pre is not None:
            k, c0 = pre[c], pre[C + c]
        else:
            with np.errstate(all="ignore"):
                scale = cv_get(self.w, c, 1.0) / math.sqrt(cv_get(self.var, c, 0.0) + self.eps)
            k = A(scale)
            c0 = A(cv_get(self.b, c, 0.0) - cv_get(self.mean, c, 0.0) * scale)
        return (k, c1, c0, m)

    def save(self, c):
        if self.pre is not None or self.save_mean is None:
            return
        self.save_mean.set(c, cv_get(self.mean, c, 0.0))
        self.save_invstd.set(c, _inv_sqrt(cv_get(self.var, c, 0.0) + self.eps))


def bn_apply_vec(x, g, out, off, cc, V, backward):
    xv = x.load(off, V)
    with np.errstate(all="ignore"):
        if backward:
            gv = g.load(off, V)
            o = [gv[e] * cc[e][0] + (xv[e] - cc[e][3]) * cc[e][1] + cc[e][2] for e in range(V)]
        else:
            o = [xv[e] * cc[e][0] + cc[e][2] for e in range(V)]
    out.store(off, o)


def bn_apply_planes_kernel(c, x, g, out, cf, NC, C, HW, HWv, V, backward):
    p = c.bx
    while p < NC:
        ch = p % C
        cc = [cf.get(ch, backward)] * V
        if not backward and p < C and c.by == 0 and c.tx == 0:
            cf.save(ch)
        base = p * HW
        j = c.by * c.bdx + c.tx
        while j < HWv:
            bn_apply_vec(x, g, out, base + j * V, cc, V, backward)
            j += c.gdy * c.bdx
        p += c.gdx


def bn_apply_rows_kernel(c, x, g, out, cf, C, Cv, R, V, backward):
    cv = c.bx * c.bdx + c.tx
    if cv >= Cv:
        return
    cc = []
    for e in range(V):
        cc.append(cf.get(cv * V + e, backward))
        if not backward and c.by == 0 and c.ty == 0:
            cf.save(cv * V + e)
    r = c.by * c.bdy + c.ty
    while r < R:
        bn_apply_vec(x, g, out, r * C + cv * V, cc, V, backward)
        r += c.gdy if "apply_rows_stride" in BUGS else c.gdy * c.bdy


# ---- host --------------------------------------------------------------------------------------


def bn_vec(vmax, inner, addrs):
    if inner % vmax != 0:
        return 1
    if "vec_no_align" not in BUGS:
        for a in addrs:
            if a is not None and a % 16 != 0:
                return 1
    return vmax


def bn_geom(channels_last, N, C, HW, itemsize, addrs, min_per_thread=K_BN_MIN_PER_THREAD):
    g = NS(rows=channels_last or HW == 1, N=N, C=C, HW=HW, R=N * HW, V=1, bx=1, by=K_BN_THREADS)
    g.min_per_thread = min_per_thread
    inner = C if g.rows else HW
    g.V = bn_vec(16 // itemsize, inner, addrs)
    g.inner_v = inner // g.V
    if g.rows:
        bx = 1
        while bx < 32 and bx < g.inner_v:
            bx *= 2
        g.bx, g.by = bx, K_BN_THREADS // bx
    return g


def bn_split(blocks_x, total, min_per):
    splits = max(1, (K_BN_MAX_BLOCKS + blocks_x - 1) // max(blocks_x, 1))
    splits = min(splits, max(1, (total + min_per - 1) // min_per))
    per = max(1, (total + splits - 1) // splits)
    return NS(splits=max(1, (total + per - 1) // per), per=per)


def bn_reduce_plan(g):
    if g.rows:
        gx = (g.inner_v + g.bx - 1) // g.bx
        sp = bn_split(gx, g.R, g.min_per_thread * g.by)
        return (gx, sp.splits), sp
    sp = bn_split(g.C, g.N * g.inner_v, max(1, g.min_per_thread * K_BN_THREADS // g.V))
    return (g.C, sp.splits), sp


def bn_reduce(g, pol, part, grid, sp):
    if g.rows:
        total = g.R - (1 if "split_last" in BUGS and sp.splits > 1 else 0)
        launch(bn_reduce_rows_kernel, grid, (g.bx, g.by), pol, part, g.C, g.inner_v, total,
               sp.per, g.V)
    else:
        total = g.N * g.inner_v - (1 if "split_last" in BUGS and sp.splits > 1 else 0)
        launch(bn_reduce_planes_kernel, grid, K_BN_THREADS, pol, part, g.C, g.HW, g.inner_v,
               total, sp.per, g.V)


def bn_apply(g, x, gr, out, cf, backward):
    if g.rows:
        gx = (g.inner_v + g.bx - 1) // g.bx
        gy = min((g.R + g.by - 1) // g.by, 65535)
        launch(bn_apply_rows_kernel, (gx, gy), (g.bx, g.by), x, gr, out, cf, g.C, g.inner_v, g.R,
               g.V, backward)
    else:
        hwv, nc = g.inner_v, g.N * g.C
        threads = min(K_BN_THREADS, max(32, (hwv + 31) // 32 * 32))
        gx = min(nc, 0x7FFFFFFF)
        gy = min((hwv + threads - 1) // threads, 65535)
        launch(bn_apply_planes_kernel, (gx, gy), threads, x, gr, out, cf, nc, g.C, g.HW, hwv,
               g.V, backward)


def bn_warp_blocks(C):
    return (C * 32 + K_BN_THREADS - 1) // K_BN_THREADS


def native_batch_norm(x, cl, N, C, HW, T, w, b, rm, rv, stat_T, training, momentum, eps, out_addr,
                      min_per_thread):
    """x: a Mem in the layout (NHWC when cl); returns (out Mem, save_mean, save_invstd)."""
    A = acc_ty(T).acc
    count = N * HW
    out = Mem.empty(x.data.size, T, out_addr, "out")
    sm = ChanVec(np.full(C, np.nan), stat_T)
    si = ChanVec(np.full(C, np.nan), stat_T)
    sm.writes[:] = 0
    si.writes[:] = 0
    total = x.data.size
    if C > 0:
        g = bn_geom(cl, N, C, HW, ITEMSIZE[T.name], [x.addr, out_addr], min_per_thread)
        if training:
            grid, sp = bn_reduce_plan(g)
            part = Scratch(BnStats.K * sp.splits * C + 2 * C, A)
            pol = BnStats(x, A)
            bn_reduce(g, pol, part, grid, sp)
            _once(x.reads, "x reads (stats)")
            x.reads[:] = 0
            # the partial slots: each written exactly once
            if np.any(part.writes[: BnStats.K * sp.splits * C] != 1):
                raise EmulationError("stats partial slots not written exactly once")
            coef = _Offset(part, BnStats.K * sp.splits * C)
            launch(bn_forward_finalize_kernel, bn_warp_blocks(C), K_BN_THREADS, part, sp.splits, C,
                   float(count), eps, momentum, w, b, rm, rv, sm, si, coef, T)
            cf = BnCoef(coef, C, w, b, rm, rv, None, None, eps, A)
            bn_apply(g, x, None, out, cf, False)
            _once(x.reads, "x reads (normalize)")
        elif total > 0:
            cf = BnCoef(None, C, w, b, rm, rv, sm, si, eps, A)
            bn_apply(g, x, None, out, cf, False)
            _once(x.reads, "x reads (eval normalize)")
        else:
            launch(bn_forward_finalize_kernel, bn_warp_blocks(C), K_BN_THREADS, None, 0, C, 0.0,
                   eps, momentum, w, b, rm, rv, sm, si, None, T)
    return out, sm, si


def native_batch_norm_backward(g_mem, x, cl, N, C, HW, T, w, save_mean, save_invstd, train, wants,
                               gi_addr, min_per_thread):
    A = acc_ty(T).acc
    input_grad, weight_grad, bias_grad = wants
    count = N * HW
    need_sums = bias_grad or weight_grad or (input_grad and train)
    gi = Mem.empty(x.data.size, T, gi_addr, "grad_input") if input_grad else None
    gw = ChanVec(np.full(C, np.nan), T) if weight_grad else None
    gb = ChanVec(np.full(C, np.nan), T) if bias_grad else None
    if C == 0:
        return gi, gw, gb
    if count == 0:
        for t in (gw, gb):
            if t is not None:
                t.data[:] = 0
                t.writes[:] = 1
        return gi, gw, gb
    addrs = [x.addr, g_mem.addr, gi_addr if input_grad else None]
    geo = bn_geom(cl, N, C, HW, ITEMSIZE[T.name], addrs, min_per_thread)
    coef = None
    if need_sums:
        grid, sp = bn_reduce_plan(geo)
        part = Scratch(BnSums.K * sp.splits * C + (4 * C if input_grad else 0), A)
        bn_reduce(geo, BnSums(g_mem, x, save_mean, A), part, grid, sp)
        if np.any(part.writes[: BnSums.K * sp.splits * C] != 1):
            raise EmulationError("sums partial slots not written exactly once")
        _once(x.reads, "x reads (sums)")
        _once(g_mem.reads, "grad_out reads (sums)")
        x.reads[:] = 0
        g_mem.reads[:] = 0
        if input_grad:
            coef = _Offset(part, BnSums.K * sp.splits * C)
        launch(bn_backward_finalize_kernel, bn_warp_blocks(C), K_BN_THREADS, part, sp.splits, C,
               float(count), train, w, save_mean, save_invstd, gw, gb, coef, T)
    if input_grad:
        cf = BnCoef(coef, C, w, None, save_mean, save_invstd, None, None, 0.0, A)
        bn_apply(geo, x, g_mem, gi, cf, True)
        _once(x.reads, "x reads (grad_input)")
        _once(g_mem.reads, "grad_out reads (grad_input)")
    return gi, gw, gb


class _Offset:
    """A + offset into a Scratch (the coef pointer)."""

    def __init__(self, base, off):
        self.base, self.off = base, off

    def __getitem__(self, i):
        return self.base[self.off + i]

    def __setitem__(self, i, v):
        self.base[self.off + i] = v


def _once(counts, what):
    if counts.size and not np.all(counts == 1):
        bad = np.argwhere(counts != 1)[:3].ravel().tolist()
        raise EmulationError(f"{what}: not exactly once (counts {np.unique(counts).tolist()}, "
                             f"e.g. at {bad})")


# ---- comparisons with the CPU kernels ----------------------------------------------------------

RNG = np.random.default_rng(11)


def E():
    import ember

    return ember


def tensor(vals, T, shape):
    ember = E()
    a = np.asarray(vals, dtype=np.float64).reshape(shape)
    if T is F64:
        return ember.tensor(a)
    return ember.tensor(a.astype(np.float32)).to(getattr(ember, T.name))


def npv(t):
    return None if t is None else t.to(E().float64).numpy().ravel()


def stat_dtype(T, params):
    if T in (F16, BF16) and any(p is F32 for p in params):
        return F32
    return T


def to_layout(a, cl):
    """NCHW values -> the kernels' memory order (NHWC when cl), flat."""
    if not cl:
        return a.ravel()
    return np.moveaxis(a, 1, -1).ravel()


def from_layout(flat, shape, cl):
    if not cl:
        return flat.reshape(shape)
    nhwc = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return np.moveaxis(flat.reshape(nhwc), -1, 1)


def check_batch(shape, T, *, P=None, affine=True, training=True, running=True, cl=False,
                momentum=0.1, shift=0.0, misalign=0, stride=1, wants=(True, True, True),
                min_per_thread=K_BN_MIN_PER_THREAD, fails):
    """One forward + backward, emulated and on the CPU. P: dtype of weight / bias / running
    statistics (default: T, float32 for the 16-bit inputs' running statistics)."""
    ember = E()
    C_ = ember._C
    shape = tuple(shape)
    N, C = shape[0], shape[1]
    HW = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    P = P or T
    PR = F32 if (P is T and T in (F16, BF16)) else P  # running statistics' dtype
    x = T.mem(RNG.standard_normal(size=shape) + shift).reshape(shape)
    w = P.mem(RNG.standard_normal(C)) if affine else None
    b = P.mem(RNG.standard_normal(C)) if affine else None
    rm = PR.mem(RNG.standard_normal(C)) if running else None
    rv = PR.mem(RNG.random(C) + 0.5) if running else None
    eps = 1e-5
    tag = (f"batch_norm{shape} {T} params {P} running {PR if running else None} affine={affine} "
           f"training={training} cl={cl} misalign={misalign} stride={stride} wants={wants} "
           f"min_per_thread={min_per_thread}")
    # CPU
    xt = tensor(x, T, shape)
    wt = tensor(w, P, [C]) if affine else None
    bt = tensor(b, P, [C]) if affine else None
    rmt = tensor(rm, PR, [C]) if running else None
    rvt = tensor(rv, PR, [C]) if running else None
    cy, cmean, cinv = C_.native_batch_norm(xt, wt, bt, rmt, rvt, training, momentum, eps)
    # emulation
    cl_geom = cl and len(shape) in (4, 5) and C > 1 and HW > 1  # is_channels_last
    item = ITEMSIZE[T.name]
    xm = Mem(to_layout(x, cl_geom), T, misalign * item, "x")
    wc = ChanVec(w, P, stride) if affine else None
    bc = ChanVec(b, P, stride) if affine else None
    rmc = ChanVec(rm, PR, stride) if running else None
    rvc = ChanVec(rv, PR, stride) if running else None
    sdt = stat_dtype(T, [P, PR] if running else [P])
    out, sm, si = native_batch_norm(xm, cl_geom, N, C, HW, T, wc, bc, rmc, rvc, sdt, training,
                                    momentum, eps, misalign * item, min_per_thread)
    tol = TOL[T.name]
    if x.size:
        _once(out.writes, tag + " y writes")
    for name, cvv in (("save_mean", sm), ("save_invstd", si)):
        if C and not np.all(cvv.writes == 1):
            raise EmulationError(f"{tag}: {name} written {cvv.writes.tolist()}")
    y = from_layout(out.data.astype(np.float64), shape, cl_geom)
    close(tag + " y", y.ravel(), npv(cy), tol, atol=tol * (1 + abs(shift)), failures=fails)
    close(tag + " save_mean", sm.values(), npv(cmean), tol, failures=fails)
    close(tag + " save_invstd", si.values(), npv(cinv), tol, failures=fails)
    if running:
        for name, cvv, ct in (("running_mean", rmc, rmt), ("running_var", rvc, rvt)):
            want_w = 1 if training else 0
            if C and not np.all(cvv.writes == want_w):
                raise EmulationError(f"{tag}: {name} written {cvv.writes.tolist()}")
            # (the statistics are float32 ones for a float32 / 16-bit input, whatever the
            # running statistics' dtype)
            close(tag + " " + name, cvv.values(), npv(ct), 1e-10 if T is F64 else 1e-6,
                  failures=fails)
    # backward, with the CPU's saved statistics
    gvals = T.mem(RNG.standard_normal(size=shape)).reshape(shape)
    gt = tensor(gvals, T, shape)
    cgi, cgw, cgb = C_.native_batch_norm_backward(gt, xt, wt, cmean, cinv, training, *wants)
    gm = Mem(to_layout(gvals, cl_geom), T, misalign * item, "grad_out")
    xm2 = Mem(to_layout(x, cl_geom), T, misalign * item, "x")
    smc = ChanVec(npv(cmean), sdt)
    sic = ChanVec(npv(cinv), sdt)
    gi, gw, gb = native_batch_norm_backward(gm, xm2, cl_geom, N, C, HW, T, wc, smc, sic,
                                            training, wants, misalign * item, min_per_thread)
    btol = tol * (4 if T in (F16, BF16) else 10)
    if wants[0]:
        if x.size:
            _once(gi.writes, tag + " grad_input writes")
        gi_v = from_layout(gi.data.astype(np.float64), shape, cl_geom)
        close(tag + " grad_input", gi_v.ravel(), npv(cgi), btol, atol=btol * (1 + abs(shift)),
              failures=fails)
    else:
        assert cgi is None
    for name, mine, cpu, want in (("grad_weight", gw, cgw, wants[1]),
                                  ("grad_bias", gb, cgb, wants[2])):
        if not want:
            continue
        if C and not np.all(mine.writes == 1):
            raise EmulationError(f"{tag}: {name} written {mine.writes.tolist()}")
        close(tag + " " + name, mine.values(), npv(cpu), btol, atol=btol * 10, failures=fails)


def check_split_plans(fails):
    """bn_split: no empty slice, every unit in one slice, splits within 1 .. 65535 and blocks
    about kBnMaxBlocks at most."""
    for bx in [1, 2, 3, 7, 64, 1000, 1024, 1025, 5000, 70000]:
        for total in [1, 2, 15, 16, 17, 4095, 4096, 4097, 10**5, 3 * 10**6, 2**31 - 1, 2**40]:
            for mp in [1, 16, 256, 4096]:
                sp = bn_split(bx, total, mp)
                ok = (1 <= sp.splits <= 1024 and sp.per >= 1
                      and (sp.splits - 1) * sp.per < total <= sp.splits * sp.per
                      and (sp.splits == 1 or sp.per >= min(mp, total)
                           or sp.per * sp.splits >= total))
                if not ok:
                    fails.append(f"MISMATCH bn_split({bx}, {total}, {mp}) = {sp}")
                    return


def cases():
    """(shape, kwargs) of every check."""
    out = []
    # planes: HW a multiple of the vector width (4 for float32) and not, one split and several
    for T in (F32, F64, F16, BF16):
        out.append(((3, 2, 4, 4), dict(T=T)))
    out += [
        ((2, 3, 5, 3), dict(T=F32)),  # HW = 15: V = 1
        ((4, 3, 5, 2), dict(T=F32, training=False)),
        ((4, 3, 5, 2), dict(T=F32, affine=False, running=False)),
        ((2, 3, 4, 4), dict(T=F32, misalign=1)),  # misaligned base: V = 1
        ((2, 3, 8), dict(T=F16, misalign=4)),  # 8 bytes off: still misaligned for 16
        ((2, 3, 8), dict(T=F16, misalign=8)),  # 16 bytes off: aligned
        ((3, 1, 6, 5), dict(T=F32)),  # C = 1
        ((1, 3, 7), dict(T=F32)),  # N = 1
        ((5, 2, 33), dict(T=F32, min_per_thread=1)),  # several splits, uneven last one
        ((3, 2, 2100), dict(T=F32)),  # several splits at the kernel's own minimum
        ((7, 2, 300), dict(T=F32, min_per_thread=1)),  # HWv > 256: j steps without n
        ((9, 2, 12), dict(T=F64, min_per_thread=1)),  # HWv 6: several n per step
        ((4, 3, 5, 2), dict(T=F32, shift=1000.0)),
        # rows: HW == 1 (2-d), channels_last
        ((6, 5), dict(T=F32)),
        ((6, 8), dict(T=F32)),  # C multiple of 4: V = 4
        ((40, 3), dict(T=F32, min_per_thread=1)),  # several row splits
        ((1100, 3), dict(T=F32)),  # several row splits at the kernel's minimum
        ((5, 70), dict(T=F16, min_per_thread=1)),  # bx = 32, two channel blocks (V = 1)
        ((5, 72), dict(T=F16)),  # V = 8, Cv = 9: bx = 16
        ((3, 4, 3, 5), dict(T=F32, cl=True)),
        ((3, 8, 3, 5), dict(T=F16, cl=True)),
        ((3, 8, 3, 5), dict(T=BF16, cl=True, P=F32)),
        ((2, 6, 3, 2, 2), dict(T=F64, cl=True)),
        ((3, 4, 3, 5), dict(T=F32, cl=True, training=False)),
        ((3, 4, 3, 5), dict(T=F32, cl=True, misalign=2)),
        ((4, 5, 2, 3), dict(T=F32, cl=True, min_per_thread=1)),
        ((2, 1, 3, 3), dict(T=F32, cl=True)),  # C = 1: contiguous too (planes)
        ((4, 3, 1, 1), dict(T=F32, cl=True)),  # HW = 1: rows
        # parameters: float32 with 16-bit inputs, float64 with float32, strided ones
        ((2, 3, 4, 4), dict(T=F16, P=F32)),
        ((2, 3, 4, 4), dict(T=BF16, P=F32, training=False)),
        ((2, 3, 4, 4), dict(T=F32, P=F64, stride=3)),
        ((2, 3, 4, 4), dict(T=F32, P=F64, stride=2, training=False)),
        # backward masks, eval backward
        ((2, 3, 4, 4), dict(T=F32, wants=(True, False, False))),
        ((2, 3, 4, 4), dict(T=F32, wants=(False, True, False))),
        ((2, 3, 4, 4), dict(T=F32, wants=(False, False, True))),
        ((2, 3, 4, 4), dict(T=F32, training=False, wants=(True, False, False))),
        ((2, 3, 4, 4), dict(T=F32, training=False, wants=(True, True, False))),
        ((6, 5), dict(T=F32, training=False, wants=(True, False, True))),
        # zero-size
        ((0, 3, 4), dict(T=F32, training=False)),
        ((2, 0, 4), dict(T=F32)),
        ((2, 3, 0), dict(T=F32, training=False)),
    ]
    return out


def run_all(quiet_cases=True):
    fails = []
    check_split_plans(fails)
    for shape, kw in cases():
        kw = dict(kw)
        T = kw.pop("T")
        try:
            check_batch(shape, T, fails=fails, **kw)
        except EmulationError as e:
            fails.append(f"EMULATION ERROR batch_norm{tuple(shape)} {T} {kw}: {e}")
    return fails


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    if "--self-test" in sys.argv:
        missed = []
        for bug in PLANTABLE:
            BUGS.clear()
            BUGS.add(bug)
            f = run_all()
            print(f"planted {bug}: {len(f)} failures")
            if not f:
                missed.append(bug)
        BUGS.clear()
        fails = [f"planted bug {b} not caught" for b in missed]
        return report("nn_batch_norm --self-test", fails, t0, quiet)
    if "--plant" in sys.argv:
        BUGS.add(sys.argv[sys.argv.index("--plant") + 1])
    fails = run_all()
    return report("nn_batch_norm" + (f" (planted {sorted(BUGS)})" if BUGS else ""), fails, t0,
                  quiet)


if __name__ == "__main__":
    sys.exit(main())
