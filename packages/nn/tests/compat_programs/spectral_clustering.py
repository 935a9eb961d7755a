"""Spectral methods as scientific PyTorch code writes them: a k-nearest-neighbour affinity graph
from torch.cdist + topk with a self-tuning (local scale) Gaussian kernel, symmetrized, the
normalized Laplacian, its smallest eigenvectors by torch.linalg.eigh and by torch.lobpcg
(largest=False, a given start block; checked against eigh), spectral clustering with a k-means++
seeding and Lloyd iterations (cluster assignment via argmin of cdist, centroids by index_add_
and bincount), clustering accuracy over label permutations, diffusion maps, randomized low-rank
SVD (torch.svd_lowrank on an exactly rank-4 matrix, torch.pca_lowrank against a centered SVD)
and a Nystrom approximation of the kernel matrix with torch.linalg.pinv. Data from NumPy;
float64. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <clustering accuracy> <lobpcg agrees: 1.0> <nystrom error>."""

import itertools

import numpy as np
import torch

rng = np.random.default_rng(1606)
torch.set_default_dtype(torch.float64)


def rings(n_per):
    out, lab = [], []
    for k, radius in enumerate((1.0, 3.0, 5.0)):
        m = int(n_per * radius / 3)  # the same density on every ring
        th = rng.uniform(0, 2 * np.pi, m)
        pts = np.stack([radius * np.cos(th), radius * np.sin(th)], 1) + rng.normal(0, 0.08, (m, 2))
        out.append(pts)
        lab += [k] * m
    return torch.from_numpy(np.concatenate(out)), torch.tensor(lab)


X, labels = rings(60)
n, K = X.shape[0], 3
D = torch.cdist(X, X)
knn_d, knn_i = torch.topk(D, 7, dim=1, largest=False)
sigma = knn_d[:, 6]  # the local scale: distance to the 6th neighbour
W = torch.zeros(n, n)
W.scatter_(1, knn_i, torch.exp(-knn_d ** 2 / (sigma[:, None] * sigma[knn_i])))
W.fill_diagonal_(0)
W = torch.maximum(W, W.T)
deg = W.sum(1)
Dm = torch.diag(deg.rsqrt())
L = torch.eye(n) - Dm @ W @ Dm
print(f"graph: symmetric {torch.equal(W, W.T)} edges {int((W > 0).sum()) // 2} min degree {deg.min().item():.4f}")
evals, evecs = torch.linalg.eigh(L)
print(f"smallest laplacian eigenvalues {[0.0 if abs(v) < 1e-10 else round(v, 4) for v in evals[:5].tolist()]} components {int((evals < 1e-10).sum())}")
X0 = torch.from_numpy(rng.normal(size=(n, K)))
lv, lvec = torch.lobpcg(L, k=K, X=X0, largest=False, niter=200, tol=1e-10)
lob_err = (lv - evals[:K]).abs().max().item()
# the eigenspace of a (near) repeated zero eigenvalue: compare projectors, not vectors
P1, P2 = lvec @ lvec.T, evecs[:, :K] @ evecs[:, :K].T
print(f"lobpcg eigenvalues match eigh: {lob_err < 1e-8} same subspace: {(P1 - P2).norm().item() < 1e-5}")


def kmeans_pp(Y, k, iters=20):
    first = int(rng.integers(0, Y.shape[0]))
    centers = [Y[first]]
    for _ in range(1, k):
        d2 = torch.cdist(Y, torch.stack(centers)).min(1).values ** 2
        p = (d2 / d2.sum()).numpy()
        centers.append(Y[int(rng.choice(Y.shape[0], p=p))])
    C = torch.stack(centers)
    for it in range(iters):
        assign = torch.cdist(Y, C).argmin(1)
        counts = torch.bincount(assign, minlength=k).clamp(min=1)
        C_new = torch.zeros_like(C).index_add_(0, assign, Y) / counts[:, None]
        if torch.allclose(C_new, C):
            break
        C = C_new
    inertia = ((Y - C[assign]) ** 2).sum().item()
    return assign, C, inertia, it


def best_accuracy(pred, truth, k):
    best = 0.0
    for perm in itertools.permutations(range(k)):
        mapped = torch.tensor(perm)[pred]
        best = max(best, (mapped == truth).double().mean().item())
    return best


U = evecs[:, :K]
U = U / U.norm(dim=1, keepdim=True)
assign, C, inertia, iters = kmeans_pp(U, K)
acc = best_accuracy(assign, labels, K)
print(f"spectral clustering accuracy {acc:.4f} sizes {torch.bincount(assign).tolist()} inertia {inertia:.4f}")
raw_assign, _, raw_inertia, _ = kmeans_pp(X, K)
print(f"k-means on raw coordinates accuracy {best_accuracy(raw_assign, labels, K):.4f}")

# diffusion maps: the random-walk matrix's top eigenvectors, scaled by eigenvalue^t
P = W / deg[:, None]
S = Dm @ W @ Dm  # symmetric conjugate of P
mu, V = torch.linalg.eigh(S)
mu, V = mu.flip(0), V.flip(1)
psi = (Dm @ V)[:, 1:3] * mu[1:3] ** 4
print(f"diffusion map: top eigenvalue {mu[0].item():.6f} P rows sum to one {torch.allclose(P.sum(1), torch.ones(n))} coords {tuple(psi.shape)}")
walk_vec = Dm @ V[:, 1]
print(f"right eigenvector of P: {torch.allclose(P @ walk_vec, mu[1] * walk_vec, atol=1e-8)}")

# randomized low-rank SVD
A = torch.from_numpy(rng.normal(size=(80, 4))) @ torch.from_numpy(rng.normal(size=(4, 50)))
U4, S4, V4 = torch.svd_lowrank(A, q=6, niter=2)
S_full = torch.linalg.svdvals(A)
print(f"svd_lowrank shapes {tuple(U4.shape)} {tuple(S4.shape)} {tuple(V4.shape)} top-4 error {(S4[:4] - S_full[:4]).abs().max().item() < 1e-8} rank-4 reconstruction {torch.allclose(U4 @ torch.diag(S4) @ V4.T, A, atol=1e-8)}")
B = torch.from_numpy(rng.normal(size=(100, 6)) @ np.diag([5.0, 3.0, 1.0, 0.1, 0.05, 0.01]))
Up, Sp, Vp = torch.pca_lowrank(B, q=3, center=True, niter=4)
Sc = torch.linalg.svdvals(B - B.mean(0))
print(f"pca_lowrank singular values {[round(v, 4) for v in Sp.tolist()]} centered svd {[round(v, 4) for v in Sc[:3].tolist()]}")

# Nystrom approximation of an RBF kernel with 40 landmarks
Kfull = torch.exp(-torch.cdist(X, X) ** 2 / 2.0)
land = torch.from_numpy(rng.choice(n, 40, replace=False))
C_nm = Kfull[:, land]
W_mm = Kfull[land][:, land]
K_ny = C_nm @ torch.linalg.pinv(W_mm, hermitian=True, rtol=1e-10) @ C_nm.T
ny_err = ((K_ny - Kfull).norm() / Kfull.norm()).item()
print(f"nystrom relative error {ny_err:.2e} exact on landmarks {torch.allclose(K_ny[land][:, land], W_mm, atol=1e-6)}")
print(f"RESULT {acc:.4f} {float(lob_err < 1e-8):.1f} {ny_err:.4f}")
