"""Message passing without PyTorch Geometric, the way public GraphSAGE / R-GCN / PNA
re-implementations write it: an edge index (2, E) with mean / max / min / sum aggregation by
Tensor.scatter_reduce(include_self=False) and by index_reduce_, degree by torch.bincount, the
standard deviation aggregator from E[x^2] - E[x]^2, PNA degree scalers (log(d + 1) / delta),
GraphSAGE with uniform neighbour sampling (fixed fan-out per node from NumPy) and mini-batches
of target nodes whose sampled two-hop computation graph is relabelled by torch.unique(
return_inverse=True), an R-GCN layer with basis decomposition (relation weights as an einsum of
bases and coefficients) and per-relation normalization c_{i,r} = 1 / |N_i^r|, trained on a
synthetic stochastic block model with two edge types, with accuracy and macro-F1. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <test accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1612)

# aggregation checks on a tiny graph: 5 nodes, edges src -> dst
src = torch.tensor([0, 1, 2, 3, 3, 4, 0])
dst = torch.tensor([1, 1, 1, 0, 2, 2, 4])
x = torch.tensor([[1.0, -1.0], [2.0, 0.5], [3.0, 2.0], [-1.0, 4.0], [0.5, 0.5]])
msg = x[src]
idx = dst.unsqueeze(1).expand(-1, 2)
outs = {}
for red in ("sum", "mean", "amax", "amin", "prod"):
    outs[red] = torch.zeros(5, 2).scatter_reduce(0, idx, msg, reduce=red, include_self=False)
    print(f"scatter_reduce {red:4s} {outs[red].tolist()}")
deg = torch.bincount(dst, minlength=5)
print(f"in-degrees {deg.tolist()} mean == sum / degree: {torch.allclose(outs['mean'], outs['sum'] / deg.clamp(min=1)[:, None])}")
ir = torch.full((5, 2), 7.0).index_reduce_(0, dst, msg, "amax", include_self=False)
print(f"index_reduce_ amax (untouched rows keep 7) {ir.tolist()}")
ir_mean = torch.ones(5, 2).index_reduce_(0, dst, msg, "mean")
print(f"index_reduce_ mean with include_self {[[round(v, 4) for v in r] for r in ir_mean.tolist()]}")
sq = torch.zeros(5, 2).scatter_reduce(0, idx, msg ** 2, reduce="mean", include_self=False)
std = torch.sqrt(torch.relu(sq - outs["mean"] ** 2) + 1e-5)
print(f"std aggregator {[[round(v, 4) for v in r] for r in std.tolist()]}")

# a stochastic block model with 3 communities and 2 relation types
N, C, FEAT = 150, 3, 8
labels_np = rng.integers(0, C, N)
feat_np = rng.normal(0, 1, (N, FEAT)) + 0.5 * np.eye(C, FEAT)[labels_np]
edges = {0: [], 1: []}
for i in range(N):
    for j in range(i + 1, N):
        same = labels_np[i] == labels_np[j]
        if rng.random() < (0.08 if same else 0.01):
            edges[0] += [(i, j), (j, i)]
        if rng.random() < (0.005 if same else 0.03):  # relation 1 links different communities
            edges[1] += [(i, j), (j, i)]
ei = [torch.tensor(edges[r], dtype=torch.long).T for r in (0, 1)]
X = torch.from_numpy(feat_np.astype(np.float32))
y = torch.from_numpy(labels_np)
perm = torch.from_numpy(rng.permutation(N))
train_idx, test_idx = perm[:60], perm[60:]
print(f"graph: {N} nodes, relation edges {[e.shape[1] for e in ei]} mean degree {torch.bincount(ei[0][1], minlength=N).float().mean().item():.3f}")


class RGCNLayer(nn.Module):
    def __init__(self, fin, fout, relations, bases):
        super().__init__()
        self.bases = nn.Parameter(torch.from_numpy(rng.normal(0, 1 / math.sqrt(fin), (bases, fin, fout)).astype(np.float32)))
        self.coef = nn.Parameter(torch.from_numpy(rng.normal(0, 1, (relations, bases)).astype(np.float32)))
        self.root = nn.Linear(fin, fout)

    def forward(self, h, edge_indices):
        W = torch.einsum("rb,bio->rio", self.coef, self.bases)
        out = self.root(h)
        for r, e in enumerate(edge_indices):
            s, d = e
            norm = 1.0 / torch.bincount(d, minlength=h.shape[0]).clamp(min=1).float()
            m = (h[s] @ W[r]) * norm[d].unsqueeze(1)
            out = out.index_add(0, d, m)
        return out


class PNALayer(nn.Module):
    def __init__(self, fin, fout, delta):
        super().__init__()
        self.delta = delta
        self.post = nn.Linear(fin * 4 * 3 + fin, fout)

    def forward(self, h, e):
        s, d = e
        n = h.shape[0]
        ix = d.unsqueeze(1).expand(-1, h.shape[1])
        mean = torch.zeros_like(h).scatter_reduce(0, ix, h[s], "mean", include_self=False)
        mx = torch.zeros_like(h).scatter_reduce(0, ix, h[s], "amax", include_self=False)
        mn = torch.zeros_like(h).scatter_reduce(0, ix, h[s], "amin", include_self=False)
        sq = torch.zeros_like(h).scatter_reduce(0, ix, h[s] ** 2, "mean", include_self=False)
        sd = torch.sqrt(torch.relu(sq - mean ** 2) + 1e-5)
        agg = torch.cat([mean, mx, mn, sd], 1)
        logd = torch.log(torch.bincount(d, minlength=n).float() + 1).unsqueeze(1)
        scaled = torch.cat([agg, agg * logd / self.delta, agg * self.delta / logd.clamp(min=1e-3)], 1)
        return self.post(torch.cat([h, scaled], 1))


class SAGE(nn.Module):
    def __init__(self, fin, hidden, out):
        super().__init__()
        self.l1_self, self.l1_nb = nn.Linear(fin, hidden), nn.Linear(fin, hidden, bias=False)
        self.l2_self, self.l2_nb = nn.Linear(hidden, out), nn.Linear(hidden, out, bias=False)

    @staticmethod
    def mean_agg(h, s, d, n):
        return torch.zeros(n, h.shape[1]).index_reduce_(0, d, h[s], "mean", include_self=False)

    def forward(self, h, blocks):
        (s1, d1, n1), (s2, d2, n2) = blocks
        h1 = F.relu(self.l1_self(h[:n1]) + self.l1_nb(self.mean_agg(h, s1, d1, n1)))
        h1 = F.normalize(h1, dim=1)
        return self.l2_self(h1[:n2]) + self.l2_nb(self.mean_agg(h1, s2, d2, n2))


adj = [[] for _ in range(N)]
for s_, d_ in ei[0].T.tolist():
    adj[d_].append(s_)


def sample_blocks(targets, fanout=(5, 5)):
    """Two-hop sampled computation graph; nodes relabelled so that targets come first."""
    layer_nodes = [targets.tolist()]
    layer_edges = []
    frontier = targets.tolist()
    for f in fanout:
        es = []
        for v in frontier:
            nb = adj[v]
            pick = rng.choice(nb, size=min(f, len(nb)), replace=False).tolist() if nb else []
            es += [(u, v) for u in pick]
        layer_edges.append(es)
        frontier = sorted({u for u, _ in es} | set(frontier))
        layer_nodes.append(frontier)
    ordered = list(dict.fromkeys(layer_nodes[0] + [u for u in layer_nodes[1] if u not in set(layer_nodes[0])] + [u for u in layer_nodes[2]]))
    nodes = torch.tensor(ordered)
    _, inv = torch.unique(torch.cat([nodes, torch.tensor([u for e in layer_edges for pair in e for u in pair], dtype=torch.long)]), return_inverse=True)
    pos = {u: i for i, u in enumerate(ordered)}
    n_hop1 = len(dict.fromkeys(layer_nodes[0] + layer_nodes[1]))
    e_outer = torch.tensor([[pos[u], pos[v]] for u, v in layer_edges[1]], dtype=torch.long).T.reshape(2, -1)
    e_inner = torch.tensor([[pos[u], pos[v]] for u, v in layer_edges[0]], dtype=torch.long).T.reshape(2, -1)
    return nodes, [(e_outer[0], e_outer[1], n_hop1), (e_inner[0], e_inner[1], len(targets))], inv.numel()


def macro_f1(pred, true, k):
    f1s = []
    for c in range(k):
        tp = ((pred == c) & (true == c)).sum().item()
        fp = ((pred == c) & (true != c)).sum().item()
        fn = ((pred != c) & (true == c)).sum().item()
        f1s.append(2 * tp / max(2 * tp + fp + fn, 1))
    return sum(f1s) / k


def init(m):
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[1]), p.shape).astype(np.float32)))
            elif p.dim() == 1:
                p.zero_()


rgcn1, rgcn2 = RGCNLayer(FEAT, 16, 2, 2), RGCNLayer(16, C, 2, 2)
pna = PNALayer(FEAT, 16, delta=torch.log(torch.bincount(ei[0][1], minlength=N).float() + 1).mean().item())
init(rgcn1.root), init(rgcn2.root), init(pna)
params = list(rgcn1.parameters()) + list(rgcn2.parameters()) + list(pna.parameters())
opt = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)
losses = []
for epoch in range(60):
    h = F.relu(rgcn1(X, ei)) + F.relu(pna(X, ei[0]))
    out = rgcn2(F.dropout(h, 0.0), ei)
    loss = F.cross_entropy(out[train_idx], y[train_idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 20 == 0:
        print(f"rgcn+pna epoch {epoch:2d} loss {loss.item():.4f}")
with torch.no_grad():
    pred = rgcn2(F.relu(rgcn1(X, ei)) + F.relu(pna(X, ei[0])), ei).argmax(1)
acc = (pred[test_idx] == y[test_idx]).float().mean().item()
print(f"rgcn+pna test accuracy {acc:.4f} macro-f1 {macro_f1(pred[test_idx], y[test_idx], C):.4f}")

sage = SAGE(FEAT, 16, C)
init(sage)
opt = torch.optim.Adam(sage.parameters(), lr=0.01)
for epoch in range(15):
    order = train_idx[torch.from_numpy(rng.permutation(60))]
    for b in range(0, 60, 20):
        nodes, blocks, _ = sample_blocks(order[b:b + 20])
        out = sage(X[nodes], blocks)
        loss = F.cross_entropy(out, y[order[b:b + 20]])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch % 5 == 0:
        print(f"sage epoch {epoch:2d} loss {loss.item():.4f} sampled nodes {nodes.numel()}")
with torch.no_grad():
    nodes, blocks, _ = sample_blocks(test_idx, fanout=(10, 10))
    sage_pred = sage(X[nodes], blocks).argmax(1)
sage_acc = (sage_pred == y[test_idx]).float().mean().item()
print(f"graphsage test accuracy {sage_acc:.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
