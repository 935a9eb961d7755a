"""Graph neural network code as libraries without torch_scatter write it, with core tensor ops
only: edge lists coalesced by unique(dim=1), self loops added, degrees by bincount and
index_add_, symmetric GCN normalisation, a GAT layer whose attention is a segment softmax
(scatter_reduce "amax" with include_self=False, exp, index_add_ sums), GIN / GraphSAGE
aggregations by scatter_reduce "sum" / "mean" / "amax" / "amin" and index_reduce_ "prod" /
"mean", graph readout over a batch vector (global mean / max / attention pooling), a
mini-batch of graphs built by concatenation with offsets (repeat_interleave, cumsum), and graph
classification trained with Adam. Data from NumPy: the run is the same on both libraries.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <train accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(77)


def make_graph(kind):
    n = int(rng.integers(6, 11))
    if kind == 0:  # a ring with a chord
        src = np.arange(n)
        dst = (src + 1) % n
        extra = np.array([[0], [n // 2]])
        e = np.concatenate([np.stack([src, dst]), extra], 1)
    else:  # a star with random leaves linked
        src = np.zeros(n - 1, dtype=np.int64)
        dst = np.arange(1, n)
        k = rng.integers(1, n, (2, 2))
        e = np.concatenate([np.stack([src, dst]), k], 1)
    e = np.concatenate([e, e[::-1]], 1)  # undirected
    e = np.concatenate([e, e[:, :3]], 1)  # duplicates, removed by coalescing
    x = rng.normal(0, 1, (n, 3)).astype(np.float32)
    x[:, 0] = 1.0
    return torch.from_numpy(x), torch.from_numpy(e.astype(np.int64)), kind


graphs = [make_graph(i % 2) for i in range(48)]
sizes = torch.tensor([g[0].shape[0] for g in graphs])
offsets = torch.cumsum(sizes, 0) - sizes
x_all = torch.cat([g[0] for g in graphs])
edges = torch.cat([g[1] + off for g, off in zip(graphs, offsets)], 1)
batch = torch.repeat_interleave(torch.arange(len(graphs)), sizes)
y = torch.tensor([g[2] for g in graphs])
N = x_all.shape[0]
print("nodes", N, "raw edges", edges.shape[1], "batch tail", batch[-3:].tolist())

edges = torch.unique(edges, dim=1)
edges = edges[:, edges[0] != edges[1]]
loops = torch.arange(N).repeat(2, 1)
ei = torch.cat([edges, loops], 1)
print("coalesced", edges.shape[1], "with loops", ei.shape[1], "sorted rows", bool((edges[0, 1:] >= edges[0, :-1]).all()))
src, dst = ei
deg = torch.bincount(dst, minlength=N).float()
deg2 = torch.zeros(N).index_add_(0, dst, torch.ones(ei.shape[1]))
print("degree max", deg.max().item(), "bincount == index_add", torch.equal(deg, deg2))
norm = deg[src].rsqrt() * deg[dst].rsqrt()

# the aggregations, checked against loops
msg = x_all[src]
agg = {}
for red in ("sum", "mean", "amax", "amin", "prod"):
    agg[red] = torch.zeros(N, 3).scatter_reduce(0, dst[:, None].expand(-1, 3), msg, reduce=red, include_self=False)
node = 5
mine = msg[dst == node]
print("scatter sum/mean/amax/amin/prod ok", all(torch.allclose(agg[r][node], v, atol=1e-6) for r, v in
      (("sum", mine.sum(0)), ("mean", mine.mean(0)), ("amax", mine.amax(0)), ("amin", mine.amin(0)), ("prod", mine.prod(0)))))
ir = torch.ones(N, 3).index_reduce_(0, dst, msg, "prod", include_self=True)
im = torch.full((N, 3), 2.0).index_reduce_(0, dst, msg, "mean", include_self=True)
print("index_reduce prod == scatter prod", torch.allclose(ir, agg["prod"], atol=1e-6),
      "mean with self", [round(v, 5) for v in im[node].tolist()])
empty = torch.full((3, 2), 7.0).scatter_reduce(0, torch.tensor([[0, 0]]), torch.tensor([[1.0, 2.0]]), "amax", include_self=False)
print("untouched rows keep their value", empty[1:].tolist())


def seed_(module, std=0.3):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, std, p.shape).astype(np.float32)))


def segment_softmax(score, index, n):
    mx = torch.full((n, score.shape[1]), float("-inf")).scatter_reduce(0, index[:, None].expand_as(score), score, "amax", include_self=False)
    ex = (score - mx[index]).exp()
    den = torch.zeros(n, score.shape[1]).index_add_(0, index, ex)
    return ex / den[index]


class GCN(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o)

    def forward(self, x):
        h = self.lin(x)
        return torch.zeros_like(h).index_add_(0, dst, h[src] * norm[:, None])


class GAT(nn.Module):
    def __init__(self, i, o, heads=2):
        super().__init__()
        self.h, self.o = heads, o
        self.lin = nn.Linear(i, heads * o, bias=False)
        self.a_src = nn.Parameter(torch.zeros(heads, o))
        self.a_dst = nn.Parameter(torch.zeros(heads, o))

    def forward(self, x):
        h = self.lin(x).view(-1, self.h, self.o)
        score = F.leaky_relu((h * self.a_src).sum(-1)[src] + (h * self.a_dst).sum(-1)[dst], 0.2)
        alpha = segment_softmax(score, dst, x.shape[0])
        out = torch.zeros_like(h).index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
        return out.flatten(1), alpha


class SAGE(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.self_lin = nn.Linear(i, o)
        self.nb_lin = nn.Linear(2 * i, o)

    def forward(self, x):
        idx = dst[:, None].expand(-1, x.shape[1])
        mean = torch.zeros_like(x).scatter_reduce(0, idx, x[src], "mean", include_self=False)
        mx = torch.zeros_like(x).scatter_reduce(0, idx, x[src], "amax", include_self=False)
        return self.self_lin(x) + self.nb_lin(torch.cat([mean, mx], 1))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gcn = GCN(3, 8)
        self.gat = GAT(8, 4)
        self.sage = SAGE(8, 8)
        self.gate = nn.Linear(8, 1)
        self.head = nn.Linear(24, 2)

    def forward(self, x):
        h = F.relu(self.gcn(x))
        h, alpha = self.gat(h)
        h = F.elu(self.sage(F.elu(h)))
        G = len(graphs)
        mean = torch.zeros(G, 8).index_add_(0, batch, h) / sizes[:, None]
        mx = torch.full((G, 8), float("-inf")).scatter_reduce(0, batch[:, None].expand_as(h), h, "amax")
        gate = segment_softmax(self.gate(h), batch, G)
        att = torch.zeros(G, 8).index_add_(0, batch, gate * h)
        return self.head(torch.cat([mean, mx, att], 1)), alpha


net = Net()
seed_(net)
logits, alpha = net(x_all)
sums = torch.zeros(N, 2).index_add_(0, dst, alpha)
print("attention sums to one per node", torch.allclose(sums, torch.ones(N, 2), atol=1e-5), "logits", tuple(logits.shape))
opt = torch.optim.Adam(net.parameters(), lr=0.02)
losses = []
for step in range(60):
    logits, _ = net(x_all)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 15 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} grad a_src {net.gat.a_src.grad.norm().item():.5f}")
acc = (net(x_all)[0].argmax(1) == y).float().mean().item()
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
