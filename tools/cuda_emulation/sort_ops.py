"""Emulation of packages/core/csrc/cuda/sort_ops.cu: radix keys (radix_key, bit for bit), the CUB
(segmented) radix sort of (key, index) pairs as a stable sort per segment over the segment
offsets the row_offsets_kernel writes, the gathers back into the outputs' layouts (first_indices,
gather_values, red::write_permuted), pick_kernel (kthvalue / median / nanmedian / mode) and the
unique pipeline (group flags, CUB inclusive scan, scatter, counts). Compared with ember's CPU
sort / argsort / topk / kthvalue / median / nanmedian / mode / unique (uint16/32/64: sort and
unique only, the others refuse them as in PyTorch).

    python3 tools/cuda_emulation/sort_ops.py
"""

from __future__ import annotations

import sys

import numpy as np
from common import Report, ember, offset_of, to_ember

INT32_MAX = (1 << 31) - 1


def key_type(dt):
    return np.uint64 if np.dtype(dt).itemsize == 8 else np.uint32


def radix_key(a):
    """radix_key of every element of a (1-d), as the key type."""
    dt = a.dtype
    if dt == np.float64:
        v = a.copy()
        nan = np.isnan(v)
        v[v == 0] = 0.0
        b = v.view(np.uint64)
        neg = (b >> np.uint64(63)) != 0
        k = np.where(neg, ~b, b | np.uint64(1 << 63))
        return np.where(nan, ~np.uint64(0), k).astype(np.uint64)
    if dt.kind == "f":  # float32, float16 (widened exactly to float)
        v = a.astype(np.float32)
        nan = np.isnan(v)
        v[v == 0] = np.float32(0.0)
        b = v.view(np.uint32)
        neg = (b >> np.uint32(31)) != 0
        k = np.where(neg, ~b, b | np.uint32(1 << 31))
        return np.where(nan, ~np.uint32(0), k).astype(np.uint32)
    if dt == np.bool_ or dt == np.uint8:
        return a.astype(np.uint32)
    if dt.kind == "u":  # uint16/32/64 order as their own bits
        return a.astype(key_type(dt))
    if dt.itemsize == 8:
        return a.view(np.uint64) ^ np.uint64(1 << 63)
    return a.astype(np.int32).view(np.uint32) ^ np.uint32(1 << 31)


def sort_pairs(keys, vals, offs):
    """CUB SortPairs / DeviceSegmentedRadixSort::SortPairs over [offs[r], offs[r+1]): radix sort
    is stable, so it equals a stable sort of each segment by key."""
    ko, vo = keys.copy(), vals.copy()
    for r in range(len(offs) - 1):
        lo, hi = offs[r], offs[r + 1]
        order = np.argsort(keys[lo:hi], kind="stable")
        ko[lo:hi] = keys[lo:hi][order]
        vo[lo:hi] = vals[lo:hi][order]
    return ko, vo


def contig_strides(sizes):
    st, acc = [], 1
    for s in reversed(sizes):
        st.append(acc)
        acc *= max(int(s), 1)
    return list(reversed(st))


def sorted_rows(a, d, descending):
    """sorted_rows: perm = other dims then d; src = contiguous copy in that order; keys."""
    nd = a.ndim
    perm = [i for i in range(nd) if i != d] + ([d] if nd > 0 else [])
    n = 1 if nd == 0 else a.shape[d]
    rows = 0 if n == 0 else a.size // n
    src = np.transpose(a, perm).copy().ravel() if nd else a.reshape(1).copy()
    total = rows * n
    k = radix_key(src)
    if descending:
        k = ~k
    idx = np.arange(total, dtype=np.int64) % max(n, 1)  # make_keys_kernel: i % n
    if rows == 1:
        offs = [0, total]
    else:
        assert total < INT32_MAX
        offs = [int(np.int32(r * n)) for r in range(rows + 1)]  # row_offsets_kernel (int)
    ks, vs = sort_pairs(k, idx, offs)
    return dict(src=src, keys=ks, idx=vs, perm=perm, rows=rows, n=n)


def write_permuted(shape, src, perm):
    """red::write_permuted into a fresh contiguous tensor of `shape`: sizes and strides of dst
    permuted, src contiguous over the permuted sizes."""
    dst = np.empty(int(np.prod(shape)) if shape else 1, src.dtype)
    dstr = contig_strides(shape)
    psizes = [shape[p] for p in perm] if perm else list(shape)
    pstr = [dstr[p] for p in perm] if perm else dstr
    need = int(np.prod(psizes)) if psizes else 1
    if src.size < need:  # strided_copy would read past the end of src
        raise IndexError(f"write_permuted reads {need} elements of a {src.size}-element source")
    i = np.arange(need, dtype=np.int64)
    dst[offset_of(psizes, pstr, i)] = src[:need]
    return dst.reshape(shape)


def write_sorted(a, d, s, m, want_values):
    shape = list(a.shape)
    if a.ndim:
        shape[d] = m
    rows, n = s["rows"], s["n"]
    if m == n:
        idx = s["idx"]
    else:  # first_indices: strided_copy [rows, m] from [rows, n]
        idx = s["idx"].reshape(rows, n)[:, :m].ravel()
    ind = write_permuted(shape, idx, s["perm"])
    vals = None
    if want_values:  # gather_rows_kernel: dst[i] = src[r * n + idx[r * n + j]]
        i = np.arange(rows * m, dtype=np.int64)
        r, j = i // max(m, 1), i % max(m, 1)
        g = s["src"][r * n + s["idx"][r * n + j]]
        vals = write_permuted(shape, g, s["perm"])
    return vals, ind


def topk_m(a, k):
    """The positions topk writes per row (after the fix: a 0-d self always writes its value)."""
    return 1 if a.ndim == 0 else k


def pick(s, mode, k, has_nan):
    keys, idx, rows, n = s["keys"], s["idx"], s["rows"], s["n"]
    allones = ~keys.dtype.type(0)
    pos = np.empty(rows, np.int64)
    for r in range(rows):
        kr = keys[r * n:(r + 1) * n]
        p = 0
        if mode == "kth":
            p = k
        elif mode == "mode":
            best, i = 0, 0
            while i < n:
                j = i
                while j + 1 < n and kr[j + 1] == kr[i]:
                    j += 1
                if j - i + 1 > best:
                    best, p = j - i + 1, j
                i = j + 1
        else:
            m = n
            if has_nan:
                lo, hi = 0, n
                while lo < hi:
                    mid = (lo + hi) // 2
                    if kr[mid] == allones:
                        hi = mid
                    else:
                        lo = mid + 1
                m = lo
            if mode == "median":
                p = m if m < n else (n - 1) // 2
            else:
                p = 0 if m == 0 else (m - 1) // 2
        pos[r] = idx[r * n + p]
    vals = s["src"][np.arange(rows) * n + pos]  # gather_one_kernel
    return vals, pos


def select_rows(a, d, keepdim, mode, k):
    shape = [a.shape[i] for i in range(a.ndim) if i != d or keepdim]
    if keepdim and a.ndim:
        shape[d] = 1
    s = sorted_rows(a, d, False)
    v, i = pick(s, mode, k, a.dtype.kind == "f")
    return v.reshape(shape), i.reshape(shape)


def unique_flat(a):
    n = a.size
    flat = a.ravel().copy()
    s = sorted_rows(flat, 0, False)
    keys, idx = s["keys"], s["idx"]
    has_nan = a.dtype.kind == "f"
    allones = ~keys.dtype.type(0)
    flags = np.zeros(n, np.int64)
    for i in range(n):  # group_start_kernel
        flags[i] = 1 if (i == 0 or keys[i] != keys[i - 1] or (has_nan and keys[i] == allones)) else 0
    gid = np.cumsum(flags)  # CUB InclusiveSum
    m = int(gid[n - 1])
    values = np.empty(m, a.dtype)
    starts = np.full(m, -999, np.int64)
    inverse = np.empty(n, np.int64)
    for i in range(n):  # unique_scatter_kernel
        g = gid[i] - 1
        if flags[i]:
            values[g] = s["src"][idx[i]]
            starts[g] = i
        inverse[idx[i]] = g
    counts = np.array([(starts[g + 1] if g + 1 < m else n) - starts[g] for g in range(m)],
                      np.int64)
    return values, inverse.reshape(a.shape), counts


# ---- data -------------------------------------------------------------------------------------


def make(shape, dt, rng, special):
    n = int(np.prod(shape)) if shape else 1
    dt = np.dtype(dt)
    if dt == np.bool_:
        a = rng.integers(0, 2, n).astype(np.bool_)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        a = rng.integers(-3 if dt.kind == "i" else 0, 4, n).astype(dt)
        if special and n >= 4:
            a[rng.integers(0, n, 2)] = info.min
            a[rng.integers(0, n, 2)] = info.max
    else:
        a = rng.integers(-3, 4, n).astype(np.float64) * 0.5
        if special and n >= 6:
            for v in (np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan):
                a[rng.integers(0, n)] = v
        a = a.astype(dt)
    return a.reshape(shape)


def same(g, w):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape:
        return False
    if w.dtype.kind == "f":
        # bit-exact values (sign of zero and NaN included)
        gb = np.where(np.isnan(g), np.nan, g)
        wb = np.where(np.isnan(w), np.nan, w)
        return bool(np.array_equal(gb, wb, equal_nan=True) and
                    np.array_equal(np.signbit(g[~np.isnan(g)]), np.signbit(w[~np.isnan(w)])))
    return bool(np.array_equal(g, w))


def main():
    rng = np.random.default_rng(2)
    rep = Report("sort_ops.cu")
    shapes = [(), (1,), (9,), (5, 7), (3, 4, 6), (2, 1, 40), (0, 3), (3, 0), (200,)]
    wide_uints = [np.uint16, np.uint32, np.uint64]
    dts = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8,
           np.bool_] + wide_uints
    for shape in shapes:
        for dt in dts:
            for special in (False, True):
                a = make(shape, dt, rng, special)
                x = to_ember(a)
                nd = a.ndim
                for d in (range(-1, nd) if nd else [0, -1]):
                    dd = d % nd if nd else 0
                    for desc in (False, True):
                        what = f"sort {np.dtype(dt).name} {shape} dim={d} desc={desc} sp={special}"
                        w = x.sort(dim=d, descending=desc)
                        if a.size == 0:
                            gv, gi = a.copy(), np.zeros(a.shape, np.int64)
                        else:
                            s = sorted_rows(a, dd, desc)
                            gv, gi = write_sorted(a, dd, s, s["n"], True)
                        rep.check(same(gv, w.values.numpy()), what + " values")
                        rep.check(same(gi, w.indices.numpy()), what + " indices")
                    if dt in wide_uints:
                        continue
                    n = 1 if nd == 0 else a.shape[dd]
                    for k in sorted({0, 1, n // 2, n}):
                        if k > n:
                            continue
                        for largest in (True, False):
                            what = f"topk k={k} {np.dtype(dt).name} {shape} dim={d} largest={largest} sp={special}"
                            w = x.topk(k, dim=d, largest=largest)
                            shp = list(a.shape)
                            if nd:
                                shp[dd] = k
                            if int(np.prod(shp)) == 0:
                                gv, gi = np.zeros(shp, a.dtype), np.zeros(shp, np.int64)
                            else:
                                s = sorted_rows(a, dd, largest)
                                try:
                                    gv, gi = write_sorted(a, dd, s, topk_m(a, k), True)
                                except IndexError as e:
                                    rep.check(False, what + f": out of bounds: {e}")
                                    continue
                            if nd == 0 and k == 0:
                                # PyTorch writes the value and index 0 for a 0-d self whatever k
                                # is; ember's CPU kernel leaves the 1-element outputs unwritten.
                                rep.check(same(gv, a) and same(gi, np.zeros((), np.int64)), what)
                                continue
                            rep.check(same(gv, w.values.numpy()), what + " values")
                            rep.check(same(gi, w.indices.numpy()), what + " indices")
                    # bool: kthvalue / median / mode refuse it (sort_rules, both devices)
                    if a.size == 0 or dt == np.bool_:
                        continue
                    for keepdim in (False, True):
                        for k in sorted({1, max(n // 2, 1), n}):
                            w = x.kthvalue(k, dim=d, keepdim=keepdim)
                            gv, gi = select_rows(a, dd, keepdim, "kth", k - 1)
                            what = f"kthvalue k={k} {np.dtype(dt).name} {shape} dim={d}"
                            rep.check(same(gv, w.values.numpy()) and same(gi, w.indices.numpy()), what)
                        for name, mode in (("median", "median"), ("nanmedian", "nanmedian"),
                                           ("mode", "mode")):
                            if name == "nanmedian" and a.dtype.kind != "f":
                                continue
                            w = getattr(x, name)(dim=d, keepdim=keepdim)
                            gv, gi = select_rows(a, dd, keepdim, mode, 0)
                            what = f"{name} {np.dtype(dt).name} {shape} dim={d} keepdim={keepdim} sp={special}"
                            rep.check(same(gv, w.values.numpy()), what + f" values {gv.ravel()[:6]} vs {w.values.numpy().ravel()[:6]}")
                            rep.check(same(gi, w.indices.numpy()), what + f" indices {gi.ravel()[:6]} vs {w.indices.numpy().ravel()[:6]}")
                # whole-tensor median / nanmedian and unique
                if a.size:
                    for name, mode in (("median", "median"), ("nanmedian", "nanmedian")):
                        if dt in wide_uints or dt == np.bool_ or (
                                name == "nanmedian" and a.dtype.kind != "f"):
                            continue
                        w = getattr(x, name)()
                        gv, _ = select_rows(a.reshape(-1), 0, False, mode, 0)
                        rep.check(same(gv.reshape(()), w.numpy()), f"{name}() {np.dtype(dt).name} {shape}")
                    v, inv, cnt = unique_flat(a)
                    w = ember.unique(x, return_inverse=True, return_counts=True)
                    what = f"unique {np.dtype(dt).name} {shape} sp={special}"
                    rep.check(same(v, w[0].numpy()), what + f" values {v[:8]} vs {w[0].numpy()[:8]}")
                    rep.check(same(inv, w[1].numpy()), what + " inverse")
                    rep.check(same(cnt, w[2].numpy()), what + " counts")
    return rep.close()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
