"""Emulation of packages/core/csrc/cuda/nn_softmax.cu (softmax / log_softmax forward and backward,
the long rows' kernels: softmax_rows_kernel and softmax_rows_smem_kernel with its shared-memory
race checks) and nn_loss.cu (nll_loss and the fused cross entropy, forward and backward) against
ember's CPU kernels. Run: PYTHONPATH=<build>/site python3 nn_softmax_loss.py [-q | --smem | --plant]."""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from nn_norm import E, npv, tensor
from nn_sim import BF16, F16, F32, F64, SYNC, TOL, Shfl, blocks_for, close, launch, report
from nn_team import (
    K_BLOCK,
    K_ROW_BLOCK,
    K_THREAD,
    _exp,
    _log,
    make_team,
    maxsum_step,
    merge_max_sum,
    team_blocks,
    team_mode,
    team_reduce,
    team_sum,
    team_threads,
)

RNG = np.random.default_rng(11)


def empty(n, ty):
    return np.full(int(n), np.nan, dtype=np.float64 if ty is F64 else np.float32)


# ---- softmax ----------------------------------------------------------------------------------


def softmax_forward_kernel(c, x, y, rows, n, inner, mode, log, T):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= rows:
        return
    base = (rid // inner) * n * inner + rid % inner
    ms = (A(-math.inf), A(0))
    for k in range(rank, n, size):
        ms = maxsum_step(ms, A(x[base + k * inner]))
    ms = yield from team_reduce(c, ms, mode, merge_max_sum, ("maxsum", A.__name__))
    if log:
        lsum = _log(ms[1])  # subtracted after the max, as the kernel
        for k in range(rank, n, size):
            with np.errstate(all="ignore"):
                y[base + k * inner] = T.from_op((A(x[base + k * inner]) - ms[0]) - lsum)
    else:
        with np.errstate(all="ignore"):
            inv = A(1) / ms[1]
        for k in range(rank, n, size):
            with np.errstate(all="ignore"):
                y[base + k * inner] = T.from_op(_exp(A(x[base + k * inner]) - ms[0]) * inv)


ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
K_ROW_ACCS, K_ROW_UNROLL = 4, 4
# Where row 0 of x / y starts past a 16-byte boundary, in elements (softmax_rows_kernel's
# alignment arithmetic; the emulated buffers themselves start at element 0).
ALIGN = {"x": 0, "y": 0}
STEPPED = []  # the x indices softmax_rows_kernel's first pass stepped (each once: host check)
GRID_CAP = {"rows": 1 << 30}  # the host's grid cap (tests lower it: blocks then take several rows)


def softmax_rows_kernel(c, x, y, rows, n, log, T):
    """softmax_rows_kernel: a block per contiguous row; head / tail elements one per thread,
    16-byte packs kRowUnroll per thread per iteration, element e of an iteration into (max, sum)
    pair e % kRowAccs; the write pass by packs when y's row is aligned as x's."""
    A = T.acc
    isz = ITEMSIZE[T.name]
    kn = 16 // isz
    t, nt = c.tx, c.bdx
    row = c.bx
    while row < rows:
        xr = yr = row * n
        xa = (ALIGN["x"] + xr) * isz
        head = min(n, ((16 - xa % 16) % 16) // isz)
        npacks = (n - head) // kn
        tail = head + npacks * kn
        assert n - tail < kn and head < kn
        ms = [(A(-math.inf), A(0))] * K_ROW_ACCS
        if t < head:
            ms[0] = maxsum_step(ms[0], A(x[xr + t]))
            STEPPED.append(xr + t)
        if t < n - tail:
            ms[1] = maxsum_step(ms[1], A(x[xr + tail + t]))
            STEPPED.append(xr + tail + t)
        k0 = t
        while k0 < npacks:
            for u in range(K_ROW_UNROLL):
                k = k0 + u * nt
                if k < npacks:
                    if (xa + (head + k * kn) * isz) % 16:
                        raise AssertionError("unaligned pack load")
                    for e in range(kn):
                        i = (u * kn + e) % K_ROW_ACCS
                        ms[i] = maxsum_step(ms[i], A(x[xr + head + k * kn + e]))
                        STEPPED.append(xr + head + k * kn + e)
            k0 += nt * K_ROW_UNROLL
        m = merge_max_sum
        tot = m(m(ms[0], ms[1]), m(ms[2], ms[3]))
        tot = yield from team_reduce(c, tot, K_BLOCK, merge_max_sum, ("maxsum", A.__name__))
        with np.errstate(all="ignore"):
            lsum = _log(tot[1])
            inv = A(1) / tot[1]

        def out(v):
            with np.errstate(all="ignore"):
                return T.from_op((A(v) - tot[0]) - lsum if log else _exp(A(v) - tot[0]) * inv)

        ya = (ALIGN["y"] + yr) * isz
        if ya % 16 == xa % 16:
            if t < head:
                y[yr + t] = out(x[xr + t])
            if t < n - tail:
                y[yr + tail + t] = out(x[xr + tail + t])
            for k in range(t, npacks, nt):
                if (ya + (head + k * kn) * isz) % 16:
                    raise AssertionError("unaligned pack store")
                for e in range(kn):
                    y[yr + head + k * kn + e] = out(x[xr + head + k * kn + e])
        else:
            for k in range(t, n, nt):
                y[yr + k] = out(x[xr + k])
        row += c.gdx


# softmax_rows_smem_kernel's host rule (smem_row_bytes): rows of at least min_bytes whose copy
# (+ a pack) and `reserve` bytes of static shared memory fit the opt-in limit (H100: 227 KiB).
SMEM = {"optin": 227 * 1024, "min_bytes": 64 * 1024, "reserve": 1024}
SMEM_USED = []  # the rows kernel each softmax_host call ran ("smem" / "rows")
THREADS_USED = []  # the block size of each softmax_rows_smem_kernel launch
PLANT = set()   # --plant: bugs planted into the transcription below


def k_smem_unroll(T):
    return 8 if ITEMSIZE[T.name] == 4 else 4


def smem_row_threads(smem):
    """smem_row_threads: 1024 threads when a second block would not fit the shared memory."""
    return 1024 if 2 * (smem + SMEM["reserve"]) > SMEM["optin"] else K_ROW_BLOCK


def smem_row_bytes(n, T):
    isz = ITEMSIZE[T.name]
    nbytes = (n + 16 // isz) * isz
    if n * isz < SMEM["min_bytes"]:
        return 0
    return nbytes if nbytes + SMEM["reserve"] <= SMEM["optin"] else 0


class DynShared:
    """The block's dynamic shared memory as elements of T (every access of the kernel is an
    element or a 16-byte pack of them), NaN at first. Each access is bounds-checked (packs also
    16-byte aligned) and race-checked against the barrier intervals (`ep`: the thread's count of
    barriers passed): a read of an element never written or written by another thread in the
    current interval, a write over another thread's write or read in the current interval."""

    def __init__(self, nbytes, isz):
        n = nbytes // isz
        self.isz = isz
        self.v = np.full(n, np.nan)
        self.w_ep = np.full(n, -1, np.int64)
        self.w_th = np.full(n, -1, np.int64)
        self.r_ep = np.full(n, -1, np.int64)
        self.r_th = np.full(n, -1, np.int64)

    def _span(self, i, k):
        if i < 0 or i + k > self.v.size:
            raise AssertionError(f"shared memory access [{i}, {i + k}) out of [0, {self.v.size})")
        if k > 1 and (i * self.isz) % 16:
            raise AssertionError(f"unaligned shared pack at element {i}")
        return slice(i, i + k)

    def write(self, i, vals, th, ep):
        sl = self._span(i, len(vals))
        if np.any((self.w_ep[sl] == ep) & (self.w_th[sl] != th)):
            raise AssertionError(f"shared race: write after another thread's write at {i}")
        if np.any((self.r_ep[sl] == ep) & (self.r_th[sl] != th)):
            raise AssertionError(f"shared race: write after another thread's read at {i}")
        self.v[sl] = vals
        self.w_ep[sl] = ep
        self.w_th[sl] = th

    def read(self, i, k, th, ep):
        sl = self._span(i, k)
        if np.any(self.w_ep[sl] < 0):
            raise AssertionError(f"shared read of an element never written at {i}")
        if np.any((self.w_ep[sl] == ep) & (self.w_th[sl] != th)):
            raise AssertionError(f"shared race: read of another thread's write at {i}, no barrier")
        self.r_ep[sl] = ep
        self.r_th[sl] = th
        return self.v[sl].copy()


def counted(gen, ep):
    """Runs the generator gen (yield from), counting the barriers it passes in ep[0]."""
    send = None
    while True:
        try:
            y = gen.send(send)
        except StopIteration as stop:
            return stop.value
        if isinstance(y, str) and y == SYNC:
            ep[0] += 1
        send = yield y


def softmax_rows_smem_kernel(c, x, y, rows, n, log, T, smem):
    """softmax_rows_smem_kernel: softmax_rows_kernel's first pass that also copies the row into
    dynamic shared memory (element k at sh[shift + k]), the write pass reading it from there."""
    A = T.acc
    isz = ITEMSIZE[T.name]
    kn = 16 // isz
    t, nt = c.tx, c.bdx
    sh = c.shared.get("dyn")
    if sh is None:
        sh = c.shared["dyn"] = DynShared(smem, isz)
    ep = [0]
    row = c.bx
    while row < rows:
        xr = yr = row * n
        xa = (ALIGN["x"] + xr) * isz
        head = min(n, ((16 - xa % 16) % 16) // isz)
        npacks = (n - head) // kn
        tail = head + npacks * kn
        shift = (xa % 16) // isz
        if "no_shift" in PLANT:
            shift = 0
        ms = [(A(-math.inf), A(0))] * K_ROW_ACCS
        if t < head:
            v = x[xr + t]
            sh.write(shift + t, [v], t, ep[0])
            ms[0] = maxsum_step(ms[0], A(v))
            STEPPED.append(xr + t)
        if t < n - tail:
            v = x[xr + tail + t]
            sh.write(shift + tail + t, [v], t, ep[0])
            ms[1] = maxsum_step(ms[1], A(v))
            STEPPED.append(xr + tail + t)
        k0 = t
        un = k_smem_unroll(T)
        while k0 < npacks:
            bufs = {}
            for u in range(un):
                k = k0 + u * nt
                if k < npacks:
                    if (xa + (head + k * kn) * isz) % 16:
                        raise AssertionError("unaligned pack load")
                    bufs[u] = x[xr + head + k * kn: xr + head + (k + 1) * kn].copy()
            for u in range(un):
                k = k0 + u * nt
                if k < npacks:
                    sh.write(shift + head + k * kn, bufs[u], t, ep[0])
                    for e in range(kn):
                        i = (u * kn + e) % K_ROW_ACCS
                        ms[i] = maxsum_step(ms[i], A(bufs[u][e]))
                        STEPPED.append(xr + head + k * kn + e)
            k0 += nt * un
        m = merge_max_sum
        tot = m(m(ms[0], ms[1]), m(ms[2], ms[3]))
        if "no_reduce_sync" in PLANT:  # the team reduction without its barriers: a warp's pair
            o = 16
            while o > 0:
                other = yield Shfl(tot, o)
                tot = m(tot, other)
                o >>= 1
        else:
            tot = yield from counted(
                team_reduce(c, tot, K_BLOCK, merge_max_sum, ("maxsum", A.__name__)), ep)
        with np.errstate(all="ignore"):
            lsum = _log(tot[1])
            inv = A(1) / tot[1]

        def out(v):
            with np.errstate(all="ignore"):
                return T.from_op((A(v) - tot[0]) - lsum if log else _exp(A(v) - tot[0]) * inv)

        ya = (ALIGN["y"] + yr) * isz
        if ya % 16 == xa % 16:
            if t < head:
                y[yr + t] = out(sh.read(shift + t, 1, t, ep[0])[0])
            if t < n - tail:
                y[yr + tail + t] = out(sh.read(shift + tail + t, 1, t, ep[0])[0])
            for k in range(t, npacks, nt):
                if (ya + (head + k * kn) * isz) % 16:
                    raise AssertionError("unaligned pack store")
                vals = sh.read(shift + head + k * kn, kn, t, ep[0])
                for e in range(kn):
                    y[yr + head + k * kn + e] = out(vals[e])
        else:
            for k in range(t, n, nt):
                y[yr + k] = out(sh.read(shift + k, 1, t, ep[0])[0])
        if "no_row_sync" not in PLANT:
            ep[0] += 1
            yield SYNC  # the next row rewrites sh
        row += c.gdx


def softmax_backward_kernel(c, g, y, gi, rows, n, inner, mode, log, T):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= rows:
        return
    base = (rid // inner) * n * inner + rid % inner
    acc = A(0)
    for k in range(rank, n, size):
        gv = A(g[base + k * inner])
        acc += gv if log else gv * A(y[base + k * inner])
    acc = yield from team_sum(c, acc, mode)
    for k in range(rank, n, size):
        gv, yv = A(g[base + k * inner]), A(y[base + k * inner])
        gi[base + k * inner] = T.from_op(gv - _exp(yv) * acc if log else yv * (gv - acc))


def plan_mode(outer, n, inner):
    if inner == 1:
        return team_mode(n, 1)
    return K_BLOCK if outer * inner < 2048 and n >= 1024 else K_THREAD


def softmax_shape(shape, d):
    outer = int(np.prod(shape[:d])) if d > 0 else 1
    inner = int(np.prod(shape[d + 1 :])) if d + 1 < len(shape) else 1
    return outer, shape[d] if shape else 1, inner


def softmax_host(x, shape, d, log, T):
    y = empty(x.size, T)
    if x.size == 0:
        return y
    outer, n, inner = softmax_shape(shape, d)
    rows = outer * inner
    mode = plan_mode(outer, n, inner)
    if inner == 1 and mode == K_BLOCK:
        STEPPED.clear()
        grid = min(rows, GRID_CAP["rows"])
        smem = smem_row_bytes(n, T)
        if smem:
            SMEM_USED.append("smem")
            threads = smem_row_threads(smem)
            THREADS_USED.append(threads)
            launch(softmax_rows_smem_kernel, grid, threads, x, y, rows, n, log, T, smem)
        else:
            SMEM_USED.append("rows")
            launch(softmax_rows_kernel, grid, K_ROW_BLOCK, x, y, rows, n, log, T)
        hits = np.bincount(np.asarray(STEPPED, np.int64), minlength=rows * n)
        if hits.size != rows * n or not np.all(hits == 1):
            raise AssertionError(f"softmax_rows_kernel: elements not stepped exactly once ({n=})")
        return y
    launch(
        softmax_forward_kernel,
        team_blocks(mode, rows),
        team_threads(mode),
        x,
        y,
        rows,
        n,
        inner,
        mode,
        log,
        T,
    )
    return y


def softmax_backward_host(g, y, shape, d, log, T):
    gi = empty(y.size, T)
    if y.size == 0:
        return gi
    outer, n, inner = softmax_shape(shape, d)
    rows = outer * inner
    mode = plan_mode(outer, n, inner)
    launch(
        softmax_backward_kernel,
        team_blocks(mode, rows),
        team_threads(mode),
        g,
        y,
        gi,
        rows,
        n,
        inner,
        mode,
        log,
        T,
    )
    return gi


def rnd(shape, T, scale=1.0):
    return T.mem(RNG.standard_normal(size=shape) * scale)


def check_softmax(shape, d, T, fails, special=False):
    ember = E()
    C_ = ember._C
    x = rnd(shape, T, 3.0)
    if special:  # a -inf row / column, a row holding +inf, NaN
        x = x.reshape(shape).copy()
        idx = [slice(None)] * len(shape)
        idx[d] = slice(None)
        first = [0] * len(shape)
        first[d] = slice(None)
        x[tuple(first)] = -np.inf
        if shape[0] > 1:
            sec = [1] * len(shape)
            sec[d] = 0
            x[tuple(sec)] = np.inf
        if shape[0] > 2:
            th = [2] * len(shape)
            th[d] = 1
            x[tuple(th)] = np.nan
        if shape[0] > 3 and len(shape) == 2:
            fo = [3] * len(shape)
            fo[d] = slice(None)
            x[tuple(fo)] = -np.inf
            fo[d] = shape[d] - 1
            x[tuple(fo)] = 0.0
        x = T.mem(x)
    xt = tensor(x, T, shape)
    tol = TOL[T.name]
    for log in (False, True):
        tag = f"{'log_' if log else ''}softmax{tuple(shape)} dim={d} {T}{' special' if special else ''}"
        y = softmax_host(x, shape, d, log, T)
        cy = (C_.log_softmax if log else C_.softmax)(xt, d)
        close(tag, y, npv(cy), tol, failures=fails)
        g = rnd(shape, T)
        gt = tensor(g, T, shape)
        cyv = npv(cy)
        gi = softmax_backward_host(g, T.mem(cyv), shape, d, log, T)
        cgi = (C_._log_softmax_backward_data if log else C_._softmax_backward_data)(gt, cy, d)
        close(tag + " backward", gi, npv(cgi), tol * 4, failures=fails)


def check_softmax_smem(fails):
    """softmax_rows_smem_kernel: rows the default rule sends there (64 KiB and more; 512-thread
    blocks up to ~113 KiB, 1024 above: a 128 KiB float row, a 160 KiB double row) and not (under
    64 KiB, over the opt-in limit), then every row over 1024 elements forced through it
    (min_bytes 0) with both block sizes (a small opt-in limit makes 1024) at each alignment of x
    and y, NaN / inf rows, blocks taking several rows (the grid capped: the end-of-row barrier),
    and the opt-in limit's edge (fits exactly / one element more falls back)."""
    SMEM_USED.clear()
    THREADS_USED.clear()
    for shape, T in [((1, 16390), F32), ((1, 32775), BF16), ((1, 8200), F64), ((1, 32768), F32),
                     ((1, 20000), F64)]:
        check_softmax(shape, 1, T, fails)
    if set(SMEM_USED) != {"smem"} or set(THREADS_USED) != {512, 1024}:
        fails.append(f"rows of 64 KiB or more: {SMEM_USED} {THREADS_USED}")
    SMEM_USED.clear()
    check_softmax((3, 1025), 1, F32, fails)
    check_softmax((1, 16380), 1, F32, fails)  # just under 64 KiB
    check_softmax((1, 58200), 1, F32, fails)  # 227 KiB + 816 B: over the opt-in limit
    if set(SMEM_USED) != {"rows"}:
        fails.append(f"rows under 64 KiB or over the limit took the smem kernel: {SMEM_USED}")
    saved = dict(SMEM)
    try:
        SMEM["min_bytes"] = 0
        for optin in (227 * 1024, 6000):
            SMEM["optin"] = optin
            SMEM_USED.clear()
            THREADS_USED.clear()
            for xo, yo in [(0, 0), (1, 1), (3, 0), (0, 5), (7, 7)]:
                ALIGN["x"], ALIGN["y"] = xo, yo
                for shape, T in [((3, 1025), F32), ((2, 1100), F16), ((2, 1037), BF16),
                                 ((2, 1031), F64)]:
                    check_softmax(shape, 1, T, fails)
                check_softmax((5, 1100), 1, F32, fails, special=True)
                GRID_CAP["rows"] = 2
                try:
                    check_softmax((5, 1030), 1, F32, fails)
                    check_softmax((3, 1100), 1, BF16, fails)
                finally:
                    GRID_CAP["rows"] = 1 << 30
            ALIGN["x"] = ALIGN["y"] = 0
            want_threads = {512} if optin > 6000 else {1024}
            if "smem" not in SMEM_USED or set(THREADS_USED) != want_threads:
                fails.append(f"min_bytes 0, opt-in {optin}: {set(SMEM_USED)} {set(THREADS_USED)}")
            if optin > 6000 and set(SMEM_USED) != {"smem"}:
                fails.append(f"min_bytes 0: not all rows on the smem kernel: {SMEM_USED}")
        n = 2000
        need = (n + 4) * 4
        for optin, want in [(need + SMEM["reserve"], "smem"), (need + SMEM["reserve"] - 1, "rows")]:
            SMEM["optin"] = optin
            SMEM_USED.clear()
            check_softmax((2, n), 1, F32, fails)
            if set(SMEM_USED) != {want}:
                fails.append(f"opt-in {optin}: {SMEM_USED}, want {want}")
    finally:
        SMEM.clear()
        SMEM.update(saved)
        ALIGN["x"] = ALIGN["y"] = 0


def plant_checks():
    """--plant: each planted bug in softmax_rows_smem_kernel must be caught."""
    ok = True
    for bug in ("no_shift", "no_reduce_sync", "no_row_sync"):
        PLANT.clear()
        PLANT.add(bug)
        fails = []
        try:
            check_softmax_smem(fails)
            caught = bool(fails)
        except AssertionError as e:
            caught = True
            print(f"  planted {bug}: raised {type(e).__name__}: {str(e)[:120]}")
        finally:
            PLANT.clear()
        print(f"planted bug {bug}: {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    return 0 if ok else 1


# ---- nll_loss / cross entropy -------------------------------------------------------------------


class ErrorSlot:
    def __init__(self):
        self.flag, self.value = 0, 0

    def report(self, v):
        if self.flag == 0:
            self.flag, self.value = 1, v


def class_at(t, i, C, ignore_index, err, report):
    k = int(t[i])
    if k == ignore_index:
        return -1
    if k < 0 or k >= C:
        if report:
            err.report(k)
        return -2
    return k


def weight_of(w, k, T):
    return float(T.to_op(w[k])) if w is not None else 1.0


def grid_stride(c, count):
    i = c.bx * c.bdx + c.tx
    while i < count:
        yield i
        i += c.gdx * c.bdx


def nll_none_kernel(c, x, t, w, out, count, C, S, ignore_index, err, T):
    for i in grid_stride(c, count):
        k = class_at(t, i, C, ignore_index, err, True)
        v = 0.0
        if k >= 0:
            n = i // S
            s = i - n * S
            v = -weight_of(w, k, T) * float(T.to_op(x[(n * C + k) * S + s]))
        out[i] = T.from_op(v)


def nll_reduce_kernel(c, x, t, w, out, count, C, S, ignore_index, mean, err, T):
    acc = np.float64(0)
    tw = np.float64(0)
    for i in range(c.tx, count, c.bdx):
        k = class_at(t, i, C, ignore_index, err, True)
        if k < 0:
            continue
        n = i // S
        s = i - n * S
        wk = weight_of(w, k, T)
        acc += -wk * float(T.to_op(x[(n * C + k) * S + s]))
        tw += wk
    acc = yield from team_sum(c, acc, K_BLOCK)
    tw = yield from team_sum(c, tw, K_BLOCK)
    if c.tx == 0:
        with np.errstate(all="ignore"):
            out[0] = T.from_op(acc / tw if mean else acc)


def total_weight_kernel(c, t, w, tw_out, count, C, ignore_index, err, T):
    tw = np.float64(0)
    for i in range(c.tx, count, c.bdx):
        k = class_at(t, i, C, ignore_index, err, True)
        if k >= 0:
            tw += weight_of(w, k, T)
    tw = yield from team_sum(c, tw, K_BLOCK)
    if c.tx == 0:
        tw_out[0] = tw


def nll_backward_kernel(c, go, t, w, tw, gi, count, C, S, ignore_index, none, err, T):
    for i in grid_stride(c, count):
        k = class_at(t, i, C, ignore_index, err, False)
        if k < 0:
            continue
        n = i // S
        s = i - n * S
        with np.errstate(all="ignore"):
            gv = (
                float(T.to_op(go[i]))
                if none
                else float(T.to_op(go[0])) / (tw[0] if tw is not None else 1.0)
            )
        gi[(n * C + k) * S + s] = T.from_op(-weight_of(w, k, T) * gv)


def weight_sum_kernel(c, w, C, out, T):
    s = np.float64(0)
    for k in range(c.tx, C, c.bdx):
        s += float(T.to_op(w[k]))
    s = yield from team_sum(c, s, K_BLOCK)
    if c.tx == 0:
        out[0] = s


def ce_forward_kernel(
    c, x, t, w, Wp, lse_out, out_none, loss, wk_out, count, C, S, ignore_index, eps, mode, err, T
):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= count:
        return
    i = rid
    k = class_at(t, i, C, ignore_index, err, rank == 0)
    if k < 0:
        if rank == 0:
            lse_out[i] = A(0)
            if out_none is not None:
                out_none[i] = T.from_op(0.0)
            else:
                loss[i] = 0.0
                wk_out[i] = 0.0
        return
    n = i // S
    s = i - n * S
    row = n * C * S + s
    ms = (A(-math.inf), A(0))
    wsum = A(0)
    for cc in range(rank, C, size):
        v = A(x[row + cc * S])
        ms = maxsum_step(ms, v)
        if eps > 0:
            wsum += (A(w[cc]) if w is not None else A(1)) * v
    ms = yield from team_reduce(c, ms, mode, merge_max_sum, ("maxsum", A.__name__))
    if eps > 0:
        wsum = yield from team_sum(c, wsum, mode)
    if rank != 0:
        return
    with np.errstate(all="ignore"):  # in double, as the kernel (log(0) = -inf, log(NaN) = NaN)
        lv = float(np.float64(ms[0]) + np.log(np.float64(ms[1])))
    lse_out[i] = A(lv)
    wk = weight_of(w, k, T)
    with np.errstate(all="ignore"):
        v = wk * (lv - float(T.to_op(x[row + k * S])))
        if eps > 0:
            W = Wp[0] if Wp is not None else float(C)
            v = (1.0 - eps) * v + eps / float(C) * (W * lv - float(wsum))
    if out_none is not None:
        out_none[i] = T.from_op(v)
    else:
        loss[i] = v
        wk_out[i] = wk


def sum_losses_kernel(c, loss, wk, count, mean, out, T):
    acc = np.float64(0)
    tw = np.float64(0)
    for i in range(c.tx, count, c.bdx):
        acc += loss[i]
        tw += wk[i]
    acc = yield from team_sum(c, acc, K_BLOCK)
    tw = yield from team_sum(c, tw, K_BLOCK)
    if c.tx == 0:
        with np.errstate(all="ignore"):
            out[0] = T.from_op(acc / tw if mean else acc)


def ce_backward_kernel(
    c, go, x, t, w, Wp, lse_in, tw, gi, count, C, S, ignore_index, eps, none, mode, T
):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= count:
        return
    i = rid
    n = i // S
    s = i - n * S
    row = n * C * S + s
    k = class_at(t, i, C, ignore_index, None, False)
    if k < 0:
        for cc in range(rank, C, size):
            gi[row + cc * S] = T.from_op(0.0)
        return
    with np.errstate(all="ignore"):
        sc = (
            float(T.to_op(go[i]))
            if none
            else float(T.to_op(go[0])) / (tw[0] if tw is not None else 1.0)
        )
    wk = weight_of(w, k, T)
    W = Wp[0] if Wp is not None else float(C)
    a = sc * ((1.0 - eps) * wk + eps * W / float(C))
    bw = sc * eps / float(C)
    al, aa, ab = A(lse_in[i]), A(a), A(bw)
    for cc in range(rank, C, size):
        wc = A(w[cc]) if w is not None else A(1)
        with np.errstate(all="ignore"):
            v = T.from_op(aa * _exp(A(x[row + cc * S]) - al) - ab * wc)
            if cc == k:
                v = T.from_op(float(T.to_op(v)) - sc * (1.0 - eps) * wk)
        gi[row + cc * S] = v


def nll_shape(shape):
    if len(shape) == 1:
        return 1, shape[0], 1
    n, c = shape[0], shape[1]
    s = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return n, c, s


def nll_host(x, shape, t, w, red, ignore_index, T):
    n, C, S = nll_shape(shape)
    count = n * S
    err = ErrorSlot()
    if red == "none":
        out = empty(count, T)
        if count:
            launch(
                nll_none_kernel,
                blocks_for(count),
                256,
                x,
                t,
                w,
                out,
                count,
                C,
                S,
                ignore_index,
                err,
                T,
            )
    else:
        out = empty(1, T)
        launch(
            nll_reduce_kernel,
            1,
            1024,
            x,
            t,
            w,
            out,
            count,
            C,
            S,
            ignore_index,
            red == "mean",
            err,
            T,
        )
    return out, err


def total_weight(t, w, count, C, ignore_index, err, T):
    tw = empty(1, F64)
    launch(total_weight_kernel, 1, 1024, t, w, tw, count, C, ignore_index, err, T)
    return tw


def nll_backward_host(g, x, shape, t, w, red, ignore_index, T):
    n, C, S = nll_shape(shape)
    count = n * S
    gi = np.zeros(x.size, dtype=np.float64 if T is F64 else np.float32)
    err = ErrorSlot()
    tw = total_weight(t, w, count, C, ignore_index, err, T)
    if count:
        launch(
            nll_backward_kernel,
            blocks_for(count),
            256,
            g,
            t,
            w,
            tw if red == "mean" else None,
            gi,
            count,
            C,
            S,
            ignore_index,
            red == "none",
            err,
            T,
        )
    return gi, err


def ce_host(x, shape, t, w, red, ignore_index, eps, T):
    n, C, S = nll_shape(shape)
    count = n * S
    none = red == "none"
    AT = F64 if T is F64 else F32
    out = empty(count if none else 1, T)
    lse = empty(count, AT)
    err = ErrorSlot()
    W = None
    if eps > 0 and w is not None:
        W = empty(1, F64)
        launch(weight_sum_kernel, 1, 1024, w, C, W, T)
    loss = wk = None
    if not none:
        loss = empty(count, F64)
        wk = empty(count, F64)
    mode = team_mode(C, S)
    if count > 0:
        launch(
            ce_forward_kernel,
            team_blocks(mode, count),
            team_threads(mode),
            x,
            t,
            w,
            W,
            lse,
            out if none else None,
            loss,
            wk,
            count,
            C,
            S,
            ignore_index,
            eps,
            mode,
            err,
            T,
        )
    if not none:
        launch(sum_losses_kernel, 1, 1024, loss, wk, count, red == "mean", out, T)
    return out, lse, err


def ce_backward_host(g, x, shape, t, w, lse, red, ignore_index, eps, T):
    n, C, S = nll_shape(shape)
    count = n * S
    gi = empty(x.size, T)
    err = ErrorSlot()
    tw = total_weight(t, w, count, C, ignore_index, err, T)
    W = None
    if eps > 0 and w is not None:
        W = empty(1, F64)
        launch(weight_sum_kernel, 1, 1024, w, C, W, T)
    mode = team_mode(C, S)
    if count and C:
        launch(
            ce_backward_kernel,
            team_blocks(mode, count),
            team_threads(mode),
            g,
            x,
            t,
            w,
            W,
            lse,
            tw if red == "mean" else None,
            gi,
            count,
            C,
            S,
            ignore_index,
            eps,
            red == "none",
            mode,
            T,
        )
    return gi, err


def check_loss(shape, T, red, weighted, ignore_index, eps, fails, bad_target=False, special=False):
    ember = E()
    C_ = ember._C
    n, C, S = nll_shape(shape)
    tshape = [] if len(shape) == 1 else [shape[0]] + list(shape[2:])
    x = rnd(shape, T, 2.0)
    if special:  # a row of -inf, a row holding +inf, a row holding NaN, a row of huge values
        x = x.reshape(shape).copy()
        x[0] = -np.inf
        x[1, 0] = np.inf
        x[2, 1] = np.nan
        with np.errstate(all="ignore"):
            x[3] = x[3] * 3e4
        x = T.mem(x)
    t = RNG.integers(0, C, size=max(n * S, 1)).astype(np.int64)[: n * S]
    if ignore_index >= 0 or ignore_index == -100:
        t[::3] = ignore_index if ignore_index != -100 else t[::3]
        if ignore_index == -100 and t.size > 1:
            t[1] = -100
    if bad_target and t.size:
        t[-1] = C + 2
    w = T.mem(RNG.random(C) + 0.5) if weighted else None
    xt = tensor(x, T, shape)
    tt = ember.tensor(t.reshape(tshape))
    wt = tensor(w, T, [C]) if weighted else None
    tol = TOL[T.name]
    tag = (
        f"{tuple(shape)} {T} {red} weighted={weighted} ignore={ignore_index} eps={eps}"
        f"{' bad_target' if bad_target else ''}{' special' if special else ''}"
    )
    # nll_loss on x as log-probabilities
    if eps == 0:
        out, err = nll_host(x, shape, t, w, red, ignore_index, T)
        try:
            cout = C_.nll_loss(xt, tt, wt, red, ignore_index)
            cerr = None
        except IndexError as e:
            cerr = e
        if cerr is not None or err.flag:
            if not (cerr is not None and err.flag):
                fails.append(f"MISMATCH nll_loss {tag}: CPU error {cerr}, GPU flag {err.flag}")
        else:
            close("nll_loss " + tag, out, npv(cout), tol, failures=fails)
            go = rnd(tshape if red == "none" else [], T)
            got = tensor(go, T, tshape if red == "none" else [])
            gi, err2 = nll_backward_host(go, x, shape, t, w, red, ignore_index, T)
            cgi = C_.nll_loss_backward(got, xt, tt, wt, red, ignore_index)
            close("nll_loss_backward " + tag, gi, npv(cgi), tol, failures=fails)
    out, lse, err = ce_host(x, shape, t, w, red, ignore_index, eps, T)
    try:
        cout, clse = C_._cross_entropy_loss(xt, tt, wt, red, ignore_index, eps)
        cerr = None
    except IndexError as e:
        cerr = e
    if cerr is not None or err.flag:
        if not (cerr is not None and err.flag):
            fails.append(f"MISMATCH cross_entropy {tag}: CPU error {cerr}, GPU flag {err.flag}")
        return
    close("cross_entropy " + tag, out, npv(cout), tol, failures=fails)
    close("cross_entropy lse " + tag, lse, npv(clse), tol, failures=fails)
    go = rnd(tshape if red == "none" else [], T)
    got = tensor(go, T, tshape if red == "none" else [])
    gi, _ = ce_backward_host(go, x, shape, t, w, lse.astype(np.float64), red, ignore_index, eps, T)
    cgi = C_._cross_entropy_loss_backward(got, xt, tt, wt, clse, red, ignore_index, eps)
    close("cross_entropy_backward " + tag, gi, npv(cgi), tol * 2, failures=fails)


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    for shape, d, types in [
        ((7, 33), 1, (F32, F16, BF16, F64)),
        ((3, 1500), 1, (F32, F16)),
        ((4, 1024), 1, (F32,)),
        ((3, 5, 6), 1, (F32, F64, F16)),
        ((2, 1100, 3), 1, (F32,)),
        ((5,), 0, (F32,)),
        ((2, 3, 4), 0, (F32,)),
        ((6, 40), 1, (F32,)),
    ]:
        for T in types:
            check_softmax(shape, d, T, fails)
    check_softmax((5, 40), 1, F32, fails, special=True)
    check_softmax((5, 1100), 1, F32, fails, special=True)
    check_softmax((5, 7, 3), 1, F32, fails, special=True)
    check_softmax((5, 40), 1, F16, fails, special=True)
    # softmax_rows_kernel: rows (n > 1024) starting at every alignment of x and of y (the write
    # pass by packs or element by element), lengths that leave heads and tails
    for xo, yo in [(0, 0), (1, 1), (3, 0), (0, 5), (7, 7)]:
        ALIGN["x"], ALIGN["y"] = xo, yo
        for shape, T in [((3, 1025), F32), ((2, 1100), F16), ((2, 1037), BF16), ((2, 1031), F64),
                         ((1, 4103), F32)]:
            check_softmax(shape, 1, T, fails)
        check_softmax((5, 1100), 1, F32, fails, special=True)
    ALIGN["x"] = ALIGN["y"] = 0
    check_softmax_smem(fails)
    # losses: (N, C) warp rows, C > 1024 block rows, (N, C, d) a thread per sample, (C,) one
    # sample; every reduction, class weights, ignore_index (default -100 and a class), label
    # smoothing, 16-bit inputs, an out-of-range target
    for shape in [(9, 7), (3, 1100), (2, 5, 3), (7,), (4, 3, 2, 2)]:
        for red in ("none", "mean", "sum"):
            for weighted in (False, True):
                for eps in (0.0, 0.2):
                    check_loss(shape, F32, red, weighted, -100, eps, fails)
    for T in (F16, BF16, F64):
        for red in ("none", "mean"):
            check_loss((9, 7), T, red, True, 2, 0.1, fails)
            check_loss((9, 7), T, red, True, 2, 0.0, fails)
    check_loss((9, 7), F32, "mean", True, 2, 0.0, fails)
    check_loss((9, 7), F32, "mean", False, 1, 0.3, fails)
    check_loss((2, 5, 3), F32, "sum", True, 4, 0.3, fails)
    check_loss((9, 7), F32, "mean", False, -100, 0.0, fails, bad_target=True)
    check_loss((9, 7), F32, "none", False, -100, 0.1, fails, bad_target=True)
    for T in (F32, F16):
        for red in ("none", "sum"):
            check_loss((9, 7), T, red, True, 5, 0.1, fails, special=True)
            check_loss((9, 1100), T, red, False, 5, 0.0, fails, special=True)
    check_loss((0, 7), F32, "mean", True, -100, 0.0, fails)
    check_loss((0, 7), F32, "sum", False, -100, 0.1, fails)
    return report("nn_softmax_loss", fails, t0, quiet)


if __name__ == "__main__":
    if "--plant" in sys.argv:
        sys.exit(plant_checks())
    if "--smem" in sys.argv:
        _fails, _t0 = [], time.time()
        check_softmax_smem(_fails)
        sys.exit(report("nn_softmax_loss (smem rows)", _fails, _t0, False))
    sys.exit(main())
