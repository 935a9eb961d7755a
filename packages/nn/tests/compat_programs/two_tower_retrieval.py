"""Two-tower retrieval in the style of public recommender code (YouTube-DNN / sampled-softmax
two-tower models): a user tower over a bag of watched item ids (nn.EmbeddingBag with offsets,
mode="mean" / "sum" with per_sample_weights, padding_idx, and max_norm renormalizing rows in
place), histories padded by pad_sequence (padding_side="left" too) and the same bags as
F.embedding_bag on a 2-D input, an item tower with feature crosses, L2-normalized embeddings
with a learned temperature, in-batch negatives with the logQ correction for popularity-biased
sampling, a mixed negative sampling variant with extra uniform negatives, and recall@k / MRR
evaluation by topk over the full catalogue. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <recall@10>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

rng = np.random.default_rng(1515)
N_ITEMS, N_CAT, D = 200, 8, 16
PAD = 0
item_cat = torch.from_numpy(rng.integers(0, N_CAT, N_ITEMS))
item_cat[PAD] = 0
popularity = torch.from_numpy(rng.zipf(1.6, N_ITEMS).clip(1, 200).astype(np.float64))
popularity[PAD] = 0
item_prob = popularity / popularity.sum()


def sample_users(b):
    """Each user likes two categories; history and the next item come from them."""
    likes = [rng.choice(N_CAT, 2, replace=False) for _ in range(b)]
    hist, nxt = [], []
    for lk in likes:
        pool = torch.nonzero(torch.isin(item_cat, torch.from_numpy(lk))).flatten()
        pool = pool[pool != PAD]
        p = popularity[pool] / popularity[pool].sum()
        n = int(rng.integers(2, 9))
        picks = pool[torch.from_numpy(rng.choice(len(pool), n + 1, p=p.numpy()))]
        hist.append(picks[:-1])
        nxt.append(picks[-1])
    return hist, torch.stack(nxt)


class UserTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(N_ITEMS, D, mode="mean", padding_idx=PAD, max_norm=2.0)
        self.mlp = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, D))

    def forward(self, flat, offsets):
        return F.normalize(self.mlp(self.bag(flat, offsets)), dim=-1)


class ItemTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(N_ITEMS, D, padding_idx=PAD)
        self.cat = nn.Embedding(N_CAT, D)
        self.mlp = nn.Sequential(nn.Linear(3 * D, 32), nn.ReLU(), nn.Linear(32, D))

    def forward(self, ids):
        e, c = self.emb(ids), self.cat(item_cat[ids])
        return F.normalize(self.mlp(torch.cat([e, c, e * c], -1)), dim=-1)


def flatten(hist):
    lengths = torch.tensor([len(h) for h in hist])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    return torch.cat(hist), offsets


# the bag APIs agree with each other
emb = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)
with torch.no_grad():
    emb.weight.copy_(torch.from_numpy(rng.normal(size=(10, 4)).astype(np.float32)))
    emb.weight[0] = 0
hist = [torch.tensor([3, 5]), torch.tensor([1, 2, 7]), torch.tensor([4])]
flat, offs = flatten(hist)
padded = pad_sequence(hist, batch_first=True, padding_value=0)
left = pad_sequence(hist, batch_first=True, padding_value=0, padding_side="left")
print(f"padded {padded.tolist()} left {left.tolist()}")
a = emb(flat, offs)
b = F.embedding_bag(padded, emb.weight, mode="sum", padding_idx=0)
c = emb(left)
print(f"offsets == padded 2-D == left padded: {torch.allclose(a, b) and torch.allclose(a, c)}")
w = torch.tensor([0.5, 1.0, 2.0, 1.0, 1.0, 3.0])
ws = emb(flat, offs, per_sample_weights=w)
print(f"per_sample_weights first bag {[round(v, 5) for v in ws[0].tolist()]} == manual "
      f"{torch.allclose(ws[0], 0.5 * emb.weight[3] + emb.weight[5])}")
mean_bag = nn.EmbeddingBag.from_pretrained(emb.weight.detach().clone(), mode="mean", padding_idx=0)
print(f"mean ignores padding: {torch.allclose(mean_bag(padded)[2], emb.weight[4])} "
      f"max bag {nn.EmbeddingBag.from_pretrained(emb.weight.detach().clone(), mode='max')(flat, offs)[1].tolist() == emb.weight[[1, 2, 7]].max(0).values.tolist()}")
mn = nn.EmbeddingBag(10, 4, max_norm=1.0, mode="sum")
with torch.no_grad():
    mn.weight.copy_(torch.from_numpy(rng.normal(0, 2, (10, 4)).astype(np.float32)))
before = mn.weight.detach().norm(dim=1).clone()
mn(torch.tensor([[1, 2]]))
after = mn.weight.detach().norm(dim=1)
print(f"max_norm renormalized looked-up rows only: {bool((after[[1, 2]] <= 1.0 + 1e-6).all())} others kept {torch.allclose(after[3:], before[3:])}")

users, items = UserTower(), ItemTower()
log_temp = nn.Parameter(torch.tensor(np.log(0.1), dtype=torch.float32))
with torch.no_grad():
    for m in (users, items):
        for name, p in m.named_parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.3 if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
    items.emb.weight[PAD] = 0
params = list(users.parameters()) + list(items.parameters()) + [log_temp]
opt = torch.optim.Adam(params, lr=5e-3)
log_q = torch.log(item_prob.float().clamp_min(1e-12))
losses = []
for step in range(80):
    hist, nxt = sample_users(64)
    flat, offs = flatten(hist)
    u = users(flat, offs)
    extra = torch.from_numpy(rng.integers(1, N_ITEMS, 32))
    cand = torch.cat([nxt, extra])
    v = items(cand)
    logits = u @ v.T / log_temp.exp()
    logits[:, :64] = logits[:, :64] - log_q[nxt]  # logQ correction for the in-batch part
    same = nxt.unsqueeze(1) == cand.unsqueeze(0)
    same.fill_diagonal_(False)
    logits = logits.masked_fill(same, float("-inf"))  # accidental hits
    loss = F.cross_entropy(logits, torch.arange(64))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} temperature {log_temp.exp().item():.5f}")

with torch.no_grad():
    hist, nxt = sample_users(200)
    flat, offs = flatten(hist)
    u = users(flat, offs)
    catalogue = items(torch.arange(N_ITEMS))
    scores = u @ catalogue.T
    scores[:, PAD] = float("-inf")
    top = scores.topk(10, dim=1).indices
    recall = (top == nxt.unsqueeze(1)).any(1).float().mean().item()
    rank = (scores > scores.gather(1, nxt.unsqueeze(1))).sum(1) + 1
    mrr = (1.0 / rank.float()).mean().item()
print(f"recall@10 {recall:.4f} mrr {mrr:.4f} user bag rows renormed {bool((users.bag.weight.norm(dim=1) <= 2.0 + 1e-5).all())}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {recall:.4f}")
