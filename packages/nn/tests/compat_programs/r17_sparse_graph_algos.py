"""Graph algorithms on sparse tensors as network-analysis code writes them in PyTorch: an
adjacency built by torch.sparse_coo_tensor from an edge list with duplicates (coalesce sums
them), converted to CSR / CSC (crow_indices, col_indices, ccol_indices), PageRank by power
iteration with torch.sparse.mm and a dangling-node correction, personalized PageRank, label
propagation for connected components by scatter_reduce(amin), BFS levels by sparse frontier
products, triangle counts by (A @ A) * A, all-pairs shortest paths by min-plus products
(broadcast + amin), a sparse attention layer (torch.sparse.softmax over coalesced scores)
trained on node labels with gradients flowing into the sparse values. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1703)
# two communities of 12 nodes plus a separate triangle {24, 25, 26}
n = 27
edges = []
for c in range(2):
    base = 12 * c
    for i in range(12):
        for j in range(i + 1, 12):
            if rng.uniform() < 0.35:
                edges.append((base + i, base + j))
edges += [(3, 15), (24, 25), (25, 26), (24, 26)]
e = torch.tensor(edges).T
src = torch.cat([e[0], e[1], torch.tensor([0])])
dst = torch.cat([e[1], e[0], torch.tensor([e[1, 0].item()])])  # one duplicate edge
A = torch.sparse_coo_tensor(torch.stack([src, dst]), torch.ones(src.numel()), (n, n))
print(f"uncoalesced nnz {A._nnz()} is_coalesced {A.is_coalesced()}")
A = A.coalesce()
print(f"coalesced nnz {A._nnz()} max value {A.values().max().item()} (duplicate summed)")
A = torch.sparse_coo_tensor(A.indices(), torch.ones_like(A.values()), (n, n)).coalesce()
Acsr = A.to_sparse_csr()
deg = torch.diff(Acsr.crow_indices())
print(f"csr layout {Acsr.layout} degrees from crow_indices {deg[:6].tolist()} == dense sums {torch.equal(deg, A.to_dense().sum(1).long())}")
Acsc = A.to_dense().to_sparse_csc()
print(f"csc symmetric: ccol_indices == crow_indices {torch.equal(Acsc.ccol_indices(), Acsr.crow_indices())}")
x = torch.from_numpy(rng.normal(size=(n, 3)).astype(np.float32))
print(f"csr @ dense == coo mm == dense: {torch.allclose(Acsr @ x, torch.sparse.mm(A, x), atol=1e-6)} {torch.allclose(Acsr @ x, A.to_dense() @ x, atol=1e-6)}")

# PageRank with a dangling node (26 loses its out-edges)
keep = A.indices()[0] != 26
P_idx = A.indices()[:, keep]
outdeg = torch.zeros(n).index_add_(0, P_idx[0], torch.ones(P_idx.shape[1]))
vals = 1.0 / outdeg[P_idx[0]]
PT = torch.sparse_coo_tensor(P_idx.flip(0), vals, (n, n)).coalesce()  # column-stochastic transpose
dangling = outdeg == 0
print(f"dangling nodes {dangling.nonzero().flatten().tolist()}")


def pagerank(PT, alpha=0.85, personal=None, iters=100):
    v = torch.full((n, 1), 1.0 / n) if personal is None else personal[:, None]
    r = v.clone()
    for it in range(iters):
        r_new = alpha * (torch.sparse.mm(PT, r) + r[dangling].sum() / n) + (1 - alpha) * v
        if (r_new - r).abs().sum() < 1e-9:
            break
        r = r_new
    return r_new.squeeze(1), it


pr, its = pagerank(PT)
print(f"pagerank sums {pr.sum().item():.6f} top nodes {torch.topk(pr, 3).indices.tolist()} iterations < 100 {its < 99}")
personal = torch.zeros(n)
personal[0] = 1.0
ppr, _ = pagerank(PT, personal=personal)
print(f"personalized mass in community 0 {ppr[:12].sum().item():.4f} in community 1 {ppr[12:24].sum().item():.4f}")

# connected components by label propagation (min label over neighbours)
label = torch.arange(n)
i, j = A.indices()
for step in range(n):
    new = label.scatter_reduce(0, i, label[j], reduce="amin", include_self=True)
    if torch.equal(new, label):
        break
    label = new
comps = torch.unique(label, return_counts=True)
print(f"components {comps[0].tolist()} sizes {comps[1].tolist()}")

# BFS levels from node 0
level = torch.full((n,), -1)
level[0] = 0
frontier = torch.zeros(n, 1)
frontier[0] = 1
for d in range(1, n):
    reach = torch.sparse.mm(A, frontier).squeeze(1) > 0
    new = reach & (level < 0)
    if not new.any():
        break
    level[new] = d
    frontier = new.float()[:, None]
print(f"bfs levels histogram {torch.bincount(level[level >= 0]).tolist()} unreachable {(level < 0).sum().item()}")

# triangles: trace(A^3) / 6 and per node
Ad = A.to_dense()
tri_node = ((Ad @ Ad) * Ad).sum(1) / 2
print(f"triangles {int(torch.trace(Ad @ Ad @ Ad).item() / 6)} node 25 in {int(tri_node[25].item())} clustering[24] {(2 * tri_node[24] / (deg[24] * (deg[24] - 1))).item():.3f}")

# min-plus all pairs shortest paths
W = torch.where(Ad > 0, torch.ones_like(Ad), torch.full_like(Ad, float("inf")))
W.fill_diagonal_(0)
Dm = W.clone()
for _ in range(5):
    Dm = torch.minimum(Dm, (Dm[:, :, None] + W[None, :, :]).amin(1))
finite = torch.isfinite(Dm)
print(f"diameter of the big component {int(Dm[:24, :24].max().item())} shortest 0->20 {int(Dm[0, 20].item())} inf pairs {(~finite).sum().item()}")
print(f"min-plus agrees with bfs: {torch.equal(Dm[0][level >= 0].long(), level[level >= 0])}")


class SparseAttention(nn.Module):
    def __init__(self, d_in, d):
        super().__init__()
        self.q = nn.Linear(d_in, d, bias=False)
        self.k = nn.Linear(d_in, d, bias=False)
        self.v = nn.Linear(d_in, d)

    def forward(self, x, idx):
        q, k, v = self.q(x), self.k(x), self.v(x)
        s = (q[idx[0]] * k[idx[1]]).sum(-1) / q.shape[-1] ** 0.5
        S = torch.sparse_coo_tensor(idx, s, (x.shape[0], x.shape[0]))
        att = torch.sparse.softmax(S, dim=1)
        return torch.sparse.mm(att, v) + v


idx = torch.cat([A.indices(), torch.arange(n).repeat(2, 1)], 1)
idx = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), (n, n)).coalesce().indices()
y = torch.cat([torch.zeros(12), torch.ones(12), torch.full((3,), 2.0)]).long()
feat = torch.from_numpy(rng.normal(size=(n, 4)).astype(np.float32))
layer1, head = SparseAttention(4, 16), nn.Linear(16, 3)
with torch.no_grad():
    for p in list(layer1.parameters()) + list(head.parameters()):
        p.copy_(torch.from_numpy(rng.normal(0, 0.4, p.shape).astype(np.float32)))
opt = torch.optim.Adam(list(layer1.parameters()) + list(head.parameters()), lr=0.02)
train = torch.tensor([0, 1, 12, 13, 24])
losses = []
for step in range(150):
    out = head(F.relu(layer1(feat, idx)))
    loss = F.cross_entropy(out[train], y[train])
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} q grad norm {layer1.q.weight.grad.norm().item():.4f}")
acc = (out.argmax(1) == y).float().mean().item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.3f}")
