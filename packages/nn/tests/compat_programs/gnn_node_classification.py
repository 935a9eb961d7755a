"""Node classification with graph neural networks written in plain PyTorch, in the style of the
public GCN and GAT reference implementations (no graph library): a stochastic-block-model graph
given as an edge_index (2, E) LongTensor with self-loops added, symmetric normalization
D^-1/2 (A + I) D^-1/2 from degrees computed with index_add_/bincount, message passing by
index_select + index_add_ (checked against a dense adjacency built with index_put_ and
torch.mm), a two-layer GCN, and a GAT layer whose edge attention is a segment softmax over each
node's incoming edges (scatter_reduce(reduce="amax", include_self=False) for the max, index_add_
for the sums, LeakyReLU(0.2) scores, multi-head concat via einsum); boolean train/val/test masks,
cross_entropy on the masked nodes, Adam with weight decay, accuracy by argmax, and the best
model kept with copy.deepcopy of its state_dict. Weights initialized from NumPy, no dropout:
the run is the same on both libraries. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <GCN test acc> <GAT test acc>."""

import argparse
import copy
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=40)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

# ---- a graph: 3 communities, denser inside ---------------------------------------------------
N, C, FEAT = 90, 3, 8
labels_np = np.repeat(np.arange(C), N // C)
p = np.where(labels_np[:, None] == labels_np[None, :], 0.15, 0.01)
upper = np.triu(rng.uniform(size=(N, N)) < p, 1)
src, dst = np.nonzero(upper | upper.T)
edge_index = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
x = torch.from_numpy((rng.normal(size=(N, FEAT)) + 0.6 * np.eye(C)[labels_np] @ rng.normal(
    size=(C, FEAT))).astype(np.float32))
y = torch.from_numpy(labels_np.astype(np.int64))
perm = torch.from_numpy(rng.permutation(N))
train_mask = torch.zeros(N, dtype=torch.bool)
val_mask, test_mask = train_mask.clone(), train_mask.clone()
train_mask[perm[:30]] = True
val_mask[perm[30:50]] = True
test_mask[perm[50:]] = True
print(f"graph: {N} nodes, {edge_index.size(1)} directed edges, masks "
      f"{int(train_mask.sum())}/{int(val_mask.sum())}/{int(test_mask.sum())}")


def add_self_loops(ei: torch.Tensor, n: int) -> torch.Tensor:
    loops = torch.arange(n).unsqueeze(0).repeat(2, 1)
    return torch.cat([ei, loops], dim=1)


ei = add_self_loops(edge_index, N)
row, col = ei
deg = torch.zeros(N).index_add_(0, col, torch.ones(col.numel()))
assert torch.equal(deg.long(), torch.bincount(col, minlength=N))
deg_inv_sqrt = deg.pow(-0.5)
deg_inv_sqrt.masked_fill_(torch.isinf(deg_inv_sqrt), 0)
norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
print(f"degrees: min {int(deg.min())} max {int(deg.max())} mean {deg.mean().item():.4f}")


def propagate(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    msg = h.index_select(0, row) * w.unsqueeze(-1)
    return torch.zeros_like(h).index_add_(0, col, msg)


dense = torch.zeros(N, N).index_put_((col, row), norm, accumulate=True)
print(f"sparse == dense propagation: {torch.allclose(propagate(x, norm), torch.mm(dense, x), atol=1e-5)}")


def det_init(model: nn.Module, seed: int) -> None:
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for _, prm in model.named_parameters():
            fan_in = prm[0].numel() if prm.dim() > 1 else prm.numel()
            prm.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(prm.shape)).astype(np.float32))
                      / math.sqrt(fan_in))


class GCNConv(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(torch.zeros(o))

    def forward(self, h):
        return propagate(self.lin(h), norm) + self.bias


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(FEAT, 16), GCNConv(16, C)

    def forward(self, h):
        return self.conv2(F.relu(self.conv1(h)))


def segment_softmax(scores: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """Softmax of the scores (E, H) over the edges sharing a target node."""
    heads = scores.size(1)
    idx = index.unsqueeze(-1).expand(-1, heads)
    mx = torch.full((n, heads), float("-inf")).scatter_reduce(0, idx, scores, reduce="amax",
                                                               include_self=False)
    e = (scores - mx.gather(0, idx)).exp()
    den = torch.zeros(n, heads).index_add_(0, index, e)
    return e / den.gather(0, idx)


class GATConv(nn.Module):
    def __init__(self, i, o, heads):
        super().__init__()
        self.heads, self.o = heads, o
        self.lin = nn.Linear(i, heads * o, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, o))
        self.att_dst = nn.Parameter(torch.empty(1, heads, o))
        self.act = nn.LeakyReLU(0.2)

    def forward(self, h):
        z = self.lin(h).view(-1, self.heads, self.o)
        a_src = torch.einsum("nho,xho->nh", z, self.att_src)
        a_dst = (z * self.att_dst).sum(-1)
        alpha = segment_softmax(self.act(a_src[row] + a_dst[col]), col, h.size(0))
        self.last_alpha = alpha.detach()
        out = torch.zeros_like(z).index_add_(0, col, z[row] * alpha.unsqueeze(-1))
        return out.flatten(1)


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GATConv(FEAT, 8, heads=4)
        self.conv2 = GATConv(32, C, heads=1)

    def forward(self, h):
        return self.conv2(F.elu(self.conv1(h)))


def accuracy(logits, mask):
    return (logits[mask].argmax(-1) == y[mask]).float().mean().item()


def train(model, name, lr):
    det_init(model, 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    best_val, best_state = -1.0, None
    for epoch in range(args.epochs):
        model.train()
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = model(x)
        val = accuracy(out, val_mask)
        if val > best_val:
            best_val, best_state = val, copy.deepcopy(model.state_dict())
        if epoch % 10 == 0:
            print(f"{name} epoch {epoch:3d} loss {loss.item():.5f} train {accuracy(out, train_mask):.4f}"
                  f" val {val:.4f}")
    model.load_state_dict(best_state)
    with torch.no_grad():
        test = accuracy(model(x), test_mask)
    print(f"{name}: best val {best_val:.4f}, test {test:.4f}, "
          f"params {sum(p.numel() for p in model.parameters())}")
    return test


gcn_acc = train(GCN(), "GCN", 0.02)
gat = GAT()
gat_acc = train(gat, "GAT", 0.01)
alpha = gat.conv1.last_alpha
sums = torch.zeros(N, alpha.size(1)).index_add_(0, col, alpha)
print(f"attention sums to 1 per node and head: {torch.allclose(sums, torch.ones_like(sums), atol=1e-5)}")
print(f"RESULT {gcn_acc:.4f} {gat_acc:.4f}")
