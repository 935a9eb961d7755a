"""A session-based recommender in the style of production PyTorch recsys code: multi-hot user
histories fed to nn.EmbeddingBag through flat ids + offsets (include_last_offset=True, recency
weights as per_sample_weights in "sum" mode), "max" and "mean" bags with a padding_idx, the
functional F.embedding_bag, sparse=True tables trained with optim.SparseAdam next to a dense
Adam on the MLP (sparse COO gradients: coalesce, indices, values), session splitting with
tensor_split over a tensor of boundaries, in-batch sampled softmax with logQ correction, and
recall@k / NDCG@k evaluation by topk and scatter. Data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <recall@10>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(31337)
N_ITEMS, D, B = 60, 16, 32
popularity = np.exp(-np.arange(N_ITEMS) / 15.0)
popularity /= popularity.sum()


def session():
    # items cluster into 6 "genres": a session mostly stays in one
    genre = rng.integers(0, 6)
    n = int(rng.integers(2, 8))
    items = genre * 10 + rng.integers(0, 10, n)
    items[rng.random(n) < 0.2] = rng.choice(N_ITEMS, p=popularity)
    nxt = genre * 10 + rng.integers(0, 10)
    return items, nxt


sessions = [session() for _ in range(640)]
flat = torch.tensor(np.concatenate([s[0] for s in sessions]))
lengths = torch.tensor([len(s[0]) for s in sessions])
bounds = torch.cumsum(lengths, 0)
targets = torch.tensor([s[1] for s in sessions])
pieces = torch.tensor_split(flat, bounds[:-1])
print("sessions", len(pieces), "tokens", flat.numel(), "first", pieces[0].tolist(), "last", pieces[-1].tolist())
assert all(len(p) == int(n) for p, n in zip(pieces, lengths))

# reference bags by hand vs EmbeddingBag
table = torch.from_numpy(rng.normal(0, 0.1, (N_ITEMS + 1, D)).astype(np.float32))
ids, offs = flat[:12], torch.tensor([0, 3, 7, 12])
w = torch.linspace(0.5, 1.5, 12)
bag_sum = F.embedding_bag(ids, table, offs, mode="sum", per_sample_weights=w, include_last_offset=True)
manual = torch.stack([(table[ids[a:b]] * w[a:b, None]).sum(0) for a, b in zip(offs[:-1], offs[1:])])
print("weighted sum bags == manual", torch.allclose(bag_sum, manual, atol=1e-6), tuple(bag_sum.shape))
bag_max = F.embedding_bag(ids, table, offs[:-1], mode="max")
print("max bags == manual", torch.allclose(bag_max, torch.stack([table[ids[a:b]].amax(0) for a, b in zip(offs[:-1], offs[1:])])))
padded = torch.nn.utils.rnn.pad_sequence(list(pieces[:4]), batch_first=True, padding_value=N_ITEMS)
mean_bag = nn.EmbeddingBag.from_pretrained(table, mode="mean", padding_idx=N_ITEMS)
print("2-D input with padding_idx", torch.allclose(mean_bag(padded), torch.stack([table[p].mean(0) for p in pieces[:4]]), atol=1e-6))
empty = F.embedding_bag(torch.tensor([1, 2]), table, torch.tensor([0, 0, 2]), mode="mean")
print("empty bag is zeros", empty[0].abs().sum().item(), "others", round(empty[2].sum().item(), 5))


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.hist_sum = nn.EmbeddingBag(N_ITEMS, D, mode="sum", sparse=True)
        self.hist_max = nn.EmbeddingBag(N_ITEMS, D, mode="max")  # max bags have no sparse grads
        self.items = nn.Embedding(N_ITEMS, D, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * D, 32), nn.ReLU(), nn.Linear(32, D))

    def user(self, ids, offsets, weights):
        s = self.hist_sum(ids, offsets, per_sample_weights=weights)
        m = self.hist_max(ids, offsets)
        return self.mlp(torch.cat([s, m], 1))


model = Recommender()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape).astype(np.float32)))
sparse_params = [p for n, p in model.named_parameters() if n in ("hist_sum.weight", "items.weight")]
dense_params = [p for n, p in model.named_parameters() if n not in ("hist_sum.weight", "items.weight")]
try:
    nn.EmbeddingBag(4, 2, mode="max", sparse=True)(torch.tensor([0, 1]), torch.tensor([0]))
except ValueError as exc:
    print("max + sparse ->", type(exc).__name__)
opt_sparse = torch.optim.SparseAdam(sparse_params, lr=0.01)
opt_dense = torch.optim.Adam(dense_params, lr=0.005)
log_q = torch.log(torch.from_numpy(popularity.astype(np.float32)))


def batch_of(idx):
    ids = torch.cat([pieces[i] for i in idx])
    lens = lengths[idx]
    offsets = torch.cumsum(lens, 0) - lens
    # recency weights: later clicks count more
    pos = torch.cat([torch.arange(int(n)) for n in lens]).float()
    weights = (pos + 1) / torch.repeat_interleave(lens.float(), lens)
    return ids, offsets, weights


train_idx = np.arange(512)
losses = []
for step in range(120):
    idx = rng.choice(train_idx, B, replace=False)
    ids, offsets, weights = batch_of(idx)
    u = model.user(ids, offsets, weights)
    tgt = targets[idx]
    v = model.items(tgt)
    logits = u @ v.T - log_q[tgt][None, :]  # in-batch negatives, popularity-corrected
    same = tgt[:, None] == tgt[None, :]
    logits = logits.masked_fill(same & ~torch.eye(B, dtype=torch.bool), float("-inf"))
    loss = F.cross_entropy(logits, torch.arange(B))
    opt_sparse.zero_grad()
    opt_dense.zero_grad()
    loss.backward()
    if step == 0:
        g = model.items.weight.grad
        print("item grad sparse", g.is_sparse, "layout", g.layout, "unique rows", g.coalesce().indices().shape[1] == tgt.unique().numel())
        print("bag grad rows touched", model.hist_sum.weight.grad.coalesce().indices().shape[1] == ids.unique().numel())
    opt_sparse.step()
    opt_dense.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")

with torch.no_grad():
    test = np.arange(512, 640)
    ids, offsets, weights = batch_of(test)
    scores = model.user(ids, offsets, weights) @ model.items.weight.T
    top = scores.topk(10, dim=1).indices
    hit = (top == targets[test][:, None])
    recall = hit.any(1).float().mean().item()
    rank = torch.where(hit.any(1), hit.float().argmax(1), torch.full((len(test),), -1))
    dcg = torch.where(rank >= 0, 1.0 / torch.log2(rank.float() + 2), torch.zeros(len(test)))
    seen = torch.zeros(len(test), N_ITEMS).scatter_(1, top, 1.0)
    print("ndcg@10", round(dcg.mean().item(), 5), "coverage", int(seen.amax(0).sum().item()))
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {recall:.4f}")
