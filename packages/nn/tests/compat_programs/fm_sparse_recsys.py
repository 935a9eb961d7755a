"""A factorization-machine click-through-rate model with sparse gradients, in the style of the
public DLRM / FM / DeepFM examples: multi-hot categorical features as flat index lists with
offsets, nn.EmbeddingBag(mode="sum", sparse=True) with per_sample_weights (feature values) and
include_last_offset=True, a padding_idx bag, the 2-D input form, mode="max" for a pooled view,
F.embedding(sparse=True) rows summed per bag by repeat_interleave / index_add_; the FM second-order term 0.5 * ((sum v)^2 - sum v^2) checked against the
explicit pairwise sum; sparse gradients (is_sparse, coalesce, indices / values, to_dense)
stepped with torch.optim.SparseAdam while the dense tower uses Adam, checked against a dense
twin; sparse SGD and Adagrad steps compared with their dense equivalents; BCEWithLogitsLoss,
an AUC by rank statistics (argsort, cumulative sums) and log-loss. Weights and data from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <auc>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
V, D, B = 60, 8, 64  # vocabulary, embedding dim, batch


def make_batch(n):
    idx, offs, vals, ys = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, 6))
        f = rng.choice(V - 1, size=k, replace=False)
        v = rng.uniform(0.5, 1.5, k)
        offs.append(len(idx))
        idx.extend(f.tolist())
        vals.extend(v.tolist())
        score = sum((1.0 if i % 3 == 0 else -0.7) * w for i, w in zip(f, v))
        score += 1.5 * ((10 in f) and (20 in f))
        ys.append(float(rng.uniform() < 1 / (1 + np.exp(-score))))
    offs.append(len(idx))  # include_last_offset
    return (torch.tensor(idx), torch.tensor(offs), torch.tensor(vals, dtype=torch.float32),
            torch.tensor(ys))


r = np.random.default_rng(1)


def init(*shape, s=0.1):
    return torch.from_numpy(r.normal(0, s, shape).astype(np.float32))


class FM(nn.Module):
    def __init__(self, sparse=True):
        super().__init__()
        self.linear = nn.EmbeddingBag(V, 1, mode="sum", sparse=sparse, include_last_offset=True)
        self.factors = nn.EmbeddingBag(V, D, mode="sum", sparse=sparse, include_last_offset=True)
        self.bias = nn.Parameter(torch.zeros(1))
        self.tower = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, 1))
        with torch.no_grad():
            self.linear.weight.copy_(init(V, 1))
            self.factors.weight.copy_(init(V, D))
            for p in self.tower.parameters():
                p.copy_(init(*p.shape, s=0.3))

    def forward(self, idx, offs, vals):
        lin = self.linear(idx, offs, per_sample_weights=vals).squeeze(-1)
        s = self.factors(idx, offs, per_sample_weights=vals)
        # the sum of squares: rows looked up by F.embedding(sparse=...), summed per bag
        rows = F.embedding(idx, self.factors.weight, sparse=self.factors.sparse) * vals[:, None]
        bag_of = torch.repeat_interleave(torch.arange(len(offs) - 1), torch.diff(offs))
        s2 = torch.zeros_like(s).index_add_(0, bag_of, rows ** 2)
        pair = 0.5 * (s.pow(2) - s2).sum(-1)
        return self.bias + lin + pair + self.tower(s).squeeze(-1)


model = FM()
idx, offs, vals, y = make_batch(4)
print("batch of 4: indices", tuple(idx.shape), "offsets", offs.tolist())
# FM pairwise term against the explicit double sum for the first sample
a, b = offs[0].item(), offs[1].item()
vecs = model.factors.weight[idx[a:b]] * vals[a:b, None]
explicit = sum((vecs[i] * vecs[j]).sum() for i in range(len(vecs)) for j in range(i + 1, len(vecs)))
s = vecs.sum(0)
print("pairwise identity:", torch.allclose(0.5 * (s.pow(2) - vecs.pow(2).sum(0)).sum(), explicit,
                                           atol=1e-6))

# EmbeddingBag forms: 2-D input, padding_idx, mode max
bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=0)
with torch.no_grad():
    bag.weight.copy_(torch.arange(30, dtype=torch.float32).reshape(10, 3))
print("2-D input sum with padding_idx 0:", bag(torch.tensor([[1, 2, 0], [0, 0, 0]])).tolist())
mx = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="max")
print("max bags:", mx(torch.tensor([3, 1, 7, 2]), torch.tensor([0, 2])).tolist())
mean = nn.EmbeddingBag.from_pretrained(bag.weight.detach(), mode="mean")
print("mean bags with an empty bag:", mean(torch.tensor([3, 1, 7]), torch.tensor([0, 2, 2])).tolist())

# sparse gradients
out = model(idx, offs, vals)
F.binary_cross_entropy_with_logits(out, y).backward()
g = model.factors.weight.grad
print("factor grad sparse:", g.is_sparse, "layout", g.layout, "shape", tuple(g.shape))
gc = g.coalesce()
print("touched rows", gc.indices()[0].tolist() == sorted(set(idx.tolist())),
      "values", tuple(gc.values().shape), f"dense norm {g.to_dense().norm().item():.6f}")
dense_twin = FM(sparse=False)
dense_twin.load_state_dict(model.state_dict())
F.binary_cross_entropy_with_logits(dense_twin(idx, offs, vals), y).backward()
print("sparse grad == dense grad:", torch.allclose(g.to_dense(), dense_twin.factors.weight.grad,
                                                   atol=1e-7))
model.zero_grad()

# sparse SGD / Adagrad steps against dense ones
for name, make in [("SGD", lambda p: torch.optim.SGD(p, lr=0.5)),
                   ("Adagrad", lambda p: torch.optim.Adagrad(p, lr=0.5))]:
    e1 = nn.Embedding(V, 4, sparse=True)
    e2 = nn.Embedding(V, 4)
    e2.load_state_dict(e1.state_dict())
    o1, o2 = make(e1.parameters()), make(e2.parameters())
    for _ in range(3):
        for e, o in ((e1, o1), (e2, o2)):
            o.zero_grad()
            e(idx[:7]).pow(2).sum().backward()
            o.step()
    print(f"sparse {name} == dense {name}:", torch.allclose(e1.weight, e2.weight, atol=1e-6))

sparse_params = [model.linear.weight, model.factors.weight]
dense_params = [model.bias] + list(model.tower.parameters())
opt_s = torch.optim.SparseAdam(sparse_params, lr=0.02)
opt_d = torch.optim.Adam(dense_params, lr=0.02)
losses = []
for step in range(60):
    idx, offs, vals, y = make_batch(B)
    loss = F.binary_cross_entropy_with_logits(model(idx, offs, vals), y)
    opt_s.zero_grad()
    opt_d.zero_grad()
    loss.backward()
    opt_s.step()
    opt_d.step()
    losses.append(loss.item())
    if step % 20 == 0:
        st = opt_s.state[model.factors.weight]
        print(f"step {step:2d} loss {loss.item():.5f} sparse adam step {st['step']} "
              f"exp_avg nonzero rows {int((st['exp_avg'].abs().sum(1) > 0).sum())}")
try:
    torch.optim.SparseAdam(model.tower.parameters(), lr=0.1).step()
    e = nn.Linear(2, 1)
    e(torch.ones(1, 2)).sum().backward()
    torch.optim.SparseAdam(e.parameters()).step()
except RuntimeError as err:
    print("SparseAdam on a dense gradient raises RuntimeError:", "dense" in str(err).lower())

with torch.no_grad():
    idx, offs, vals, y = make_batch(400)
    p = torch.sigmoid(model(idx, offs, vals))
    order = torch.argsort(p)
    ranks = torch.empty_like(p)
    ranks[order] = torch.arange(1, 401, dtype=torch.float32)
    npos = y.sum()
    auc = ((ranks[y == 1].sum() - npos * (npos + 1) / 2) / (npos * (400 - npos))).item()
    ll = F.binary_cross_entropy(p, y).item()
print(f"test auc {auc:.5f} log loss {ll:.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {auc:.5f}")
