"""Hashed and compositional embeddings for huge categorical vocabularies, in the style of the
public DLRM / "hashing trick" / quotient-remainder embedding code: 64-bit feature ids hashed by
multiply-xorshift (int64 arithmetic that wraps around, bitwise_xor, bitwise_right_shift /
>> on negative numbers, bitwise_and masks, torch.iinfo limits), hashed n-gram ids built with
bitwise_left_shift, quotient-remainder embeddings (floor_divide and remainder into two
tables combined by multiplication), a count-min sketch of id frequencies (scatter_add_ rows,
min over rows), a Bloom filter of seen ids (bool scatter, all over hash rows), frequency-based
embedding pruning with torch.unique(return_counts) and searchsorted, float bit tricks through
Tensor.view(torch.int32) (bfloat16 round-to-nearest-even emulated with integer ops and checked
against .to(torch.bfloat16)), EmbeddingBag(mode="sum") with per_sample_weights and
padding_idx, and a click model trained with SparseAdam on sparse embedding gradients plus Adam on
the dense part. Data from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <AUC>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(4)
i64 = torch.iinfo(torch.int64)
print("int64 range", i64.min, i64.max, i64.bits)


def mix64(x):
    # splitmix64-style finalizer with wrapping int64 products and logical shifts
    m1 = torch.tensor(-4658895280553007687, dtype=torch.int64)  # 0xBF58476D1CE4E5B9
    m2 = torch.tensor(-7723592293110705685, dtype=torch.int64)  # 0x94D049BB133111EB
    mask = (1 << 64 - 31) - 1
    x = x ^ ((x >> 30) & ((1 << 34) - 1))
    x = x * m1
    x = x ^ ((x >> 27) & ((1 << 37) - 1))
    x = x * m2
    return x ^ ((x >> 31) & mask)


ids = torch.from_numpy(rng.integers(0, 2**62, size=6, dtype=np.int64))
h = mix64(ids)
print("hashes", h.tolist())
print("arith shift of negatives", (torch.tensor([-8, -7]) >> 1).tolist(),
      torch.bitwise_right_shift(torch.tensor([-1]), 60).tolist(),
      "wrap", (torch.tensor([i64.max]) + 1).tolist(), (torch.tensor([2**62]) * 4).tolist())
buckets = torch.remainder(h, 1000)
print("buckets", buckets.tolist(), "non-negative:", bool((buckets >= 0).all()))
bigram = torch.bitwise_left_shift(ids[:-1] & 0xFFFF, 16) | (ids[1:] & 0xFFFF)
print("bigram ids", bigram.tolist())

# ---- data: skewed categorical ids -> clicks ----
n = 3000
raw = torch.from_numpy((rng.zipf(1.3, size=(n, 3)) * 7919).astype(np.int64) % (10**9))
weight_true = rng.normal(0, 1.5, size=200)
y = torch.from_numpy((weight_true[(raw % 200).numpy()].sum(1) + rng.normal(0, 0.5, n) > 0)
                     .astype(np.float32))
hashed = torch.remainder(mix64(raw), 2**20)
print("distinct raw", torch.unique(raw).numel(), "distinct hashed", torch.unique(hashed).numel())

# count-min sketch (4 rows x 256) and a Bloom filter (3 hashes x 8192 bits)
seeds = torch.tensor([[11], [23], [37], [51]])
rows = torch.remainder(mix64(raw.flatten()[None, :] + seeds * 1_000_003), 256)
cms = torch.zeros(4, 256, dtype=torch.long).scatter_add_(1, rows, torch.ones_like(rows))
q = raw.flatten()[:5]
est = cms.gather(1, torch.remainder(mix64(q[None, :] + seeds * 1_000_003), 256)).min(0).values
true = (raw.flatten()[:, None] == q[None, :]).sum(0)
print("count-min estimates", est.tolist(), "true", true.tolist(), "never under:", bool((est >= true).all()))
bloom = torch.zeros(3, 8192, dtype=torch.bool)
bloom.scatter_(1, torch.remainder(mix64(raw.flatten()[None, :] + seeds[:3]), 8192), True)
probe = torch.cat([raw.flatten()[:3], torch.tensor([123456789, 987654321])])
hits = bloom.gather(1, torch.remainder(mix64(probe[None, :] + seeds[:3]), 8192)).all(0)
print("bloom members", hits.tolist(), "fill", round(bloom.float().mean().item(), 4))

# frequency pruning: rare hashed ids map to a shared OOV row
vals, counts = torch.unique(hashed, return_counts=True)
keep = vals[counts >= 3]
pos = torch.searchsorted(keep, hashed).clamp(max=keep.numel() - 1)
found = keep[pos] == hashed
compact = torch.where(found, pos + 1, torch.zeros_like(pos))  # 0 = OOV
print("kept ids", keep.numel(), "oov fraction", round((~found).float().mean().item(), 4))

# bfloat16 rounding by integer bit manipulation
f = torch.from_numpy(rng.normal(size=8).astype(np.float32))
bits = f.view(torch.int32)
rounding = ((bits >> 16) & 1) + 0x7FFF
bf = ((bits + rounding) & ~0xFFFF).view(torch.float32)
print("bf16 by bits == .to(bfloat16):", torch.equal(bf, f.to(torch.bfloat16).float()),
      bits.dtype, bits.stride(), f.view(torch.uint8).shape)


class QREmbedding(nn.Module):
    def __init__(self, num, dim, q):
        super().__init__()
        self.q = q
        self.quot = nn.Embedding(num // q + 1, dim, sparse=True)
        self.rem = nn.Embedding(q, dim, sparse=True)

    def forward(self, x):
        return self.quot(torch.floor_divide(x, self.q)) * self.rem(torch.remainder(x, self.q))


class ClickModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.qr = QREmbedding(2**20, 8, 1024)
        self.bag = nn.EmbeddingBag(keep.numel() + 1, 8, mode="sum", sparse=True, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, hashed_ids, compact_ids, w):
        a = self.qr(hashed_ids).sum(1)
        b = self.bag(compact_ids, per_sample_weights=w)
        return self.mlp(torch.cat([a, b], 1)).squeeze(1)


model = ClickModel()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
    model.bag.weight[0].zero_()
w = torch.tensor([1.0, 0.5, 0.25]).expand(n, 3).contiguous()
sparse_params = [p for n_, p in model.named_parameters() if not n_.startswith("mlp")]
opt_sparse = torch.optim.SparseAdam(sparse_params, lr=0.05)
opt_dense = torch.optim.Adam(model.mlp.parameters(), lr=0.01)
losses = []
for epoch in range(4):
    for s in range(0, n, 500):
        logit = model(hashed[s:s + 500], compact[s:s + 500], w[s:s + 500])
        loss = F.binary_cross_entropy_with_logits(logit, y[s:s + 500])
        opt_sparse.zero_grad()
        opt_dense.zero_grad()
        loss.backward()
        opt_sparse.step()
        opt_dense.step()
        losses.append(loss.item())
g = model.bag.weight.grad
print("sparse grads:", g.is_sparse, model.qr.rem.weight.grad.layout, "padding row untouched:",
      bool((model.bag.weight[0] == 0).all()))
with torch.no_grad():
    score = model(hashed, compact, w)
order = torch.argsort(score)
ranks = torch.empty_like(order).scatter_(0, order, torch.arange(n))
pos_ = y.bool()
auc = ((ranks[pos_].float().sum() - pos_.sum() * (pos_.sum() - 1) / 2)
       / (pos_.sum() * (~pos_).sum())).item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {auc:.4f}")
