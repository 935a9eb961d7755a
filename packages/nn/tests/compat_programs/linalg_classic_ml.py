"""Classical machine learning written with torch.linalg, in the style of the public "ML from
scratch in PyTorch" notebooks: PCA by torch.linalg.svd (explained variance, the sign-invariant
reconstruction, torch.pca_lowrank agreeing on the spectrum), torch.cov / torch.corrcoef with
frequency and analytic weights, ridge regression three ways (linalg.solve on the normal
equations, linalg.lstsq, linalg.pinv), polynomial fitting with torch.vander and the roots of
the fitted cubic from linalg.eigvals of its companion matrix, Fisher LDA through a Cholesky
whitening and linalg.eigh, spectral clustering from the graph Laplacian's Fiedler vector,
orthogonal Procrustes by SVD, the Gaussian log-likelihood with linalg.slogdet,
linalg.cholesky_ex / solve_triangular / cho-solve and lu_factor / lu_solve agreeing, kron /
block_diag / linalg.cross / matrix_power / matrix_rank / cond / matrix_norm, triu_indices, and
a Gaussian fit by gradient descent through slogdet and solve (a full covariance parametrized
by a Cholesky factor with a softplus diagonal). Data from NumPy: the numbers are the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first nll> <last nll> <ridge test mse>."""

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(8)
T = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731

# PCA
Z = rng.normal(size=(200, 3)) @ np.array([[3.0, 0, 0, 1, 0], [0, 1.5, 0, 0, 1], [0, 0, 0.3, 1, 0]])
X = T(Z + 0.05 * rng.normal(size=(200, 5)))
Xc = X - X.mean(0, keepdim=True)
U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
ratio = S ** 2 / (S ** 2).sum()
print("explained variance", [round(v, 4) for v in ratio.tolist()])
k = 3
recon = (U[:, :k] * S[:k]) @ Vh[:k]
print(f"rank-3 reconstruction error {(recon - Xc).norm() / Xc.norm():.5f}")
_, S2, _ = torch.pca_lowrank(X, q=5, center=True, niter=6)
print("pca_lowrank spectrum agrees:", torch.allclose(S2, S, rtol=1e-6))
C = torch.cov(X.T)
print("cov == Xc^T Xc / (n-1):", torch.allclose(C, Xc.T @ Xc / 199))
fw = torch.from_numpy(rng.integers(1, 4, size=200))
aw = T(rng.uniform(0.5, 2.0, size=200))
print("weighted cov diag", [round(v, 4) for v in torch.cov(X.T, fweights=fw, aweights=aw)
                            .diagonal().tolist()])
print("corrcoef[0]", [round(v, 4) for v in torch.corrcoef(X.T)[0].tolist()])

# ridge regression
w_true = T(rng.normal(size=5))
y = X @ w_true + 0.1 * T(rng.normal(size=200))
Xtr, ytr, Xte, yte = X[:150], y[:150], X[150:], y[150:]
lam = 0.5
A = Xtr.T @ Xtr + lam * torch.eye(5)
w1 = torch.linalg.solve(A, Xtr.T @ ytr)
Xa = torch.cat([Xtr, lam ** 0.5 * torch.eye(5)])
ya = torch.cat([ytr, torch.zeros(5)])
w2 = torch.linalg.lstsq(Xa, ya.unsqueeze(1)).solution.squeeze(1)
w3 = torch.linalg.pinv(Xa) @ ya
print("ridge solve == lstsq == pinv:", torch.allclose(w1, w2), torch.allclose(w1, w3))
ridge_mse = F.mse_loss(Xte @ w1, yte).item()
print(f"ridge test mse {ridge_mse:.6f}")

# polynomial fit and its roots
xs = T(np.linspace(-2, 2, 40))
ys = (xs - 1.5) * (xs + 0.5) * (xs + 1.0) + 0.01 * T(rng.normal(size=40))
V = torch.vander(xs, N=4)
coef = torch.linalg.lstsq(V, ys.unsqueeze(1)).solution.squeeze(1)
c = coef / coef[0]
companion = torch.zeros(3, 3)
companion[0] = -c[1:]
companion[1:, :2] = torch.eye(2)
roots = torch.linalg.eigvals(companion)
print("cubic coefficients", [round(v, 3) + 0.0 for v in coef.tolist()], "roots",
      sorted(round(r, 3) for r in roots.real.tolist()), "real roots:",
      roots.imag.abs().max().item() < 1e-6)

# Fisher LDA on two classes
mu0, mu1 = np.array([0.0, 0, 0]), np.array([1.0, 2.0, 0.5])
cov = np.array([[1.0, 0.6, 0], [0.6, 1.0, 0.2], [0, 0.2, 0.5]])
L = np.linalg.cholesky(cov)
D0 = T(mu0 + rng.normal(size=(100, 3)) @ L.T)
D1 = T(mu1 + rng.normal(size=(100, 3)) @ L.T)
Sw = torch.cov(D0.T) + torch.cov(D1.T)
d = (D1.mean(0) - D0.mean(0)).unsqueeze(1)
Sb = d @ d.T
Lw = torch.linalg.cholesky(Sw)
Li = torch.linalg.solve_triangular(Lw, torch.eye(3), upper=False)
evals, evecs = torch.linalg.eigh(Li @ Sb @ Li.T)
direction = Li.T @ evecs[:, -1]
direction = direction * torch.sign(direction @ d.squeeze(1))
proj0, proj1 = D0 @ direction, D1 @ direction
thr = (proj0.mean() + proj1.mean()) / 2
acc = ((proj0 < thr).double().mean() + (proj1 > thr).double().mean()) / 2
print(f"lda eigenvalue {evals[-1].item():.4f} accuracy {acc.item():.3f}")

# spectral clustering of two rings' points
ang = T(np.tile(np.linspace(0, 2 * np.pi, 30, endpoint=False), 2) + 0.05 * rng.normal(size=60))
rad = torch.cat([torch.full((30,), 1.0), torch.full((30,), 3.0)])
P = torch.stack([rad * ang.cos(), rad * ang.sin()], 1) + 0.05 * T(rng.normal(size=(60, 2)))
Wg = torch.exp(-torch.cdist(P, P) ** 2 / 0.5)
Wg.fill_diagonal_(0)
deg = Wg.sum(1)
Lsym = torch.eye(60) - Wg / torch.sqrt(deg[:, None] * deg[None, :])
lev, lvec = torch.linalg.eigh(Lsym)
fiedler = lvec[:, 1]
labels = (fiedler > 0).long()
agree = (labels[:30] == labels[0]).all().item() and (labels[30:] != labels[0]).all().item()
print("laplacian eigenvalues 2, 3", [round(v, 4) for v in lev[1:3].tolist()],
      "rings separated:", agree)

# orthogonal Procrustes
Q, _ = torch.linalg.qr(T(rng.normal(size=(3, 3))))
if torch.linalg.det(Q) < 0:
    Q[:, 0] = -Q[:, 0]
src = T(rng.normal(size=(50, 3)))
dst = src @ Q.T + 0.01 * T(rng.normal(size=(50, 3)))
U2, _, Vh2 = torch.linalg.svd(src.T @ dst)
R = (U2 @ Vh2).T
print(f"procrustes rotation error {(R - Q).norm().item():.4f} det {torch.linalg.det(R).item():.6f}")

# Gaussian log-likelihood and factorization agreements
Sigma = T(cov)
sign, logdet = torch.linalg.slogdet(Sigma)
Lc, info = torch.linalg.cholesky_ex(Sigma)
print("slogdet", int(sign.item()), round(logdet.item(), 6), "cholesky logdet",
      round(2 * Lc.diagonal().log().sum().item(), 6), "info", int(info.item()))
_, bad = torch.linalg.cholesky_ex(-Sigma)
print("cholesky_ex on a negative definite matrix: info", int(bad.item()))
rhs = T(rng.normal(size=(3, 2)))
x1 = torch.cholesky_solve(rhs, Lc)
LU, piv = torch.linalg.lu_factor(Sigma)
x2 = torch.linalg.lu_solve(LU, piv, rhs)
print("cholesky_solve == lu_solve == solve:", torch.allclose(x1, x2),
      torch.allclose(x1, torch.linalg.solve(Sigma, rhs)))
K = torch.kron(torch.eye(2), T([[1.0, 2.0], [3.0, 4.0]]))
B = torch.block_diag(T([[1.0]]), T([[2.0, 0.0], [0.0, 3.0]]))
print("kron", K.tolist()[1], "block_diag", B.diagonal().tolist(),
      "cross", torch.linalg.cross(T([1.0, 0, 0]), T([0, 1.0, 0])).tolist())
print("matrix_power", torch.linalg.matrix_power(T([[1.0, 1.0], [0.0, 1.0]]), 5).tolist(),
      "rank", torch.linalg.matrix_rank(Xc[:, :3] @ T(rng.normal(size=(3, 5)))).item(),
      f"cond {torch.linalg.cond(Sigma).item():.4f}",
      f"norms {torch.linalg.matrix_norm(Sigma, 'fro').item():.4f}",
      f"{torch.linalg.matrix_norm(Sigma, 2).item():.4f} {torch.linalg.matrix_norm(Sigma, 'nuc').item():.4f}")
iu = torch.triu_indices(3, 3, offset=1)
print("triu_indices", iu.tolist(), "upper entries", Sigma[iu[0], iu[1]].tolist())

# a full-covariance Gaussian fitted through slogdet and solve
data = torch.cat([D0, D1])
mean = torch.zeros(3, requires_grad=True)
raw_diag = torch.zeros(3, requires_grad=True)
off = torch.zeros(3, requires_grad=True)
opt = torch.optim.Adam([mean, raw_diag, off], lr=0.05)
il = torch.tril_indices(3, 3, offset=-1)
nlls = []
for step in range(80):
    Lm = torch.diag_embed(F.softplus(raw_diag) + 1e-3)
    Lm = Lm.index_put((il[0], il[1]), off)
    Cov = Lm @ Lm.T
    diff = data - mean
    maha = (diff * torch.linalg.solve(Cov, diff.T).T).sum(1)
    nll = 0.5 * (maha.mean() + torch.linalg.slogdet(Cov)[1] + 3 * np.log(2 * np.pi))
    opt.zero_grad()
    nll.backward()
    opt.step()
    nlls.append(nll.item())
print("nll", [round(v, 5) for v in nlls[::20]])
emp = torch.cov(data.T, correction=0)
print(f"fitted covariance vs empirical {(Cov - emp).abs().max().item():.4f}")
torch.set_default_dtype(torch.float32)
print(f"RESULT {nlls[0]:.5f} {nlls[-1]:.5f} {ridge_mse:.6f}")
