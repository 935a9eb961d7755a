"""Word2vec skip-gram with negative sampling, in the style of the public PyTorch word2vec
implementations: a synthetic corpus from a topic model (words of the same topic co-occur),
a Counter vocabulary with min_count, subsampling of frequent words (Mikolov's keep
probability, NumPy draws), (center, context) pairs from a dynamic window, a noise
distribution proportional to counts ** 0.75 held as a tensor and sampled with NumPy,
input / output embeddings as nn.Embedding(sparse=True) with the output table zero-initialized,
the loss F.logsigmoid(u . v) + sum F.logsigmoid(-u . v_neg) through torch.bmm, optim.SparseAdam
(sparse gradients: is_sparse, coalesce, indices / values), then the vectors frozen into
nn.Embedding.from_pretrained(freeze=True) and nn.EmbeddingBag.from_pretrained(mode="mean")
for sentence vectors, nearest neighbours by cosine similarity (F.normalize and topk), a
topic purity score of the neighbours, and padding_idx behaviour of F.embedding. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <neighbour purity>."""

from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(19)
TOPICS, PER = 5, 8
words = [f"t{t}w{i}" for t in range(TOPICS) for i in range(PER)] + ["the", "of", "and", "rare"]
corpus = []
for _ in range(400):
    t = rng.integers(0, TOPICS)
    sent = []
    for _ in range(10):
        r = rng.random()
        sent.append(["the", "of", "and"][rng.integers(0, 3)] if r < 0.35 else f"t{t}w{rng.integers(0, PER)}")
    corpus.append(sent)
corpus[0].append("rare")
counts = Counter(w for s in corpus for w in s)
vocab = [w for w, c in counts.most_common() if c >= 2]
stoi = {w: i for i, w in enumerate(vocab)}
V, D = len(vocab), 16
freq = torch.tensor([counts[w] for w in vocab], dtype=torch.float64)
total = freq.sum()
print(f"vocab {V} (min_count drops {len(counts) - V}) top {vocab[:3]} tokens {int(total)}")
keep = ((freq / total / 1e-3).sqrt() + 1) * 1e-3 / (freq / total)
noise = freq ** 0.75
noise = (noise / noise.sum()).numpy()
print(f"keep prob the {keep[stoi['the']].item():.4f} topic word {keep[stoi['t0w0']].item():.4f}")

pairs = []
for s in corpus:
    ids = [stoi[w] for w in s if w in stoi and rng.random() < keep[stoi[w]].item()]
    for i, c in enumerate(ids):
        win = int(rng.integers(1, 4))
        for j in range(max(0, i - win), min(len(ids), i + win + 1)):
            if j != i:
                pairs.append((c, ids[j]))
pairs = torch.tensor(pairs)
print(f"training pairs {pairs.shape[0]}")


class SGNS(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Embedding(V, D, sparse=True)
        self.out = nn.Embedding(V, D, sparse=True)
        with torch.no_grad():
            self.inp.weight.copy_(torch.from_numpy(rng.uniform(-0.5 / D, 0.5 / D, (V, D)).astype(np.float32)))
            self.out.weight.zero_()

    def forward(self, c, o, neg):
        u = self.inp(c)[:, :, None]  # (B, D, 1)
        pos = torch.bmm(self.out(o)[:, None], u).squeeze()
        negs = torch.bmm(self.out(neg), u).squeeze(2)
        return -(F.logsigmoid(pos) + F.logsigmoid(-negs).sum(1)).mean()


model = SGNS()
opt = torch.optim.SparseAdam(model.parameters(), lr=0.01)
losses = []
for epoch in range(6):
    order = torch.from_numpy(rng.permutation(pairs.shape[0]))
    tot, nb = 0.0, 0
    for b in order.split(256):
        c, o = pairs[b, 0], pairs[b, 1]
        neg = torch.from_numpy(rng.choice(V, size=(b.numel(), 5), p=noise))
        loss = model(c, o, neg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot, nb = tot + loss.item(), nb + 1
    losses.append(tot / nb)
    print(f"epoch {epoch} loss {losses[-1]:.5f}")
g = model.inp.weight.grad
print(f"sparse grad: {g.is_sparse} nnz rows {g.coalesce().indices().shape[1]} values {tuple(g.coalesce().values().shape)}")

emb = nn.Embedding.from_pretrained(model.inp.weight.detach().clone(), freeze=True)
E = F.normalize(emb.weight, dim=1)
sims = E @ E.T
sims.fill_diagonal_(-2)
topic_of = lambda w: w[:2] if w.startswith("t") else None  # noqa: E731
purity = []
for w in vocab:
    if topic_of(w):
        nn_idx = sims[stoi[w]].topk(3).indices.tolist()
        purity.append(np.mean([topic_of(vocab[j]) == topic_of(w) for j in nn_idx]))
nbrs = [vocab[j] for j in sims[stoi["t2w3"]].topk(3).indices.tolist()]
print(f"neighbours of t2w3: topics {[topic_of(n) for n in nbrs]} purity {np.mean(purity):.4f} frozen: {not emb.weight.requires_grad}")
bag = nn.EmbeddingBag.from_pretrained(emb.weight, mode="mean")
sent = torch.tensor([stoi["t1w0"], stoi["t1w1"], stoi["t3w2"], stoi["t3w4"], stoi["t3w5"]])
sv = bag(sent, torch.tensor([0, 2]))
print(f"sentence vectors {tuple(sv.shape)} matches mean: {torch.allclose(sv[0], emb.weight[sent[:2]].mean(0))}")
w = torch.arange(12.0).view(4, 3).requires_grad_()
F.embedding(torch.tensor([0, 2, 0, 1]), w, padding_idx=0).sum().backward()
print(f"padding_idx grad rows {w.grad.sum(1).tolist()}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {np.mean(purity):.4f}")
