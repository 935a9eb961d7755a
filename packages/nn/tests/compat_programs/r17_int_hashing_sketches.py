"""Integer and bit-level tensor code as streaming / dedup / retrieval code writes it in PyTorch:
a 32-bit xorshift generator and MurmurHash3's fmix32 finalizer in int64 with explicit masking,
FNV-1a over bytes (uint8 tensors widened to int64), a table-driven CRC32 built with bitwise ops
and checked against zlib, a Bloom filter and a count-min sketch (scatter_add_ / amin), MinHash
signatures with Jaccard estimates, SimHash / random-hyperplane LSH codes packed into integers by
shifts and compared by popcount, int8 / uint8 overflow and promotion, floor_divide / remainder /
fmod on negatives, gcd / lcm, and a hashed-feature logistic model trained on bucket ids.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <minhash error>."""

import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

M32 = 0xFFFFFFFF
rng = np.random.default_rng(1704)


def xorshift32(state, n):
    out = []
    for _ in range(n):
        state = state ^ ((state << 13) & M32)
        state = state ^ (state >> 17)
        state = state ^ ((state << 5) & M32)
        out.append(state.clone())
    return torch.stack(out)


def xorshift_py(s, n):
    out = []
    for _ in range(n):
        s ^= (s << 13) & M32
        s ^= s >> 17
        s ^= (s << 5) & M32
        out.append(s)
    return out


seeds = torch.tensor([1, 2463534242, 88172645], dtype=torch.int64)
xs = xorshift32(seeds, 4)
print(f"xorshift32 {xs[:, 1].tolist()} == python {xorshift_py(2463534242, 4)}: {xs[:, 1].tolist() == xorshift_py(2463534242, 4)}")


def fmix32(h):
    h = h & M32
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def fmix32_py(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


keys = torch.arange(0, 50000, 997, dtype=torch.int64)
hk = fmix32(keys)
print(f"fmix32 matches python: {hk.tolist() == [fmix32_py(k) for k in keys.tolist()]} first {hk[:3].tolist()}")
print(f"fmix32 bucket balance (16 buckets) max {torch.bincount(hk % 16, minlength=16).max().item()} of {keys.numel()}")


def fnv1a(data_u8):
    h = torch.full(data_u8.shape[:1], 0x811C9DC5, dtype=torch.int64)
    for col in data_u8.to(torch.int64).unbind(1):
        h = ((h ^ col) * 0x01000193) & M32
    return h


words = [b"tensor", b"sparse", b"graphs", b"hashes"]
u8 = torch.tensor([list(w) for w in words], dtype=torch.uint8)
print(f"uint8 bytes {u8.dtype} {u8[0].tolist()} fnv1a {fnv1a(u8).tolist()}")

table = torch.arange(256, dtype=torch.int64)
for _ in range(8):
    table = torch.where((table & 1).bool(), (table >> 1) ^ 0xEDB88320, table >> 1)


def crc32(data_u8):
    c = torch.tensor(M32, dtype=torch.int64)
    for b in data_u8.to(torch.int64):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return (c ^ M32).item()


msg = b"The quick brown fox jumps over the lazy dog"
print(f"crc32 {crc32(torch.frombuffer(bytearray(msg), dtype=torch.uint8)):#010x} zlib {zlib.crc32(msg):#010x}")

# overflow and promotion
a8 = torch.tensor([120, -120], dtype=torch.int8)
print(f"int8 wrap {(a8 + 10).tolist()} uint8 wrap {(torch.tensor([250], dtype=torch.uint8) + 10).tolist()} int8+uint8 {(a8 + torch.tensor([1, 1], dtype=torch.uint8)).dtype}")
print(f"int8 * float {(a8 * 0.5).dtype} int + bool {(a8 + torch.tensor([True, False])).dtype} iinfo int8 {torch.iinfo(torch.int8).min} {torch.iinfo(torch.int8).max}")
neg = torch.tensor([-7, 7, -7, 7])
den = torch.tensor([2, -2, -2, 2])
print(f"floor_divide {torch.floor_divide(neg, den).tolist()} // {(neg // den).tolist()} trunc {torch.div(neg, den, rounding_mode='trunc').tolist()} true {torch.div(neg, den).tolist()}")
print(f"remainder {torch.remainder(neg, den).tolist()} % {(neg % den).tolist()} fmod {torch.fmod(neg, den).tolist()}")
print(f"gcd {torch.gcd(torch.tensor([12, -18, 0, 17]), torch.tensor([8, 12, 5, 0])).tolist()} lcm {torch.lcm(torch.tensor([4, 6, 3]), torch.tensor([6, -4, 0])).tolist()}")
print(f"shifts int16 {(torch.tensor([-8, 255], dtype=torch.int16) >> 2).tolist()} {(torch.tensor([1, 3], dtype=torch.int16) << 14).tolist()}")

# Bloom filter with k = 3 hashes from two base hashes (Kirsch-Mitzenmacher)
MBITS = 512
items = torch.from_numpy(rng.choice(10 ** 6, 60, replace=False).astype(np.int64))
probe = torch.from_numpy(rng.choice(np.arange(10 ** 6, 2 * 10 ** 6), 2000, replace=False).astype(np.int64))


def bloom_idx(x):
    h1, h2 = fmix32(x), fmix32(x ^ 0x5BD1E995)
    return torch.stack([(h1 + i * h2) % MBITS for i in range(3)], 1)


bits = torch.zeros(MBITS, dtype=torch.bool)
bits[bloom_idx(items).flatten()] = True
member = bits[bloom_idx(items)].all(1)
fp = bits[bloom_idx(probe)].all(1).float().mean().item()
theory = (1 - np.exp(-3 * 60 / MBITS)) ** 3
print(f"bloom: all members found {bool(member.all())} bits set {bits.sum().item()} false positive rate {fp:.4f} theory {theory:.4f}")

# count-min sketch
stream = torch.from_numpy(rng.zipf(1.6, 5000).astype(np.int64) % 1000)
W, Dp = 64, 4
cms = torch.zeros(Dp, W, dtype=torch.int64)
cols = torch.stack([fmix32(stream * (2 * r + 1) + r) % W for r in range(Dp)])
cms.scatter_add_(1, cols, torch.ones_like(cols))
q = torch.arange(5)
est = cms.gather(1, torch.stack([fmix32(q * (2 * r + 1) + r) % W for r in range(Dp)])).amin(0)
true = torch.bincount(stream, minlength=1000)[:5]
print(f"count-min estimates {est.tolist()} true {true.tolist()} never under {bool((est >= true).all())}")

# MinHash
docs = [set(rng.choice(200, 40, replace=False).tolist()) for _ in range(2)]
docs[1] = set(list(docs[0])[:25]) | docs[1]
NH = 256
ca = torch.from_numpy(rng.integers(1, 2 ** 31 - 1, NH).astype(np.int64))
cb = torch.from_numpy(rng.integers(0, 2 ** 31 - 1, NH).astype(np.int64))
P = 2 ** 31 - 1


def signature(s):
    x = torch.tensor(sorted(s), dtype=torch.int64)
    return ((ca[:, None] * x[None, :] + cb[:, None]) % P).amin(1)


s0, s1 = signature(docs[0]), signature(docs[1])
jac = len(docs[0] & docs[1]) / len(docs[0] | docs[1])
est_j = (s0 == s1).float().mean().item()
print(f"minhash jaccard {est_j:.4f} exact {jac:.4f}")

# SimHash codes packed into int64 and compared by popcount
vecs = torch.from_numpy(rng.normal(size=(6, 32)).astype(np.float32))
vecs[1] = vecs[0] + 0.1 * vecs[1]
planes = torch.from_numpy(rng.normal(size=(32, 48)).astype(np.float32))
bitsv = (vecs @ planes > 0).to(torch.int64)
codes = (bitsv << torch.arange(48)).sum(1)


def popcount(x):
    c = torch.zeros_like(x)
    for _ in range(48):
        c += x & 1
        x = x >> 1
    return c


ham = popcount(codes[:, None] ^ codes[None, :])
print(f"simhash hamming to item 0 {ham[0].tolist()} nearest {ham[0, 1:].argmin().item() + 1}")

# hashed features -> logistic regression
tokens = torch.from_numpy(rng.integers(0, 5000, (400, 12)).astype(np.int64))
label = ((tokens % 7 == 0).sum(1) >= 2).float()
buckets = fmix32(tokens) % 256
X = torch.zeros(400, 256).scatter_add_(1, buckets, torch.ones(400, 12))
lin = nn.Linear(256, 1)
nn.init.zeros_(lin.weight)
nn.init.zeros_(lin.bias)
opt = torch.optim.SGD(lin.parameters(), lr=0.5, momentum=0.9)
losses = []
for step in range(100):
    loss = F.binary_cross_entropy_with_logits(lin(X).squeeze(1), label)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 25 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {abs(est_j - jac):.4f}")
