"""Classic clustering written in tensors, in the style of the public "k-means / spectral
clustering in PyTorch" gists (kmeans_pytorch-like): k-means++ seeding made deterministic (the
farthest point instead of a random draw), Lloyd iterations with torch.cdist and
index_add_ / bincount centroid updates, empty-cluster handling, the silhouette score from
torch.pdist turned square with triu_indices, k-medoids by a PAM swap step, robust statistics
(nanmedian, kthvalue for a trimmed radius, torch.mode of the assignments, count_nonzero,
aminmax), DBSCAN-style core points from the k-th neighbour distance (topk(largest=False)),
spectral clustering on an RBF affinity (normalized Laplacian, eigh, the bottom eigenvectors
row-normalized then k-means), single-linkage merges read from a sorted pdist, the adjusted
agreement of two labelings through a contingency matrix built with index_put_(accumulate=True),
and a Gaussian-mixture E-step with logsumexp. Data from NumPy: torch and ember print the same
numbers. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first inertia> <last inertia> <silhouette>."""

import numpy as np
import torch

rng = np.random.default_rng(2)
centers = np.array([[0.0, 0.0], [4.0, 0.5], [1.5, 4.0]])
X = torch.from_numpy(np.concatenate([c + rng.normal(0, 0.6, (40, 2)) for c in centers])).float()
truth = torch.arange(3).repeat_interleave(40)
N, k = X.shape[0], 3


def kmeanspp(X, k):
    idx = [int(torch.linalg.vector_norm(X - X.mean(0), dim=1).argmin())]
    for _ in range(k - 1):
        d = torch.cdist(X, X[idx]).min(1).values
        idx.append(int(d.argmax()))
    return X[idx].clone()


def lloyd(X, C, iters=20):
    inertias = []
    for _ in range(iters):
        d = torch.cdist(X, C, compute_mode="donot_use_mm_for_euclid_dist")
        assign = d.argmin(1)
        inertias.append((d.gather(1, assign[:, None]) ** 2).sum().item())
        sums = torch.zeros_like(C).index_add_(0, assign, X)
        counts = torch.bincount(assign, minlength=C.shape[0]).float()
        C = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], C)
    return C, assign, inertias


C0 = kmeanspp(X, k)
C, assign, inertias = lloyd(X, C0)
print("seeds", [[round(v, 3) for v in c] for c in C0.tolist()])
print("inertia", [round(v, 3) for v in inertias[:4]], "->", round(inertias[-1], 3))
print("cluster sizes", torch.bincount(assign).tolist(), "mode label", torch.mode(assign).values.item())

D = torch.zeros(N, N)
iu = torch.triu_indices(N, N, offset=1)
pd = torch.pdist(X)
D[iu[0], iu[1]] = pd
D = D + D.T
print("pdist size", pd.numel(), "== N(N-1)/2:", pd.numel() == N * (N - 1) // 2,
      "matches cdist:", torch.allclose(D, torch.cdist(X, X, compute_mode="donot_use_mm_for_euclid_dist"),
                                         atol=1e-5))


def silhouette(D, labels, k):
    onehot = torch.nn.functional.one_hot(labels, k).float()
    sums = D @ onehot
    sizes = onehot.sum(0)
    own = sums.gather(1, labels[:, None]).squeeze(1) / (sizes[labels] - 1)
    other = (sums / sizes).masked_fill(onehot.bool(), float("inf")).min(1).values
    return ((other - own) / torch.maximum(own, other)).mean()


sil = silhouette(D, assign, k).item()
print(f"silhouette {sil:.5f}")

# k-medoids: one PAM-style swap pass
medoids = torch.stack([D[assign == j][:, assign == j].sum(1).argmin() for j in range(k)])
medoids = torch.stack([torch.nonzero(assign == j).squeeze(1)[m] for j, m in enumerate(medoids)])
cost = D[:, medoids].min(1).values.sum()
print("medoids", medoids.tolist(), f"cost {cost.item():.4f}")

# robust statistics per cluster
dist_to_c = torch.linalg.vector_norm(X - C[assign], dim=1)
with_nan = dist_to_c.clone()
with_nan[::7] = float("nan")
print("nanmedian", round(torch.nanmedian(with_nan).item(), 5), "median",
      round(dist_to_c.median().item(), 5))
kth = torch.kthvalue(dist_to_c, int(0.9 * N))
print(f"90% radius {kth.values.item():.5f} at index {kth.indices.item()}",
      "outside:", torch.count_nonzero(dist_to_c > kth.values).item())
lo, hi = torch.aminmax(dist_to_c)
print(f"aminmax {lo.item():.5f} {hi.item():.5f}")

# DBSCAN-like core points from the 5th-neighbour distance
knn = torch.topk(D, 6, dim=1, largest=False)
eps = knn.values[:, 5].median()
core = knn.values[:, 5] <= eps
print(f"eps {eps.item():.5f} core points {int(core.sum())}", "self first:",
      torch.equal(knn.indices[:, 0], torch.arange(N)))

# spectral clustering
Wm = torch.exp(-D ** 2 / (2 * 0.8 ** 2)).fill_diagonal_(0)
dinv = Wm.sum(1).rsqrt()
L = torch.eye(N) - dinv[:, None] * Wm * dinv[None, :]
evals, evecs = torch.linalg.eigh(L)
U = torch.nn.functional.normalize(evecs[:, :k], dim=1)
_, spec, _ = lloyd(U, kmeanspp(U, k))
print("laplacian smallest eigenvalues", [round(abs(v), 5) for v in evals[:4].tolist()])

# contingency table between labelings
cont = torch.zeros(k, k, dtype=torch.long)
cont.index_put_((truth, spec), torch.ones(N, dtype=torch.long), accumulate=True)
purity = cont.max(1).values.sum().item() / N
cont2 = torch.zeros(k, k, dtype=torch.long).index_put_((truth, assign), torch.ones(N, dtype=torch.long),
                                                      accumulate=True)
print("contingency rows sorted", sorted(cont2.tolist()), f"spectral purity {purity:.4f}")

# single linkage: the merge heights are the minimum spanning tree's edges (Kruskal over pdist)
order = torch.argsort(pd, stable=True)
parent = list(range(N))


def find(a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


heights = []
for e in order.tolist():
    a, b = find(iu[0, e].item()), find(iu[1, e].item())
    if a != b:
        parent[a] = b
        heights.append(pd[e].item())
print("last merge heights", [round(h, 4) for h in heights[-3:]], "merges", len(heights))

# one GMM E-step from the k-means solution
var = torch.stack([((X[assign == j] - C[j]) ** 2).mean() for j in range(k)])
logp = (-((X[:, None] - C[None]) ** 2).sum(-1) / (2 * var) - torch.log(2 * torch.pi * var)
        + torch.log(torch.bincount(assign).float() / N))
resp = torch.softmax(logp, 1)
print(f"gmm loglik {torch.logsumexp(logp, 1).sum().item():.4f}",
      "agrees with kmeans:", (resp.argmax(1) == assign).float().mean().item())
print(f"RESULT {inertias[0]:.4f} {inertias[-1]:.4f} {sil:.5f}")
