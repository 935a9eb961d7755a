"""Emulation of packages/core/csrc/cuda/nn_rnn.cu (_lstm_layer, _gru_layer, their backwards and
_rnn_input_backward) against ember's CPU kernels of the same ops.

The host code is transcribed step for step over flat device buffers (numpy 1-d arrays, NaN where
nothing was written): every pointer offset, leading dimension and transpose flag of the cuBLAS
products goes through `gemm_rowmajor` below, which reads its operands element by element as
gemm.h defines them (bounds checked, and checked against cuBLAS's documented leading-dimension
rules of the column-major call linalg_ops.cpp makes), and every pointwise kernel is its
grid-stride loop over n = B * H (vectorized: each element is one thread's, no sharing), with
the launch geometry of cuda::blocks_for. col_sum_kernel runs per block with its shared array
(NaN-filled) and barrier. Run: PYTHONPATH=<build>/site python3 nn_rnn.py [-q]"""

from __future__ import annotations

import sys
import time

import ember
import numpy as np
from nn_sim import EmulationError, blocks_for, close, report

K_BLOCK = 256
KCUBLAS_MAX = 2**31 - 1


class Buf:
    """A device allocation of n elements (NaN-filled, like uninitialized memory)."""

    def __init__(self, n, dt, values=None):
        self.a = np.full(int(n), np.nan, dtype=dt) if values is None else \
            np.array(values, dtype=dt).ravel().copy()

    def __len__(self):
        return self.a.size


class Ptr:
    def __init__(self, buf, off=0):
        self.buf, self.off = buf, int(off)

    def __add__(self, k):
        return Ptr(self.buf, self.off + int(k))

    def idx(self, i, what):
        i = np.asarray(i, dtype=np.int64) + self.off
        if i.size and (i.min() < 0 or i.max() >= len(self.buf)):
            raise EmulationError(f"{what}: access [{i.min()}, {i.max()}] of {len(self.buf)}")
        return i

    def get(self, i, what="read"):
        return self.buf.a[self.idx(i, what)]

    def set(self, i, v, what="write"):
        self.buf.a[self.idx(i, what)] = v


def gemm_rowmajor(op, m, n, k, alpha, a, lda, ta, b, ldb, tb, beta, c, ldc):
    """gemm.h with batch 1: C (m x n, ldc) = alpha op(A) @ op(B) + beta C; op(X)[i, j] is
    x[i * ld + j], or x[j * ld + i] with trans. Plus cuBLAS's checks of the call made by
    linalg_ops.cpp: cublasGemmEx(op_b, op_a, n, m, k, b, ldb, a, lda, c, ldc) column-major."""
    if not (m <= KCUBLAS_MAX and n <= KCUBLAS_MAX and k <= KCUBLAS_MAX):
        raise EmulationError(f"{op}: sizes past int")
    if not (m > 0 and n > 0 and k > 0):
        raise EmulationError(f"{op}: internal error: empty GEMM ({m}, {n}, {k})")
    # cuBLAS: A' = our b (op_b): N -> n x k, lda >= max(1, n); T -> k x n, lda >= max(1, k)
    if ldb < max(1, k if tb else n):
        raise EmulationError(f"{op}: cuBLAS CUBLAS_STATUS_INVALID_VALUE: ldb {ldb} (tb={tb})")
    if lda < max(1, m if ta else k):
        raise EmulationError(f"{op}: cuBLAS CUBLAS_STATUS_INVALID_VALUE: lda {lda} (ta={ta})")
    if ldc < max(1, n):
        raise EmulationError(f"{op}: cuBLAS CUBLAS_STATUS_INVALID_VALUE: ldc {ldc}")
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    kk = np.arange(k)
    ai = (kk[None, :] * lda + np.arange(m)[:, None]) if ta else (np.arange(m)[:, None] * lda + kk)
    bi = (np.arange(n)[None, :] * ldb + kk[:, None]) if tb else (kk[:, None] * ldb + np.arange(n))
    A = a.get(ai, f"{op} A")
    B = b.get(bi, f"{op} B")
    prod = alpha * (A @ B)
    ci = i * ldc + j
    if beta != 0:
        prod = prod + beta * c.get(ci, f"{op} C")
    c.set(ci, prod, f"{op} C")


def grid_elems(n):
    """The elements a grid-stride launch of blocks_for(n) x 256 threads visits (each once)."""
    g = blocks_for(n)
    assert g * K_BLOCK >= n or g == 1 << 30
    return np.arange(n, dtype=np.int64)


def sigm(x):
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def bias_rows_kernel(o, bias, total, G):
    e = grid_elems(total)
    o.set(e, bias.get(e % G) if bias is not None else 0.0)


def lstm_step_kernel(n, H, gx, cp, cp_ld, ws, h, hn, cn):
    e = grid_elems(n)
    b, k = e // H, e % H
    row = b * 6 * H
    x = b * 4 * H
    i = sigm(ws.get(row + k) + gx.get(x + k))
    f = sigm(ws.get(row + H + k) + gx.get(x + H + k))
    g = np.tanh(ws.get(row + 2 * H + k) + gx.get(x + 2 * H + k))
    o = sigm(ws.get(row + 3 * H + k) + gx.get(x + 3 * H + k))
    c = f * cp.get(b * cp_ld + k) + i * g
    tc = np.tanh(c)
    hv = o * tc
    for p, v in enumerate((i, f, g, o, c, tc)):
        ws.set(row + p * H + k, v)
    h.set(e, hv)
    if hn is not None:
        hn.set(e, hv)
        cn.set(e, c)


def lstm_back_step_kernel(n, H, dh, go, ws, cp, cp_ld, dc, gg):
    e = grid_elems(n)
    b, k = e // H, e % H
    row = b * 6 * H
    i, f, g, o = (ws.get(row + p * H + k) for p in range(4))
    tc = ws.get(row + 5 * H + k)
    h_grad = dh.get(e) + go.get(e)
    c_grad = dc.get(e) + h_grad * o * (1 - tc * tc)
    gr = b * 4 * H
    gg.set(gr + k, c_grad * g * i * (1 - i))
    gg.set(gr + H + k, c_grad * cp.get(b * cp_ld + k) * f * (1 - f))
    gg.set(gr + 2 * H + k, c_grad * i * (1 - g * g))
    gg.set(gr + 3 * H + k, h_grad * tc * o * (1 - o))
    dc.set(e, c_grad * f)


def gru_step_kernel(n, H, gx, bias, hp, ws, h, hn):
    e = grid_elems(n)
    b, k = e // H, e % H
    row = b * 4 * H
    x = b * 3 * H
    br = bias.get(k) if bias is not None else 0.0
    bz = bias.get(H + k) if bias is not None else 0.0
    bn = bias.get(2 * H + k) if bias is not None else 0.0
    r = sigm(ws.get(row + k) + gx.get(x + k) + br)
    z = sigm(ws.get(row + H + k) + gx.get(x + H + k) + bz)
    a = ws.get(row + 2 * H + k) + bn
    c = np.tanh(gx.get(x + 2 * H + k) + r * a)
    hv = c + z * (hp.get(e) - c)
    for p, v in enumerate((r, z, c, a)):
        ws.set(row + p * H + k, v)
    h.set(e, hv)
    if hn is not None:
        hn.set(e, hv)


def gru_back_step_kernel(n, H, dhm, z_next, ghn, go, ws, hp, hg, gx, gh):
    e = grid_elems(n)
    b, k = e // H, e % H
    dh = hg.get(e) * z_next.get(b * 4 * H + k) + dhm.get(e) if dhm is not None else ghn.get(e)
    h_grad = dh + go.get(e)
    row = b * 4 * H
    r, z, c, a = (ws.get(row + p * H + k) for p in range(4))
    dn = h_grad * (1 - z) * (1 - c * c)
    dr = dn * a * r * (1 - r)
    dz = h_grad * (hp.get(e) - c) * z * (1 - z)
    gxr = b * 3 * H
    gx.set(gxr + k, dr)
    gh.set(gxr + k, dr)
    gx.set(gxr + H + k, dz)
    gh.set(gxr + H + k, dz)
    gx.set(gxr + 2 * H + k, dn)
    gh.set(gxr + 2 * H + k, dn * r)
    hg.set(e, h_grad)


def gru_h0_direct_kernel(n, H, hg, z, out):
    e = grid_elems(n)
    b, k = e // H, e % H
    out.set(e, hg.get(e) * z.get(b * 4 * H + k))


def col_sum(g, out, N, G):
    """col_sum_kernel: blocks of 32 x 8, part[8][33] in shared memory, one barrier."""
    if G == 0:
        return
    for blk in np.random.default_rng(N * 31 + G).permutation((G + 31) // 32):
        part = np.full((8, 33), np.nan)
        for ty in range(8):
            for tx in range(32):
                j = blk * 32 + tx
                s = 0.0
                if j < G:
                    for r in range(ty, N, 8):
                        s += g.get(r * G + j)
                part[ty, tx] = s
        # __syncthreads()
        for tx in range(32):
            j = blk * 32 + tx
            if j < G:
                out.set(j, sum(part[y, tx] for y in range(8)))


def copy_bytes(dst, src, n):
    if n > 0:
        dst.set(np.arange(n), src.get(np.arange(n)))


def weight_grad(gg, h0, out, gw, T, B, H, G, reverse):
    if G * H == 0:
        return
    if T == 0 or B == 0:
        gw.set(np.arange(G * H), 0.0)
        return
    first = T - 1 if reverse else 0
    gemm_rowmajor("wg", G, H, B, 1.0, gg + first * B * G, G, True, h0, H, False, 0.0, gw, H)
    if T > 1:
        gemm_rowmajor("wg", G, H, (T - 1) * B, 1.0, gg + (0 if reverse else 1) * B * G, G, True,
                      out + (1 if reverse else 0) * B * H, H, False, 1.0, gw, H)


class Order:
    def __init__(self, T, reverse):
        self.T, self.reverse = T, reverse

    def time(self, s):
        return self.T - 1 - s if self.reverse else s

    def prev(self, t):
        return t + 1 if self.reverse else t - 1

    def next(self, t):
        return t - 1 if self.reverse else t + 1


def lstm_layer(inputs, reverse, T, B, H):
    G, W = 4 * H, 6 * H
    h0, c0, w = (Ptr(Buf(0, np.float64, x)) for x in inputs[1:4])
    out, ws = Ptr(Buf(T * B * H, np.float64)), Ptr(Buf(T * B * W, np.float64))
    hn, cn = Ptr(Buf(B * H, np.float64)), Ptr(Buf(B * H, np.float64))
    if T == 0 or B * H == 0:
        copy_bytes(hn, h0, B * H)
        copy_bytes(cn, c0, B * H)
        return out, hn, cn, ws
    if len(inputs) == 4:
        gx = Ptr(Buf(0, np.float64, inputs[0]))
    else:
        x = Ptr(Buf(0, np.float64, inputs[0]))
        w_ih = Ptr(Buf(0, np.float64, inputs[4]))
        bias = Ptr(Buf(0, np.float64, inputs[5])) if len(inputs) == 6 else None
        N, n_in = T * B, inputs[0].shape[2]
        gx = Ptr(Buf(T * B * G, np.float64))
        bias_rows_kernel(gx, bias, N * G, G)
        if n_in > 0:
            gemm_rowmajor("lstm x", N, G, n_in, 1.0, x, n_in, False, w_ih, n_in, True, 1.0, gx, G)
    ord_ = Order(T, reverse)
    n = B * H
    for s in range(T):
        t, tp = ord_.time(s), ord_.prev(ord_.time(s))
        hp = h0 if s == 0 else out + tp * B * H
        cp = c0 if s == 0 else ws + tp * B * W + 4 * H
        wst = ws + t * B * W
        gemm_rowmajor("lstm h", B, G, H, 1.0, hp, H, False, w, H, True, 0.0, wst, W)
        last = s == T - 1
        lstm_step_kernel(n, H, gx + t * B * G, cp, H if s == 0 else W, wst, out + t * B * H,
                         hn if last else None, cn if last else None)
    return out, hn, cn, ws


def lstm_layer_backward(go_, ghn_, gcn_, h0_, c0_, w_, out_, ws_, reverse, T, B, H):
    G, W = 4 * H, 6 * H
    go, ghn, gcn, h0c, c0c, w, out, ws = (Ptr(Buf(0, np.float64, x)) for x in
                                          (go_, ghn_, gcn_, h0_, c0_, w_, out_, ws_))
    gg, gh0 = Ptr(Buf(T * B * G, np.float64)), Ptr(Buf(B * H, np.float64))
    gc0, gw = Ptr(Buf(B * H, np.float64)), Ptr(Buf(G * H, np.float64))
    copy_bytes(gc0, gcn, B * H)
    if T == 0 or B * H == 0:
        copy_bytes(gh0, ghn, B * H)
        weight_grad(gg, h0c, out, gw, T, B, H, G, reverse)
        return gg, gh0, gc0, gw
    ord_ = Order(T, reverse)
    n = B * H
    dh = Ptr(Buf(B * H, np.float64))
    for s in range(T):
        t = ord_.time(T - 1 - s)
        tn, tp = ord_.next(t), ord_.prev(t)
        first_fwd = s == T - 1
        dh_in = ghn
        if s > 0:
            gemm_rowmajor("lstm dh", B, H, G, 1.0, gg + tn * B * G, G, False, w, H, False, 0.0,
                          dh, H)
            dh_in = dh
        cp = c0c if first_fwd else ws + tp * B * W + 4 * H
        lstm_back_step_kernel(n, H, dh_in, go + t * B * H, ws + t * B * W, cp,
                              H if first_fwd else W, gc0, gg + t * B * G)
    gemm_rowmajor("lstm dh0", B, H, G, 1.0, gg + ord_.time(0) * B * G, G, False, w, H, False, 0.0,
                  gh0, H)
    weight_grad(gg, h0c, out, gw, T, B, H, G, reverse)
    return gg, gh0, gc0, gw


def rnn_input_backward(g_, x_, w_):
    N, n_in = x_.shape
    G = w_.shape[0]
    g, x, w = (Ptr(Buf(0, np.float64, a)) for a in (g_, x_, w_))
    gi, gw, gb = (Ptr(Buf(N * n_in, np.float64)), Ptr(Buf(G * n_in, np.float64)),
                  Ptr(Buf(G, np.float64)))
    if N * n_in > 0:
        if G > 0:
            gemm_rowmajor("in gi", N, n_in, G, 1.0, g, G, False, w, n_in, False, 0.0, gi, n_in)
        else:
            gi.set(np.arange(N * n_in), 0.0)
    if G * n_in > 0:
        if N > 0:
            gemm_rowmajor("in gw", G, n_in, N, 1.0, g, G, True, x, n_in, False, 0.0, gw, n_in)
        else:
            gw.set(np.arange(G * n_in), 0.0)
    col_sum(g, gb, N, G)
    return gi, gw, gb


def gru_layer(inputs, reverse, T, B, H):
    G, W = 3 * H, 4 * H
    gx, h0, w = (Ptr(Buf(0, np.float64, x)) for x in inputs[:3])
    bias = Ptr(Buf(0, np.float64, inputs[3])) if len(inputs) == 4 else None
    out, ws, hn = (Ptr(Buf(T * B * H, np.float64)), Ptr(Buf(T * B * W, np.float64)),
                   Ptr(Buf(B * H, np.float64)))
    if T == 0 or B * H == 0:
        copy_bytes(hn, h0, B * H)
        return out, hn, ws
    ord_ = Order(T, reverse)
    n = B * H
    for s in range(T):
        t = ord_.time(s)
        hp = h0 if s == 0 else out + ord_.prev(t) * B * H
        wst = ws + t * B * W
        gemm_rowmajor("gru h", B, G, H, 1.0, hp, H, False, w, H, True, 0.0, wst, W)
        gru_step_kernel(n, H, gx + t * B * G, bias, hp, wst, out + t * B * H,
                        hn if s == T - 1 else None)
    return out, hn, ws


def gru_layer_backward(go_, ghn_, h0_, w_, out_, ws_, reverse, T, B, H):
    G, W = 3 * H, 4 * H
    go, ghn, h0c, w, out, ws = (Ptr(Buf(0, np.float64, x)) for x in (go_, ghn_, h0_, w_, out_, ws_))
    gx, gh = Ptr(Buf(T * B * G, np.float64)), Ptr(Buf(T * B * G, np.float64))
    gh0, gw, gb = Ptr(Buf(B * H, np.float64)), Ptr(Buf(G * H, np.float64)), Ptr(Buf(G, np.float64))
    if T == 0 or B * H == 0:
        copy_bytes(gh0, ghn, B * H)
        weight_grad(gh, h0c, out, gw, T, B, H, G, reverse)
        if G > 0:
            gb.set(np.arange(G), 0.0)
        return gx, gh0, gw, gb
    ord_ = Order(T, reverse)
    n = B * H
    hg, dhm = Ptr(Buf(B * H, np.float64)), Ptr(Buf(B * H, np.float64))
    for s in range(T):
        t = ord_.time(T - 1 - s)
        tn = ord_.next(t)
        hp = h0c if s == T - 1 else out + ord_.prev(t) * B * H
        z_next = None
        if s > 0:
            gemm_rowmajor("gru dhm", B, H, G, 1.0, gh + tn * B * G, G, False, w, H, False, 0.0,
                          dhm, H)
            z_next = ws + tn * B * W + H
        gru_back_step_kernel(n, H, dhm if s > 0 else None, z_next, ghn, go + t * B * H,
                             ws + t * B * W, hp, hg, gx + t * B * G, gh + t * B * G)
    tf = ord_.time(0)
    gru_h0_direct_kernel(n, H, hg, ws + tf * B * W + H, gh0)
    gemm_rowmajor("gru dh0", B, H, G, 1.0, gh + tf * B * G, G, False, w, H, False, 1.0, gh0, H)
    weight_grad(gh, h0c, out, gw, T, B, H, G, reverse)
    col_sum(gh, gb, T * B, G)
    return gx, gh0, gw, gb


def t64(a):
    return ember.tensor(np.asarray(a, dtype=np.float64))


def vals(p, shape):
    return p.buf.a.reshape(shape)


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    rng = np.random.default_rng(3)
    tol = 1e-10
    for (T, B, H, n_in) in ((1, 1, 1, 1), (5, 3, 4, 6), (7, 2, 33, 5), (4, 5, 3, 0), (0, 2, 3, 4),
                         (3, 0, 4, 2), (6, 1, 70, 9)):
        for reverse in (False, True):
            for form in ("gx", "x", "x+bias"):
                nm = f"lstm T={T} B={B} H={H} I={n_in} rev={reverse} {form}"
                h0, c0 = rng.standard_normal((B, H)), rng.standard_normal((B, H))
                w_hh = rng.standard_normal((4 * H, H)) * 0.5
                if form == "gx":
                    inputs = [rng.standard_normal((T, B, 4 * H)), h0, c0, w_hh]
                else:
                    inputs = [rng.standard_normal((T, B, n_in)), h0, c0, w_hh,
                              rng.standard_normal((4 * H, n_in)) * 0.5]
                    if form == "x+bias":
                        inputs.append(rng.standard_normal(4 * H))
                try:
                    out, hn, cn, ws = lstm_layer(inputs, reverse, T, B, H)
                    ro, rh, rc, rw = ember._C._lstm_layer([t64(a) for a in inputs], reverse)
                    close(nm + " out", vals(out, (T, B, H)), ro.numpy(), tol, tol, fails)
                    close(nm + " hn", vals(hn, (B, H)), rh.numpy(), tol, tol, fails)
                    close(nm + " cn", vals(cn, (B, H)), rc.numpy(), tol, tol, fails)
                    close(nm + " ws", vals(ws, (T, B, 6 * H)), rw.numpy(), tol, tol, fails)
                    if form != "x+bias":
                        continue
                    go, ghn, gcn = (rng.standard_normal(s) for s in ((T, B, H), (B, H), (B, H)))
                    res = lstm_layer_backward(go, ghn, gcn, h0, c0, w_hh, ro.numpy(), rw.numpy(),
                                              reverse, T, B, H)
                    ref = ember._C._lstm_layer_backward(t64(go), t64(ghn), t64(gcn), t64(h0),
                                                        t64(c0), t64(w_hh), ro, rw, reverse)
                    for what, got, r, shp in zip(("gg", "gh0", "gc0", "gw"), res, ref,
                                                 ((T, B, 4 * H), (B, H), (B, H), (4 * H, H))):
                        close(f"{nm} {what}", vals(got, shp), r.numpy(), tol, tol, fails)
                    gg = ref[0].numpy().reshape(T * B, 4 * H)
                    xi = inputs[0].reshape(T * B, n_in)
                    res = rnn_input_backward(gg, xi, inputs[4])
                    ref = ember._C._rnn_input_backward(t64(gg), t64(xi), t64(inputs[4]))
                    for what, got, r, shp in zip(("gi", "gw_ih", "gb"), res, ref,
                                                 ((T * B, n_in), (4 * H, n_in), (4 * H,))):
                        close(f"{nm} {what}", vals(got, shp), r.numpy(), tol, tol, fails)
                except EmulationError as e:
                    fails.append(f"{nm}: {e}")
                    print(f"ERROR {nm}: {e}")
            for bias in (False, True):
                nm = f"gru T={T} B={B} H={H} rev={reverse} bias={bias}"
                h0 = rng.standard_normal((B, H))
                w_hh = rng.standard_normal((3 * H, H)) * 0.5
                inputs = [rng.standard_normal((T, B, 3 * H)), h0, w_hh]
                if bias:
                    inputs.append(rng.standard_normal(3 * H))
                try:
                    out, hn, ws = gru_layer(inputs, reverse, T, B, H)
                    ro, rh, rw = ember._C._gru_layer([t64(a) for a in inputs], reverse)
                    close(nm + " out", vals(out, (T, B, H)), ro.numpy(), tol, tol, fails)
                    close(nm + " hn", vals(hn, (B, H)), rh.numpy(), tol, tol, fails)
                    close(nm + " ws", vals(ws, (T, B, 4 * H)), rw.numpy(), tol, tol, fails)
                    go, ghn = rng.standard_normal((T, B, H)), rng.standard_normal((B, H))
                    res = gru_layer_backward(go, ghn, h0, w_hh, ro.numpy(), rw.numpy(), reverse,
                                             T, B, H)
                    ref = ember._C._gru_layer_backward(t64(go), t64(ghn), t64(h0), t64(w_hh), ro,
                                                       rw, reverse)
                    for what, got, r, shp in zip(("gx", "gh0", "gw", "gb"), res, ref,
                                                 ((T, B, 3 * H), (B, H), (3 * H, H), (3 * H,))):
                        close(f"{nm} {what}", vals(got, shp), r.numpy(), tol, tol, fails)
                except EmulationError as e:
                    fails.append(f"{nm}: {e}")
                    print(f"ERROR {nm}: {e}")
    # col_sum over more than one block of columns and rows not a multiple of 8
    g = rng.standard_normal((37, 70))
    gb = Ptr(Buf(70, np.float64))
    col_sum(Ptr(Buf(0, np.float64, g)), gb, 37, 70)
    close("col_sum 37x70", gb.buf.a, g.sum(0), tol, tol, fails)
    return report("nn_rnn", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
