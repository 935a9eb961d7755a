"""Knowledge-graph embeddings, in the style of the public TransE / RotatE / ComplEx
re-implementations (KGE toolkits without the library): a synthetic graph of (head, relation,
tail) triples generated from hidden rules, TransE with nn.Embedding(max_norm=1.0) (entity rows
renormalized on lookup) and an L1 distance, a margin loss on corrupted triples (NumPy-chosen
negatives, head or tail replaced by torch.where), RotatE with relations as phases turned into
unit complex numbers by torch.polar, entities stored as real pairs and viewed with
torch.view_as_complex, the self-adversarial negative weighting (softmax of negative scores,
detached) with F.logsigmoid, ComplEx scores Re(<h, r, conj(t)>) with torch.conj and .real and
N3 regularization, Tensor.renorm_ of the relation table, and filtered ranking metrics (MRR,
Hits@1/3/10): all tails scored at once, the known true tails masked with index_put_ of -inf
(accumulate=False) and the rank counted by comparisons. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <rotate mrr>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(17)
E, R, D = 60, 4, 16
perm = [rng.permutation(E) for _ in range(R)]  # relation r maps entity e to perm[r][e]
heads = rng.integers(0, E, 400)
rels = rng.integers(0, R, 400)
tails = np.array([perm[r][h] for h, r in zip(heads, rels)])
triples = torch.from_numpy(np.unique(np.stack([heads, rels, tails], 1), axis=0))
n = triples.shape[0]
test = triples[::7]
train = triples[torch.arange(n) % 7 != 0]
print(f"triples {n} train {train.shape[0]} test {test.shape[0]}")
known = {}
for h, r, t in triples.tolist():
    known.setdefault((h, r), []).append(t)


def corrupt(batch, k=8):
    neg = batch.repeat_interleave(k, 0)
    ents = torch.from_numpy(rng.integers(0, E, neg.shape[0]))
    head_side = torch.from_numpy(rng.random(neg.shape[0]) < 0.5)
    neg[:, 0] = torch.where(head_side, ents, neg[:, 0])
    neg[:, 2] = torch.where(head_side, neg[:, 2], ents)
    return neg


def init_(emb, scale):
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(rng.uniform(-scale, scale, emb.weight.shape).astype(np.float32)))


class TransE(nn.Module):
    def __init__(self):
        super().__init__()
        self.ent, self.rel = nn.Embedding(E, D, max_norm=1.0), nn.Embedding(R, D)
        init_(self.ent, 0.5), init_(self.rel, 0.5)

    def score(self, h, r, t):  # higher is better
        return -(self.ent(h) + self.rel(r) - self.ent(t)).abs().sum(-1)


class RotatE(nn.Module):
    def __init__(self, gamma=6.0):
        super().__init__()
        self.gamma = gamma
        self.ent, self.phase = nn.Embedding(E, 2 * D), nn.Embedding(R, D)
        init_(self.ent, 0.5), init_(self.phase, np.pi)

    def all_tails(self, h, r):
        hc = torch.view_as_complex(self.ent(h).view(-1, D, 2))
        rot = torch.polar(torch.ones_like(self.phase(r)), self.phase(r))
        tc = torch.view_as_complex(self.ent.weight.view(E, D, 2))
        return self.gamma - ((hc * rot)[:, None] - tc[None]).abs().sum(-1)

    def score(self, h, r, t):
        return self.all_tails(h, r).gather(1, t[:, None]).squeeze(1)


class ComplEx(nn.Module):
    def __init__(self):
        super().__init__()
        self.ent, self.rel = nn.Embedding(E, 2 * D), nn.Embedding(R, 2 * D)
        init_(self.ent, 0.3), init_(self.rel, 0.3)

    def all_tails(self, h, r):
        hc = torch.view_as_complex(self.ent(h).view(-1, D, 2))
        rc = torch.view_as_complex(self.rel(r).view(-1, D, 2))
        tc = torch.view_as_complex(self.ent.weight.view(E, D, 2))
        return ((hc * rc) @ torch.conj(tc).T).real

    def score(self, h, r, t):
        return self.all_tails(h, r).gather(1, t[:, None]).squeeze(1)


def filtered_metrics(model, data):
    with torch.no_grad():
        if isinstance(model, TransE):
            s = -(model.ent(data[:, 0])[:, None] + model.rel(data[:, 1])[:, None] - model.ent.weight[None]).abs().sum(-1)
        else:
            s = model.all_tails(data[:, 0], data[:, 1])
        target = s.gather(1, data[:, 2:3])
        rows, cols = [], []
        for i, (h, r, t) in enumerate(data.tolist()):
            for tt in known[(h, r)]:
                if tt != t:
                    rows.append(i), cols.append(tt)
        if rows:
            s = s.index_put_((torch.tensor(rows), torch.tensor(cols)), torch.tensor(float("-inf")))
        rank = (s > target).sum(1) + 1
        return (1.0 / rank.float()).mean().item(), [(rank <= k).float().mean().item() for k in (1, 3, 10)]


results = {}
for name, model in [("TransE", TransE()), ("RotatE", RotatE()), ("ComplEx", ComplEx())]:
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for epoch in range(25):
        order = torch.from_numpy(rng.permutation(train.shape[0]))
        total = 0.0
        for b in order.split(128):
            pos = train[b]
            neg = corrupt(pos)
            ps = model.score(pos[:, 0], pos[:, 1], pos[:, 2])
            ns = model.score(neg[:, 0], neg[:, 1], neg[:, 2]).view(-1, 8)
            if name == "TransE":
                loss = F.relu(2.0 - ps[:, None] + ns).mean()
            elif name == "RotatE":
                w = F.softmax(ns.detach(), dim=1)
                loss = -(F.logsigmoid(ps).mean() + (w * F.logsigmoid(-ns)).sum(1).mean()) / 2
            else:
                loss = F.softplus(-ps).mean() + F.softplus(ns).mean()
                loss = loss + 1e-3 * (model.ent(pos[:, 0]).abs() ** 3).sum() / pos.shape[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
            if name == "RotatE":
                with torch.no_grad():
                    model.ent.weight.renorm_(2, 0, 2.0)
            total += loss.item() * b.numel()
        losses.append(total / train.shape[0])
    mrr, hits = filtered_metrics(model, train[::3])
    results[name] = (losses, mrr)
    print(f"{name:7s} loss {losses[0]:.4f} -> {losses[-1]:.4f} filtered train MRR {mrr:.4f} "
          f"hits@1/3/10 {[round(h, 4) for h in hits]}")
norms = TransE().ent(torch.arange(E)).norm(dim=1)
print(f"max_norm respected: {bool((norms <= 1.0 + 1e-5).all())}")
print(f"RESULT {results['RotatE'][0][0]:.4f} {results['RotatE'][0][-1]:.4f} {results['RotatE'][1]:.4f}")
