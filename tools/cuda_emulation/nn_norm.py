"""Emulation of packages/core/csrc/cuda/nn_norm.cu (layer / RMS / group norm, forward and
backward; batch norm: nn_batch_norm.py), kernel by kernel and host function by host function,
against ember's CPU kernels (ember._C.native_*). Run: PYTHONPATH=<build>/site python3 nn_norm.py
[-q]."""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace as NS

import numpy as np
from nn_sim import BF16, F16, F32, F64, TOL, blocks_for, close, launch, report
from nn_team import K_BLOCK, K_ROW_BLOCK, make_team, team_blocks, team_mode, team_sum, team_threads

K_INDEX_LIMIT = 2**31 - 1
M32 = 0xFFFFFFFF


class IntDivider:
    """elementwise.cuh's IntDivider (multiply-shift division of uint32)."""

    def __init__(self, d):
        self.divisor = d
        shift = 0
        while shift < 32 and (1 << shift) < d:
            shift += 1
        self.shift = shift
        self.magic = (((1 << 32) * ((1 << shift) - d)) // d + 1) & M32

    def div(self, n):
        assert 0 <= n <= M32
        t = (n * self.magic) >> 32
        return ((t + n) & M32) >> self.shift


class ChanGeom:
    def __init__(self, o, p, k):
        self.O, self.P, self.K = o, p, k
        self.fast = o * p * k <= K_INDEX_LIMIT and p >= 1 and k >= 1
        if self.fast:
            self.kdiv = IntDivider(k)

    def outer_of(self, idx):
        return self.kdiv.div(idx) if self.fast else idx // self.K


def acc_ty(T):
    return F64 if T is F64 else F32


def rsqrt_(A, v):
    with np.errstate(all="ignore"):
        return A(1) / A(np.sqrt(v))


# ---- row kernels ---------------------------------------------------------------------------


def param_of(geo, r, j):
    return (r % geo.G) * geo.cg + j // geo.hw if geo.G > 0 else j


def row_norm_forward_kernel(c, x, w, b, y, mean, rstd, geo, eps, center, mode, T):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= geo.rows:
        return
    r, M = rid, geo.M
    base = r * M
    mu = A(0)
    if center:
        for j in range(rank, M, size):
            mu += A(x[base + j])
        mu = (yield from team_sum(c, mu, mode)) / A(M if M > 0 else 1)
    var = A(0)
    for j in range(rank, M, size):
        d = A(x[base + j]) - mu
        var += d * d
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 = NaN for an empty row
        var = (yield from team_sum(c, var, mode)) / A(M)
    rs = rsqrt_(A, var + A(eps))
    if rank == 0:
        if mean is not None:
            mean[r] = mu
        rstd[r] = rs
    shift = -mu * rs
    for j in range(rank, M, size):
        v = A(x[base + j]) * rs + shift
        if w is not None or b is not None:
            p = param_of(geo, r, j)
            if w is not None:
                v *= A(w[p])
            if b is not None:
                v += A(b[p])
        y[base + j] = T.from_op(v)


def row_norm_backward_kernel(c, g, x, mean, rstd, w, gi, geo, mode, T):
    A = T.acc
    rid, rank, size = make_team(c, mode)
    if rid >= geo.rows:
        return
    r, M = rid, geo.M
    base = r * M
    mu = A(mean[r]) if mean is not None else A(0)
    s = A(rstd[r])
    sg = A(0)
    sgx = A(0)
    for j in range(rank, M, size):
        gv = A(g[base + j])
        if w is not None:
            gv *= A(w[param_of(geo, r, j)])
        sg += gv
        sgx += gv * (A(x[base + j]) - mu) * s
    sg = yield from team_sum(c, sg, mode)
    sgx = yield from team_sum(c, sgx, mode)
    a = sg / A(M) if mean is not None else A(0)
    cc = sgx / A(M)
    for j in range(rank, M, size):
        gv = A(g[base + j])
        if w is not None:
            gv *= A(w[param_of(geo, r, j)])
        xh = (A(x[base + j]) - mu) * s
        gi[base + j] = T.from_op(s * (gv - a - xh * cc))


K_COL_TILE, K_COL_ROWS = 32, 8


def col_param_partial_kernel(c, g, x, mean, rstd, pw, pb, R, M, chunk, T):
    A = T.acc
    sw = c.shared_array("sw", (K_COL_ROWS, K_COL_TILE + 1))
    sb = c.shared_array("sb", (K_COL_ROWS, K_COL_TILE + 1))
    tx, ty = c.tx, c.ty
    j = c.bx * K_COL_TILE + tx
    r0 = c.by * chunk
    r1 = r0 + chunk if r0 + chunk < R else R
    aw = A(0)
    ab = A(0)
    if j < M:
        for r in range(r0 + ty, r1, K_COL_ROWS):
            gv = A(g[r * M + j])
            mu = A(mean[r]) if mean is not None else A(0)
            ab += gv
            aw += gv * (A(x[r * M + j]) - mu) * A(rstd[r])
    sw[ty][tx] = aw
    sb[ty][tx] = ab
    yield "sync"
    if ty == 0 and j < M:
        for k in range(1, K_COL_ROWS):
            aw += A(sw[k][tx])
            ab += A(sb[k][tx])
        pw[c.by * M + j] = aw
        pb[c.by * M + j] = ab


def col_param_final_kernel(c, pw, pb, gw, gb, chunks, M, T):
    A = T.acc
    j = c.bx * c.bdx + c.tx
    if j >= M:
        return
    aw = A(0)
    ab = A(0)
    for k in range(chunks):
        aw += A(pw[k * M + j])
        ab += A(pb[k * M + j])
    if gw is not None:
        gw[j] = T.from_op(aw)
    if gb is not None:
        gb[j] = T.from_op(ab)


def split_for(P, total):
    splits = max(1, (1024 + P - 1) // max(P, 1))
    splits = min(splits, max(1, (total + 4095) // 4096))
    per = (total + splits - 1) // splits
    return NS(splits=(total + per - 1) // max(per, 1), per=per)


def channel_sums_kernel(c, g, x, mean, rstd, part_sg, part_sgx, geo, G, cg, per, T):
    p, y, total = c.bx, c.by, geo.O * geo.K
    lo = y * per
    hi = lo + per if lo + per < total else total
    a = np.float64(0)
    bs = np.float64(0)
    for idx in range(lo + c.tx, hi, c.bdx):
        o = geo.outer_of(idx)
        k = idx - o * geo.K
        i = (o * geo.P + p) * geo.K + k
        st = o * G + p // cg if G > 0 else p
        gv = np.float64(T.to_op(g[i]))
        a += gv
        bs += gv * (np.float64(T.to_op(x[i])) - mean[st]) * rstd[st]
    a = yield from team_sum(c, a, K_BLOCK)
    bs = yield from team_sum(c, bs, K_BLOCK)
    if c.tx == 0:
        part_sg[y * geo.P + p] = a
        part_sgx[y * geo.P + p] = bs


def sum_parts_kernel(c, pa, pb, out_a, out_b, P, splits):
    p = c.bx * c.bdx + c.tx
    if p >= P:
        return
    a = np.float64(0)
    b = np.float64(0)
    for y in range(splits):
        a += pa[y * P + p]
        b += pb[y * P + p]
    out_a[p] = a
    out_b[p] = b


# ---- host functions -----------------------------------------------------------------------


def stat_dtype(T, params, always_float=False):
    """nn::norm_stat_dtype."""
    if T in (F16, BF16) and (always_float or any(p is F32 for p in params)):
        return F32
    return T


def launch_row_forward(x, w, b, y, mean, rstd, geo, eps, center, T):
    if geo.rows == 0:
        return
    mode = team_mode(geo.M, 1)
    launch(
        row_norm_forward_kernel,
        team_blocks(mode, geo.rows),
        team_threads(mode),
        x,
        w,
        b,
        y,
        mean,
        rstd,
        geo,
        eps,
        center,
        mode,
        T,
    )


def launch_row_backward(g, x, mean, rstd, w, gi, geo, T):
    if geo.rows == 0 or geo.M == 0:
        return
    mode = team_mode(geo.M, 1)
    launch(
        row_norm_backward_kernel,
        team_blocks(mode, geo.rows),
        team_threads(mode),
        g,
        x,
        mean,
        rstd,
        w,
        gi,
        geo,
        mode,
        T,
    )


def empty(n, ty):
    """Uninitialized device memory: NaN (garbage) so unwritten outputs show."""
    return np.full(int(n), np.nan, dtype=np.float64 if ty is F64 else np.float32)


def row_norm_forward(x, R, M, w, b, eps, center, T):
    AT = acc_ty(T)
    y = empty(R * M, T)
    mean = empty(R, AT)
    rstd = empty(R, AT)
    geo = NS(rows=R, M=M, hw=1, G=0, cg=1)
    launch_row_forward(x, w, b, y, mean if center else None, rstd, geo, eps, center, T)
    if not center and R > 0:
        mean[:] = 0
    return y, mean, rstd


def row_norm_backward(g, x, R, M, mean, rstd, w, wants, T):
    AT = acc_ty(T)
    geo = NS(rows=R, M=M, hw=1, G=0, cg=1)
    gi = gw = gb = None
    if wants[0]:
        gi = empty(R * M, T)
        launch_row_backward(g, x, mean, rstd, w, gi, geo, T)
    if wants[1] or wants[2]:
        if wants[1]:
            gw = empty(M, T)
        if wants[2]:
            gb = empty(M, T)
        if M > 0 and R == 0:
            for t in (gw, gb):
                if t is not None:
                    t[:] = 0
        elif M > 0:
            chunk = max(64, (R + 511) // 512)
            chunks = (R + chunk - 1) // chunk
            pw = empty(chunks * M, AT)
            pb = empty(chunks * M, AT)
            grid = ((M + K_COL_TILE - 1) // K_COL_TILE, chunks)
            launch(
                col_param_partial_kernel,
                grid,
                (K_COL_TILE, K_COL_ROWS),
                g,
                x,
                mean,
                rstd,
                pw,
                pb,
                R,
                M,
                chunk,
                T,
            )
            launch(col_param_final_kernel, blocks_for(M), 256, pw, pb, gw, gb, chunks, M, T)
    return gi, gw, gb


def channel_sums(g, x, mean, rstd, O, P, K, G, cg, T):  # noqa: E741 (the kernel's names)
    sg = empty(P, F64)
    sgx = empty(P, F64)
    if P == 0:
        return sg, sgx
    if O * K == 0:
        sg[:] = 0
        sgx[:] = 0
        return sg, sgx
    sp = split_for(P, O * K)
    pa = empty(sp.splits * P, F64)
    pb = empty(sp.splits * P, F64)
    geo = ChanGeom(O, P, K)
    launch(
        channel_sums_kernel,
        (P, sp.splits),
        K_ROW_BLOCK,
        g,
        x,
        mean,
        rstd,
        pa,
        pb,
        geo,
        G,
        cg,
        sp.per,
        T,
    )
    launch(sum_parts_kernel, blocks_for(P), 256, pa, pb, sg, sgx, P, sp.splits)
    return sg, sgx


def group_norm_forward(x, n, c, hw, G, w, b, eps, T):
    AT = acc_ty(T)
    y = empty(x.size, T)
    mean = empty(n * G, AT)
    rstd = empty(n * G, AT)
    cg = c // G
    geo = NS(rows=n * G, M=cg * hw, hw=max(hw, 1), G=G, cg=cg)
    launch_row_forward(x, w, b, y, mean, rstd, geo, eps, True, T)
    return y, mean, rstd


def group_norm_backward(g, x, n, c, hw, G, mean, rstd, w, wants, T):
    cg = c // G
    gi = gw = gb = None
    if wants[0]:
        gi = empty(x.size, T)
        geo = NS(rows=n * G, M=cg * hw, hw=max(hw, 1), G=G, cg=cg)
        launch_row_backward(g, x, mean, rstd, w, gi, geo, T)
    if wants[1] or wants[2]:
        sg, sgx = channel_sums(
            g, x, mean.astype(np.float64), rstd.astype(np.float64), n, c, hw, G, cg, T
        )
        gw, gb = sgx, sg
    return gi, gw, gb


# ---- comparisons with the CPU kernels ----------------------------------------------------------

RNG = np.random.default_rng(7)


def E():
    import ember

    return ember


def tensor(vals, T, shape):
    """The CPU ember tensor of T holding exactly the (already rounded) values."""
    ember = E()
    a = np.asarray(vals, dtype=np.float64).reshape(shape)
    if T is F64:
        return ember.tensor(a)
    return ember.tensor(a.astype(np.float32)).to(getattr(ember, T.name))


def npv(t):
    return None if t is None else t.to(E().float64).numpy().ravel()


def rnd(shape, T, scale=1.0, shift=0.0):
    return T.mem(RNG.standard_normal(size=shape) * scale + shift)


def out_round(T, arr):
    """What a T tensor of these values holds (the emulated output, as stored)."""
    return None if arr is None else np.asarray(arr, dtype=np.float64)


def check_layer_rms(shape, k, T, affine, center, fails):
    ember = E()
    C_ = ember._C
    ns = list(shape[len(shape) - k :])
    M = int(np.prod(ns)) if ns else 1
    R = int(np.prod(shape)) // max(M, 1) if M else int(np.prod(shape[: len(shape) - k]))
    x = rnd(shape, T, 2.0, 0.5)
    w = rnd(ns, T) if affine else None
    b = rnd(ns, T) if (affine and center) else None
    eps = 1e-5
    tag = f"{'layer' if center else 'rms'}_norm{tuple(shape)}/{k} {T} affine={affine}"
    xt = tensor(x, T, shape)
    wt = tensor(w, T, ns) if w is not None else None
    bt = tensor(b, T, ns) if b is not None else None
    y, mean, rstd = row_norm_forward(x, R, M, w, b, eps, center, T)
    if center:
        cy, cmean, crstd = C_.native_layer_norm(xt, ns, wt, bt, eps)
    else:
        cy, crstd = C_._fused_rms_norm(xt, ns, wt, eps)
        cmean = None
    tol = TOL[T.name]
    close(tag + " y", y, npv(cy), tol, failures=fails)
    if center:
        close(tag + " mean", mean, npv(cmean), tol, failures=fails)
    close(tag + " rstd", rstd, npv(crstd), tol, failures=fails)
    # backward: the statistics as saved by the CPU (its dtype), read in the compute type
    g = rnd(shape, T)
    gt = tensor(g, T, shape)
    sm = npv(cmean) if center else None
    sr = npv(crstd)
    AT = acc_ty(T)
    smA = None if sm is None else AT.mem(sm)
    srA = AT.mem(sr)
    wants = (True, affine, affine and center)
    gi, gw, gb = row_norm_backward(g, x, R, M, smA, srA, w, wants, T)
    if center:
        cgi, cgw, cgb = C_.native_layer_norm_backward(gt, xt, ns, cmean, crstd, wt, *wants)
    else:
        cgi, cgw = C_._fused_rms_norm_backward(gt, xt, ns, crstd, wt, wants[0], wants[1])
        cgb = None
    btol = tol * (4 if T in (F16, BF16) else 10)
    close(tag + " grad_input", gi, npv(cgi), btol, failures=fails)
    if affine:
        close(tag + " grad_weight", gw, npv(cgw), btol, atol=btol * 10, failures=fails)
        if center:
            close(tag + " grad_bias", gb, npv(cgb), btol, atol=btol * 10, failures=fails)


def check_group(shape, G, T, affine, fails):
    ember = E()
    C_ = ember._C
    n, c = shape[0], shape[1]
    hw = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    x = rnd(shape, T, 1.5, -0.3)
    w = rnd([c], T) if affine else None
    b = rnd([c], T) if affine else None
    xt = tensor(x, T, shape)
    wt = tensor(w, T, [c]) if affine else None
    bt = tensor(b, T, [c]) if affine else None
    tag = f"group_norm{tuple(shape)} G={G} {T} affine={affine}"
    eps = 1e-5
    y, mean, rstd = group_norm_forward(x, n, c, hw, G, w, b, eps, T)
    cy, cmean, crstd = C_.native_group_norm(xt, G, wt, bt, eps)
    tol = TOL[T.name]
    close(tag + " y", y, npv(cy), tol, failures=fails)
    # mean / rstd saved in the input's dtype
    close(tag + " mean", T.mem(mean), npv(cmean), tol, failures=fails)
    close(tag + " rstd", T.mem(rstd), npv(crstd), tol, failures=fails)
    g = rnd(shape, T)
    gt = tensor(g, T, shape)
    wants = (True, affine, affine)
    AT = acc_ty(T)
    gi, gw, gb = group_norm_backward(
        g, x, n, c, hw, G, AT.mem(npv(cmean)), AT.mem(npv(crstd)), w, wants, T
    )
    cgi, cgw, cgb = C_.native_group_norm_backward(gt, xt, G, cmean, crstd, wt, *wants)
    btol = tol * (4 if T in (F16, BF16) else 10)
    close(tag + " grad_input", gi, npv(cgi), btol, failures=fails)
    if affine:
        close(tag + " grad_weight", T.mem(gw), npv(cgw), btol, atol=btol * 10, failures=fails)
        close(tag + " grad_bias", T.mem(gb), npv(cgb), btol, atol=btol * 10, failures=fails)


def check_int_divider(fails):
    """IntDivider against exact division over divisors and numerators at the edges."""
    rng = np.random.default_rng(3)
    ds = [
        1,
        2,
        3,
        5,
        7,
        31,
        32,
        33,
        255,
        256,
        1000,
        4095,
        65535,
        65537,
        2**20 + 1,
        2**31 - 1,
        2**31,
        2**31 + 1,
    ] + rng.integers(1, 2**31, 40).tolist()
    for d in ds:
        dv = IntDivider(int(d))
        ns = [0, 1, d - 1, d, d + 1, 2**31 - 1, 2**31 - 2, 2 * d - 1] + rng.integers(
            0, 2**31, 30
        ).tolist()
        for n in ns:
            n = int(n)
            if n < 0 or n > 2**31 - 1:
                continue
            if dv.div(n) != n // d:
                fails.append(f"MISMATCH IntDivider({d}).div({n}) = {dv.div(n)}, want {n // d}")
                return


def check_split_for(fails):
    """split_for's plan: every element of a channel in exactly one slice, no empty slice, the
    grid's y dimension (splits) within 65535, a slice count that fills ~1024 blocks at most."""
    rng = np.random.default_rng(9)
    Ps = [1, 2, 3, 7, 64, 1000, 1024, 1025, 5000, 70000]
    totals = [1, 2, 4095, 4096, 4097, 10**5, 3 * 10**6, 2**31 - 1, 2**40]
    for P in Ps + rng.integers(1, 10**5, 10).tolist():
        for total in totals + rng.integers(1, 10**8, 10).tolist():
            sp = split_for(int(P), int(total))
            ok = (
                1 <= sp.splits <= 65535
                and sp.per >= 1
                and (sp.splits - 1) * sp.per < total <= sp.splits * sp.per
                and P * sp.splits <= max(P, 1024 + P)
            )
            if not ok:
                fails.append(f"MISMATCH split_for({P}, {total}) = {sp}")
                return


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    check_int_divider(fails)
    check_split_for(fails)
    # layer / RMS norm: warp rows (short; a partial last block of warps), block rows (> 1024),
    # the boundary 1024, one-element rows, several normalized dims
    cases = [
        ((9, 33), 1),
        ((3, 1500), 1),
        ((2, 1024), 1),
        ((7, 1), 1),
        ((2, 3, 40), 2),
        ((130, 40), 1),
    ]
    for shape, k in cases:
        for T in (F32, F16, BF16, F64) if shape == (9, 33) else (F32,):
            for center in (True, False):
                check_layer_rms(shape, k, T, True, center, fails)
        check_layer_rms(shape, k, F32, False, True, fails)
    check_layer_rms((130, 40), 1, F16, True, True, fails)
    # group norm: warp rows, block rows (cg * hw > 1024), hw = 1, one group, G = C
    for shape, G, T in [
        ((2, 6, 5, 4), 3, F32),
        ((2, 6, 5, 4), 3, F16),
        ((2, 6, 5, 4), 3, F64),
        ((2, 4, 1100), 2, F32),
        ((3, 4), 2, F32),
        ((2, 4, 3), 1, F32),
        ((2, 4, 0), 2, F32),
        ((2, 4, 3), 4, BF16),
    ]:
        check_group(shape, G, T, True, fails)
    check_group((2, 6, 5, 4), 3, F32, False, fails)
    return report("nn_norm", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
