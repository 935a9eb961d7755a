"""Graph-level regression on small molecule-like graphs with a GIN, in the style of the
public PyTorch-Geometric-free GIN / MPNN implementations: graphs batched into one big graph
(node offsets added to each edge_index, a batch vector from torch.repeat_interleave of the
node counts), messages with edge features summed by index_add_, max aggregation by
scatter_reduce_(reduce="amax", include_self=False) into a -inf tensor (every node has an in-edge), mean by index_reduce_(reduce="mean",
include_self=False), graph readouts by torch.segment_reduce over sorted segments (sum / mean with lengths; max
checked against the scatter form), a learnable epsilon per layer, a virtual
node, BatchNorm1d over nodes, jumping-knowledge concatenation of the per-layer readouts, and the
targets: the number of rings (edges - nodes + 1) and the max degree, with a degree histogram by
torch.bincount. Data and weights from NumPy, float64 throughout. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <mae>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(40)
torch.set_default_dtype(torch.float64)  # ties under ReLU / max make float32 runs drift apart


def random_graph():
    n = int(rng.integers(5, 11))
    edges = {(i, i + 1) for i in range(n - 1)}  # a path keeps it connected
    for _ in range(int(rng.integers(0, 4))):
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        edges.add((a, b))
    e = np.array(sorted(edges)).T
    return n, np.concatenate([e, e[::-1]], 1), rng.integers(0, 3, n), rng.integers(0, 2, e.shape[1])


graphs = [random_graph() for _ in range(64)]
counts = torch.tensor([g[0] for g in graphs])
offsets = torch.cumsum(counts, 0) - counts
edge_index = torch.cat([torch.from_numpy(g[1]) + off for g, off in zip(graphs, offsets.tolist())], 1)
atom = torch.cat([torch.from_numpy(g[2]) for g in graphs])
bond = torch.cat([torch.from_numpy(np.concatenate([g[3], g[3]])) for g in graphs])
batch = torch.repeat_interleave(torch.arange(len(graphs)), counts)
deg = torch.bincount(edge_index[0], minlength=int(counts.sum()))
rings = torch.tensor([g[1].shape[1] // 2 - g[0] + 1 for g in graphs], dtype=torch.float64)
max_deg = torch.zeros(len(graphs), dtype=deg.dtype).scatter_reduce_(0, batch, deg, reduce="amax", include_self=False)
Y = torch.stack([rings, max_deg.double()], 1)
print(f"graphs {len(graphs)} nodes {int(counts.sum())} edges {edge_index.shape[1]} degree histogram {torch.bincount(deg).tolist()}")

seg = torch.segment_reduce(deg.double(), "max", lengths=counts)
hd = torch.tensor([[1.0, 2.0], [1.0, 0.5], [5.0, 6.0]], requires_grad=True)
torch.zeros(2, 2).index_reduce_(0, torch.tensor([0, 0, 1]), hd, "amax", include_self=False).sum().backward()
print(f"index_reduce_ amax ties share the gradient: {hd.grad.tolist()}")
print(f"segment_reduce max == scatter amax: {torch.equal(seg, max_deg.double())} "
      f"mean: {torch.allclose(torch.segment_reduce(deg.double(), 'mean', lengths=counts), torch.zeros(len(graphs)).index_reduce_(0, batch, deg.double(), 'mean', include_self=False))}")


class GINLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.bond = nn.Embedding(2, d)
        self.mlp = nn.Sequential(nn.Linear(2 * d, d), nn.BatchNorm1d(d), nn.ReLU(), nn.Linear(d, d))

    def forward(self, h, edge_index, bond):
        src, dst = edge_index
        msg = F.relu(h[src] + self.bond(bond))
        agg_sum = torch.zeros_like(h).index_add_(0, dst, msg)
        agg_max = torch.full_like(h, float("-inf")).scatter_reduce_(0, dst[:, None].expand_as(msg), msg, reduce="amax", include_self=False)
        return self.mlp(torch.cat([(1 + self.eps) * h + agg_sum, agg_max], 1))


class GIN(nn.Module):
    def __init__(self, d=32, layers=3):
        super().__init__()
        self.atom = nn.Embedding(3, d)
        self.layers = nn.ModuleList([GINLayer(d) for _ in range(layers)])
        self.virtual = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])
        self.head = nn.Linear(3 * d * (layers + 1), 2)

    def readout(self, h):
        s = torch.segment_reduce(h, "sum", lengths=counts, axis=0)
        # max by scatter_reduce: torch's segment_reduce max backward mishandles ties
        m = torch.full((len(graphs), h.shape[1]), float("-inf")).scatter_reduce(
            0, batch[:, None].expand_as(h), h, reduce="amax", include_self=False)
        a = torch.segment_reduce(h, "mean", lengths=counts, axis=0)
        return torch.cat([s / 10, m, a], 1)

    def forward(self):
        h = self.atom(atom)
        vn = torch.zeros(len(graphs), h.shape[1])
        outs = [self.readout(h)]
        for layer, vlin in zip(self.layers, self.virtual):
            h = h + vn[batch]
            h = F.relu(layer(h, edge_index, bond)) + h
            vn = F.relu(vlin(torch.zeros_like(vn).index_add_(0, batch, h) + vn))
            outs.append(self.readout(h))
        return self.head(torch.cat(outs, 1))


model = GIN()
with torch.no_grad():
    for n, p in model.named_parameters():
        if p.dim() > 1 or n.endswith(".bias") and "mlp.1" not in n:
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 / np.sqrt(p.shape[-1]), p.shape)))
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for step in range(80):
    loss = F.mse_loss(model(), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} eps {[round(layer.eps.item(), 4) for layer in model.layers]}")
model.eval()
with torch.no_grad():
    mae = (model() - Y).abs().mean(0)
print(f"mae rings {mae[0].item():.4f} max degree {mae[1].item():.4f} bn running mean {model.layers[0].mlp[1].running_mean.abs().mean().item():.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {mae.mean().item():.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
