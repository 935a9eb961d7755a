"""Deep canonical correlation analysis in the style of the public DCCA / DGCCA PyTorch ports on
two synthetic views sharing a 3-D latent (NumPy nonlinear maps plus view-specific noise): two
MLP towers, the CCA objective computed as the sum of the top-k singular values of
T = S11^{-1/2} S12 S22^{-1/2} with ridge-regularized covariances, the inverse square roots by
torch.linalg.eigh (eigenvalues clamped) checked against a Newton-Schulz iteration and
matrix_power, the full trace-norm variant by torch.linalg.matrix_norm(ord="nuc"), gradient
flow through eigh and svdvals, linear CCA on the learned features solved as a generalized
eigenproblem via cholesky + solve_triangular, and the canonical correlations of held-out data
compared with the true latent dimension. float64. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember. Prints RESULT <first
correlation> <last correlation> <held-out top-3 correlation>."""

import numpy as np
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(149)
N, K = 600, 3
z = rng.normal(size=(N, K))
A1, A2 = rng.normal(size=(K, 10)), rng.normal(size=(K, 12))
v1 = np.tanh(z @ A1) + 0.3 * rng.normal(size=(N, 10))
v2 = (z @ A2) ** 2 / 4 + 0.3 * rng.normal(size=(N, 12))
X1, X2 = torch.from_numpy(v1), torch.from_numpy(v2)
tr, te = slice(0, 450), slice(450, N)


def inv_sqrt(m, eps=1e-9):
    w, v = torch.linalg.eigh(m)
    return v @ torch.diag(w.clamp_min(eps).rsqrt()) @ v.T


def newton_schulz(m, iters=30):
    norm = torch.linalg.matrix_norm(m)
    y, zz = m / norm, torch.eye(m.shape[0])
    for _ in range(iters):
        t = 0.5 * (3 * torch.eye(m.shape[0]) - zz @ y)
        y, zz = y @ t, t @ zz
    return zz / norm.sqrt()


m = torch.from_numpy(rng.normal(size=(5, 5)))
m = m @ m.T + 0.5 * torch.eye(5)
r = inv_sqrt(m)
print(f"eigh inverse sqrt: r m r == I {torch.allclose(r @ m @ r, torch.eye(5), atol=1e-8)} "
      f"newton-schulz agrees {torch.allclose(newton_schulz(m), r, atol=1e-6)} "
      f"matrix_power(r, -2) == m {torch.allclose(torch.linalg.matrix_power(r, -2), m, atol=1e-6)}")


def cca_corr(h1, h2, k=None, r1=1e-3, r2=1e-3):
    n = h1.shape[0]
    h1, h2 = h1 - h1.mean(0), h2 - h2.mean(0)
    s11 = h1.T @ h1 / (n - 1) + r1 * torch.eye(h1.shape[1])
    s22 = h2.T @ h2 / (n - 1) + r2 * torch.eye(h2.shape[1])
    s12 = h1.T @ h2 / (n - 1)
    t = inv_sqrt(s11) @ s12 @ inv_sqrt(s22)
    if k is None:
        return torch.linalg.matrix_norm(t, ord="nuc")
    return torch.linalg.svdvals(t)[:k].sum()


def tower(i, o=6, h=32):
    net = nn.Sequential(nn.Linear(i, h), nn.Sigmoid(), nn.Linear(h, h), nn.Sigmoid(), nn.Linear(h, o))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape)))
    return net


f1, f2 = tower(10), tower(12)
opt = torch.optim.Adam([*f1.parameters(), *f2.parameters()], lr=3e-3)
corrs = []
for step in range(120):
    idx = torch.from_numpy(rng.choice(450, 200, replace=False))
    corr = cca_corr(f1(X1[tr][idx]), f2(X2[tr][idx]), k=K)
    opt.zero_grad()
    (-corr).backward()
    opt.step()
    corrs.append(corr.item())
    if step % 30 == 0:
        print(f"step {step:3d} top-{K} correlation {corr.item():.5f}")

with torch.no_grad():
    h1, h2 = f1(X1[te]), f2(X2[te])
    nuc = cca_corr(h1, h2).item()
    top = cca_corr(h1, h2, k=K).item()
    # linear CCA on the features as a generalized symmetric eigenproblem: S12 S22^-1 S21 w = rho^2 S11 w
    h1c, h2c = h1 - h1.mean(0), h2 - h2.mean(0)
    n = h1.shape[0]
    s11 = h1c.T @ h1c / (n - 1) + 1e-3 * torch.eye(6)
    s22 = h2c.T @ h2c / (n - 1) + 1e-3 * torch.eye(6)
    s12 = h1c.T @ h2c / (n - 1)
    Lc = torch.linalg.cholesky(s11)
    M = s12 @ torch.linalg.solve(s22, s12.T)
    Linv_M = torch.linalg.solve_triangular(Lc, M, upper=False)
    C = torch.linalg.solve_triangular(Lc, Linv_M.T, upper=False)
    rho = torch.linalg.eigvalsh((C + C.T) / 2).flip(0).clamp_min(0).sqrt()
    sv = torch.linalg.svdvals(inv_sqrt(s11) @ s12 @ inv_sqrt(s22))
print(f"held-out: nuclear {nuc:.5f} top-{K} {top:.5f} correlations {[round(v, 4) for v in rho.tolist()]}")
print(f"generalized eigen == svd: {torch.allclose(rho, sv, atol=1e-6)}")
print(f"RESULT {corrs[0]:.5f} {np.mean(corrs[-10:]):.5f} {top:.5f}")
