"""Click-through-rate models in the style of the public DLRM / DeepCTR-Torch / TorchRec examples:
multi-hot sparse features packed as (values, offsets) for nn.EmbeddingBag(mode="sum") with
per_sample_weights, the same bag through F.embedding_bag and through a padded 2-D input
(checked equal), padding_idx handling, DLRM's pairwise dot-product interaction taking the strict
lower triangle with torch.tril_indices, a DCN-v2 cross network (x_{l+1} = x0 * (W x_l + b) +
x_l, a low-rank mixture variant), a Wide & Deep linear part on hashed crosses, BCE with logits
and pos_weight, and evaluation by ROC-AUC computed from ranks (argsort, the Mann-Whitney
statistic with ties averaged) and log loss; Adagrad for the embeddings and Adam for the dense
part in two optimizers. Data from a planted logistic model in NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <test auc>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1608)
N_DENSE, CARD, EMB = 4, [20, 30, 12], 8
true_emb = [rng.normal(0, 1, (c, 1)) for c in CARD]


def batch(m):
    dense = rng.normal(0, 1, (m, N_DENSE)).astype(np.float32)
    values, offsets, weights, logit = [], [], [], dense[:, 0] - 0.5 * dense[:, 1] * dense[:, 2]
    for f, c in enumerate(CARD):
        vals, offs, wts = [], [], []
        for i in range(m):
            k = int(rng.integers(1, 4))
            ids = rng.integers(0, c, k)
            w = rng.uniform(0.5, 1.5, k)
            offs.append(len(vals))
            vals.extend(ids.tolist())
            wts.extend(w.tolist())
            logit[i] += (true_emb[f][ids, 0] * w).sum() / k
        values.append(torch.tensor(vals))
        offsets.append(torch.tensor(offs))
        weights.append(torch.tensor(wts, dtype=torch.float32))
    y = (rng.random(m) < 1 / (1 + np.exp(-2 * logit))).astype(np.float32)
    return torch.from_numpy(dense), values, offsets, weights, torch.from_numpy(y)


class CrossNetV2(nn.Module):
    def __init__(self, dim, layers=2, rank=None):
        super().__init__()
        self.rank = rank
        if rank is None:
            self.W = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        else:
            self.U = nn.ParameterList(nn.Parameter(torch.empty(dim, rank)) for _ in range(layers))
            self.V = nn.ParameterList(nn.Parameter(torch.empty(rank, dim)) for _ in range(layers))
            self.b = nn.ParameterList(nn.Parameter(torch.zeros(dim)) for _ in range(layers))

    def forward(self, x0):
        x = x0
        for i in range(len(self.W) if self.rank is None else len(self.U)):
            if self.rank is None:
                xw = self.W[i](x)
            else:
                xw = (x @ self.V[i].T) @ self.U[i].T + self.b[i]
            x = x0 * xw + x
        return x


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(c, EMB, mode="sum") for c in CARD)
        self.bottom = nn.Sequential(nn.Linear(N_DENSE, 16), nn.ReLU(), nn.Linear(16, EMB), nn.ReLU())
        n_feat = len(CARD) + 1
        self.register_buffer("li", torch.tril_indices(n_feat, n_feat, offset=-1)[0])
        self.register_buffer("lj", torch.tril_indices(n_feat, n_feat, offset=-1)[1])
        inter = n_feat * (n_feat - 1) // 2
        self.cross = CrossNetV2(EMB + inter, layers=2, rank=4)
        self.top = nn.Sequential(nn.Linear(EMB + inter, 16), nn.ReLU(), nn.Linear(16, 1))
        self.wide = nn.EmbeddingBag(64, 1, mode="sum")

    def forward(self, dense, values, offsets, weights):
        x = self.bottom(dense)
        embs = [bag(v, o, per_sample_weights=w) for bag, v, o, w in zip(self.bags, values, offsets, weights)]
        T = torch.stack([x] + embs, dim=1)  # (B, F, D)
        Z = torch.bmm(T, T.transpose(1, 2))
        inter = Z[:, self.li, self.lj]
        h = torch.cat([x, inter], dim=1)
        # wide part: hashed crosses of the first ids of fields 0 and 1
        first0, first1 = values[0][offsets[0]], values[1][offsets[1]]
        wide_ids = (first0 * 31 + first1) % 64
        wide = self.wide(wide_ids, torch.arange(dense.shape[0]))
        return (self.top(self.cross(h)) + wide).squeeze(1)


def auc(scores, labels):
    order = torch.argsort(scores)
    s = scores[order]
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    uniq, inv, counts = torch.unique(s, return_inverse=True, return_counts=True)
    if len(uniq) < len(s):  # average ranks over ties
        sums = torch.zeros(len(uniq), dtype=scores.dtype).index_add_(0, inv, ranks[order])
        ranks[order] = (sums / counts)[inv]
    pos = labels == 1
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


# EmbeddingBag forms agree
bag = nn.EmbeddingBag(10, 3, mode="sum", padding_idx=0)
vals = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
offs = torch.tensor([0, 2, 4])
w = torch.tensor([1.0, 0.5, 2.0, 1.0, 1.0, 1.0, 0.25, 3.0])
out1 = bag(vals, offs, per_sample_weights=w)
out2 = F.embedding_bag(vals, bag.weight, offs, mode="sum", per_sample_weights=w, padding_idx=0)
manual = torch.stack([(bag.weight[vals[a:b]] * w[a:b, None]).sum(0) for a, b in zip([0, 2, 4], [2, 4, 8])])
print(f"embedding_bag module == functional: {torch.equal(out1, out2)} == manual: {torch.allclose(out1, manual, atol=1e-6)}")
padded = torch.tensor([[1, 2, 0, 0], [4, 5, 0, 0], [4, 3, 2, 9]])
mean_bag = nn.EmbeddingBag(10, 3, mode="mean", padding_idx=0)
mean_bag.weight.data.copy_(bag.weight.data)
mean2d = mean_bag(padded)
print(f"padding_idx row zero {bag.weight[0].abs().sum().item():.1f} mean over non-padding: {torch.allclose(mean2d[0], bag.weight[[1, 2]].mean(0))} max mode {tuple(F.embedding_bag(padded, bag.weight, mode='max').shape)}")
print(f"tril_indices(4, 4, -1) {torch.tril_indices(4, 4, offset=-1).tolist()}")
print(f"auc of a perfect ranking {auc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 1, 0, 1])):.4f} with ties {auc(torch.tensor([0.5, 0.5, 0.2, 0.9]), torch.tensor([1, 0, 0, 1])):.4f}")

model = DLRM()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[1]), p.shape).astype(np.float32)))
        else:
            p.zero_()
sparse = [p for n, p in model.named_parameters() if n.startswith(("bags", "wide"))]
dense_p = [p for n, p in model.named_parameters() if not n.startswith(("bags", "wide"))]
opt_s = torch.optim.Adagrad(sparse, lr=0.1, initial_accumulator_value=0.01)
opt_d = torch.optim.Adam(dense_p, lr=1e-2)
print(f"parameters sparse {sum(p.numel() for p in sparse)} dense {sum(p.numel() for p in dense_p)}")
pos_weight = torch.tensor([1.2])
losses = []
for step in range(80):
    d, v, o, w, y = batch(64)
    loss = F.binary_cross_entropy_with_logits(model(d, v, o, w), y, pos_weight=pos_weight)
    opt_s.zero_grad()
    opt_d.zero_grad()
    loss.backward()
    opt_s.step()
    opt_d.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")
d, v, o, w, y = batch(500)
with torch.no_grad():
    logits = model(d, v, o, w)
test_auc = auc(logits, y)
logloss = F.binary_cross_entropy_with_logits(logits, y).item()
print(f"test auc {test_auc:.4f} log loss {logloss:.4f} base rate {y.mean().item():.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {test_auc:.4f}")
