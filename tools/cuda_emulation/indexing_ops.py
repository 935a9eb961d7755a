"""Emulation of packages/core/csrc/cuda/indexing_ops.cu and index_common.cuh: ix::make_walk,
make_geo and index_kernel (byte offsets, an index operand walked with its own strides, the
indexed dim's stride replaced by index * step), the host index checks (negatives wrapped), the
atomics (a CAS on the aligned 32-bit word for 1- and 2-byte types, lanes checked), scatter's
include_self / mean passes, index_put_'s last-write-wins dedupe, advanced indexing's offsets, the
flag + scan + compact kernels of masked_select / masked_scatter_ / nonzero, masked_fill_,
searchsorted and histc. Compared with ember's CPU ops.

Threads of one launch run in a shuffled order (the atomics serialize them; plain stores to one
address keep the last one run, so those cases compare only where no two threads share an
address, or after the host's dedupe).

    python3 tools/cuda_emulation/indexing_ops.py
"""

from __future__ import annotations

import sys

import numpy as np
from common import Report, contig_strides, ember, to_ember

RNG = np.random.default_rng(3)


class Dev:
    """A device tensor: a flat element buffer, an element offset, sizes and element strides."""

    def __init__(self, buf, offset, sizes, strides):
        self.buf, self.offset = buf, offset
        self.sizes, self.strides = list(sizes), list(strides)

    @staticmethod
    def of(a):
        a = np.array(a, copy=True, order="C")
        return Dev(a.reshape(-1), 0, a.shape, contig_strides(a.shape))

    @property
    def itemsize(self):
        return self.buf.itemsize

    def dim(self):
        return len(self.sizes)

    def numel(self):
        return int(np.prod(self.sizes)) if self.sizes else 1

    def numpy(self):
        it = self.buf.itemsize
        return np.lib.stride_tricks.as_strided(
            self.buf[self.offset:], shape=tuple(self.sizes),
            strides=tuple(s * it for s in self.strides)).copy()


def as_1d(t):
    return t if t.dim() > 0 else Dev(t.buf, t.offset, [1], [1])


def with_shape(t, shape):
    assert t.numel() == (int(np.prod(shape)) if shape else 1)
    return Dev(t.buf, t.offset, shape, contig_strides(shape))


def expand_view(t, sizes):
    n = len(sizes)
    off = n - t.dim()
    st = [0] * n
    for d in range(t.dim()):
        st[off + d] = 0 if (t.sizes[d] == 1 and sizes[off + d] != 1) else t.strides[d]
    return Dev(t.buf, t.offset, sizes, st)


# ---- ix::make_walk / make_geo (byte strides) ------------------------------------------------------


def make_walk(sizes, ops):
    nd = len(sizes)
    st = [[0] * nd for _ in range(4)]
    for k, t in enumerate(ops):
        if t is None:
            continue
        off = nd - t.dim()
        for d in range(t.dim()):
            st[k][off + d] = 0 if (t.sizes[d] == 1 and sizes[off + d] != 1) else t.strides[d] * t.itemsize
    return dict(nd=nd, sizes=list(sizes), st=st)


def make_geo(shape, dim, dst, dst_indexed, dst_step, src, src_indexed, src_step, didx, didx_nd,
             sidx, sidx_nd):
    w = make_walk(shape, [dst, src])
    for k, t in enumerate((dst, src)):
        if t.dim() != len(shape):
            continue
        for d in range(t.dim()):
            w["st"][k][d] = 0 if (t.sizes[d] == 1 and shape[d] != 1) else t.strides[d] * t.itemsize
    if dst_indexed:
        w["st"][0][dim] = 0
    if src_indexed:
        w["st"][1][dim] = 0
    for k, t, nd in ((2, didx, didx_nd), (3, sidx, sidx_nd)):
        w["st"][k] = [0] * w["nd"]
        if t is None:
            continue
        if nd:
            cs = contig_strides(t.sizes)
            for d in range(t.dim()):
                w["st"][k][d] = 0 if t.sizes[d] == 1 else cs[d] * 8
        else:
            w["st"][k][dim] = 8
    return dict(w=w, dst_step=dst_step, src_step=src_step)


def byte_to_elem(t, byte_off):
    it = t.itemsize
    assert np.all(byte_off % it == 0), "misaligned element access"
    e = t.offset + byte_off // it
    assert np.all((e >= 0) & (e < t.buf.size)), f"out of bounds: {e.min()}..{e.max()} of {t.buf.size}"
    return e


# ---- atomics --------------------------------------------------------------------------------------


def atomic_update_small(buf, elem, f):
    """atomic_update for 1- and 2-byte T: the CAS on the aligned 32-bit word holding the element,
    through the word's lanes, with the other lanes checked untouched."""
    it = buf.itemsize
    raw = buf.view(np.uint8)
    pad = (-raw.size) % 4
    words = np.concatenate([raw, np.zeros(pad, np.uint8)]).view(np.uint32)
    addr = elem * it  # the buffer base is 256-byte aligned on the device
    word = addr & ~3
    shift = (addr & 3) * 8
    mask = np.uint32((0xFFFF if it == 2 else 0xFF) << shift)
    old = words[word // 4]
    cur = (old & mask) >> np.uint32(shift)
    bits = np.dtype(np.uint16 if it == 2 else np.uint8)
    cur_v = np.array([cur], dtype=bits).view(buf.dtype)[0]
    nv = np.array([f(cur_v)], dtype=buf.dtype).view(bits)[0]
    new = (old & ~mask) | (np.uint32(nv) << np.uint32(shift))
    before = words.copy()
    words[word // 4] = new
    changed = np.nonzero(words.view(np.uint8) != before.view(np.uint8))[0]
    assert all(addr <= c < addr + it for c in changed), "CAS touched a neighbouring lane"
    raw[:] = words.view(np.uint8)[:raw.size]


def opmath(dt):
    return np.float32 if dt == np.float16 else dt.type


def reduce_combine(dt, red, x, y, alpha):
    """ReduceOp::combine in the accumulation type (bool: bool; integers: int64; floats: opmath)."""
    if dt == np.bool_:
        x, y = bool(x), bool(y)
        if red == "add":
            return x or (alpha != 0 and y)
        if red == "mul":
            return x and y
        if red == "max":
            return y if y > x else x
        return y if y < x else x
    if dt.kind in "iu":
        x, y = int(x), int(y)
        if red == "add":
            r = x + int(alpha) * y
        elif red == "mul":
            r = x * y
        elif red == "max":
            r = y if y > x else x
        else:
            r = y if y < x else x
        return np.array(r, dtype=np.int64).astype(dt)  # from_op: wraps as a C++ cast
    A = opmath(dt)
    x, y = A(x), A(y)
    with np.errstate(all="ignore"):
        if red == "add":
            r = x + A(alpha) * y
        elif red == "mul":
            r = x * y
        elif red == "max":
            r = y if (y != y or y > x) else x
        else:
            r = y if (y != y or y < x) else x
    return dt.type(r)


def index_kernel(g, dst, src, didx, sidx, red, alpha=1):
    """index_kernel over every element e of the walk, threads in a shuffled order."""
    w = g["w"]
    n = int(np.prod(w["sizes"])) if w["sizes"] else 1
    if n == 0:
        return
    e = np.arange(n, dtype=np.int64)
    rem = e.copy()
    od, os_, oi, oj = (np.zeros(n, np.int64) for _ in range(4))
    for d in range(w["nd"] - 1, -1, -1):
        c = rem % w["sizes"][d]
        rem //= w["sizes"][d]
        od += c * w["st"][0][d]
        os_ += c * w["st"][1][d]
        oi += c * w["st"][2][d]
        oj += c * w["st"][3][d]
    if didx is not None:
        od += didx.buf[byte_to_elem(didx, oi)] * g["dst_step"]
    if sidx is not None:
        os_ += sidx.buf[byte_to_elem(sidx, oj)] * g["src_step"]
    de = byte_to_elem(dst, od)
    se = byte_to_elem(src, os_)
    vals = src.buf[se]
    dt = dst.buf.dtype
    order = RNG.permutation(n)
    if red == "assign":
        dst.buf[de[order]] = vals[order]  # numpy keeps the last write of a repeated index
        return
    for i in order:
        if dt.itemsize < 4:
            atomic_update_small(dst.buf, de[i], lambda x, y=vals[i]: reduce_combine(dt, red, x, y, alpha))
        elif red == "add" and dt in (np.float32, np.float64):
            dst.buf[de[i]] = dst.buf[de[i]] + dt.type(alpha) * vals[i]  # atomicAdd(T(alpha) * y)
        elif red == "add" and dt in (np.int64, np.int32):
            dst.buf[de[i]] = (np.array(int(dst.buf[de[i]]) + int(alpha) * int(vals[i]))
                              .astype(np.int64).astype(dt))
        else:
            dst.buf[de[i]] = reduce_combine(dt, red, dst.buf[de[i]], vals[i], alpha)


def checked_index(index, size, allow_negative):
    h = np.array(index, dtype=np.int64, copy=True)
    lo = -size if allow_negative else 0
    if np.any((h < lo) | (h >= size)):
        raise IndexError("index out of bounds")
    h[h < 0] += size
    return Dev.of(h)


# ---- ops (the host code) --------------------------------------------------------------------------


def gather(self_a, dim, index, allow_negative=False):
    s1 = as_1d(Dev.of(self_a))
    dim = dim % max(self_a.ndim, 1)
    res = Dev.of(np.zeros(index.shape, self_a.dtype))
    if index.size == 0:
        return res.numpy()
    idx = as_1d(checked_index(index, s1.sizes[dim], allow_negative))
    r1 = as_1d(res)
    g = make_geo(idx.sizes, dim, r1, False, 0, s1, True, s1.strides[dim] * s1.itemsize, None,
                 False, idx, True)
    index_kernel(g, r1, s1, None, idx, "assign")
    return res.numpy()


def scatter(self_a, dim, index, src_a, red, include_self=True, mean=False, value=None):
    dt = self_a.dtype
    t = Dev.of(self_a)  # inplace_target: a clone
    dim = dim % max(self_a.ndim, 1)
    t1 = as_1d(t)
    if index.size == 0:
        return t.numpy()
    idx = as_1d(checked_index(index, t1.sizes[dim], False))
    if src_a is not None:
        srcv = as_1d(Dev.of(src_a))
    else:
        srcv = expand_view(Dev.of(np.array(value, dtype=dt)), idx.sizes)

    def scatter_kernel(target, s, r):
        g = make_geo(idx.sizes, dim, target, True, target.strides[dim] * target.itemsize, s,
                     False, 0, idx, True, None, False)
        index_kernel(g, target, s, idx, None, r)

    if not include_self and red != "assign":
        ident = identity(mean and "add" or red, dt)
        scatter_kernel(t1, expand_view(Dev.of(np.array(ident, dtype=dt)), idx.sizes), "assign")
    scatter_kernel(t1, srcv, red)
    if not mean:
        return t.numpy()
    counts = Dev.of(np.full(t1.sizes, 1 if include_self else 0, np.int64))
    scatter_kernel(counts, expand_view(Dev.of(np.array(1, np.int64)), idx.sizes), "add")
    # divide_counts_kernel: walk t1, counts contiguous in the same order
    n = t1.numel()
    w = make_walk(t1.sizes, [t1])
    e = np.arange(n, dtype=np.int64)
    rem, ox = e.copy(), np.zeros(n, np.int64)
    for d in range(w["nd"] - 1, -1, -1):
        c = rem % w["sizes"][d]
        rem //= w["sizes"][d]
        ox += c * w["st"][0][d]
    xe = byte_to_elem(t1, ox)
    c = counts.buf
    for i in range(n):
        if c[i] == 0:
            continue
        if dt.kind in "iu":
            v = int(t1.buf[xe[i]])
            q = int(np.trunc(v / c[i])) if abs(v) < 2**52 else v // c[i]
            q = v // c[i] if v >= 0 else -((-v) // c[i])  # C++ truncating division
            t1.buf[xe[i]] = dt.type((q - 1) if (v % c[i] != 0 and v < 0) else q)
        else:
            A = opmath(dt)
            t1.buf[xe[i]] = dt.type(A(t1.buf[xe[i]]) / A(c[i]))
    return t.numpy()


def identity(red, dt):
    if red == "mul":
        return 1
    if red in ("max", "min"):
        if dt.kind in "iu":
            return np.iinfo(dt).min if red == "max" else np.iinfo(dt).max
        if dt == np.bool_:
            return red != "max"
        return -np.inf if red == "max" else np.inf
    return 0


def index_select(self_a, dim, index):
    s1 = as_1d(Dev.of(self_a))
    dim = dim % max(self_a.ndim, 1)
    idx = checked_index(index, s1.sizes[dim], False)
    idx = with_shape(idx, [idx.numel()])
    shape = list(s1.sizes)
    shape[dim] = idx.numel()
    res = Dev.of(np.zeros(shape, self_a.dtype))
    g = make_geo(shape, dim, res, False, 0, s1, True, s1.strides[dim] * s1.itemsize, None, False,
                 idx, False)
    index_kernel(g, res, s1, None, idx, "assign")
    out = res.numpy()
    return out.reshape(()) if self_a.ndim == 0 else out


def put_along_dim(target, dim, idx, source, red, alpha):
    t1, src1 = as_1d(target), as_1d(source)
    g = make_geo(src1.sizes, dim, t1, True, t1.strides[dim] * t1.itemsize, src1, False, 0, idx,
                 False, None, False)
    index_kernel(g, t1, src1, idx, None, red, alpha)


def index_add(self_a, dim, index, source_a, alpha, red="add", allow_negative=False):
    t = Dev.of(self_a)
    dim = dim % max(self_a.ndim, 1)
    idx = checked_index(index, as_1d(t).sizes[dim], allow_negative)
    put_along_dim(t, dim, with_shape(idx, [idx.numel()]), Dev.of(source_a), red, alpha)
    return t.numpy()


def index_fill(self_a, dim, index, value):
    t = Dev.of(self_a)
    s1 = as_1d(t)
    dim = dim % max(self_a.ndim, 1)
    idx = checked_index(index, s1.sizes[dim], True)
    idx = with_shape(idx, [idx.numel()])
    vshape = list(s1.sizes)
    vshape[dim] = idx.numel()
    v = Dev.of(np.array(value, dtype=self_a.dtype))
    put_along_dim(s1, dim, idx, expand_view(v, vshape), "assign", 1)
    return t.numpy()


def take(self_a, index):
    src = Dev.of(self_a)
    idx = checked_index(index, src.numel(), True)
    n = idx.numel()
    out = Dev.of(np.zeros(index.shape, self_a.dtype))
    if n == 0:
        return out.numpy()
    flat = with_shape(out, [n])
    sflat = Dev(src.buf, src.offset, [1], [0])
    g = make_geo([n], 0, flat, False, 0, sflat, True, src.itemsize, None, False,
                 with_shape(idx, [n]), False)
    index_kernel(g, flat, sflat, None, with_shape(idx, [n]), "assign")
    return out.numpy()


def advanced_index(self_t, indices):
    """make_advanced_index for integer index arrays (None: a full slice)."""
    per_dim = [None if i is None else np.asarray(i, np.int64) for i in indices]
    dims = [d for d, i in enumerate(per_dim) if i is not None]
    bshape = np.broadcast_shapes(*[per_dim[d].shape for d in dims])
    adjacent = (not dims) or dims[-1] - dims[0] + 1 == len(dims)
    pos = dims[0] if (adjacent and dims) else 0
    offsets = np.zeros(bshape, np.int64)
    rest_empty = any(self_t.sizes[d] == 0 and (d >= len(per_dim) or per_dim[d] is None)
                     for d in range(self_t.dim()))
    if offsets.size and not rest_empty:
        for d in dims:
            v = np.broadcast_to(per_dim[d], bshape)
            size = self_t.sizes[d]
            if np.any((v < -size) | (v >= size)):
                raise IndexError("index out of bounds")
            offsets = offsets + np.where(v < 0, v + size, v) * self_t.strides[d]
    sizes = [s for d, s in enumerate(self_t.sizes) if not (d < len(per_dim) and per_dim[d] is not None)]
    strides = [s for d, s in enumerate(self_t.strides) if not (d < len(per_dim) and per_dim[d] is not None)]
    result_shape = sizes[:pos] + list(bshape) + sizes[pos:]
    sizes.insert(pos, 1)
    strides.insert(pos, 0)
    src = Dev(self_t.buf, self_t.offset, sizes, strides)
    return dict(src=src, offsets=offsets.reshape(-1), bshape=list(bshape),
                result_shape=result_shape, pos=pos)


def transposed_dev(a):
    """a (2-d or more) held as the transpose of a contiguous buffer: strides reversed."""
    buf = np.ascontiguousarray(np.transpose(a)).reshape(-1)
    return Dev(buf, 0, list(a.shape), list(reversed(contig_strides(list(reversed(a.shape))))))


def index_get(self_a, indices, t=None):
    t = Dev.of(self_a) if t is None else t
    ai = advanced_index(t, indices)
    out = Dev.of(np.zeros(ai["result_shape"], self_a.dtype))
    count = ai["offsets"].size
    if count == 0 or out.numel() == 0:
        return out.numpy()
    fs = list(ai["src"].sizes)
    fs[ai["pos"]] = count
    res = with_shape(out, fs)
    offs = Dev.of(ai["offsets"])
    g = make_geo(fs, ai["pos"], res, False, 0, ai["src"], True, t.itemsize, None, False, offs,
                 False)
    index_kernel(g, res, ai["src"], None, offs, "assign")
    return out.numpy()


def index_put(self_a, indices, values_a, accumulate, t=None):
    t = Dev.of(self_a) if t is None else t
    ai = advanced_index(t, indices)
    count = ai["offsets"].size
    _vals = np.broadcast_to(values_a, ai["result_shape"])  # index_put_values
    if count == 0:
        return t.numpy()
    # index_put_source: vexp = expand_view(vals, result_shape)
    vdev = Dev.of(np.asarray(values_a))
    vexp = expand_view(vdev, ai["result_shape"])
    nb, pos = len(ai["bshape"]), ai["pos"]
    src_off = np.zeros(count, np.int64)
    ctr = [0] * nb
    cur = 0
    for j in range(count):
        src_off[j] = cur
        for d in range(nb - 1, -1, -1):
            st = vexp.strides[pos + d]
            ctr[d] += 1
            if ctr[d] < ai["bshape"][d]:
                cur += st
                break
            cur -= st * (ctr[d] - 1)
            ctr[d] = 0
    vst = [vexp.strides[d] for d in range(vexp.dim()) if d < pos or d >= pos + nb]
    vst.insert(pos, 0)
    vrest = Dev(vexp.buf, vexp.offset, ai["src"].sizes, vst)
    off = ai["offsets"]
    so = src_off
    if not accumulate:  # last write wins: keep the last occurrence of each offset
        seen, keep = set(), []
        for j in range(count - 1, -1, -1):
            if off[j] not in seen:
                seen.add(off[j])
                keep.append(j)
        if len(keep) < count:
            keep = keep[::-1]
            off, so = off[keep], so[keep]
    fs = list(ai["src"].sizes)
    fs[pos] = off.size
    offs, sod = Dev.of(off), Dev.of(so)
    g = make_geo(fs, pos, ai["src"], True, t.itemsize, vrest, True, t.itemsize, offs, False, sod,
                 False)
    index_kernel(g, t, vrest, offs, sod, "add" if accumulate else "assign")
    return t.numpy()


# ---- flag + scan ----------------------------------------------------------------------------------


def scan_nonzero(m, shape):
    mb = np.broadcast_to(m, shape).reshape(-1)
    flags = (mb != 0).astype(np.int64)
    pos = np.concatenate([[0], np.cumsum(flags)[:-1]]) if flags.size else flags  # ExclusiveSum
    count = int(pos[-1] + flags[-1]) if flags.size else 0
    return flags, pos, count


def masked_select(a, m):
    shape = np.broadcast_shapes(a.shape, m.shape)
    flags, pos, count = scan_nonzero(m, shape)
    out = np.full(count, 77, a.dtype)
    ab = np.broadcast_to(a, shape).reshape(-1)
    for e in RNG.permutation(flags.size):
        if flags[e]:
            out[pos[e]] = ab[e]
    return out


def masked_scatter(a, m, source):
    flags, pos, count = scan_nonzero(m, a.shape)
    if source.size < count:
        raise RuntimeError("source too small")
    out = a.copy().reshape(-1)
    src = source.reshape(-1)
    for e in RNG.permutation(flags.size):
        if flags[e]:
            out[e] = src[pos[e]]
    return out.reshape(a.shape)


def nonzero(a):
    flags, pos, count = scan_nonzero(a, a.shape)
    out = np.full((count, a.ndim), -1, np.int64)
    for e in RNG.permutation(flags.size):
        if flags[e] and a.ndim:
            rem = e
            for d in range(a.ndim - 1, -1, -1):
                out[pos[e], d] = rem % a.shape[d]
                rem //= a.shape[d]
    return out


def searchsorted(seq, vals, right):
    inner = seq.shape[-1]
    bd = seq.reshape(-1)
    vc = vals.reshape(-1)
    nv = vc.size
    per_row = max(nv, 1) if seq.ndim == 1 else max(vals.shape[-1], 1)
    out = np.empty(nv, np.int64)
    A = opmath(seq.dtype)
    for i in range(nv):
        row = 0 if seq.ndim == 1 else i // per_row
        x = A(vc[i])
        lo, hi = 0, inner
        while lo < hi:
            mid = lo + ((hi - lo) >> 1)
            mv = A(bd[row * inner + mid])
            go_right = (not (mv > x)) if right else (not (mv >= x))
            if go_right:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo
    return out.reshape(vals.shape)


# ---- the checks -----------------------------------------------------------------------------------


def same(g, w):
    g, w = np.asarray(g), np.asarray(w)
    if g.shape != w.shape:
        return False
    if w.dtype.kind == "f":
        return bool(np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-3 if w.dtype == np.float16 else 1e-6,
                                atol=2e-3 if w.dtype == np.float16 else 1e-6, equal_nan=True))
    return bool(np.array_equal(g, w))


def data(shape, dt):
    dt = np.dtype(dt)
    n = int(np.prod(shape)) if shape else 1
    if dt == np.bool_:
        return (RNG.integers(0, 2, n) == 1).reshape(shape)
    if dt.kind in "iu":
        return RNG.integers(0 if dt.kind == "u" else -4, 5, n).astype(dt).reshape(shape)
    return (RNG.integers(-8, 9, n) * 0.25).astype(dt).reshape(shape)


DTS = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8,
       np.bool_]


def unique_rows_index(shape_idx, size, dim, rng):
    """An index of shape_idx whose values along `dim` never repeat (for plain stores)."""
    idx = np.empty(shape_idx, np.int64)
    it = np.ndindex(*[s for d, s in enumerate(shape_idx) if d != dim])
    for rest in it:
        perm = rng.permutation(size)[: shape_idx[dim]]
        sl = list(rest)
        sl.insert(dim, slice(None))
        idx[tuple(sl)] = perm
    return idx


def main():
    rep = Report("indexing_ops.cu")
    rng = RNG
    for dt in DTS:
        dtn = np.dtype(dt).name
        # gather / take_along_dim (negatives)
        for shape, dim, ishape in (((5, 6), 0, (3, 6)), ((5, 6), 1, (5, 4)), ((4, 3, 5), 1, (2, 2, 3)),
                                   ((4, 3, 5), -1, (4, 3, 7)), ((7,), 0, (10,)), ((), 0, ())):
            a = data(shape, dt)
            size = a.shape[dim] if a.ndim else 1
            idx = rng.integers(0, size, ishape)
            want = ember.gather(to_ember(a), dim, to_ember(idx)).numpy()
            rep.check(same(gather(a, dim, idx), want), f"gather {dtn} {shape} dim={dim} {ishape}")
            nidx = idx - size * rng.integers(0, 2, ishape)
            if a.ndim and all(i == s for d, (i, s) in enumerate(zip(ishape, shape))
                              if d != dim % a.ndim):
                want = ember.take_along_dim(to_ember(a), to_ember(nidx), dim).numpy()
                rep.check(same(gather(a, dim, nidx, True), want),
                          f"take_along_dim {dtn} {shape} dim={dim}")
        # scatter / scatter_add / scatter_reduce
        for shape, dim, ishape in (((5, 6), 0, (3, 6)), ((5, 6), 1, (5, 4)), ((4, 3, 5), 1, (2, 2, 3)),
                                   ((7,), 0, (12,)), ((3, 4), 0, (0, 4))):
            a = data(shape, dt)
            size = a.shape[dim]
            idx = rng.integers(0, size, ishape)  # duplicates
            src = data(ishape, dt)
            x, xi, xs = to_ember(a), to_ember(idx), to_ember(src)
            if dt != np.bool_:
                rep.check(same(scatter(a, dim, idx, src, "add"), x.scatter_add(dim, xi, xs).numpy()),
                          f"scatter_add {dtn} {shape} dim={dim}")
                rep.check(same(scatter(a, dim, idx, src, "mul"),
                               x.scatter(dim, xi, xs, reduce="multiply").numpy()),
                          f"scatter multiply {dtn} {shape}")
            for red, ered in (("sum", "add"), ("prod", "mul"), ("amax", "max"), ("amin", "min"),
                              ("mean", "add")):
                if dt == np.bool_ and red in ("sum", "mean", "prod"):
                    continue
                for inc in (True, False):
                    try:
                        want = x.scatter_reduce(dim, xi, xs, red, include_self=inc).numpy()
                    except Exception:
                        continue
                    got = scatter(a, dim, idx, src, ered, inc, red == "mean")
                    rep.check(same(got, want), f"scatter_reduce {red} inc={inc} {dtn} {shape} dim={dim}: {got.ravel()[:6]} vs {want.ravel()[:6]}")
            # plain scatter: unique targets per row
            if ishape[dim] <= size and 0 not in ishape:
                uidx = unique_rows_index(ishape, size, dim, rng)
                want = x.scatter(dim, to_ember(uidx), xs).numpy()
                rep.check(same(scatter(a, dim, uidx, src, "assign"), want), f"scatter {dtn} {shape}")
                want = x.scatter(dim, to_ember(uidx), 1).numpy()
                rep.check(same(scatter(a, dim, uidx, None, "assign", value=1), want),
                          f"scatter value {dtn} {shape}")
        # index_select / index_add / index_copy / index_fill
        for shape, dim, k in (((5, 6), 0, 7), ((5, 6), 1, 3), ((4, 3, 5), 2, 6), ((7,), 0, 9),
                              ((), 0, 1)):
            a = data(shape, dt)
            size = a.shape[dim] if a.ndim else 1
            idx = rng.integers(0, size, k)
            x, xi = to_ember(a), to_ember(idx)
            rep.check(same(index_select(a, dim, idx), x.index_select(dim, xi).numpy()),
                      f"index_select {dtn} {shape} dim={dim}")
            sshape = list(a.shape)
            if a.ndim:
                sshape[dim] = k
            src = data(sshape if a.ndim else (k,) if k > 1 else (), dt)
            if a.ndim == 0:
                continue
            for alpha in ((1, 3) if dt != np.bool_ else (1,)):
                want = x.index_add(dim, xi, to_ember(src), alpha=alpha).numpy()
                rep.check(same(index_add(a, dim, idx, src, alpha), want),
                          f"index_add alpha={alpha} {dtn} {shape} dim={dim}")
            if k <= size:
                uidx = rng.permutation(size)[:k]
                want = x.index_copy(dim, to_ember(uidx), to_ember(src)).numpy()
                rep.check(same(index_add(a, dim, uidx, src, 1, "assign"), want),
                          f"index_copy {dtn} {shape} dim={dim}")
            nidx = idx - size * rng.integers(0, 2, k)
            y = to_ember(a)
            y.index_fill_(dim, to_ember(nidx), 1)
            rep.check(same(index_fill(a, dim, nidx, 1), y.numpy()), f"index_fill {dtn} {shape}")
        # take
        a = data((4, 5), dt)
        idx = rng.integers(-20, 20, (3, 4))
        rep.check(same(take(a, idx), ember.take(to_ember(a), to_ember(idx)).numpy()), f"take {dtn}")
        # advanced indexing: get and put (accumulate with duplicates; assign, last write wins)
        a = data((4, 5, 6), dt)
        cases = [
            [rng.integers(-4, 4, (3,))],
            [None, rng.integers(0, 5, (2, 3))],
            [rng.integers(0, 4, (3,)), None, rng.integers(0, 6, (3,))],  # non-adjacent: front
            [rng.integers(0, 4, (2, 1)), rng.integers(0, 5, (1, 3))],
            [None, None, rng.integers(-6, 6, (5,))],
            [np.array([0, 1, 1, 3, 0]), np.array([2, 2, 2, 4, 2])],  # repeated positions
        ]
        for ind in cases:
            x = to_ember(a)
            key = tuple(slice(None) if i is None else to_ember(i) for i in ind)
            want = x[key].numpy()
            rep.check(same(index_get(a, ind), want), f"index get {dtn} {[None if i is None else i.shape for i in ind]}")
            res_shape = want.shape
            for acc in (False, True):
                if acc and dt == np.bool_:
                    continue
                for vshape in (res_shape, res_shape[-1:], ()):
                    v = data(vshape, dt)
                    y = to_ember(a)
                    y.index_put_([None if i is None else to_ember(i) for i in ind], to_ember(v),
                                 accumulate=acc)
                    got = index_put(a, ind, v, acc)
                    rep.check(same(got, y.numpy()), f"index_put acc={acc} {dtn} v{vshape} {[None if i is None else i.shape for i in ind]}")
                    # self a non-contiguous view (the kernel walks its strides)
                    td = transposed_dev(a)
                    got = index_put(a, ind, v, acc, td)
                    rep.check(same(td.numpy(), y.numpy()), f"index_put strided self acc={acc} {dtn}")
            rep.check(same(index_get(a, ind, transposed_dev(a)), want), f"index get strided self {dtn}")
        # masked_select / masked_scatter_ / masked_fill_ / nonzero
        for shape, mshape in (((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 1, 4), (2, 4)), ((6,), (6,)),
                              ((), ())):
            a = data(shape, dt)
            m = rng.integers(0, 2, mshape).astype(bool)
            x, xm = to_ember(a), to_ember(m)
            rep.check(same(masked_select(a, m), ember.masked_select(x, xm).numpy()),
                      f"masked_select {dtn} {shape} {mshape}")
            if np.broadcast_shapes(shape, mshape) == tuple(shape):
                src = data((int(np.prod(shape)) + 2,) if shape else (2,), dt)
                y = to_ember(a)
                y.masked_scatter_(xm, to_ember(src))
                rep.check(same(masked_scatter(a, m, src), y.numpy()), f"masked_scatter {dtn} {shape}")
            rep.check(same(nonzero(a), ember.nonzero(x).numpy()), f"nonzero {dtn} {shape}")
    # searchsorted (NaN in values and boundaries)
    for dt in (np.float32, np.float64, np.float16, np.int64, np.int32):
        for seq_shape, v_shape in (((9,), (7,)), ((3, 9), (3, 5)), ((9,), ())):
            seq = np.sort(data(seq_shape, dt), axis=-1)
            vals = data(v_shape, dt)
            if np.dtype(dt).kind == "f" and vals.size > 1:
                vals.reshape(-1)[0] = np.nan
            for right in (False, True):
                want = ember.searchsorted(to_ember(seq), to_ember(vals), right=right).numpy()
                rep.check(same(searchsorted(seq, vals, right), want),
                          f"searchsorted {np.dtype(dt).name} {seq_shape} {v_shape} right={right}")
    # the CAS lanes: every byte position of a word, 1- and 2-byte types
    for dt in (np.float16, np.int8, np.uint8, np.int16, np.bool_):
        buf = data((13,), dt).reshape(-1)
        want = buf.copy()
        for e in range(buf.size):
            y = buf.dtype.type(1)
            atomic_update_small(buf, e, lambda x: reduce_combine(np.dtype(dt), "add", x, y, 1))
            want[e] = reduce_combine(np.dtype(dt), "add", want[e], y, 1)
        rep.check(same(buf, want), f"CAS lanes {np.dtype(dt).name}")
    return rep.close()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
