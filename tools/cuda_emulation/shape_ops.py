"""Emulation of packages/core/csrc/cuda/shape_ops.cu: triangle_kernel (tril / triu: (row, col) of
each flat element of the output walk, dst and src walked with their own strides, in place on a
contiguous self), pad_kernel (each output element gathered through the per-dim source maps of
constant_pad_nd and of the reflect / replicate / circular modes, -1 entries filled). Compared with
ember's CPU ops over layouts, diagonals, batch dims, negative (cropping) pads and every mode.

    python3 tools/cuda_emulation/shape_ops.py
"""

from __future__ import annotations

import sys

import numpy as np
from common import Report, contig_strides, ember, offset_of, to_ember

RNG = np.random.default_rng(5)


def clamp_diagonal(d):
    lim = 1 << 62
    return max(-lim, min(lim, d))


def triangle(a, lower, diagonal, view_strides=None):
    """triangle_into(r, self): r fresh and contiguous; self walked by its strides."""
    dst = np.zeros(a.size, a.dtype)
    sizes = list(a.shape)
    rows, cols = sizes[-2], sizes[-1]
    n = a.size
    if n == 0 or rows == 0 or cols == 0:
        return dst.reshape(a.shape)
    src_flat = a.reshape(-1) if view_strides is None else view_strides[0]
    sst = contig_strides(sizes) if view_strides is None else view_strides[1]
    e = np.arange(n, dtype=np.int64)
    od = offset_of(sizes, contig_strides(sizes), e)
    os_ = offset_of(sizes, sst, e)
    j = e % cols
    i = (e // cols) % rows
    d = clamp_diagonal(diagonal)
    keep = (j <= i + d) if lower else (j >= i + d)
    dst[od] = np.where(keep, src_flat[os_], a.dtype.type(0))
    return dst.reshape(a.shape)


def pad_kernel(a, maps, fill):
    out_sizes = [len(m) for m in maps]
    n = int(np.prod(out_sizes)) if out_sizes else 1
    out = np.empty(n, a.dtype)
    if n == 0:
        return out.reshape(out_sizes)
    hm = []
    map_off = []
    for m in maps:
        map_off.append(len(hm))
        hm.extend(m)
    hm = np.array(hm, np.int64)
    st = contig_strides(a.shape)
    e = np.arange(n, dtype=np.int64)
    rem = e.copy()
    os_ = np.zeros(n, np.int64)
    pad = np.zeros(n, bool)
    for d in range(len(out_sizes) - 1, -1, -1):
        c = rem % out_sizes[d]
        rem //= out_sizes[d]
        s = hm[map_off[d] + c]
        pad |= s < 0
        os_ += s * st[d]
    flat = a.reshape(-1)
    safe = np.where(pad, 0, os_)
    out[:] = np.where(pad, fill, flat[safe] if flat.size else fill)
    return out.reshape(out_sizes)


def constant_maps(shape, pad):
    nd, np_ = len(shape), len(pad) // 2
    maps = []
    for d in range(nd):
        i = nd - 1 - d
        n = shape[d]
        lp = pad[2 * i] if i < np_ else 0
        r = pad[2 * i + 1] if i < np_ else 0
        out_size = n + lp + r
        length = n - max(-lp, 0) - max(-r, 0)
        lo, pl = max(-lp, 0), max(lp, 0)
        maps.append([lo + j - pl if 0 <= j - pl < length else -1 for j in range(out_size)])
    return maps


def mode_maps(shape, pad, mode):
    nd, np_ = len(shape), len(pad) // 2
    maps = []
    for d in range(nd):
        i = nd - 1 - d
        n = shape[d]
        if i < np_:
            lp, r = pad[2 * i], pad[2 * i + 1]
            idx = np.arange(n)
            lo = max(-lp, 0)
            hi = n - max(-r, 0)
            idx = idx[lo:hi]
            m = np.pad(idx, (max(lp, 0), max(r, 0)),
                       mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
            maps.append(list(m))
        else:
            maps.append(list(range(n)))
    return maps


def main():
    rep = Report("shape_ops.cu")
    for dt in (np.float32, np.float16, np.int64, np.int8, np.bool_, np.float64):
        for shape in ((4, 5), (5, 4), (2, 3, 6), (1, 1), (0, 3), (3, 0), (2, 0, 4)):
            a = (RNG.integers(-3, 4, shape)).astype(dt)
            for diag in (0, 1, -1, 3, -4, 100, -100, (1 << 62) + 5, -(1 << 62) - 5):
                for lower in (True, False):
                    x = to_ember(a)
                    want = (x.tril(diag) if lower else x.triu(diag)).numpy()
                    rep.check(np.array_equal(triangle(a, lower, diag), want),
                              f"{'tril' if lower else 'triu'} {np.dtype(dt).name} {shape} diag={diag}")
                    if a.ndim >= 2 and a.size:
                        # a transposed input (strided source)
                        at = np.swapaxes(a, -1, -2)
                        base = np.ascontiguousarray(a).reshape(-1)
                        st = list(contig_strides(a.shape))
                        st[-1], st[-2] = st[-2], st[-1]
                        xt = to_ember(a).transpose(-1, -2)
                        want = (xt.tril(diag) if lower else xt.triu(diag)).numpy()
                        got = triangle(np.ascontiguousarray(at), lower, diag, (base, st))
                        rep.check(np.array_equal(got, want), f"strided tril/triu {np.dtype(dt).name} {shape}")
        for shape, pad in (((3, 4), (1, 2)), ((3, 4), (1, 2, 0, 3)), ((2, 3, 4), (-1, 2, 1, -1)),
                           ((5,), (-2, -3)), ((2, 2, 3), (0, 0, 0, 0, 1, 1)), ((3, 4), (-2, -2))):
            a = RNG.integers(-3, 4, shape).astype(dt)
            val = 7 if dt != np.bool_ else 1
            want = ember.nn.functional.pad(to_ember(a), list(pad), value=val).numpy()
            got = pad_kernel(a, constant_maps(shape, pad), dt(val))
            rep.check(np.array_equal(got, want), f"constant pad {np.dtype(dt).name} {shape} {pad}")
    for mode in ("reflect", "replicate", "circular"):
        for shape, pad in (((2, 5), (2, 3)), ((1, 2, 4, 5), (1, 2, 3, 1)), ((2, 3, 6), (-1, 2)),
                           ((1, 1, 3, 4, 5), (1, 1, 2, 0, 0, 2))):
            a = RNG.standard_normal(shape).astype(np.float32)
            try:
                want = ember.nn.functional.pad(to_ember(a), list(pad), mode=mode).numpy()
            except Exception:
                continue
            got = pad_kernel(a, mode_maps(shape, pad, mode), np.float32(0))
            rep.check(np.array_equal(got, want), f"{mode} pad {shape} {pad}")
    return rep.close()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
