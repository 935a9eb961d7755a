"""Optimization on matrix manifolds in the style of public geoopt / McTorch-like PyTorch code:
a Riemannian SGD on the Stiefel manifold (the Euclidean gradient projected onto the tangent
space, the QR retraction with the sign fix, the Cayley retraction by linalg.solve), PCA as
trace maximization checked against eigh, Householder-parametrized orthogonal matrices via
torch.linalg.householder_product (and geqrf), orthogonal Procrustes by SVD, the matrix
exponential of skew-symmetric generators (and matrix_exp's derivative by autograd against
finite differences), and torch.nn.utils.parametrizations.orthogonal with its three maps
("matrix_exp", "cayley", "householder") on a small orthogonal linear regression. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <pca subspace error, floored at 1e-8>."""

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations, parametrize

rng = np.random.default_rng(1509)
torch.set_default_dtype(torch.float64)


def sym(a):
    return 0.5 * (a + a.mT)


def proj_tangent(x, g):
    return g - x @ sym(x.mT @ g)


def qr_retract(y):
    q, r = torch.linalg.qr(y)
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)


def cayley_retract(x, g, lr):
    w = g @ x.mT - x @ g.mT  # skew
    eye = torch.eye(x.shape[0])
    return torch.linalg.solve(eye + lr / 2 * w, (eye - lr / 2 * w) @ x)


n, p = 8, 3
A = torch.from_numpy(rng.normal(size=(200, n))) * torch.tensor([3.0, 2.5, 2.0, 0.7, 0.6, 0.5, 0.4, 0.3])
C = A.T @ A / 200
evals, evecs = torch.linalg.eigh(C)
top = evecs[:, -p:]
print(f"eigh ascending: {bool((evals[1:] >= evals[:-1]).all())} top eigenvalues {[round(v, 4) for v in evals[-p:].flip(0).tolist()]}")

losses = {}
for name in ("qr", "cayley"):
    X = qr_retract(torch.from_numpy(rng.normal(size=(n, p))))
    hist = []
    for it in range(150):
        Xr = X.clone().requires_grad_(True)
        loss = -torch.trace(Xr.T @ C @ Xr)
        (g,) = torch.autograd.grad(loss, Xr)
        rg = proj_tangent(X, g)
        X = qr_retract(X - 0.05 * rg) if name == "qr" else cayley_retract(X, g, 0.05)
        hist.append(loss.item())
    orth = torch.dist(X.T @ X, torch.eye(p)).item()
    sub = torch.linalg.matrix_norm(X @ X.T - top @ top.T).item()
    losses[name] = hist
    print(f"{name:6s} loss {hist[0]:.5f} -> {hist[-1]:.5f} orthonormal {orth < 1e-10} subspace found {sub < 1e-8} "
          f"tangent grad vanished {torch.linalg.norm(rg).item() < 1e-8}")

# Householder reflectors: geqrf + householder_product == Q of qr
M = torch.from_numpy(rng.normal(size=(6, 4)))
a, tau = torch.geqrf(M)
Q = torch.linalg.householder_product(a, tau)
Qr, Rr = torch.linalg.qr(M)
print(f"householder_product == qr's Q: {torch.allclose(Q, Qr)} R on the diagonal {torch.allclose(torch.triu(a[:4]), Rr)}")

# Procrustes: the rotation best mapping P onto R Q
S = torch.from_numpy(rng.normal(size=(3, 3)))
R_true = torch.linalg.matrix_exp(S - S.T)
P = torch.from_numpy(rng.normal(size=(20, 3)))
Qp = P @ R_true.T + 0.01 * torch.from_numpy(rng.normal(size=(20, 3)))
U, _, Vh = torch.linalg.svd(Qp.T @ P)
d = torch.sign(torch.linalg.det(U @ Vh))
R_est = U @ torch.diag(torch.tensor([1.0, 1.0, d.item()])) @ Vh
print(f"procrustes rotation error {torch.linalg.norm(R_est - R_true).item():.4f} det {torch.linalg.det(R_est).item():.6f}")

# matrix_exp's derivative against central differences
W = torch.from_numpy(rng.normal(size=(4, 4))) * 0.5
W.requires_grad_(True)
Gm = torch.from_numpy(rng.normal(size=(4, 4)))


def f(w):
    return (torch.linalg.matrix_exp(w - w.T) * Gm).sum()


(gw,) = torch.autograd.grad(f(W), W)
E = torch.zeros(4, 4)
E[1, 2] = 1e-6
fd = (f(W.detach() + E) - f(W.detach() - E)) / 2e-6
print(f"matrix_exp grad {gw[1, 2].item():.6f} finite difference {fd.item():.6f} "
      f"gradcheck {torch.autograd.gradcheck(lambda w: torch.linalg.matrix_exp(w - w.T), (W[:3, :3].detach().clone().requires_grad_(True),))}")

# parametrizations.orthogonal: fit an orthogonal map Y = X R
R_fit = qr_retract(torch.from_numpy(rng.normal(size=(5, 5))))
Xd = torch.from_numpy(rng.normal(size=(64, 5)))
Yd = Xd @ R_fit.T
init = torch.from_numpy(rng.normal(size=(5, 5)))
for orth_map in ("matrix_exp", "cayley", "householder"):
    lin = nn.Linear(5, 5, bias=False)
    with torch.no_grad():
        lin.weight.copy_(init)
    parametrizations.orthogonal(lin, orthogonal_map=orth_map)
    w0 = lin.weight.detach().clone()
    opt = torch.optim.Adam(lin.parameters(), lr=0.05)
    for it in range(100):
        loss = ((lin(Xd) - Yd) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = lin.weight.detach()
    print(f"orthogonal({orth_map:11s}) start orthogonal {torch.allclose(w0 @ w0.T, torch.eye(5))} loss {loss.item():.2e} "
          f"orthogonal {torch.allclose(w @ w.T, torch.eye(5))} parametrized {parametrize.is_parametrized(lin, 'weight')} "
          f"original {tuple(lin.parametrizations.weight.original.shape)}")
print(f"RESULT {losses['qr'][0]:.5f} {losses['qr'][-1]:.5f} {max(sub, 1e-8):.0e}")
