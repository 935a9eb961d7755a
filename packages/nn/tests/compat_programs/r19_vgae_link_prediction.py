"""A variational graph auto-encoder for link prediction, in the style of the public
PyTorch (no PyG) re-implementations: a stochastic block model graph, an edge split into
train / validation positives by a NumPy permutation, the symmetric normalized adjacency
D^-1/2 (A + I) D^-1/2 as a torch.sparse_coo_tensor (coalesce, indices / values, sparse.sum to
dense degrees, torch.sparse.mm), a two-layer GCN encoder giving mu and log-sigma, the
reparameterization with noise drawn from NumPy, an inner-product decoder, a weighted
reconstruction loss (pos_weight = negatives / positives through
F.binary_cross_entropy_with_logits on a dense target built with index_put_), the KL term,
negatives sampled by NumPy and filtered against existing edges with a hashed torch.isin,
ROC AUC and average precision computed by sorting, and the sparse adjacency compared with its
dense form and converted to CSR. Weights and data from NumPy. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <val auc>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(29)
N, K = 60, 3
block = np.repeat(np.arange(K), N // K)
p = np.where(block[:, None] == block[None, :], 0.3, 0.02)
A = np.triu(rng.uniform(size=(N, N)) < p, 1)
src, dst = np.nonzero(A)
perm = rng.permutation(len(src))
n_val = len(src) // 8
val_e = np.stack([src[perm[:n_val]], dst[perm[:n_val]]])
tr_e = np.stack([src[perm[n_val:]], dst[perm[n_val:]]])
print("nodes", N, "edges", len(src), "train", tr_e.shape[1], "val", n_val)

tr = torch.from_numpy(tr_e)
und = torch.cat([tr, tr.flip(0)], 1)
loops = torch.arange(N).repeat(2, 1)
idx = torch.cat([und, loops], 1)
adj = torch.sparse_coo_tensor(idx, torch.ones(idx.shape[1]), (N, N)).coalesce()
deg = torch.sparse.sum(adj, dim=1).to_dense()
dinv = deg.pow(-0.5)
i, j = adj.indices()
a_norm = torch.sparse_coo_tensor(adj.indices(), dinv[i] * adj.values() * dinv[j], (N, N)).coalesce()
dense = a_norm.to_dense()
print("normalized adjacency symmetric", torch.allclose(dense, dense.T), "nnz", a_norm._nnz(), "row sums max", round(dense.sum(1).max().item(), 4))
csr = a_norm.to_sparse_csr()
print("csr crow", tuple(csr.crow_indices().shape), "csr @ x == coo @ x", torch.allclose(csr @ torch.ones(N, 2), torch.sparse.mm(a_norm, torch.ones(N, 2))))

feats = torch.eye(N)


class VGAE(nn.Module):
    def __init__(self, d_in, h, z):
        super().__init__()
        self.w0 = nn.Parameter(torch.from_numpy(rng.normal(0, (2 / (d_in + h)) ** 0.5, size=(d_in, h)).astype(np.float32)))
        self.w_mu = nn.Parameter(torch.from_numpy(rng.normal(0, (2 / (h + z)) ** 0.5, size=(h, z)).astype(np.float32)))
        self.w_sig = nn.Parameter(torch.from_numpy(rng.normal(0, (2 / (h + z)) ** 0.5, size=(h, z)).astype(np.float32)))

    def encode(self, a, x):
        hid = F.relu(torch.sparse.mm(a, x @ self.w0))
        return torch.sparse.mm(a, hid @ self.w_mu), torch.sparse.mm(a, hid @ self.w_sig)


model = VGAE(N, 16, 8)
target = torch.zeros(N, N)
target.index_put_((und[0], und[1]), torch.tensor(1.0))
target.index_put_((loops[0], loops[1]), torch.tensor(1.0))
n_pos = target.sum()
pos_weight = (N * N - n_pos) / n_pos
norm = N * N / float((N * N - n_pos) * 2)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for epoch in range(120):
    mu, logsig = model.encode(a_norm, feats)
    eps = torch.from_numpy(rng.normal(size=(N, 8)).astype(np.float32))
    z = mu + eps * torch.exp(logsig)
    logits = z @ z.T
    rec = norm * F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight)
    kl = -0.5 / N * torch.mean(torch.sum(1 + 2 * logsig - mu ** 2 - torch.exp(logsig) ** 2, 1))
    loss = rec + kl
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 30 == 0:
        print(f"epoch {epoch:3d} loss {loss.item():.5f} rec {rec.item():.5f} kl {kl.item():.5f}")

# validation negatives: NumPy pairs not present in the graph (checked by hashing u * N + v)
cand = rng.integers(0, N, size=(2, 4 * n_val))
cand = torch.from_numpy(cand)
keys = torch.minimum(cand[0], cand[1]) * N + torch.maximum(cand[0], cand[1])
edge_keys = torch.from_numpy(np.minimum(src, dst) * N + np.maximum(src, dst))
ok = ~torch.isin(keys, edge_keys) & (cand[0] != cand[1])
neg = cand[:, ok][:, :n_val]
print("negatives kept", int(ok.sum()), "used", neg.shape[1])
with torch.no_grad():
    mu, _ = model.encode(a_norm, feats)
    ve = torch.from_numpy(val_e)
    s_pos = torch.sigmoid((mu[ve[0]] * mu[ve[1]]).sum(1))
    s_neg = torch.sigmoid((mu[neg[0]] * mu[neg[1]]).sum(1))
scores = torch.cat([s_pos, s_neg])
labels = torch.cat([torch.ones_like(s_pos), torch.zeros_like(s_neg)])
order = torch.argsort(scores, descending=True)
tp = torch.cumsum(labels[order], 0)
fp = torch.cumsum(1 - labels[order], 0)
auc = torch.trapezoid(torch.cat([torch.zeros(1), tp / tp[-1]]), torch.cat([torch.zeros(1), fp / fp[-1]])).item()
ap = ((tp / torch.arange(1, len(labels) + 1)) * labels[order]).sum().item() / labels.sum().item()
print(f"val auc {auc:.5f} ap {ap:.5f}")
same = (mu @ mu.T)[torch.from_numpy(block[:, None] == block[None, :])].mean().item()
diff_ = (mu @ mu.T)[torch.from_numpy(block[:, None] != block[None, :])].mean().item()
print(f"mean inner product within blocks {same:.4f} across {diff_:.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {auc:.6f}")
