"""A graph attention network on a sparse COO adjacency and a node-embedding table with sparse
gradients, written against `torch` in the style of public GAT code: attention logits at the
edges put into a torch.sparse_coo_tensor, torch.sparse.softmax over each row, aggregation by
torch.sparse.mm; the graph batch built with torch.cat of sparse adjacencies (block diagonal),
torch.sum(adj, 1) for degrees, index_select of rows, dense + sparse residuals (torch.add and +=).
The node embeddings come from nn.Embedding(sparse=True): a tensor hook rescales the sparse
gradient, torch.autograd.grad returns it, and SGD with momentum / Adagrad apply it. Ten Adam
steps. Weights and data from NumPy, so the run is the same on both libraries; the test suite
runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <train acc>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

C, EMB, HID = 3, 8, 8


def random_graph(n: int) -> torch.Tensor:
    labels = rng.integers(0, C, size=n)
    p = np.where(labels[:, None] == labels[None, :], 0.3, 0.03)
    upper = np.triu(rng.uniform(size=(n, n)) < p, 1)
    src, dst = np.nonzero(upper | upper.T | np.eye(n, dtype=bool))
    idx = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
    return torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), (n, n)).coalesce(), labels


# a batch of three graphs as one block-diagonal adjacency (torch.cat of sparse tensors)
graphs = [random_graph(n) for n in (20, 25, 15)]
sizes = [g.shape[0] for g, _ in graphs]
N = sum(sizes)
rows = []
offset = 0
for g, _ in graphs:
    left = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0),
                                   (g.shape[0], offset))
    right = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0),
                                    (g.shape[0], N - offset - g.shape[0]))
    rows.append(torch.cat([left, g, right], 1))
    offset += g.shape[0]
adj = torch.cat(rows, 0).coalesce()
labels = torch.from_numpy(np.concatenate([lab for _, lab in graphs]).astype(np.int64))
deg = torch.sum(adj, 1).to_dense()
print(f"batch adjacency: {tuple(adj.shape)} nnz {adj._nnz()} layout {adj.layout}; degrees "
      f"min {deg.min().item():.0f} max {deg.max().item():.0f} sum {deg.sum().item():.0f}")
sub = torch.index_select(adj, 0, torch.tensor([0, 20, 45]))
print(f"index_select rows: {tuple(sub.shape)} nnz {sub._nnz()} row sums "
      f"{[round(v, 1) for v in torch.sparse.sum(sub, 1).to_dense().tolist()]}")
eye_plus = torch.add(torch.eye(N), adj, alpha=0.5)  # dense + sparse: dense
print(f"eye + adj/2: {eye_plus.layout} trace {eye_plus.trace().item():.1f} "
      f"sum {eye_plus.sum().item():.1f}")
stacked = torch.stack([adj, adj * 2])
print(f"stacked: {tuple(stacked.shape)} sparse_dim {stacked.sparse_dim()} nnz {stacked._nnz()} "
      f"total {torch.sparse.sum(stacked).item():.0f}")


class GATLayer(nn.Module):
    def __init__(self, fin: int, fout: int) -> None:
        super().__init__()
        self.lin = nn.Linear(fin, fout, bias=False)
        self.a_src = nn.Parameter(torch.empty(fout))
        self.a_dst = nn.Parameter(torch.empty(fout))

    def forward(self, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        z = self.lin(h)
        i, j = a.indices()
        logits = F.leaky_relu((z * self.a_src).sum(1)[i] + (z * self.a_dst).sum(1)[j], 0.2)
        att = torch.sparse.softmax(torch.sparse_coo_tensor(a.indices(), logits, a.shape), dim=1)
        return torch.sparse.mm(att, z)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(N, EMB, sparse=True)
        self.gat1 = GATLayer(EMB, HID)
        self.gat2 = GATLayer(HID, C)

    def forward(self, ids: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        h = F.elu(self.gat1(self.emb(ids), a))
        return F.log_softmax(self.gat2(h, a), dim=1)


model = Model()
r = np.random.default_rng(1)
with torch.no_grad():
    for _, prm in model.named_parameters():
        bound = 1 / math.sqrt(prm.shape[-1])
        prm.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(prm.shape)).astype(np.float32)))
ids = torch.arange(N)
seen = []
hook = model.emb.weight.register_hook(lambda g: seen.append((str(g.layout), g._nnz())) or g * 0.5)
dense_params = [p for n, p in model.named_parameters() if not n.startswith("emb")]
opt = torch.optim.Adam(dense_params, lr=0.1)
emb_opt = torch.optim.SGD([model.emb.weight], lr=0.5, momentum=0.9)
losses = []
for step in range(args.steps):
    opt.zero_grad()
    emb_opt.zero_grad()
    loss = F.nll_loss(model(ids, adj), labels)
    loss.backward()
    g = model.emb.weight.grad
    opt.step()
    emb_opt.step()
    losses.append(loss.item())
    print(f"step {step} loss {loss.item():.5f} emb grad {g.layout} nnz {g._nnz()} "
          f"norm {g.coalesce().values().norm().item():.5f}")
hook.remove()
print(f"hook saw {len(seen)} sparse grads, first {seen[0][0]} nnz {seen[0][1]}")
with torch.no_grad():
    acc = (model(ids, adj).argmax(1) == labels).float().mean().item()
print(f"train accuracy {acc:.4f}")

# the embedding gradient as a value (no .grad touched), as in meta-learning code
g, = torch.autograd.grad(F.nll_loss(model(ids, adj), labels), model.emb.weight)
print(f"autograd.grad: {g.layout} nnz {g._nnz()} sum {g.coalesce().values().sum().item():.5f} "
      f".grad still {model.emb.weight.grad.layout}")

# a user-written update with the sparse gradient: dense += sparse, in place
w = model.emb.weight.detach().clone()
w += g * -0.1
upd = torch.add(model.emb.weight.detach(), g, alpha=-0.1)
change = (w - model.emb.weight).abs().sum().item()
print(f"manual update equal: {torch.allclose(w, upd)} change {change:.5f}")

# Adagrad on the sparse gradients
emb2 = nn.Embedding(N, EMB, sparse=True)
with torch.no_grad():
    emb2.weight.copy_(model.emb.weight)
ada = torch.optim.Adagrad(emb2.parameters(), lr=0.1)
for _ in range(3):
    ada.zero_grad()
    (emb2(ids[:10]) ** 2).sum().backward()
    ada.step()
print(f"Adagrad: weight sum {emb2.weight.sum().item():.5f} grad nnz {emb2.weight.grad._nnz()}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
