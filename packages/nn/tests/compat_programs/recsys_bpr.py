"""Implicit-feedback recommendation, in the style of the public matrix-factorisation / BPR and
neural collaborative filtering examples: a synthetic user-item interaction log with latent
tastes, a leave-one-out split per user (the last interaction held out), user and item
nn.Embedding tables with item biases, the Bayesian personalised ranking loss
-F.logsigmoid(pos - neg) with negatives sampled by NumPy, L2 regularisation on the looked-up
rows only, nn.Embedding(max_norm=...) renormalising the rows it looks up in place, a
user-history encoder with nn.EmbeddingBag(mode="mean") over flattened histories and offsets
(and per_sample_weights in mode="sum" for recency weights), an NCF-style MLP tower on the
concatenated embeddings trained with BCEWithLogits on positives and negatives, Adagrad, then
evaluation: scores for all items, already-seen items masked to -inf with index_put_ through a
boolean matrix built by scatter_, top-k with torch.topk, hit rate and NDCG@10 (torch.isin,
positions from nonzero, log2), item popularity by torch.unique(return_counts=True), and the
catalogue coverage of the recommendations. Weights, negatives and data from NumPy: the run is
the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <hr@10> <ndcg@10>."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
USERS, ITEMS, DIM, K = 60, 80, 16, 10

# interactions: users like items near their taste vector
user_taste = rng.normal(size=(USERS, 4))
item_attr = rng.normal(size=(ITEMS, 4))
affinity = user_taste @ item_attr.T + rng.gumbel(size=(USERS, ITEMS))
history = [list(np.argsort(-affinity[u])[:12][rng.permutation(12)]) for u in range(USERS)]
train_pairs = np.array([(u, i) for u in range(USERS) for i in history[u][:-1]], np.int64)
held_out = torch.tensor([history[u][-1] for u in range(USERS)])
seen = torch.zeros(USERS, ITEMS, dtype=torch.bool)
seen.scatter_(1, torch.tensor([h[:-1] for h in history]), True)
print(f"interactions {len(train_pairs)}, density {seen.float().mean().item():.4f}")
items_u, counts = torch.unique(torch.from_numpy(train_pairs[:, 1]), return_counts=True)
top_pop = items_u[counts.argsort(descending=True, stable=True)[:5]]
print(f"items with interactions {len(items_u)}, most popular {top_pop.tolist()} "
      f"({counts.max().item()} users)")


class BPRMF(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(USERS, DIM)
        self.item = nn.Embedding(ITEMS, DIM, max_norm=3.0)
        self.item_bias = nn.Embedding(ITEMS, 1)
        self.history = nn.EmbeddingBag(ITEMS, DIM, mode="mean")

    def user_vector(self, users, hist_flat, offsets):
        return self.user(users) + self.history(hist_flat, offsets)

    def score(self, uvec, items):
        return (uvec * self.item(items)).sum(-1) + self.item_bias(items).squeeze(-1)


def histories(users):
    flat = np.concatenate([history[u][:-1] for u in users])
    offsets = np.cumsum([0] + [len(history[u]) - 1 for u in users[:-1]])
    return torch.from_numpy(flat.astype(np.int64)), torch.from_numpy(offsets.astype(np.int64))


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))


model = BPRMF()
init(model, 1)
# EmbeddingBag(mode="sum") with recency weights agrees with a weighted sum of rows
bag = nn.EmbeddingBag(ITEMS, DIM, mode="sum")
with torch.no_grad():
    bag.weight.copy_(model.history.weight)
flat, offsets = histories([0, 1])
w = torch.linspace(0.5, 1.0, len(flat))
manual = torch.stack([(bag.weight[flat[:11]] * w[:11, None]).sum(0),
                      (bag.weight[flat[11:]] * w[11:, None]).sum(0)])
print(f"per_sample_weights sum bag agrees: "
      f"{torch.allclose(bag(flat, offsets, per_sample_weights=w), manual, atol=1e-6)}")

opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
losses = []
for epoch in range(args.epochs):
    perm = rng.permutation(len(train_pairs))
    total = 0.0
    for start in range(0, len(perm), 128):
        batch = train_pairs[perm[start:start + 128]]
        users = torch.from_numpy(batch[:, 0])
        pos = torch.from_numpy(batch[:, 1])
        neg = torch.from_numpy(rng.integers(0, ITEMS, len(batch)))
        flat, offsets = histories(batch[:, 0])
        u = model.user_vector(users, flat, offsets)
        diff = model.score(u, pos) - model.score(u, neg)
        reg = 1e-4 * (u.pow(2).sum() + model.item(pos).pow(2).sum() + model.item(neg).pow(2).sum())
        loss = -F.logsigmoid(diff).mean() + reg / len(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item() * len(batch)
    losses.append(total / len(train_pairs))
    print(f"epoch {epoch} bpr loss {losses[-1]:.5f}")
norms = model.item.weight.norm(dim=1)
print(f"item rows looked up stay within max_norm: {bool((norms <= 3.0 + 1e-4).all())}")


class NCF(nn.Module):
    def __init__(self):
        super().__init__()
        self.user, self.item = nn.Embedding(USERS, DIM), nn.Embedding(ITEMS, DIM)
        self.mlp = nn.Sequential(nn.Linear(2 * DIM, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.out = nn.Linear(16 + DIM, 1)

    def forward(self, users, items):
        u, i = self.user(users), self.item(items)
        return self.out(torch.cat([self.mlp(torch.cat([u, i], -1)), u * i], -1)).squeeze(-1)


ncf = NCF()
init(ncf, 2)
opt = torch.optim.Adam(ncf.parameters(), lr=5e-3)
bce = nn.BCEWithLogitsLoss()
for epoch in range(30):
    users = torch.from_numpy(np.concatenate([train_pairs[:, 0]] * 2))
    items = torch.from_numpy(np.concatenate([train_pairs[:, 1],
                                             rng.integers(0, ITEMS, len(train_pairs))]))
    labels = torch.cat([torch.ones(len(train_pairs)), torch.zeros(len(train_pairs))])
    loss = bce(ncf(users, items), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"ncf bce {loss.item():.5f}")


def evaluate(scores):
    scores = scores.clone()
    scores[seen] = float("-inf")  # never recommend what the user already has
    top = torch.topk(scores, K, dim=1).indices
    hit = (top == held_out[:, None]).any(1)
    rank = (top == held_out[:, None]).nonzero()
    ndcg = torch.zeros(USERS)
    ndcg[rank[:, 0]] = 1.0 / torch.log2(rank[:, 1].float() + 2.0)
    coverage = torch.unique(top).numel() / ITEMS
    return hit.float().mean().item(), ndcg.mean().item(), coverage, top


model.eval()
with torch.no_grad():
    flat, offsets = histories(list(range(USERS)))
    u = model.user_vector(torch.arange(USERS), flat, offsets)
    mf_scores = u @ model.item.weight.T + model.item_bias.weight.T
    hr, ndcg, cov, top = evaluate(mf_scores)
    users = torch.arange(USERS).repeat_interleave(ITEMS)
    items = torch.arange(ITEMS).repeat(USERS)
    ncf_hr, ncf_ndcg, _, _ = evaluate(ncf(users, items).view(USERS, ITEMS))
    pop_hr, _, _, _ = evaluate(torch.zeros(USERS, ITEMS).index_add_(
        1, items_u, counts.float().expand(USERS, -1)))
print(f"user 0 top-{K}: {top[0].tolist()}, held out {held_out[0].item()}, "
      f"seen in top: {bool(torch.isin(top[0], torch.tensor(history[0][:-1])).any())}")
print(f"bpr-mf HR@{K} {hr:.4f} NDCG@{K} {ndcg:.4f} coverage {cov:.4f}; ncf HR@{K} {ncf_hr:.4f}; "
      f"popularity HR@{K} {pop_hr:.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {hr:.4f} {ndcg:.4f}")
