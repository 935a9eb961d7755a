"""Emulation of packages/core/csrc/cuda/elementwise.cuh, the engine of pointwise_ops.cu,
pointwise_binary_ops.cu and tensor_ops.cu: launch_elementwise / launch_piece (the int32 fit
check and the cuts along the outermost dim, the contiguous decision with stride-0 inputs read
once, the 16-byte vector alignment check, nvec / tail threads), ew_contig_kernel (vector t and
tail element nvec * VEC + t per thread), ew_strided_kernel with OffsetCalc and IntDivider.

Checks, over plans (shape outer -> inner, byte strides per operand, base addresses) like the
TensorIterator's, including broadcast (stride 0), transposed, sliced, overlapping-free
non-contiguous, host-scalar inputs, misaligned bases and plans past 2^31 elements / bytes:
  - IntDivider.div == floor division for divisors and dividends below 2^31 (random and edges);
  - every output element is written exactly once, at the right byte offset, from the right input
    bytes (small plans: all elements; huge plans: the cut pieces tile the index space, each fits
    int32, and random elements' offsets through their piece equal the plan's);
  - the vector path only touches 16-byte-aligned (VEC * item) addresses and every offset
    computed in int32 stays in int32.
Run: python3 elementwise.py  (no ember build needed)"""

from __future__ import annotations

import sys

import numpy as np

K_BLOCK = 256
K_MAX_DIMS = 25
K_INDEX_LIMIT = 2**31 - 1
HOST_SCALAR, MEMORY, BROADCAST = 1, 0, 2


class Fail(AssertionError):
    pass


# ---- IntDivider --------------------------------------------------------------------------------


def divider(d):
    shift = 0
    while shift < 32 and (1 << shift) < d:
        shift += 1
    magic = ((1 << 32) * ((1 << shift) - d)) // d + 1
    assert magic < (1 << 32), (d, magic)  # static_cast<uint32_t> must not truncate
    return d, magic, shift


def div(dv, n):
    d, magic, shift = dv
    n = np.asarray(n, dtype=np.uint64)
    t = (n * np.uint64(magic)) >> np.uint64(32)
    s = t + n
    assert np.all(s < (1 << 32)), "t + n overflows uint32"
    return (s >> np.uint64(shift)).astype(np.int64)


def check_divider(rng):
    ds = list(range(1, 300)) + [2**k + e for k in range(9, 31) for e in (-1, 0, 1)] + \
        list(rng.integers(1, 2**31 - 1, 300))
    ds = [d for d in ds if 1 <= d <= 2**31 - 1]
    bad = 0
    for d in ds:
        dv = divider(int(d))
        ns = np.concatenate([np.arange(0, 2000), rng.integers(0, 2**31 - 1, 3000),
                             np.array([2**31 - 1, 2**31 - 2, d - 1, d, d + 1, 2 * d - 1,
                                       (2**31 - 1) // d * d, (2**31 - 1) // d * d - 1])])
        ns = ns[(ns >= 0) & (ns <= 2**31 - 1)].astype(np.uint64)
        got = div(dv, ns)
        want = (ns // np.uint64(d)).astype(np.int64)
        bad += int(np.sum(got != want))
    return bad, len(ds)


# ---- launch_piece -------------------------------------------------------------------------------


def vec_size(items):
    return min(16 // max(items), 8)


class Piece:
    def __init__(self, shape, ptr, strides):
        self.shape, self.ptr, self.strides = list(shape), list(ptr), [list(s) for s in strides]


def plan_pieces(shape, ptrs, strides, items, modes, pieces, launches):
    """launch_piece's recursion: appends the launched pieces with their kernel decisions."""
    p = Piece(shape, ptrs, strides)
    nops = len(items)
    nd = len(p.shape)
    numel = int(np.prod(p.shape)) if nd else 1
    if numel == 0:
        return
    fits = numel <= K_INDEX_LIMIT and nd <= K_MAX_DIMS
    for k in range(nops):
        if not fits:
            break
        if k > 0 and modes[k - 1] == HOST_SCALAR:
            continue
        span = items[k] + sum((p.shape[d] - 1) * abs(p.strides[k][d]) for d in range(nd))
        fits = span <= K_INDEX_LIMIT
    if not fits:
        def sub(begin, length, drop):
            q_ptr = [p.ptr[k] + begin * p.strides[k][0] for k in range(nops)]
            q_str = [s[1:] if drop else list(s) for s in p.strides]
            q_shape = p.shape[1:] if drop else [length] + p.shape[1:]
            plan_pieces(q_shape, q_ptr, q_str, items, modes, pieces, launches)
        outer = p.shape[0]
        if nd > K_MAX_DIMS or outer == 1:
            if outer > 10000:
                raise Fail(f"{outer} launches for one dim")
            for i in range(outer):
                sub(i, 1, True)
        else:
            mid = outer // 2
            if mid > 256:
                mid -= mid % 128
            sub(0, mid, False)
            sub(mid, outer - mid, False)
        return
    a_modes = list(modes)
    n = numel
    contig = nd <= 1
    if contig and nd == 1:
        contig = p.strides[0][0] == items[0]
        for k in range(nops - 1):
            if not contig:
                break
            if a_modes[k] == HOST_SCALAR:
                continue
            s = p.strides[k + 1][0]
            if s == 0:
                a_modes[k] = BROADCAST
            else:
                contig = s == items[k + 1]
    launches.append(1)
    if contig:
        vec = vec_size(items)
        aligned = p.ptr[0] % (vec * items[0]) == 0
        for k in range(nops - 1):
            if a_modes[k] == MEMORY:
                aligned = aligned and p.ptr[k + 1] % (vec * items[k + 1]) == 0
        nvec = n // vec if aligned else 0
        threads = max(nvec, n - nvec * vec)
        pieces.append(("contig", p, a_modes, vec, nvec, n, threads))
    else:
        a_modes = [MEMORY if m == BROADCAST else m for m in a_modes]
        if nd > K_MAX_DIMS:
            raise Fail("OffsetCalc with too many dims")
        for k in range(nops):
            for d in range(nd):
                # static_cast<int32_t>: harmless for a dim of size 1 (its index is 0)
                if p.shape[d] > 1 and not (-(2**31) <= p.strides[k][d] <= 2**31 - 1):
                    raise Fail("stride does not fit int32")
        pieces.append(("strided", p, a_modes, None, None, n, n))


def contig_offsets(piece):
    """The (element index, per-operand byte offset from the piece base) pairs the contiguous
    kernel's threads touch, and the vector accesses' addresses (for the alignment check)."""
    _, p, modes, vec, nvec, n, threads = piece
    nb = min(max((threads + K_BLOCK - 1) // K_BLOCK, 1), 1 << 30)
    t = np.arange(nb * K_BLOCK, dtype=np.int64)
    vt = t[t < nvec]
    elems_v = (vt[:, None] * vec + np.arange(vec)[None, :]).ravel()
    i = nvec * vec + t
    tail = i[i < n]
    return np.concatenate([elems_v, tail]), vt


def strided_offsets(piece, elems):
    """OffsetCalc.get over linear indices elems (int32 arithmetic checked)."""
    _, p, modes, _, _, n, _ = piece
    nd = len(p.shape)
    nops = len(p.strides)
    off = np.zeros((nops, elems.size), dtype=np.int64)
    lin = elems.astype(np.uint64)
    for d in range(nd):
        src = nd - 1 - d
        dv = divider(p.shape[src])
        q = div(dv, lin)
        r = lin.astype(np.int64) - q * dv[0]
        for k in range(nops):
            off[k] += r * p.strides[k][src]
            if off[k].size and (off[k].max() > 2**31 - 1 or off[k].min() < -(2**31)):
                raise Fail("OffsetCalc int32 overflow")
        lin = q.astype(np.uint64)
    return off


def expected_offsets(shape, strides_k, elems):
    """Byte offset of row-major linear indices elems over shape (python ints, any size)."""
    off = np.zeros(elems.size, dtype=object)
    rem = elems.astype(object)
    for d in range(len(shape) - 1, -1, -1):
        off = off + (rem % shape[d]) * strides_k[d]
        rem = rem // shape[d]
    return off


def run_plan(name, shape, strides, items, modes, bases, rng, full=True, fails=None):
    """Emulates launch_elementwise over one plan; checks coverage and offsets."""
    pieces, launches = [], []
    try:
        plan_pieces(shape, bases, strides, items, modes, pieces, launches)
        total = int(np.prod(shape)) if shape else 1
        # Each piece: its base pointers are the plan's at some multi-index; recover the linear
        # range by walking pieces in order (the recursion emits them in row-major order).
        got_total = sum(pc[5] for pc in pieces)
        if got_total != total:
            raise Fail(f"pieces cover {got_total} of {total} elements")
        start = 0
        seen_out = {} if full else None
        for pc in pieces:
            kind, p = pc[0], pc[1]
            n = pc[5]
            if full or n <= 4096:
                elems = None
                if kind == "contig":
                    elems, vt = contig_offsets(pc)
                    if np.unique(elems).size != elems.size or elems.size != n:
                        raise Fail(f"contig kernel covers {np.unique(elems).size} of {n} "
                                   f"(dups {elems.size - np.unique(elems).size})")
                    vec = pc[3]
                    if vt.size:
                        if p.ptr[0] % (vec * items[0]):
                            raise Fail("misaligned vector store")
                        for k in range(len(items) - 1):
                            if pc[2][k] == MEMORY and p.ptr[k + 1] % (vec * items[k + 1]):
                                raise Fail("misaligned vector load")
                    offs = []
                    for k in range(len(items)):
                        if k > 0 and pc[2][k - 1] in (HOST_SCALAR, BROADCAST):
                            offs.append(np.zeros(elems.size, dtype=np.int64))
                        else:
                            o = elems * items[k]
                            if o.size and o.max() > 2**31 - 1:
                                raise Fail("contig int32 offset overflow")
                            offs.append(o)
                    offs = np.array(offs)
                else:
                    elems = np.arange(n, dtype=np.int64)
                    offs = strided_offsets(pc, elems)
            else:
                elems = rng.integers(0, n, 64).astype(np.int64)
                if kind == "contig":
                    offs = np.array([elems * items[k] if not (k > 0 and pc[2][k - 1] in
                                                              (HOST_SCALAR, BROADCAST))
                                     else 0 * elems for k in range(len(items))])
                else:
                    offs = strided_offsets(pc, elems)
            # the global linear index of each element: start + its index in the piece (pieces
            # are row-major blocks of the plan), compared with the plan's byte offsets
            glob = start + elems
            for k in range(len(items)):
                if k > 0 and modes[k - 1] == HOST_SCALAR:
                    continue
                want = expected_offsets(shape, strides[k], glob.astype(object)) + bases[k]
                got = offs[k].astype(object) + p.ptr[k]
                if k > 0 and pc[2][k - 1] == BROADCAST:
                    # read once from the piece base: every element's plan offset must equal it
                    got = np.full(elems.size, p.ptr[k], dtype=object)
                if not np.array_equal(np.asarray(got, dtype=object), np.asarray(want,
                                                                                  dtype=object)):
                    raise Fail(f"operand {k}: offsets differ from the plan's")
            if seen_out is not None:
                for o in (offs[0] + p.ptr[0]).tolist():
                    if o in seen_out:
                        raise Fail("an output element written twice")
                    seen_out[o] = 1
            start += n
        if seen_out is not None and len(seen_out) != total:
            raise Fail(f"{len(seen_out)} of {total} output elements written")
        return len(pieces)
    except Fail as e:
        fails.append(f"{name}: {e}")
        print(f"FAIL {name}: {e}")
        return 0


def plans(rng):
    """(name, shape, strides (bytes), items, modes, bases, full)."""
    P = []
    # small plans: contiguous (aligned / misaligned), broadcast, scalars, transposed, strided
    for items in ((4, 4), (2, 2), (1, 8), (8, 4, 4), (2, 1, 2), (1, 1, 1, 1)):
        nin = len(items) - 1
        for n in (1, 7, 8, 255, 257, 1000, 4099):
            for shift in (0, 1):
                bases = [4096 + (shift * items[0] if k == 0 else 0) for k in range(len(items))]
                strides = [[it] for it in items]
                P.append((f"contig n={n} items={items} shift={shift}", [n], strides, items,
                          [MEMORY] * nin, bases, True))
                st = [[items[0]]] + [[0] if k == 0 else [items[k + 1]] for k in range(nin)]
                P.append((f"bcast n={n} items={items}", [n], st, items, [MEMORY] * nin,
                          [8192] * len(items), True))
                md = [HOST_SCALAR] + [MEMORY] * (nin - 1)
                st = [[items[0]]] + [[0] if k == 0 else [items[k + 1]] for k in range(nin)]
                P.append((f"scalar n={n} items={items}", [n], st, items, md,
                          [0] + [64] * nin, True))
        for shape in ((3, 5), (7, 1, 9), (2, 3, 4, 5), (33, 65)):
            nd = len(shape)
            cst = [int(np.prod(shape[d + 1:])) for d in range(nd)]
            strides = []
            for k, it in enumerate(items):
                if k == 0:
                    strides.append([c * it for c in cst])
                elif k == 1:  # transposed input
                    rev = [int(np.prod(shape[:d])) for d in range(nd)]
                    strides.append([c * it for c in rev])
                else:  # broadcast along dim 0, sliced with step 3 along the last
                    s = [c * it * 3 for c in cst]
                    s[0] = 0
                    strides.append(s)
            P.append((f"strided {shape} items={items}", list(shape), strides, items,
                      [MEMORY] * nin, [1 << 20] * len(items), True))
    # 26 dims of size 2 (past kMaxDims): cut into single indices of the outermost dim
    shape = [2] * 26
    cst = [2 ** (25 - d) for d in range(26)]
    P.append(("26 dims", shape, [[c * 4 for c in cst], [c * 4 for c in reversed(cst)]], (4, 4),
              [MEMORY], [0, 0], False))
    # huge plans (past 2^31 elements or bytes): checked on samples
    n = 3 * 2**30 + 77
    P.append(("huge contiguous float", [n], [[4], [4]], (4, 4), [MEMORY], [0, 0], False))
    P.append(("huge contiguous byte->double", [n], [[8], [1]], (8, 1), [MEMORY], [0, 0], False))
    P.append(("huge broadcast 2d", [70000, 40000], [[160000, 4], [0, 4]], (4, 4), [MEMORY],
              [0, 0], False))
    P.append(("huge transposed", [300, 2000000], [[8000000, 4], [4, 1200]], (4, 4), [MEMORY],
              [0, 0], False))
    P.append(("rows of 2^31 bytes", [3, 2**29 + 5], [[4 * (2**29 + 5) + 64, 4], [0, 4]],
              (4, 4), [MEMORY], [0, 0], False))
    P.append(("inner stride past int32", [5, 3], [[4, 2**31 + 4], [4, 2**31 + 4]], (4, 4),
              [MEMORY], [0, 0], True))
    return P


def main():
    rng = np.random.default_rng(7)
    fails = []
    bad, nd = check_divider(rng)
    if bad:
        fails.append(f"IntDivider: {bad} wrong quotients")
    n_pieces = 0
    P = plans(rng)
    for name, shape, strides, items, modes, bases, full in P:
        n_pieces += run_plan(name, shape, strides, items, modes, bases, rng, full, fails)
    print(f"elementwise: {len(P)} plans ({n_pieces} launches), {nd} divisors, "
          f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
