"""Emulation of packages/core/csrc/cuda/nn_conv_depthwise.cu (native depthwise convolution:
forward, input gradient, weight gradient) with its host decisions (fits_int32, the 3x3 / 5x5 and
stride 1 / 2 template choices, plan_weight's slicing), run per thread on nn_sim.py's executor
(shuffled blocks and threads, barriers, full-mask xor shuffles, shared memory that starts unset).

Two arithmetics run the same transcribed kernels:
- numeric: float32 / float64 / float16 / bfloat16 storage, float (double) compute, against a
  NumPy reference convolution in float64 of the same (rounded) inputs;
- symbolic: every input element is a symbol, a product is the term (a, b), a sum is the multiset
  union of terms. Each output element must hold exactly the terms the definition gives it, each
  once (for the weight gradient: every (n, oh, ow) term of every weight element combined exactly
  once across threads, warps, blocks and slices).
Every output element must be written exactly once; every read is bounds-checked (an index off
the buffer raises, negative ones too); in the 32-bit forms every index intermediate must fit int32.

Run: PYTHONPATH=<build>/site python3 nn_conv_depthwise.py [-q]. `--plant` also runs the checks
with each of several planted bugs and fails unless every one is caught."""

from __future__ import annotations

import sys
import time
from collections import Counter
from types import SimpleNamespace as NS

import numpy as np
from nn_sim import BF16, F16, F32, F64, SYNC, TOL, EmulationError, Shfl, blocks_for, launch

K_BLOCK = 256
K_WARPS = K_BLOCK // 32
K_TARGET_BLOCKS = 1024
K_MIN_TERMS_PER_THREAD = 4
K_MAX_SLICES = 65535
RNG = np.random.default_rng(29)
PLANT = set()  # names of planted bugs (self-test)
RUNS = Counter()  # checks run, by kind
FORCE_I64 = set()  # non-empty: the launchers take the 64-bit forms (as for a huge problem)


# ---- memory and arithmetic --------------------------------------------------------------------


class Mem:
    """A device buffer: bounds-checked reads (unset elements raise), counted writes."""

    def __init__(self, name, values):
        self.name = name
        self.a = values
        self.writes = np.zeros(len(values), dtype=np.int64)
        self.unset = None

    @staticmethod
    def output(name, n, obj=False):
        m = Mem(name, np.full(n, None, dtype=object) if obj else np.full(n, np.nan))
        return m

    def read(self, i):
        if not 0 <= i < len(self.a):
            raise EmulationError(f"read of {self.name}[{i}] outside [0, {len(self.a)})")
        return self.a[i]

    def write(self, i, v):
        if not 0 <= i < len(self.a):
            raise EmulationError(f"write of {self.name}[{i}] outside [0, {len(self.a)})")
        self.a[i] = v
        self.writes[i] += 1


class Num:
    """The kernels' arithmetic in storage type T, compute type T.acc."""

    sym = False

    def __init__(self, T):
        self.T = T

    def zero(self):
        return self.T.acc(0)

    def load(self, mem, i):
        return self.T.to_op(mem.read(i))

    def mul(self, a, b):
        return a * b

    def add(self, a, b):
        return a + b

    def store(self, mem, i, v):
        mem.write(i, self.T.from_op(v))

    def store_acc(self, mem, i, v):
        mem.write(i, v)


class Terms(Counter):
    pass


class Sym:
    """Symbolic arithmetic: loads give the element's symbol, products terms, sums multisets."""

    sym = True

    def zero(self):
        return Terms()

    def load(self, mem, i):
        v = mem.read(i)
        if v is None:
            raise EmulationError(f"read of unset {mem.name}[{i}]")
        return v

    def mul(self, a, b):
        return Terms({(a, b): 1})

    def add(self, a, b):
        if not isinstance(b, Terms):  # the bias: a symbol on its own
            b = Terms({b: 1})
        r = Terms(a)
        r.update(b)
        return r

    def store(self, mem, i, v):
        mem.write(i, v)

    store_acc = store


# ---- host decisions (the launchers) -----------------------------------------------------------


def params(N, C, M, H, W, KH, KW, st=(1, 1), pd=(0, 0), dl=(1, 1)):
    """depthwise::Params as make_params builds it (output sizes as make_window_geom)."""
    Ho = (H + 2 * pd[0] - (dl[0] * (KH - 1) + 1)) // st[0] + 1
    Wo = (W + 2 * pd[1] - (dl[1] * (KW - 1) + 1)) // st[1] + 1
    assert Ho >= 1 and Wo >= 1, "make_window_geom refuses a kernel wider than the padded input"
    return NS(
        N=N,
        C=C,
        M=M,
        H=H,
        W=W,
        Ho=Ho,
        Wo=Wo,
        KH=KH,
        KW=KW,
        sh=st[0],
        sw=st[1],
        ph=pd[0],
        pw=pd[1],
        dh=dl[0],
        dw=dl[1],
    )


def fits_int32(p):
    lim, coord = 1 << 31, 1 << 30
    Co = p.C * p.M
    xn, yn, wn = p.N * p.C * p.H * p.W, p.N * Co * p.Ho * p.Wo, Co * p.KH * p.KW
    return xn < lim and yn < lim and wn < lim and p.H + 2 * p.ph < coord and p.W + 2 * p.pw < coord


def fixed_kernel(p, ks):
    return p.KH == ks and p.KW == ks


def dims_of(p, i32):
    d = NS(**vars(p))
    d.Co = p.C * p.M
    d.i32 = i32
    return d


def plan_weight(p, all_taps):
    K, R = p.KH * p.KW, p.N * p.Ho * p.Wo
    rows = p.C * p.M if all_taps else p.C * p.M * K
    S = (K_TARGET_BLOCKS + rows - 1) // rows
    S = min(S, (R + K_BLOCK * K_MIN_TERMS_PER_THREAD - 1) // (K_BLOCK * K_MIN_TERMS_PER_THREAD))
    S = max(1, min(S, K_MAX_SLICES))
    chunk = (R + S - 1) // S
    S = (R + chunk - 1) // chunk
    return NS(rows=rows, S=S, chunk=chunk)


def ix(d, v):
    """An index intermediate of the kernel's type I: int32 in the 32-bit forms must not overflow."""
    if d.i32 and not -(1 << 31) <= v < (1 << 31):
        raise EmulationError(f"int32 index overflow: {v}")
    return v


def grid_stride(c, total):
    e = c.bx * c.bdx + c.tx
    while e < total:
        yield e
        e += c.gdx * c.bdx


# ---- kernels (transcriptions) -----------------------------------------------------------------


def dw_forward_kernel(c, total, x, w, bias, y, d, KS, ar):
    KH, KW = (KS, KS) if KS > 0 else (d.KH, d.KW)
    for e in grid_stride(c, total):
        ow = e % d.Wo
        t = e // d.Wo
        oh = t % d.Ho
        t = t // d.Ho
        co = t % d.Co
        n = t // d.Co
        cc = co if d.M == 1 else co // d.M
        if "fwd_chan" in PLANT:
            cc = co % d.C
        xb = ix(d, ix(d, n * d.C + cc) * d.H * d.W)
        wb = ix(d, co * KH * KW)
        ih0, iw0 = ix(d, oh * d.sh - d.ph), ix(d, ow * d.sw - d.pw)
        acc = ar.zero()
        for kh in range(KH):
            ih = ix(d, ih0 + kh * d.dh)
            if ih < 0 or (ih > d.H if "fwd_bound" in PLANT else ih >= d.H):
                continue
            for kw in range(KW):
                iw = ix(d, iw0 + kw * d.dw)
                if iw < 0 or iw >= d.W:
                    continue
                acc = ar.add(
                    acc,
                    ar.mul(ar.load(w, wb + kh * KW + kw), ar.load(x, xb + ix(d, ih * d.W + iw))),
                )
        if bias is not None:
            acc = ar.add(acc, ar.load(bias, co))
        ar.store(y, e, acc)


def dw_input_grad_kernel(c, total, go, w, gi, d, KS, ST, ar):
    KH, KW = (KS, KS) if KS > 0 else (d.KH, d.KW)
    sh, sw = (ST, ST) if ST > 0 else (d.sh, d.sw)
    for e in grid_stride(c, total):
        iw = e % d.W
        t = e // d.W
        ih = t % d.H
        t = t // d.H
        cc = t % d.C
        n = t // d.C
        acc = ar.zero()
        for m in range(d.M):
            co = ix(d, cc * d.M + m)
            gb = ix(d, ix(d, n * d.Co + co) * d.Ho * d.Wo)
            wb = ix(d, co * KH * KW)
            for kh in range(KH):
                th = ix(d, ih + d.ph - kh * d.dh)
                if th < 0:
                    continue
                oh = th // sh
                if (oh * sh != th and "bi_div" not in PLANT) or oh >= d.Ho:
                    continue
                for kw in range(KW):
                    tw = ix(d, iw + d.pw - kw * d.dw)
                    if tw < 0:
                        continue
                    ow = tw // sw
                    if ow * sw != tw or ow >= d.Wo:
                        continue
                    acc = ar.add(
                        acc,
                        ar.mul(
                            ar.load(w, wb + kh * KW + kw), ar.load(go, gb + ix(d, oh * d.Wo + ow))
                        ),
                    )
        ar.store(gi, e, acc)


def warp_sum(v, ar):
    """The butterfly of warp_sum: v += shfl_xor(v, o) for o = 16, 8, 4, 2, 1."""
    o = 16
    while o > 0:
        other = yield Shfl(v, o)
        v = ar.add(v, other)
        o >>= 1
    return v


def dw_weight_grad_kernel(c, go, x, partial, d, R, chunk, KS, ar):
    NT = KS * KS if KS > 0 else 1
    KH, KW = (KS, KS) if KS > 0 else (d.KH, d.KW)
    K = KH * KW
    row = c.bx
    co = row if KS > 0 else row // K
    tap0 = 0 if KS > 0 else row % K
    kh0, kw0 = tap0 // KW, tap0 % KW
    if "wg_tap" in PLANT:
        kh0, kw0 = tap0 % KW, tap0 // KW
    cc = co if d.M == 1 else co // d.M
    HoWo = ix(d, d.Ho * d.Wo)
    acc = [ar.zero() for _ in range(NT)]
    r0 = c.by * chunk
    r1 = r0 + chunk if ("wg_slice" in PLANT or r0 + chunk < R) else R
    r = r0 + c.tx
    while r < r1:
        n = r // HoWo
        q = r - n * HoWo
        oh = q // d.Wo
        ow = q - oh * d.Wo
        g = ar.load(go, ix(d, ix(d, n * d.Co + co) * HoWo + q))
        xb = ix(d, ix(d, n * d.C + cc) * d.H * d.W)
        ih0, iw0 = ix(d, oh * d.sh - d.ph), ix(d, ow * d.sw - d.pw)
        if KS > 0:
            for kh in range(KS):
                ih = ix(d, ih0 + kh * d.dh)
                hin = 0 <= ih < d.H
                for kw in range(KS):
                    iw = ix(d, iw0 + kw * d.dw)
                    if hin and 0 <= iw < d.W:
                        t = kh * KS + kw
                        acc[t] = ar.add(acc[t], ar.mul(g, ar.load(x, xb + ix(d, ih * d.W + iw))))
        else:
            ih, iw = ix(d, ih0 + kh0 * d.dh), ix(d, iw0 + kw0 * d.dw)
            if 0 <= ih < d.H and 0 <= iw < d.W:
                acc[0] = ar.add(acc[0], ar.mul(g, ar.load(x, xb + ix(d, ih * d.W + iw))))
        r += c.bdx
    # __shared__ A warp_tot[NT][kWarps]: starts unset (NaN / None).
    tot = c.shared.get("warp_tot")
    if tot is None:
        tot = np.full((NT, K_WARPS), None, dtype=object)
        c.shared["warp_tot"] = tot
    lane, warp = c.tx & 31, c.tx >> 5
    for t in range(NT):
        v = yield from warp_sum(acc[t], ar)
        if lane == 0:
            tot[t][warp] = v
    yield SYNC
    if warp == 0:
        S = c.gdy
        nw = K_WARPS - 1 if "wg_warp" in PLANT else K_WARPS
        for t in range(NT):
            if lane < nw:
                v0 = tot[t][lane]
                if v0 is None:
                    raise EmulationError("read of unset warp_tot")
            else:
                v0 = ar.zero()
            v = yield from warp_sum(v0, ar)
            if lane == 0:
                ar.store_acc(partial, (co * K + tap0 + t) * S + c.by, v)


def dw_weight_grad_finish_kernel(c, n, partial, S, gw, ar):
    for j in grid_stride(c, n):
        s = ar.zero()
        for k in range(S):
            v = partial.read(j * S + k)
            if v is None or (not ar.sym and np.isnan(v)):
                raise EmulationError(f"partial[{j * S + k}] never written")
            s = ar.add(s, v)
        ar.store(gw, j, s)


# ---- launchers (transcriptions of forward / backward_input / backward_weight) -----------------


def run_forward(x, w, b, y, p, ar, seed):
    total = p.N * p.C * p.M * p.Ho * p.Wo
    i32 = fits_int32(p) and not FORCE_I64
    KS = 3 if i32 and fixed_kernel(p, 3) else 5 if i32 and fixed_kernel(p, 5) else 0
    launch(
        dw_forward_kernel,
        blocks_for(total),
        K_BLOCK,
        total,
        x,
        w,
        b,
        y,
        dims_of(p, i32),
        KS,
        ar,
        seed=seed,
    )
    return KS


def run_backward_input(go, w, gi, p, ar, seed):
    total = p.N * p.C * p.H * p.W
    i32 = fits_int32(p) and not FORCE_I64
    st = p.sh if p.sh == p.sw and p.sh in (1, 2) else 0
    KS = 3 if i32 and fixed_kernel(p, 3) else 5 if i32 and fixed_kernel(p, 5) else 0
    ST = st if KS > 0 else 0
    launch(
        dw_input_grad_kernel,
        blocks_for(total),
        K_BLOCK,
        total,
        go,
        w,
        gi,
        dims_of(p, i32),
        KS,
        ST,
        ar,
        seed=seed,
    )
    return KS, ST


def run_backward_weight(go, x, gw, p, ar, seed):
    n = p.C * p.M * p.KH * p.KW
    i32 = fits_int32(p) and not FORCE_I64
    ks = 3 if i32 and fixed_kernel(p, 3) else 5 if i32 and fixed_kernel(p, 5) else 0
    pl = plan_weight(p, ks > 0)
    assert pl.rows <= 0x7FFFFFFF
    R = p.N * p.Ho * p.Wo
    partial = Mem.output("partial", n * pl.S, obj=True)
    launch(
        dw_weight_grad_kernel,
        (pl.rows, pl.S),
        K_BLOCK,
        go,
        x,
        partial,
        dims_of(p, i32),
        R,
        pl.chunk,
        ks,
        ar,
        seed=seed,
    )
    launch(
        dw_weight_grad_finish_kernel,
        blocks_for(n),
        K_BLOCK,
        n,
        partial,
        pl.S,
        gw,
        ar,
        seed=seed + 1,
    )
    return ks, pl


# ---- references -------------------------------------------------------------------------------


def ref_numeric(x, w, b, go, p):
    """float64 forward, input and weight gradients by the definition (NumPy, per tap)."""
    N, C, M, H, W, Ho, Wo = p.N, p.C, p.M, p.H, p.W, p.Ho, p.Wo
    Co = C * M
    xp = np.pad(x, ((0, 0), (0, 0), (p.ph, p.ph), (p.pw, p.pw)))
    xr = np.repeat(xp, M, axis=1)  # channel co reads input channel co // M
    y = np.zeros((N, Co, Ho, Wo))
    gxr = np.zeros_like(xr)
    gw = np.zeros((Co, 1, p.KH, p.KW))
    for kh in range(p.KH):
        for kw in range(p.KW):
            hs = slice(kh * p.dh, kh * p.dh + (Ho - 1) * p.sh + 1, p.sh)
            ws = slice(kw * p.dw, kw * p.dw + (Wo - 1) * p.sw + 1, p.sw)
            wt = w[:, 0, kh, kw][None, :, None, None]
            y += wt * xr[:, :, hs, ws]
            gxr[:, :, hs, ws] += wt * go
            gw[:, 0, kh, kw] = (go * xr[:, :, hs, ws]).sum(axis=(0, 2, 3))
    if b is not None:
        y += b[None, :, None, None]
    gx = gxr.reshape(N, C, M, *gxr.shape[2:]).sum(axis=2)
    gx = gx[:, :, p.ph : p.ph + H, p.pw : p.pw + W]
    return y, gx, gw


def ref_terms(p, bias):
    """Per output element of each pass, the multiset of terms by the definition (brute force)."""
    Co = p.C * p.M
    fy = [Terms() for _ in range(p.N * Co * p.Ho * p.Wo)]
    fgi = [Terms() for _ in range(p.N * p.C * p.H * p.W)]
    fgw = [Terms() for _ in range(Co * p.KH * p.KW)]
    for n in range(p.N):
        for co in range(Co):
            c = co // p.M
            for oh in range(p.Ho):
                for ow in range(p.Wo):
                    yi = ((n * Co + co) * p.Ho + oh) * p.Wo + ow
                    if bias:
                        fy[yi][("b", co)] += 1
                    for kh in range(p.KH):
                        ih = oh * p.sh - p.ph + kh * p.dh
                        for kw in range(p.KW):
                            iw = ow * p.sw - p.pw + kw * p.dw
                            if not (0 <= ih < p.H and 0 <= iw < p.W):
                                continue
                            xi = ((n * p.C + c) * p.H + ih) * p.W + iw
                            wi = (co * p.KH + kh) * p.KW + kw
                            fy[yi][(("w", wi), ("x", xi))] += 1
                            fgi[xi][(("w", wi), ("g", yi))] += 1
                            fgw[wi][(("g", yi), ("x", xi))] += 1
    return fy, fgi, fgw


# ---- checks -----------------------------------------------------------------------------------


def symbols(name, n):
    a = np.empty(n, dtype=object)
    for i in range(n):
        a[i] = (name, i)
    return Mem(name, a)


def written_once(m, what, fails):
    bad = np.flatnonzero(m.writes != 1)
    if bad.size:
        fails.append(
            f"{what}: {bad.size} of {m.writes.size} elements written "
            f"{sorted(set(m.writes[bad].tolist()))} times (e.g. index {bad[0]})"
        )
        return False
    return True


def check_symbolic(p, bias, fails, seed=0):
    what = f"symbolic {vars(p)} bias={bias}"
    Co = p.C * p.M
    nx, ny, nw = p.N * p.C * p.H * p.W, p.N * Co * p.Ho * p.Wo, Co * p.KH * p.KW
    fy, fgi, fgw = ref_terms(p, bias)
    RUNS["symbolic"] += 1
    ar = Sym()
    x, w, go = symbols("x", nx), symbols("w", nw), symbols("g", ny)
    b = symbols("b", Co) if bias else None
    try:
        y = Mem.output("y", ny, obj=True)
        run_forward(x, w, b, y, p, ar, seed)
        gi = Mem.output("gi", nx, obj=True)
        run_backward_input(go, w, gi, p, ar, seed + 3)
        gw = Mem.output("gw", nw, obj=True)
        run_backward_weight(go, x, gw, p, ar, seed + 5)
    except EmulationError as err:
        fails.append(f"{what}: {err}")
        return
    for name, m, ref in (("forward", y, fy), ("input grad", gi, fgi), ("weight grad", gw, fgw)):
        if not written_once(m, f"{what} {name}", fails):
            continue
        for i, r in enumerate(ref):
            got = m.a[i] if m.a[i] is not None else Terms()
            if Terms(got) != r:
                extra = Terms(got) - r
                missing = r - Terms(got)
                fails.append(
                    f"{what} {name}[{i}]: {sum(missing.values())} term(s) missing, "
                    f"{sum(extra.values())} extra (e.g. {list((missing or extra))[:1]})"
                )
                break


def check_numeric(p, T, bias, fails, seed=0):
    what = f"numeric {T} {vars(p)} bias={bias}"
    Co = p.C * p.M
    x = T.mem(RNG.standard_normal(p.N * p.C * p.H * p.W))
    w = T.mem(RNG.standard_normal(Co * p.KH * p.KW) * 0.5)
    go = T.mem(RNG.standard_normal(p.N * Co * p.Ho * p.Wo))
    b = T.mem(RNG.standard_normal(Co)) if bias else None
    ar = Num(T)
    RUNS[f"numeric {T}"] += 1
    try:
        y = Mem.output("y", go.size)
        run_forward(Mem("x", x), Mem("w", w), Mem("b", b) if bias else None, y, p, ar, seed)
        gi = Mem.output("gi", x.size)
        run_backward_input(Mem("go", go), Mem("w", w), gi, p, ar, seed + 3)
        gw = Mem.output("gw", w.size)
        run_backward_weight(Mem("go", go), Mem("x", x), gw, p, ar, seed + 5)
    except EmulationError as err:
        fails.append(f"{what}: {err}")
        return
    f64 = np.float64
    ry, rgi, rgw = ref_numeric(
        x.astype(f64).reshape(p.N, p.C, p.H, p.W),
        w.astype(f64).reshape(Co, 1, p.KH, p.KW),
        b.astype(f64) if bias else None,
        go.astype(f64).reshape(p.N, Co, p.Ho, p.Wo),
        p,
    )
    tol = TOL[T.name]
    for name, m, ref in (("forward", y, ry), ("input grad", gi, rgi), ("weight grad", gw, rgw)):
        if not written_once(m, f"{what} {name}", fails):
            continue
        got = m.a.astype(f64)
        ref = ref.ravel()
        # Sums of many terms: the tolerance scales with the sum of magnitudes (16-bit outputs
        # also round once at the end).
        scale = max(1.0, float(np.abs(ref).max()))
        if not np.allclose(got, ref, rtol=tol, atol=tol * scale):
            k = int(np.argmax(np.abs(got - ref)))
            fails.append(f"{what} {name}: max error at {k}: {got[k]!r} vs {ref[k]!r}")


def check_against_ember(fails):
    """The NumPy reference is ember's CPU convolution (and its backward), for a few shapes."""
    try:
        import ember
    except ImportError:
        print("  (ember not importable: the reference is not cross-checked)")
        return
    for p, bias in (
        (params(2, 3, 2, 7, 6, 3, 3, (2, 1), (1, 2), (1, 2)), True),
        (params(1, 4, 1, 5, 9, 2, 4, (1, 2), (2, 0), (2, 1)), False),
    ):
        Co = p.C * p.M
        x = RNG.standard_normal((p.N, p.C, p.H, p.W))
        w = RNG.standard_normal((Co, 1, p.KH, p.KW))
        b = RNG.standard_normal(Co) if bias else None
        go = RNG.standard_normal((p.N, Co, p.Ho, p.Wo))
        ry, rgi, rgw = ref_numeric(x, w, b, go, p)
        args = ([p.sh, p.sw], [p.ph, p.pw], [p.dh, p.dw], False, [0, 0], p.C)
        ey = ember.convolution(
            ember.tensor(x), ember.tensor(w), ember.tensor(b) if bias else None, *args
        )
        egi, egw, _ = ember.convolution_backward(
            ember.tensor(go), ember.tensor(x), ember.tensor(w), *args, True, True, False
        )
        RUNS["reference vs ember CPU"] += 1
        for name, e, r in (("y", ey, ry), ("gi", egi, rgi), ("gw", egw, rgw)):
            if not np.allclose(e.numpy(), r, rtol=1e-10, atol=1e-10):
                fails.append(f"NumPy reference differs from ember's CPU {name} for {vars(p)}")


def check_plans(fails):
    """plan_weight over many sizes: slices tile [0, R) exactly, none empty, grid limits hold."""
    for N in (1, 2, 3, 64, 128, 1000, 70000):
        for C, M in ((1, 1), (2, 2), (32, 1), (960, 1), (7, 3)):
            for HW, K in ((1, 3), (7, 3), (12, 5), (56, 3), (112, 3), (5, 1)):
                for all_taps in (True, False):
                    p = params(N, C, M, HW, HW, K, K, pd=(K // 2, K // 2))
                    pl = plan_weight(p, all_taps)
                    R = p.N * p.Ho * p.Wo
                    ok = 1 <= pl.S <= K_MAX_SLICES and pl.rows <= 0x7FFFFFFF
                    ok = ok and (pl.S - 1) * pl.chunk < R <= pl.S * pl.chunk  # last slice not empty
                    if not ok:
                        fails.append(f"plan_weight {vars(p)} all_taps={all_taps}: {vars(pl)}")


def check_int32_bounds(fails):
    """For large problems that fits_int32 accepts, the extreme threads' index intermediates fit
    int32 (the index math alone, via the symbolic kernels' checks, on sampled threads)."""
    cases = [
        params(1, 1, 1, 46340, 46340, 3, 3, pd=(1, 1)),
        params(64, 960, 1, 7, 7, 3, 3, pd=(1, 1)),
        params(1, 2, 1, 1, (1 << 29) - 10, 1, 5, pd=(0, 2), dl=(1, 3)),
        params(2, 1, 2, 3, 100000, 1, 7, (1, 3), (0, 1000), (1, 1000)),
    ]
    for p in cases:
        i32 = fits_int32(p)
        d = dims_of(p, i32)
        Co = p.C * p.M
        ny, nx = p.N * Co * p.Ho * p.Wo, p.N * p.C * p.H * p.W
        cover = {"fwd": ny, "bi": nx}
        try:
            for kind, total in cover.items():
                for e in sorted({0, 1, total // 2, total - 2, total - 1}):
                    if e >= 0:
                        index_walk(kind, d, e, p)
        except EmulationError as err:
            fails.append(f"int32 bounds {vars(p)} (fits_int32 {i32}): {err}")


def index_walk(kind, d, e, p):
    """The index intermediates of one thread of the forward or input-gradient kernel."""
    if kind == "fwd":
        ow = e % d.Wo
        t = e // d.Wo
        oh = t % d.Ho
        t //= d.Ho
        co, n = t % d.Co, t // d.Co
        cc = co // d.M
        ix(d, ix(d, n * d.C + cc) * d.H * d.W)
        ix(d, co * d.KH * d.KW)
        ih0, iw0 = ix(d, oh * d.sh - d.ph), ix(d, ow * d.sw - d.pw)
        for kh in (0, d.KH - 1):
            ih = ix(d, ih0 + kh * d.dh)
            for kw in (0, d.KW - 1):
                iw = ix(d, iw0 + kw * d.dw)
                if 0 <= ih < d.H and 0 <= iw < d.W:
                    ix(d, ih * d.W + iw)
    else:
        iw = e % d.W
        t = e // d.W
        ih = t % d.H
        t //= d.H
        cc, n = t % d.C, t // d.C
        for m in (0, d.M - 1):
            co = ix(d, cc * d.M + m)
            ix(d, ix(d, n * d.Co + co) * d.Ho * d.Wo)
            for kh in (0, d.KH - 1):
                ix(d, ih + d.ph - kh * d.dh)
            for kw in (0, d.KW - 1):
                ix(d, iw + d.pw - kw * d.dw)


# (N, C, M, H, W, KH, KW, stride, padding, dilation): odd sizes, stride 2, dilation 2, padding
# 0 / 1 / 2, multiplier 2 and 3, N = 1, C = 1, H or W = 1, a kernel larger than the input (with
# padding), 3x3 / 5x5 fast forms with stride 1 / 2 / mixed, 1-d (H = 1) problems, slices (R > 1024).
SHAPES = [
    (2, 3, 1, 7, 9, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 3, 1, 7, 9, 3, 3, (2, 2), (1, 1), (1, 1)),
    (1, 2, 2, 8, 7, 3, 3, (2, 2), (0, 0), (1, 1)),
    (2, 2, 1, 9, 8, 3, 3, (1, 1), (2, 2), (2, 2)),
    (1, 3, 1, 6, 11, 5, 5, (1, 1), (2, 2), (1, 1)),
    (2, 2, 1, 9, 9, 5, 5, (2, 2), (2, 1), (1, 1)),
    (1, 2, 3, 5, 6, 3, 3, (2, 1), (1, 0), (1, 2)),
    (1, 1, 1, 5, 5, 3, 3, (1, 1), (1, 1), (1, 1)),
    (1, 1, 2, 4, 4, 3, 3, (2, 2), (1, 1), (1, 1)),
    (2, 2, 1, 1, 13, 1, 3, (1, 2), (0, 1), (1, 1)),
    (2, 3, 2, 1, 10, 1, 4, (1, 1), (0, 2), (1, 2)),
    (1, 2, 1, 7, 1, 3, 1, (2, 1), (1, 0), (1, 1)),
    (1, 2, 1, 2, 3, 5, 5, (1, 1), (2, 2), (1, 1)),
    (1, 2, 1, 2, 2, 7, 6, (1, 2), (3, 3), (1, 1)),
    (1, 1, 1, 1, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 2, 1, 6, 5, 2, 3, (3, 2), (1, 2), (2, 1)),
    (1, 2, 1, 5, 5, 3, 3, (3, 3), (1, 1), (1, 1)),
    (1, 1, 1, 25, 41, 3, 3, (1, 1), (1, 1), (1, 1)),  # R = 1025: 2 slices, the last short
    (3, 2, 1, 20, 21, 3, 3, (1, 1), (0, 1), (1, 1)),  # generic-path rows x slices
    (3, 1, 2, 23, 24, 1, 3, (1, 1), (0, 1), (1, 1)),
    (1, 1, 1, 61, 83, 3, 3, (1, 1), (1, 1), (1, 1)),  # R = 5063: 5 slices
]
SYMBOLIC_MAX = 4000  # symbolic runs only where the term lists stay small


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    check_plans(fails)
    check_int32_bounds(fails)
    check_against_ember(fails)
    covered = Counter()
    for k, s in enumerate(SHAPES):
        N, C, M, H, W, KH, KW, st, pd, dl = s
        p = params(N, C, M, H, W, KH, KW, st, pd, dl)
        terms = p.N * p.C * p.M * p.Ho * p.Wo * p.KH * p.KW
        if terms <= SYMBOLIC_MAX:
            check_symbolic(p, bias=k % 2 == 0, fails=fails, seed=k)
        for T in (F32, F64, F16, BF16) if k % 4 == 0 else ((F32, F64, F16, BF16)[k % 4],):
            check_numeric(p, T, bias=k % 3 != 1, fails=fails, seed=k)
        i32 = fits_int32(p)
        ks = 3 if fixed_kernel(p, 3) else 5 if fixed_kernel(p, 5) else 0
        covered[f"KS={ks}" + (f" ST={p.sh}" if ks and p.sh == p.sw and p.sh in (1, 2) else "")] += 1
        covered[f"slices={plan_weight(p, ks > 0).S > 1}"] += 1
        assert i32
    # The 64-bit forms: the same kernels with I = int64 (forced), on a few shapes.
    FORCE_I64.add(True)
    try:
        for k in (0, 3, 9, 13):
            s = SHAPES[k]
            p = params(*s)
            check_symbolic(p, bias=True, fails=fails, seed=100 + k)
            check_numeric(p, F32, bias=True, fails=fails, seed=100 + k)
    finally:
        FORCE_I64.clear()
    print(f"nn_conv_depthwise: {len(SHAPES)} shapes, forms {dict(sorted(covered.items()))}")
    print(f"nn_conv_depthwise: runs {dict(sorted(RUNS.items()))}")
    print(f"nn_conv_depthwise: {len(fails)} failures ({time.time() - t0:.1f}s)")
    if fails and not quiet:
        for f in fails[:30]:
            print("  ", f)
    status = 1 if fails else 0
    if "--plant" in sys.argv:
        status |= self_test()
    return status


PLANTS = {
    "fwd_bound": "forward: ih > H instead of ih >= H",
    "bi_div": "input grad: no oh * sh == th check",
    "wg_slice": "weight grad: last slice not clamped to R",
    "wg_warp": "weight grad: the last warp's total left out",
    "fwd_chan": "forward: input channel co % C instead of co / M",
    "wg_tap": "weight grad (any kernel size): the tap's kh and kw swapped",
}


def self_test():
    """Each planted bug must make the checks fail."""
    status = 0
    for name, desc in PLANTS.items():
        PLANT.clear()
        PLANT.add(name)
        fails = []
        check_plans(fails)
        for k in (0, 1, 2, 3, 13, 17, 18):
            p = params(*SHAPES[k])
            terms = p.N * p.C * p.M * p.Ho * p.Wo * p.KH * p.KW
            if terms <= SYMBOLIC_MAX:
                check_symbolic(p, True, fails, seed=k)
            check_numeric(p, F32, True, fails, seed=k)
        caught = bool(fails)
        print(
            f"planted bug {name} ({desc}): {'caught' if caught else 'NOT CAUGHT'}"
            + (f": {fails[0][:150]}" if fails else "")
        )
        status |= 0 if caught else 1
    PLANT.clear()
    return status


if __name__ == "__main__":
    sys.exit(main())
