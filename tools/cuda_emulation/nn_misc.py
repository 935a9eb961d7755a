"""Emulation of packages/core/csrc/cuda/nn_pool.cu (max / avg / adaptive pooling and backward),
nn_embedding.cu (embedding, embedding_dense_backward with padding_idx / scale_grad_by_freq),
nn_upsample.cu (nearest, nearest-exact, linear, bilinear, trilinear, bicubic; align_corners,
scale factors; forward and backward) and nn_pad.cu (_pad_backward: constant / reflect /
replicate / circular, the CSR inverse maps and the gather) against ember's CPU kernels. One
thread per output (or input) element, grid-stride loops as launched; atomics are ordered adds.
Run: PYTHONPATH=<build>/site python3 nn_misc.py [-q]."""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from nn_norm import E, npv, tensor
from nn_sim import BF16, F16, F32, F64, TOL, Ty, blocks_for, close, launch, report

RNG = np.random.default_rng(17)
# integer storage types (compute type = storage type, as dev_opmath_t of an integer)
U8, I8, I16 = (
    Ty("uint8", np.uint8, np.uint8),
    Ty("int8", np.int8, np.int8),
    Ty("int16", np.int16, np.int16),
)
I32, I64 = Ty("int32", np.int32, np.int32), Ty("int64", np.int64, np.int64)


def grid_stride(c, total):
    e = c.bx * c.bdx + c.tx
    while e < total:
        yield e
        e += c.gdx * c.bdx


def tdiv(a, b):
    """C++ integer division (truncation toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ---- pooling ----------------------------------------------------------------------------------


class Plan:
    def __init__(self):
        self.inn = [1, 1, 1]
        self.out = [1, 1, 1]
        self.ks = [1, 1, 1]
        self.st = [1, 1, 1]
        self.pd = [0, 0, 0]
        self.dl = [1, 1, 1]
        self.adaptive = False
        self.count_include_pad = False

    def in_numel(self):
        return self.inn[0] * self.inn[1] * self.inn[2]

    def out_numel(self):
        return self.out[0] * self.out[1] * self.out[2]


def window_of(p, j, i):
    inn = p.inn[j]
    if p.adaptive:
        o = p.out[j]
        a = (i * inn) // o
        b = ((i + 1) * inn + o - 1) // o
        return (a, b - a, 1, b - a)
    ks, dl = p.ks[j], p.dl[j]
    start = i * p.st[j] - p.pd[j]
    lo = 0 if start >= 0 else min(ks, tdiv(-start + dl - 1, dl))
    hi = max(lo, min(ks, tdiv(inn - 1 - start, dl) + 1))
    w = [start + lo * dl, hi - lo, dl, hi - lo]
    if p.count_include_pad:
        w[3] = min(start + ks, inn + p.pd[j]) - start
    return tuple(w)


def locate(p, e):
    Q = p.out_numel()
    q = e % Q
    plane = e // Q
    ow, oh, od = q % p.out[2], (q // p.out[2]) % p.out[1], q // (p.out[2] * p.out[1])
    return plane, (window_of(p, 0, od), window_of(p, 1, oh), window_of(p, 2, ow))


def visit_window(p, w):
    for a in range(w[0][1]):
        id_ = w[0][0] + a * w[0][2]
        for b in range(w[1][1]):
            base = (id_ * p.inn[1] + w[1][0] + b * w[1][2]) * p.inn[2]
            for cc in range(w[2][1]):
                yield base + w[2][0] + cc * w[2][2]


def is_nan_value(v):
    """The kernel's is_nan_value: v != v for floats, false for integers."""
    return bool(np.issubdtype(type(v), np.floating) and v != v)


def max_pool_kernel(c, total, x, out, idx, p, T):
    A = T.acc
    P = p.in_numel()
    for e in grid_stride(c, total):
        plane, w = locate(p, e)
        # -numeric_limits<A>::infinity(): 0 for an integer A (never read: arg < 0 takes the first)
        best, arg = A(-math.inf) if np.issubdtype(A, np.floating) else A(0), -1
        for i in visit_window(p, w):
            v = A(x[plane * P + i])
            if arg < 0 or v > best or is_nan_value(v):
                best, arg = v, i
        out[e] = T.from_op(best)
        idx[e] = arg


def avg_pool_kernel(c, total, x, out, p, divisor_override, T):
    A = T.acc
    P = p.in_numel()
    for e in grid_stride(c, total):
        plane, w = locate(p, e)
        s = A(0)
        for i in visit_window(p, w):
            s += A(x[plane * P + i])
        div = divisor_override if divisor_override != 0 else w[0][3] * w[1][3] * w[2][3]
        with np.errstate(all="ignore"):
            out[e] = T.from_op(s / A(div))


def avg_pool_backward_kernel(c, total, g, acc, p, divisor_override, T):
    A = T.acc
    P = p.in_numel()
    for e in grid_stride(c, total):
        plane, w = locate(p, e)
        div = divisor_override if divisor_override != 0 else w[0][3] * w[1][3] * w[2][3]
        with np.errstate(all="ignore"):
            v = acc.dtype.type(A(g[e]) / A(div))
        for i in visit_window(p, w):
            acc[plane * P + i] += v


def max_pool_backward_kernel(c, total, g, idx, acc, P, Q, T):
    for e in grid_stride(c, total):
        i = int(idx[e])
        if i < 0 or i >= P:
            continue
        acc[(e // Q) * P + i] += acc.dtype.type(T.to_op(g[e]))


def scatter_into(n, T, run):
    acc = np.zeros(n, dtype=np.float64 if T is F64 else np.float32)
    run(acc)
    if T in (F16, BF16):
        return np.array([T.from_op(v) for v in acc], dtype=np.float64)
    return acc


def plan_for(shape, k, out_spatial, ks=None, st=None, pd=None, dl=None, adaptive=False, cip=False):
    p = Plan()
    off = 3 - k
    for j in range(k):
        p.inn[off + j] = shape[len(shape) - k + j]
        p.out[off + j] = out_spatial[j]
        if not adaptive:
            p.ks[off + j], p.st[off + j], p.pd[off + j] = ks[j], st[j], pd[j]
            p.dl[off + j] = dl[j] if dl else 1
    p.adaptive = adaptive
    p.count_include_pad = cip
    return p


def check_max_pool_int(shape, k, T, fails, ks, st, pd, dl, ceil=False):
    """Max pooling of an integer dtype T (fixed windows only; values and indices exact)."""
    ember = E()
    info = np.iinfo(T.store)
    x = RNG.integers(info.min, int(info.max) + 1, size=int(np.prod(shape))).astype(T.store)
    x[:3] = info.min  # the lowest value, and ties (the first maximum wins)
    xt = ember.tensor(x.astype(np.int64).reshape(shape)).to(getattr(ember, T.name))
    cmax, cidx = ember._C._max_pool(xt, ks, st, pd, dl, ceil)
    planes = int(np.prod(shape[: len(shape) - k]))
    p = plan_for(shape, k, list(cmax.shape)[len(shape) - k :], ks, st, pd, dl, False)
    total = planes * p.out_numel()
    out = np.zeros(total, dtype=T.store)
    idx = np.full(total, -7, dtype=np.int64)
    if total:
        launch(max_pool_kernel, blocks_for(total), 256, total, x, out, idx, p, T)
    tag = f"pool{tuple(shape)} k={k} {T} ks={ks} st={st} pd={pd} dl={dl} ceil={ceil}"
    want = cmax.numpy().ravel()  # compared exactly (int64 does not fit float64)
    if want.dtype != T.store or not np.array_equal(out, want):
        fails.append(f"MISMATCH max_pool {tag}: {out[:6].tolist()} vs {want[:6].tolist()}")
    close("max_pool indices " + tag, idx, cidx.numpy().ravel(), 0, failures=fails)


def check_pool(
    shape,
    k,
    T,
    fails,
    ks=None,
    st=None,
    pd=None,
    dl=None,
    ceil=False,
    cip=True,
    div=None,
    adaptive_out=None,
    nan=False,
):
    ember = E()
    C_ = ember._C
    x = T.mem(RNG.standard_normal(shape))
    if nan:
        x[3] = np.nan
        x[7] = -np.inf
    xt = tensor(x, T, shape)
    planes = int(np.prod(shape[: len(shape) - k]))
    tol = TOL[T.name]
    tag = (
        f"pool{tuple(shape)} k={k} {T} ks={ks} st={st} pd={pd} dl={dl} ceil={ceil} "
        f"cip={cip} div={div} adaptive={adaptive_out}"
    )
    if adaptive_out is not None:
        cmax, cidx = C_._adaptive_max_pool(xt, adaptive_out)
        cavg = C_._adaptive_avg_pool(xt, adaptive_out)
    else:
        cmax, cidx = C_._max_pool(xt, ks, st, pd, dl, ceil)
        cavg = C_._avg_pool(xt, ks, st, pd, ceil, cip, div)
    out_sp = list(cmax.shape)[len(shape) - k :]
    # max
    p = plan_for(shape, k, out_sp, ks, st, pd, dl, adaptive_out is not None)
    total = planes * p.out_numel()
    out = np.full(total, np.nan)
    idx = np.full(total, -7, dtype=np.int64)
    if total:
        launch(max_pool_kernel, blocks_for(total), 256, total, x, out, idx, p, T)
    close("max_pool " + tag, out, npv(cmax), tol, failures=fails)
    close("max_pool indices " + tag, idx, cidx.numpy().ravel(), 0, failures=fails)
    g = T.mem(RNG.standard_normal(total))
    gt = tensor(g, T, list(cmax.shape))
    P, Q = p.in_numel(), p.out_numel()
    gi = scatter_into(
        x.size,
        T,
        lambda acc: (
            launch(max_pool_backward_kernel, blocks_for(total), 256, total, g, idx, acc, P, Q, T)
            if total
            else None
        ),
    )
    cgi = C_._max_pool_backward(gt, cidx, list(shape), k)
    close("max_pool_backward " + tag, gi, npv(cgi), tol, failures=fails)
    # avg
    pa = plan_for(
        shape,
        k,
        list(cavg.shape)[len(shape) - k :],
        ks,
        st,
        pd,
        [1] * k,
        adaptive_out is not None,
        cip,
    )
    total = planes * pa.out_numel()
    out = np.full(total, np.nan)
    dv = 0 if div is None else div
    if total:
        launch(avg_pool_kernel, blocks_for(total), 256, total, x, out, pa, dv, T)
    close("avg_pool " + tag, out, npv(cavg), tol, failures=fails)
    g = T.mem(RNG.standard_normal(total))
    gt = tensor(g, T, list(cavg.shape))
    gi = scatter_into(
        x.size,
        T,
        lambda acc: (
            launch(avg_pool_backward_kernel, blocks_for(total), 256, total, g, acc, pa, dv, T)
            if total
            else None
        ),
    )
    if adaptive_out is not None:
        cgi = C_._adaptive_avg_pool_backward(gt, list(shape), adaptive_out)
    else:
        cgi = C_._avg_pool_backward(gt, list(shape), ks, st, pd, ceil, cip, div)
    close("avg_pool_backward " + tag, gi, npv(cgi), tol * 2, failures=fails)


# ---- embedding --------------------------------------------------------------------------------


def embedding_kernel(c, w, idx, out, n, D, V, err):
    for e in grid_stride(c, n * D):
        i = e // D
        d = e - i * D
        k = int(idx[i])
        if k < 0 or k >= V:
            if d == 0 and not err:
                err.append(k)
            out[e] = 0
        else:
            out[e] = w[k * D + d]


def embedding_count_kernel(c, idx, n, num_weights, counts, err):
    for i in grid_stride(c, n):
        k = int(idx[i])
        if k < 0 or k >= num_weights:
            if not err:
                err.append(k)
        elif counts is not None:
            counts[k] += 1


def embedding_backward_kernel(c, g, idx, counts, out, n, D, num_weights, padding_idx, T):
    A = T.acc
    for e in grid_stride(c, n * D):
        i = e // D
        d = e - i * D
        k = int(idx[i])
        if k == padding_idx or k < 0 or k >= num_weights:
            continue
        v = A(g[e])
        if counts is not None:
            v = v * (A(1) / A(counts[k]))
        out[k * D + d] += v


def check_embedding(V, D, ishape, T, padding_idx, freq, fails, bad=False):
    ember = E()
    C_ = ember._C
    w = T.mem(RNG.standard_normal(V * D))
    n = int(np.prod(ishape))
    idx = RNG.integers(0, V, size=n).astype(np.int64)
    if n > 3:
        idx[1] = idx[2] = idx[0]
        if padding_idx >= 0:
            idx[3] = padding_idx
    if bad and n:
        idx[-1] = V
    wt = tensor(w, T, [V, D])
    it = ember.tensor(idx.reshape(ishape))
    tag = f"embedding V={V} D={D} idx{tuple(ishape)} {T} pad={padding_idx} freq={freq} bad={bad}"
    out = np.full(n * D, np.nan)
    err = []
    if n * D:
        launch(embedding_kernel, blocks_for(n * D, 4), 256, w, idx, out, n, D, V, err)
    try:
        cout = C_.embedding(wt, it, padding_idx, freq, False)
        cerr = None
    except IndexError as e:
        cerr = e
    if bool(err) != (cerr is not None):
        fails.append(f"MISMATCH {tag}: GPU error {err}, CPU error {cerr}")
        return
    if err:
        return
    close(tag, out, npv(cout), 0, failures=fails)
    g = T.mem(RNG.standard_normal(n * D))
    gt = tensor(g, T, list(ishape) + [D])
    acc = np.zeros(V * D, dtype=np.float64 if T is F64 else np.float32)
    if n > 0:
        counts = np.zeros(max(V, 1), dtype=np.int32) if freq else None
        err = []
        launch(embedding_count_kernel, blocks_for(n), 256, idx, n, V, counts, err)
        if D > 0:
            launch(
                embedding_backward_kernel,
                blocks_for(n * D, 4),
                256,
                g,
                idx,
                counts,
                acc,
                n,
                D,
                V,
                padding_idx,
                T,
            )
    gi = acc if T in (F32, F64) else np.array([T.from_op(v) for v in acc], dtype=np.float64)
    cgi = C_.embedding_dense_backward(gt, it, V, padding_idx, freq)
    close(tag + " backward", gi, npv(cgi), TOL[T.name], failures=fails)


# ---- upsample ---------------------------------------------------------------------------------

K_NEAREST, K_NEAREST_EXACT, K_LINEAR, K_CUBIC = 0, 1, 2, 3


class AxisP:
    def __init__(self):
        self.inn = 1
        self.out = 1
        self.identity = True
        self.halve = False
        self.align_corners = False
        self.sf = np.float32(0)
        self.sd = 0.0


def floor_index(src, inn, A):
    if not (src < A(inn - 1)):
        return inn - 1
    return int(math.floor(src))


def cubic_weights(t, A):
    a = A(-0.75)

    def near_(x):
        return ((a + A(2)) * x - (a + A(3))) * x * x + A(1)

    def far_(x):
        return ((a * x - A(5) * a) * x + A(8) * a) * x - A(4) * a

    return [far_(t + A(1)), near_(t), near_(A(1) - t), far_(A(2) - t)]


def nearest_index(a, mode, o):
    if a.identity:
        return o
    if a.halve:
        return o // 2
    s = a.sf
    f = np.float32
    with np.errstate(all="ignore"):
        if mode == K_NEAREST:
            src = s * f(o)
        else:
            t = s * (f(o) + f(0.5)) - f(0.5)
            t = f(0) if t < f(0) else t
            src = t + f(0.5)
    return floor_index(src, a.inn, np.float32)


def taps_of(a, mode, o, A):
    if a.identity or a.halve or mode in (K_NEAREST, K_NEAREST_EXACT):
        i = nearest_index(a, mode, o) if mode in (K_NEAREST, K_NEAREST_EXACT) else o
        return [i], [A(1)]
    s = a.sf if A is np.float32 else np.float64(a.sd)
    with np.errstate(all="ignore"):
        src = s * A(o) if a.align_corners else s * (A(o) + A(0.5)) - A(0.5)
        if mode == K_LINEAR and src < A(0):
            src = A(0)
        i0 = floor_index(src, a.inn, A)
        f = src - A(i0)
    f = A(0) if f < A(0) else f
    f = A(1) if A(1) < f else f
    if mode == K_LINEAR:
        return [i0, i0 + 1 if i0 < a.inn - 1 else i0], [A(1) - f, f]
    w = cubic_weights(f, A)
    return [min(max(i0 - 1 + k, 0), a.inn - 1) for k in range(4)], w


def make_geometry(k, mode, input_size, out_sp, align_corners, scales):
    inn = [1, 1, 1]
    out = [1, 1, 1]
    for j in range(k):
        inn[3 - k + j] = input_size[len(input_size) - k + j]
        out[3 - k + j] = out_sp[j]
    nearest = mode in (K_NEAREST, K_NEAREST_EXACT)
    shortcuts = mode == K_NEAREST and k == 2
    axes = []
    for j in range(3):
        a = AxisP()
        a.inn, a.out = inn[j], out[j]
        axes.append(a)
        if j < 3 - k:
            continue
        sc = scales[j - (3 - k)]
        same = a.inn == a.out and (mode == K_LINEAR or shortcuts)
        twice = a.out == 2 * a.inn and shortcuts
        a.identity = same
        a.halve = twice and not same
        if same or twice:
            continue
        a.identity = False
        a.align_corners = (not nearest) and align_corners
        if a.align_corners:
            a.sf = np.float32(a.inn - 1) / np.float32(a.out - 1) if a.out > 1 else np.float32(0)
            a.sd = (a.inn - 1) / (a.out - 1) if a.out > 1 else 0.0
        elif sc is not None and sc > 0:
            a.sf = np.float32(1.0 / sc)
            a.sd = 1.0 / sc
        else:
            a.sf = np.float32(a.inn) / np.float32(a.out)
            a.sd = a.inn / a.out
    return inn, out, axes


def out_pos(out, e):
    Q = out[0] * out[1] * out[2]
    q = e % Q
    return e // Q, q // (out[2] * out[1]), (q // out[2]) % out[1], q % out[2]


def nearest_kernel(c, total, x, y, inn, out, axes, mode):
    P = inn[0] * inn[1] * inn[2]
    for e in grid_stride(c, total):
        pl, od, oh, ow = out_pos(out, e)
        id_ = nearest_index(axes[0], mode, od)
        ih = nearest_index(axes[1], mode, oh)
        iw = nearest_index(axes[2], mode, ow)
        y[e] = x[pl * P + (id_ * inn[1] + ih) * inn[2] + iw]


def blend_kernel(c, total, x, y, inn, out, axes, mode, T):
    A = T.acc
    P = inn[0] * inn[1] * inn[2]
    for e in grid_stride(c, total):
        pl, od, oh, ow = out_pos(out, e)
        td = taps_of(axes[0], mode, od, A)
        th = taps_of(axes[1], mode, oh, A)
        tw = taps_of(axes[2], mode, ow, A)
        base = pl * P
        acc = A(0)
        for k in range(len(tw[0])):
            inner = A(0)
            first = True
            for a in range(len(td[0])):
                for b in range(len(th[0])):
                    w = td[1][a] * th[1][b]
                    if w == A(0):
                        continue
                    v = w * A(x[base + (td[0][a] * inn[1] + th[0][b]) * inn[2] + tw[0][k]])
                    inner = v if first else inner + v
                    first = False
            term = tw[1][k] * inner
            acc = term if k == 0 else acc + term
        y[e] = T.from_op(acc)


def blend_backward_kernel(c, total, gy, gx, inn, out, axes, mode, T):
    A = T.acc
    P = inn[0] * inn[1] * inn[2]
    for e in grid_stride(c, total):
        pl, od, oh, ow = out_pos(out, e)
        td = taps_of(axes[0], mode, od, A)
        th = taps_of(axes[1], mode, oh, A)
        tw = taps_of(axes[2], mode, ow, A)
        go = A(gy[e])
        base = pl * P
        for a in range(len(td[0])):
            for b in range(len(th[0])):
                w = td[1][a] * th[1][b]
                if w == A(0):
                    continue
                row = base + (td[0][a] * inn[1] + th[0][b]) * inn[2]
                for k in range(len(tw[0])):
                    gx[row + tw[0][k]] += gx.dtype.type(w * (tw[1][k] * go))


UP_OPS = {
    (K_NEAREST, 1): "upsample_nearest1d",
    (K_NEAREST, 2): "upsample_nearest2d",
    (K_NEAREST, 3): "upsample_nearest3d",
    (K_NEAREST_EXACT, 1): "_upsample_nearest_exact1d",
    (K_NEAREST_EXACT, 2): "_upsample_nearest_exact2d",
    (K_NEAREST_EXACT, 3): "_upsample_nearest_exact3d",
    (K_LINEAR, 1): "upsample_linear1d",
    (K_LINEAR, 2): "upsample_bilinear2d",
    (K_LINEAR, 3): "upsample_trilinear3d",
    (K_CUBIC, 2): "upsample_bicubic2d",
}


def check_upsample(shape, k, mode, out_sp, T, fails, align=False, scales=None):
    ember = E()
    C_ = ember._C
    scales = scales or [None] * k
    x = T.mem(RNG.standard_normal(shape))
    xt = tensor(x, T, shape)
    name = UP_OPS[(mode, k)]
    fwd = getattr(C_, name)
    bwd = getattr(C_, name + "_backward")
    lin = mode in (K_LINEAR, K_CUBIC)
    cy = fwd(xt, out_sp, align, *scales) if lin else fwd(xt, out_sp, *scales)
    inn, out, axes = make_geometry(k, mode, shape, out_sp, align, scales)
    planes = int(np.prod(shape[: len(shape) - k]))
    total = planes * out[0] * out[1] * out[2]
    y = np.full(total, np.nan)
    tag = f"{name}{tuple(shape)}->{out_sp} {T} align={align} scales={scales}"
    if total:
        if lin:
            launch(blend_kernel, blocks_for(total), 256, total, x, y, inn, out, axes, mode, T)
        else:
            launch(nearest_kernel, blocks_for(total), 256, total, x, y, inn, out, axes, mode)
    close(tag, y, npv(cy), TOL[T.name], failures=fails)
    g = T.mem(RNG.standard_normal(total))
    gt = tensor(g, T, list(cy.shape))
    gx = np.zeros(x.size, dtype=np.float64 if T is F64 else np.float32)
    if total and x.size:
        launch(blend_backward_kernel, blocks_for(total), 256, total, g, gx, inn, out, axes, mode, T)
    if T in (F16, BF16):
        gx = np.array([T.from_op(v) for v in gx], dtype=np.float64)
    cgi = (
        bwd(gt, out_sp, list(shape), align, *scales)
        if lin
        else bwd(gt, out_sp, list(shape), *scales)
    )
    close(tag + " backward", gx, npv(cgi), TOL[T.name] * 2, failures=fails)


# ---- pad backward -------------------------------------------------------------------------------


def constant_maps(sizes, pad):
    nd, np_ = len(sizes), len(pad) // 2
    maps = []
    for d in range(nd):
        i = nd - 1 - d
        n = sizes[d]
        left = pad[2 * i] if i < np_ else 0
        r = pad[2 * i + 1] if i < np_ else 0
        out = n + left + r
        lo, pl = max(-left, 0), max(left, 0)
        m = n - lo - max(-r, 0)
        maps.append([lo + j - pl if 0 <= j - pl < m else -1 for j in range(out)])
    return maps


def mode_maps(sizes, pad, mode):
    """The forward's index maps of reflect / replicate / circular padding, read off the CPU pad
    of an arange (kernels/pad.h's pad_source_index, through the op that uses it)."""
    ember = E()
    nd, np_ = len(sizes), len(pad) // 2
    maps = []
    for d in range(nd):
        i = nd - 1 - d
        if i < np_:
            n = sizes[d]
            t = ember.tensor(np.arange(n, dtype=np.float64).reshape(1, 1, n))
            maps.append(
                [
                    int(v)
                    for v in ember._C.pad(t, [pad[2 * i], pad[2 * i + 1]], mode).numpy().ravel()
                ]
            )
        else:
            maps.append(list(range(sizes[d])))
    return maps


def pad_backward_kernel(c, total, g, gi, maps, w, T):
    A = T.acc
    for e in grid_stride(c, total):
        lo, hi, cur = [0] * w["nd"], [0] * w["nd"], [0] * w["nd"]
        rem = e
        none = False
        for d in range(w["nd"] - 1, -1, -1):
            i = rem % w["in_sizes"][d]
            rem //= w["in_sizes"][d]
            lo[d] = maps[w["first_off"][d] + i]
            hi[d] = maps[w["first_off"][d] + i + 1]
            none |= lo[d] == hi[d]
            cur[d] = lo[d]
        acc = A(0)
        if not none:
            while True:
                off = 0
                for d in range(w["nd"]):
                    off += maps[cur[d]] * w["out_strides"][d]
                acc = A(acc + A(g[off]))
                d = w["nd"] - 1
                while d >= 0:
                    cur[d] += 1
                    if cur[d] < hi[d]:
                        break
                    cur[d] = lo[d]
                    d -= 1
                if d < 0:
                    break
        gi[e] = T.from_op(acc)


def pad_backward_host(g, input_size, pad, mode, T):
    maps = (
        constant_maps(input_size, pad) if mode == "constant" else mode_maps(input_size, pad, mode)
    )
    nd = len(input_size)
    out_sizes = [len(m) for m in maps]
    total = int(np.prod(input_size))
    gi = np.full(total, np.nan)
    if total == 0:
        return gi
    if int(np.prod(out_sizes)) == 0:
        gi[:] = 0
        return gi
    n_first = sum(s + 1 for s in input_size)
    n_list = sum(out_sizes)
    hb = [0] * (n_first + n_list)
    w = dict(nd=nd, in_sizes=[0] * nd, out_strides=[0] * nd, first_off=[0] * nd)
    first_pos, list_pos, stride = 0, n_first, 1
    for d in range(nd - 1, -1, -1):
        w["out_strides"][d] = stride
        stride *= out_sizes[d]
    for d in range(nd):
        n = input_size[d]
        w["in_sizes"][d] = n
        w["first_off"][d] = first_pos
        count = [0] * (n + 1)
        for v in maps[d]:
            if v >= 0:
                count[v + 1] += 1
        for i in range(n):
            count[i + 1] += count[i]
        for i in range(n + 1):
            hb[first_pos + i] = list_pos + count[i]
        fill = count[:-1]
        for j, v in enumerate(maps[d]):
            if v >= 0:
                hb[list_pos + fill[v]] = j
                fill[v] += 1
        first_pos += n + 1
        list_pos += count[n]
    launch(pad_backward_kernel, blocks_for(total), 256, total, g, gi, hb, w, T)
    return gi


def check_pad(input_size, pad, mode, T, fails):
    ember = E()
    C_ = ember._C
    x = ember.zeros(*input_size, dtype=getattr(ember, T.name))
    out_shape = (
        list(C_.pad(x, pad, mode).shape)
        if mode != "constant"
        else [
            s
            + (
                pad[2 * (len(input_size) - 1 - d)] + pad[2 * (len(input_size) - 1 - d) + 1]
                if len(input_size) - 1 - d < len(pad) // 2
                else 0
            )
            for d, s in enumerate(input_size)
        ]
    )
    g = T.mem(RNG.standard_normal(int(np.prod(out_shape))))
    gt = tensor(g, T, out_shape)
    gi = pad_backward_host(g, list(input_size), pad, mode, T)
    cgi = C_._pad_backward(gt, list(input_size), pad, mode)
    close(
        f"pad_backward {input_size} pad={pad} {mode} {T}", gi, npv(cgi), TOL[T.name], failures=fails
    )


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    # pooling: 1-D / 2-D / 3-D, padding, dilation, ceil_mode (a last window starting in the
    # padding), count_include_pad, divisor_override, adaptive (uneven), NaN / -inf inputs
    check_pool((2, 3, 9), 1, F32, fails, ks=[3], st=[2], pd=[1], dl=[1])
    check_pool((2, 3, 9), 1, F32, fails, ks=[3], st=[2], pd=[1], dl=[2], ceil=True)
    check_pool(
        (2, 7, 8), 2, F32, fails, ks=[3, 2], st=[2, 2], pd=[1, 1], dl=[1, 2], ceil=True, cip=False
    )
    check_pool((2, 7, 8), 2, F16, fails, ks=[3, 3], st=[2, 1], pd=[1, 0], dl=[1, 1], cip=True)
    check_pool((2, 7, 8), 2, BF16, fails, ks=[2, 2], st=[2, 2], pd=[0, 0], dl=[1, 1], div=3)
    check_pool(
        (1, 2, 5, 6, 4),
        3,
        F64,
        fails,
        ks=[2, 3, 2],
        st=[2, 2, 1],
        pd=[1, 1, 0],
        dl=[1, 1, 1],
        ceil=True,
    )
    check_pool((2, 7, 8), 2, F32, fails, ks=[3, 3], st=[1, 1], pd=[1, 1], dl=[1, 1], nan=True)
    check_pool((2, 7, 9), 2, F32, fails, adaptive_out=[3, 4])
    check_pool((2, 5, 13), 1, F32, fails, adaptive_out=[5])
    check_pool((1, 3, 5, 7, 6), 3, F16, fails, adaptive_out=[2, 3, 4])
    check_pool((2, 7, 8), 2, F32, fails, adaptive_out=[9, 11])  # output larger than input
    # integer max pooling (the kernel's dispatch_numeric cases)
    for T in (U8, I8, I16, I32, I64):
        check_max_pool_int(
            (2, 7, 8), 2, T, fails, ks=[3, 2], st=[2, 1], pd=[1, 1], dl=[1, 2], ceil=True
        )
    check_max_pool_int(
        (1, 2, 5, 6, 4), 3, I32, fails, ks=[2, 3, 2], st=[2, 2, 1], pd=[1, 1, 0], dl=[1, 1, 1]
    )
    # embedding
    for T in (F32, F16, BF16, F64):
        check_embedding(11, 5, (4, 6), T, -1, False, fails)
    check_embedding(11, 5, (4, 6), F32, 3, True, fails)
    check_embedding(11, 5, (4, 6), F16, 0, True, fails)
    check_embedding(11, 0, (3,), F32, -1, False, fails)
    check_embedding(11, 3, (0,), F32, -1, True, fails)
    check_embedding(11, 5, (4, 6), F32, -1, False, fails, bad=True)
    # upsample
    ups = [
        ((2, 3, 5), 1, K_NEAREST, [11]),
        ((2, 3, 5), 1, K_NEAREST, [3]),
        ((1, 2, 4, 5), 2, K_NEAREST, [8, 10]),
        ((1, 2, 4, 5), 2, K_NEAREST, [7, 5]),
        ((1, 2, 3, 4, 5), 3, K_NEAREST, [5, 4, 9]),
        ((2, 3, 5), 1, K_NEAREST_EXACT, [11]),
        ((1, 2, 4, 5), 2, K_NEAREST_EXACT, [7, 3]),
        ((1, 2, 3, 4, 5), 3, K_NEAREST_EXACT, [4, 8, 2]),
        ((2, 3, 5), 1, K_LINEAR, [11]),
        ((2, 3, 5), 1, K_LINEAR, [3]),
        ((1, 2, 4, 5), 2, K_LINEAR, [7, 9]),
        ((1, 2, 4, 5), 2, K_LINEAR, [4, 12]),
        ((1, 2, 3, 4, 5), 3, K_LINEAR, [5, 7, 3]),
        ((1, 2, 4, 5), 2, K_CUBIC, [9, 7]),
        ((1, 2, 4, 5), 2, K_CUBIC, [3, 2]),
        ((1, 1, 1, 5), 2, K_CUBIC, [3, 8]),
        ((1, 2, 4, 5), 2, K_LINEAR, [1, 3]),
        ((1, 2, 4, 5), 2, K_CUBIC, [1, 1]),
        ((2, 3, 1), 1, K_LINEAR, [4]),
        ((1, 2, 4, 5), 2, K_NEAREST, [4, 5]),
        ((1, 2, 4, 5), 2, K_NEAREST, [2, 2]),
    ]
    for shape, k, mode, out in ups:
        for align in (False, True) if mode in (K_LINEAR, K_CUBIC) else (False,):
            check_upsample(shape, k, mode, out, F32, fails, align=align)
    check_upsample((1, 2, 4, 5), 2, K_LINEAR, [7, 9], F16, fails)
    check_upsample((1, 2, 4, 5), 2, K_CUBIC, [9, 7], F64, fails, align=True)
    check_upsample((1, 2, 4, 5), 2, K_CUBIC, [9, 7], BF16, fails)
    check_upsample((2, 3, 5), 1, K_LINEAR, [12], F32, fails, scales=[2.5])
    check_upsample((1, 2, 4, 5), 2, K_NEAREST, [6, 7], F32, fails, scales=[1.7, 1.5])
    check_upsample((1, 2, 4, 5), 2, K_NEAREST_EXACT, [6, 7], F32, fails, scales=[1.7, 1.5])
    check_upsample((1, 2, 4, 5), 2, K_CUBIC, [6, 7], F32, fails, scales=[1.7, 1.5])
    check_upsample((1, 2, 4, 5), 2, K_LINEAR, [4, 6], F32, fails, scales=[1.2, 1.3])
    check_upsample((1, 2, 4, 5), 2, K_LINEAR, [4, 6], F64, fails, scales=[1.2, 1.3])
    # pad backward
    for mode in ("constant", "reflect", "replicate", "circular"):
        check_pad([2, 3, 5], [2, 1], mode, F32, fails)
        check_pad([1, 2, 4, 5], [1, 2, 3, 1], mode, F32, fails)
        check_pad([1, 2, 3, 4, 5], [1, 1, 2, 0, 0, 2], mode, F64, fails)
    check_pad([2, 3, 5], [2, 3], "circular", F16, fails)
    check_pad([2, 3, 5], [-1, 2], "constant", F32, fails)
    check_pad([2, 3, 5], [1, 1, -1, 1, 1, 0], "constant", BF16, fails)
    check_pad([2, 3, 5], [-3, -2], "constant", F32, fails)
    return report("nn_misc", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
