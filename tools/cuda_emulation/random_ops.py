"""Emulation of packages/core/csrc/cuda/random_ops.cu: the device Philox4x32-10 (32-bit lanes,
__umulhi), random_kernel's counters (thread c of the launch uses counter base + c, `per` values
per counter, the last counter partly used), the reservation from the generator, and every fill
(uniform, exponential, normal by Box-Muller, random_ integers narrow and wide, bernoulli with a
scalar or a tensor p, multinomial with and without replacement). Each is compared with ember's CPU
kernel drawing from the same explicit Generator state (the CPU kernels use the same counter layout),
so the GPU stream equals the CPU stream for a given seed.

    python3 tools/cuda_emulation/random_ops.py
"""

from __future__ import annotations

import sys

import numpy as np
from common import Report, ember

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
MASK32 = np.uint64(0xFFFFFFFF)
ORIGINAL_U1 = "--original" in sys.argv


def philox(seed, counters):
    """philox(seed, counter) of random_ops.cu for an array of counters: 4 words each."""
    counters = np.asarray(counters, dtype=np.uint64)
    k0 = np.uint32(seed & 0xFFFFFFFF)
    k1 = np.uint32((seed >> 32) & 0xFFFFFFFF)
    c0 = (counters & MASK32).astype(np.uint32)
    c1 = (counters >> np.uint64(32)).astype(np.uint32)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = M0 * c0.astype(np.uint64)
            p1 = M1 * c2.astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), (p0 & MASK32).astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), (p1 & MASK32).astype(np.uint32)
            n0 = hi1 ^ c1 ^ k0
            n2 = hi0 ^ c3 ^ k1
            c0, c1, c2, c3 = n0, lo1, n2, lo0
            k0 = np.uint32(k0 + W0)
            k1 = np.uint32(k1 + W1)
    return np.stack([c0, c1, c2, c3], axis=1)


def u53(hi, lo):
    v = ((hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)) >> np.uint64(11)
    return v.astype(np.float64) * (1.0 / 9007199254740992.0)


def random_kernel(n, per, seed, base, fill):
    """random_kernel: counters c = 0 .. ceil(n / per) - 1 (grid-stride), values [c*per, +cnt)."""
    counters = (n + per - 1) // per
    w = philox(seed, np.uint64(base) + np.arange(counters, dtype=np.uint64))
    out = [None] * n
    for c in range(counters):
        first = c * per
        cnt = min(per, n - first)
        fill(out, first, cnt, w[c])
    return out


def fill_uniforms(T, f):
    def fill(o, first, cnt, w):
        if T == np.float64:
            for j in range(cnt):
                o[first + j] = f(u53(w[2 * j:2 * j + 1], w[2 * j + 1:2 * j + 2])[0])
        else:
            digits = 11 if T == np.float16 else 24
            scale = 1.0 / float(1 << digits)
            for j in range(cnt):
                o[first + j] = np.float32(f(float(w[j] >> np.uint32(32 - digits)) * scale)).astype(T) \
                    if T == np.float16 else T(f(float(w[j] >> np.uint32(32 - digits)) * scale))
    return fill


def normal_fill(T, mean, std):
    def fill(o, first, cnt, w):
        if T == np.float64:
            u1 = 1.0 - u53(w[0:1], w[1:2])[0]
            u2 = u53(w[2:3], w[3:4])[0]
            r = np.sqrt(-2.0 * np.log(u1))
            c, s = np.cos(2 * np.pi * u2), np.sin(2 * np.pi * u2)
            o[first] = mean + std * r * c
            if cnt > 1:
                o[first + 1] = mean + std * r * s
            return
        m, sd = np.float32(mean), np.float32(std)
        for p in range(2):
            if 2 * p >= cnt:
                break
            if ORIGINAL_U1:  # before the fix: (k + 1) / 2^24
                u1 = np.float32((w[2 * p] >> np.uint32(8)) + 1) * np.float32(1.0 / 16777216.0)
            else:  # 1 - k / 2^24, the CPU's u1
                u1 = np.float32(1.0) - np.float32(w[2 * p] >> np.uint32(8)) * np.float32(1.0 / 16777216.0)
            u2 = np.float32(w[2 * p + 1] >> np.uint32(8)) * np.float32(1.0 / 16777216.0)
            r = np.sqrt(np.float32(-2.0) * np.log(u1))
            c = np.float32(np.cos(2 * np.pi * np.float64(u2)))
            s = np.float32(np.sin(2 * np.pi * np.float64(u2)))
            o[first + 2 * p] = T(m + sd * r * c)
            if 2 * p + 1 < cnt:
                o[first + 2 * p + 1] = T(m + sd * r * s)
    return fill


def int_to(T, v):
    if T == np.bool_:
        return v != 0
    if np.dtype(T).kind in "iu":
        return np.array(v, dtype=np.int64).astype(T)
    return T(float(v))


def random_int_fill(T, frm, rng_):
    wide = rng_ == 0 or rng_ > (1 << 32)

    def fill(o, first, cnt, w):
        for j in range(cnt):
            if wide:
                r = (int(w[2 * j]) << 32) | int(w[2 * j + 1])
                if rng_:
                    r %= rng_
            else:
                r = int(w[j]) % rng_
            v = ((frm + r) & ((1 << 64) - 1))
            v = v - (1 << 64) if v >= (1 << 63) else v
            o[first + j] = int_to(T, v)
    return fill, (2 if wide else 4)


def bernoulli_fill(T, p, pv):
    def fill(o, first, cnt, w):
        for j in range(cnt):
            prob = p[first + j] if p is not None else pv
            o[first + j] = int_to(T, 1 if u53(w[2 * j:2 * j + 1], w[2 * j + 1:2 * j + 2])[0] < prob else 0)
    return fill


def multinomial(probs, num_samples, replacement, seed, base):
    rows, ncat = probs.shape
    out = np.empty((rows, num_samples), np.int64)
    per_row = num_samples if replacement else ncat

    def draw(r, k):
        d = r * per_row + k
        w = philox(seed, [np.uint64(base + d // 2)])[0]
        o = (d % 2) * 2
        return u53(w[o:o + 1], w[o + 1:o + 2])[0]

    for r in range(rows):
        row = probs[r]
        if replacement:
            acc = np.cumsum(row)  # sequential adds, as the kernel
            s = 0.0
            for c in range(ncat):
                s += row[c]
                acc[c] = s
            total = acc[-1]
            for k in range(num_samples):
                u = draw(r, k) * total
                lo, hi = 0, ncat
                while lo < hi:
                    mid = lo + ((hi - lo) >> 1)
                    if acc[mid] > u:
                        hi = mid
                    else:
                        lo = mid + 1
                c = lo
                while c > 0 and (c >= ncat or row[c] == 0.0):
                    c -= 1
                out[r, k] = c
        else:
            acc = np.empty(ncat)
            for c in range(ncat):
                e = -np.log1p(-draw(r, c))
                acc[c] = e / row[c] if row[c] > 0.0 else np.inf
            for k in range(num_samples):
                best = -1
                for c in range(ncat):
                    if acc[c] != acc[c]:
                        continue
                    if best < 0 or acc[c] < acc[best]:
                        best = c
                out[r, k] = best
                acc[best] = np.nan
    return out


# ---- checks -----------------------------------------------------------------------------------

EDT = {np.float32: ember.float32, np.float64: ember.float64, np.float16: ember.float16,
       np.int64: ember.int64, np.int32: ember.int32, np.uint8: ember.uint8, np.int8: ember.int8,
       np.bool_: ember.bool}


def cpu_draw(seed, offset, make):
    g = ember.Generator()
    g.manual_seed(seed)
    if offset:
        ember.empty(offset * 2, dtype=ember.float64).uniform_(generator=g)  # advance by `offset`
    return make(g)


def main():
    rep = Report("random_ops.cu")
    seed = 0x1234_5678_9ABC
    # the device Philox against the host's (core/generator.h, through a CPU uniform_ of doubles:
    # value 2c and 2c+1 are the two 53-bit draws of counter c)
    g = ember.Generator()
    g.manual_seed(seed)
    host = ember.empty(64, dtype=ember.float64).uniform_(generator=g).numpy()
    w = philox(seed, np.arange(32, dtype=np.uint64))
    dev = np.stack([u53(w[:, 0], w[:, 1]), u53(w[:, 2], w[:, 3])], axis=1).reshape(-1)
    rep.check(np.array_equal(host, dev), "philox words (uniform float64 stream)")
    for n in (1, 3, 4, 5, 1023, 1025):
        for T in (np.float32, np.float64, np.float16):
            per = 2 if T == np.float64 else 4
            for (a, b) in ((0.0, 1.0), (-3.0, 5.0)):
                got = np.array(random_kernel(n, per, seed, 0, fill_uniforms(T, lambda u, a=a, b=b: a + (b - a) * u)), dtype=T)
                want = cpu_draw(seed, 0, lambda g: ember.empty(n, dtype=EDT[T]).uniform_(a, b, generator=g).numpy())
                rep.check(np.array_equal(got, want), f"uniform_ {np.dtype(T).name} n={n} [{a},{b})")
                rep.check(bool(np.all((got >= a) & (got < b)) or T == np.float16), f"uniform range {np.dtype(T).name}")
            got = np.array(random_kernel(n, per, seed, 0, fill_uniforms(T, lambda u: -np.log1p(-u) / 2.0)), dtype=T)
            want = cpu_draw(seed, 0, lambda g: ember.empty(n, dtype=EDT[T]).exponential_(2.0, generator=g).numpy())
            rep.check(np.allclose(got, want, rtol=1e-6 if T != np.float16 else 1e-3), f"exponential_ {np.dtype(T).name} n={n}")
            got = np.array(random_kernel(n, per, seed, 0, normal_fill(T, 1.5, 2.0)), dtype=T)
            want = cpu_draw(seed, 0, lambda g: ember.empty(n, dtype=EDT[T]).normal_(1.5, 2.0, generator=g).numpy())
            rtol = {np.float64: 1e-12, np.float32: 2e-5, np.float16: 2e-3}[T]
            ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol * 10)
            rep.check(ok, f"normal_ {np.dtype(T).name} n={n}: {got[:4]} vs {want[:4]}")
            rep.check(bool(np.all(np.isfinite(got))), f"normal finite {np.dtype(T).name}")
        for T in (np.int64, np.int32, np.uint8, np.int8, np.bool_, np.float32):
            for frm, to in ((0, 10), (-5, 3), (0, None), (-(1 << 40), 1 << 40)):
                if T != np.int64 and (to is None or abs(frm) > 100):
                    continue
                if T == np.uint8 and frm < 0:
                    continue
                # random_range: to - from, else the dtype's max - from + 1 (int64: 2^63 - from)
                rng_ = (to - frm) if to is not None else ((1 << 63) - frm) % (1 << 64)
                if T == np.bool_:
                    frm, to, rng_ = 0, 2, 2
                fill, per = random_int_fill(T, frm, rng_)
                got = np.array(random_kernel(n, per, seed, 0, fill), dtype=T)
                want = cpu_draw(seed, 0, lambda g: (ember.empty(n, dtype=EDT[T]).random_(frm, to, generator=g) if to is not None
                                                    else ember.empty(n, dtype=EDT[T]).random_(generator=g)).numpy())
                rep.check(np.array_equal(got, want), f"random_ {np.dtype(T).name} [{frm},{to}) n={n}")
        for T in (np.float32, np.float64, np.int64, np.bool_):
            got = np.array(random_kernel(n, 2, seed, 0, bernoulli_fill(T, None, 0.3)), dtype=T)
            want = cpu_draw(seed, 0, lambda g: ember.empty(n, dtype=EDT[T]).bernoulli_(0.3, generator=g).numpy())
            rep.check(np.array_equal(got, want), f"bernoulli_ scalar {np.dtype(T).name} n={n}")
            p = np.linspace(0, 1, n)
            got = np.array(random_kernel(n, 2, seed, 0, bernoulli_fill(T, p, 0.0)), dtype=T)
            want = cpu_draw(seed, 0, lambda g: ember.empty(n, dtype=EDT[T]).bernoulli_(ember.from_numpy(p), generator=g).numpy())
            rep.check(np.array_equal(got, want), f"bernoulli_ tensor {np.dtype(T).name} n={n}")
    # a second call continues the stream (base = the reserved offset)
    n = 10
    g = ember.Generator()
    g.manual_seed(seed)
    first = ember.empty(n).uniform_(generator=g).numpy()
    second = ember.empty(n).uniform_(generator=g).numpy()
    base2 = (n + 3) // 4
    got2 = np.array(random_kernel(n, 4, seed, base2, fill_uniforms(np.float32, lambda u: u)), np.float32)
    rep.check(np.array_equal(got2, second) and not np.array_equal(first, second), "offset advances by the counters used")
    # multinomial
    rng = np.random.default_rng(4)
    for rows, ncat, ns, repl in ((1, 5, 3, False), (3, 7, 7, False), (4, 6, 20, True), (2, 9, 4, False),
                                 (1, 4, 1, True)):
        p = rng.random((rows, ncat))
        p[0, 1] = 0.0
        if not repl:
            ns = min(ns, int((p > 0).sum(axis=1).min()))
        got = multinomial(p, ns, repl, seed, 0)
        want = cpu_draw(seed, 0, lambda g: ember.multinomial(ember.from_numpy(p), ns, repl, generator=g).numpy())
        rep.check(np.array_equal(got, want), f"multinomial rows={rows} ncat={ncat} n={ns} repl={repl}")
    return rep.close()


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
