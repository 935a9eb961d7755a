"""A two-layer GCN on a sparse adjacency, in the style of the public Kipf & Welling pygcn code:
the normalized adjacency D^-1/2 (A + I) D^-1/2 built as a torch.sparse_coo_tensor from an
edge_index (duplicate edges summed by coalesce()), converted to CSR and back, propagation by
torch.sparse.mm / torch.spmm / adj @ h, 20 Adam steps of cross_entropy on the labelled nodes.
Then a recommendation-style embedding table with sparse gradients (nn.Embedding(sparse=True))
trained by SGD and SparseAdam, and torch.save/torch.load of the sparse adjacency. Weights and
data from NumPy, so the run is the same on both libraries. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <test acc>."""

import argparse
import io
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

N, C, FEAT, HID = 120, 3, 16, 16
labels_np = np.repeat(np.arange(C), N // C)
p = np.where(labels_np[:, None] == labels_np[None, :], 0.12, 0.01)
upper = np.triu(rng.uniform(size=(N, N)) < p, 1)
src, dst = np.nonzero(upper | upper.T)
# a few edges listed twice, as raw edge lists often have them: coalesce() sums them
dup = rng.choice(len(src), 10, replace=False)
src, dst = np.concatenate([src, src[dup], np.arange(N)]), np.concatenate([dst, dst[dup], np.arange(N)])
edge_index = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
ones = torch.ones(edge_index.size(1))
adj = torch.sparse_coo_tensor(edge_index, ones, (N, N))
print(f"adj: {adj.layout}, nnz {adj._nnz()}, coalesced {adj.is_coalesced()}, size {tuple(adj.shape)}")
adj = adj.coalesce()
print(f"coalesced: nnz {adj._nnz()}, max value {adj.values().max().item():.1f}, "
      f"sparse_dim {adj.sparse_dim()} dense_dim {adj.dense_dim()}")
deg = torch.sparse.sum(adj, 1).to_dense()
d = deg.pow(-0.5)
row, col = adj.indices()
adj = torch.sparse_coo_tensor(adj.indices(), d[row] * adj.values() * d[col], (N, N)).coalesce()
dense_adj = adj.to_dense()
print(f"row sums of D^-1/2 (A+I) D^-1/2: min {dense_adj.sum(1).min().item():.4f} "
      f"max {dense_adj.sum(1).max().item():.4f}")
csr = adj.to_sparse_csr()
print(f"csr: {csr.layout}, crow {tuple(csr.crow_indices().shape)}, col {tuple(csr.col_indices().shape)}, "
      f"round trip equal {torch.equal(csr.to_dense(), dense_adj)}")

x = torch.from_numpy((rng.normal(size=(N, FEAT)) + 0.8 * np.eye(C)[labels_np] @ rng.normal(
    size=(C, FEAT))).astype(np.float32))
y = torch.from_numpy(labels_np.astype(np.int64))
perm = rng.permutation(N)
train_idx = torch.from_numpy(perm[:30])
test_idx = torch.from_numpy(perm[60:])
print(f"spmm == dense mm: {torch.allclose(torch.sparse.mm(adj, x), dense_adj @ x, atol=1e-5)}, "
      f"csr == coo: {torch.allclose(csr @ x, torch.spmm(adj, x), atol=1e-5)}")


class GraphConvolution(nn.Module):
    def __init__(self, fin: int, fout: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fin, fout))
        self.bias = nn.Parameter(torch.empty(fout))

    def forward(self, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(a, h @ self.weight) + self.bias


class GCN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gc1 = GraphConvolution(FEAT, HID)
        self.gc2 = GraphConvolution(HID, C)

    def forward(self, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.gc1(h, a))
        return F.log_softmax(torch.spmm(a, h @ self.gc2.weight) + self.gc2.bias, dim=1)


model = GCN()
r = np.random.default_rng(1)
with torch.no_grad():
    for _, prm in model.named_parameters():
        bound = 1 / math.sqrt(prm.shape[-1])
        prm.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(prm.shape)).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
losses = []
for step in range(args.steps):
    opt.zero_grad()
    out = model(x, adj)
    loss = F.nll_loss(out[train_idx], y[train_idx])
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 5 == 0 or step == args.steps - 1:
        print(f"step {step:2d} loss {loss.item():.5f} grad norm {model.gc1.weight.grad.norm().item():.5f}")
model.eval()
with torch.no_grad():
    acc = (model(x, adj)[test_idx].argmax(1) == y[test_idx]).float().mean().item()
print(f"test accuracy {acc:.4f}")

# gradient with respect to the adjacency's values (edge weights), as in learned-graph models
w_edges = adj.values().clone().requires_grad_(True)
a2 = torch.sparse_coo_tensor(adj.indices(), w_edges, (N, N))
(torch.sparse.mm(a2, x) ** 2).sum().backward()
print(f"edge weight grad: shape {tuple(w_edges.grad.shape)} sum {w_edges.grad.sum().item():.4f}")

# ---- sparse embedding gradients ----------------------------------------------------------
V, D = 50, 4
for name in ("SGD", "SparseAdam"):
    emb = nn.Embedding(V, D, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(r.normal(size=(V, D)).astype(np.float32)))
    eopt = torch.optim.SGD(emb.parameters(), lr=0.1) if name == "SGD" else \
        torch.optim.SparseAdam(emb.parameters(), lr=0.05)
    target = torch.from_numpy(r.normal(size=(8, D)).astype(np.float32))
    for _ in range(5):
        ids = torch.from_numpy(r.integers(0, V, size=(8,)))
        eopt.zero_grad()
        eloss = ((emb(ids) - target) ** 2).mean()
        eloss.backward()
        eopt.step()
    g = emb.weight.grad
    print(f"{name}: grad layout {g.layout} nnz {g._nnz()} loss {eloss.item():.5f} "
          f"weight sum {emb.weight.sum().item():.5f}")

# ---- saving the adjacency ----------------------------------------------------------------
buf = io.BytesIO()
torch.save({"adj": adj}, buf)
buf.seek(0)
back = torch.load(buf)["adj"]
print(f"saved and loaded: {back.layout} equal {torch.equal(back.to_dense(), dense_adj)}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
