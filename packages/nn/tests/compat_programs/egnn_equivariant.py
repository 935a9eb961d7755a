"""E(n)-equivariant graph neural networks (EGNN, Satorras et al.) in the style of the public
reference code: batched molecules as one disjoint graph (a batch vector from repeat_interleave,
fully connected edges per graph from torch.combinations shifted by cumsum offsets, both
directions), edge messages from [h_i, h_j, |x_i - x_j|^2, edge_attr], coordinate updates
x_i + sum_j (x_i - x_j) phi_x(m_ij) / (n - 1) by index_add_, node updates from aggregated messages
by scatter_add_ with an expanded index, attention gates, and graph readout by
scatter_reduce("mean", include_self=False). E(3) equivariance of the coordinates and invariance
of the features are checked under a random orthogonal matrix (torch.linalg.qr with the sign fix,
including a reflection) plus a translation, and node-permutation equivariance under a shuffle.
Trained to predict the radius of gyration of random point clouds. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <test mae>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(150)
torch.set_default_dtype(torch.float64)


def unsorted_segment_sum(data, segment_ids, num_segments):
    result = data.new_full((num_segments, data.size(1)), 0)
    segment_ids = segment_ids.unsqueeze(-1).expand(-1, data.size(1))
    return result.scatter_add_(0, segment_ids, data)


class EGCL(nn.Module):
    def __init__(self, h, edge_dim=1, attention=True, tanh=True, coords_range=3.0):
        super().__init__()
        self.edge_mlp = nn.Sequential(nn.Linear(2 * h + 1 + edge_dim, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU())
        self.node_mlp = nn.Sequential(nn.Linear(2 * h, h), nn.SiLU(), nn.Linear(h, h))
        last = nn.Linear(h, 1, bias=False)
        nn.init.xavier_uniform_(last.weight, gain=0.001)
        self.coord_mlp = nn.Sequential(nn.Linear(h, h), nn.SiLU(), last)
        self.att_mlp = nn.Sequential(nn.Linear(h, 1), nn.Sigmoid()) if attention else None
        self.tanh, self.coords_range = tanh, coords_range

    def forward(self, h, x, edge_index, edge_attr, n_per_node):
        row, col = edge_index
        diff = x[row] - x[col]
        radial = (diff ** 2).sum(1, keepdim=True)
        m = self.edge_mlp(torch.cat([h[row], h[col], radial, edge_attr], dim=1))
        if self.att_mlp is not None:
            m = m * self.att_mlp(m)
        trans = self.coord_mlp(m)
        if self.tanh:
            trans = torch.tanh(trans) * self.coords_range
        trans = diff * trans
        agg = torch.zeros_like(x).index_add_(0, row, trans) / (n_per_node.unsqueeze(1) - 1)
        x = x + agg
        agg_h = unsorted_segment_sum(m, row, h.size(0))
        h = h + self.node_mlp(torch.cat([h, agg_h], dim=1))
        return h, x


class EGNN(nn.Module):
    def __init__(self, in_nf=4, h=32, layers=3):
        super().__init__()
        self.embedding_in = nn.Linear(in_nf, h)
        self.layers = nn.ModuleList([EGCL(h) for _ in range(layers)])
        self.readout = nn.Sequential(nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1))

    def forward(self, h, x, edge_index, batch, n_graphs):
        counts = torch.bincount(batch, minlength=n_graphs)
        n_per_node = counts[batch].to(x.dtype)
        edge_attr = ((x[edge_index[0]] - x[edge_index[1]]) ** 2).sum(1, keepdim=True)
        h = self.embedding_in(h)
        for layer in self.layers:
            h, x = layer(h, x, edge_index, edge_attr, n_per_node)
        pooled = torch.zeros(n_graphs, h.shape[1]).scatter_reduce(
            0, batch.unsqueeze(1).expand_as(h), h, reduce="mean", include_self=False)
        return self.readout(pooled).squeeze(-1), x


def make_batch(sizes):
    sizes_t = torch.tensor(sizes)
    batch = torch.repeat_interleave(torch.arange(len(sizes)), sizes_t)
    offsets = torch.cumsum(sizes_t, 0) - sizes_t
    edges = []
    for g, n in enumerate(sizes):
        pairs = torch.combinations(torch.arange(n), r=2) + offsets[g]
        edges.append(torch.cat([pairs, pairs.flip(1)]))
    edge_index = torch.cat(edges).T.contiguous()
    n = int(sizes_t.sum())
    x = torch.from_numpy(rng.normal(size=(n, 3)) * rng.uniform(0.5, 2.0, (n, 1)))
    h = F.one_hot(torch.from_numpy(rng.integers(0, 4, n)), 4).to(torch.float64)
    return h, x, edge_index, batch


def radius_of_gyration(x, batch, n_graphs):
    counts = torch.bincount(batch, minlength=n_graphs).unsqueeze(1).to(x.dtype)
    center = torch.zeros(n_graphs, 3).index_add_(0, batch, x) / counts
    d2 = ((x - center[batch]) ** 2).sum(1, keepdim=True)
    return (torch.zeros(n_graphs, 1).index_add_(0, batch, d2) / counts).sqrt().squeeze(1)


model = EGNN()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("coord_mlp.2.weight"):
            p.mul_(0).add_(torch.from_numpy(rng.uniform(-1e-3, 1e-3, p.shape)))
        elif p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[1]), p.shape)))
        else:
            p.zero_()

sizes = [5, 7, 4]
h, x, ei, batch = make_batch(sizes)
print(f"nodes {x.shape[0]} edges {ei.shape[1]} batch {batch.tolist()}")
q, r = torch.linalg.qr(torch.from_numpy(rng.normal(size=(3, 3))))
q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
q = q @ torch.diag(torch.tensor([1.0, 1.0, -1.0]))  # include a reflection: E(3), not only SE(3)
t = torch.from_numpy(rng.normal(size=(1, 3)))
model.layers[0].coord_mlp[2].weight.data.mul_(1000)  # visible coordinate updates for the check
y1, x1 = model(h, x, ei, batch, 3)
y2, x2 = model(h, x @ q.T + t, ei, batch, 3)
print(f"orthogonal: {torch.allclose(q @ q.T, torch.eye(3))} det {torch.linalg.det(q).item():.1f}")
print(f"invariant output: {torch.allclose(y1, y2, atol=1e-9)} equivariant coordinates: "
      f"{torch.allclose(x1 @ q.T + t, x2, atol=1e-9)} coordinates moved: {bool((x1 - x).abs().max() > 1e-3)}")
perm = torch.from_numpy(rng.permutation(x.shape[0]))
inv = torch.argsort(perm)
y3, x3 = model(h[perm], x[perm], inv[ei], batch[perm], 3)
print(f"permutation equivariant: {torch.allclose(x3, x1[perm], atol=1e-9)} graph outputs equal: {torch.allclose(y3, y1, atol=1e-9)}")
model.layers[0].coord_mlp[2].weight.data.div_(1000)

opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-12)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=20, gamma=0.5)
losses = []
for step in range(50):
    sizes = rng.integers(3, 8, 8).tolist()
    h, x, ei, batch = make_batch(sizes)
    target = radius_of_gyration(x, batch, len(sizes))
    pred, _ = model(h, x, ei, batch, len(sizes))
    loss = F.l1_loss(pred, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} l1 {loss.item():.4f}")
with torch.no_grad():
    sizes = rng.integers(3, 8, 64).tolist()
    h, x, ei, batch = make_batch(sizes)
    mae = (model(h, x, ei, batch, len(sizes))[0] - radius_of_gyration(x, batch, len(sizes))).abs().mean().item()
    baseline = (radius_of_gyration(x, batch, len(sizes)) - radius_of_gyration(x, batch, len(sizes)).mean()).abs().mean().item()
print(f"test mae {mae:.4f} (predict-the-mean {baseline:.4f})")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {mae:.4f}")
