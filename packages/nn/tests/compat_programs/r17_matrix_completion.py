"""Low-rank matrix completion as recommender / compressed-sensing notebooks write it in PyTorch:
a rank-3 ratings matrix observed on a random mask, Soft-Impute (iterative SVD with singular
value soft-thresholding by torch.linalg.svd), a nuclear-norm regularized objective written
with torch.norm(W, p='nuc') and trained by gradient descent (its gradient U V^T checked
against the SVD), the nuclear norm three ways (torch.norm 'nuc', linalg.matrix_norm 'nuc',
the sum of svdvals) including batched dims and keepdim, alternating least squares with
per-row ridge solves by torch.linalg.solve on masked normal equations, a factorized model
trained by Adam with weight decay, and held-out RMSE of each method. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<soft-impute rmse> <als rmse> <nuclear-gd rmse>."""

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(1714)
m, n, r = 30, 24, 3
U0 = torch.from_numpy(rng.normal(size=(m, r)))
V0 = torch.from_numpy(rng.normal(size=(n, r)))
M = U0 @ V0.T
mask = torch.from_numpy(rng.uniform(size=(m, n)) < 0.5)
test = ~mask
print(f"observed {int(mask.sum())} of {m * n} entries rank {torch.linalg.matrix_rank(M).item()}")

A = torch.arange(12.0).view(3, 4)
print(f"nuclear norm torch.norm {torch.norm(A, p='nuc').item():.6f} method {A.norm('nuc').item():.6f} matrix_norm {torch.linalg.matrix_norm(A, 'nuc').item():.6f} svdvals {torch.linalg.svdvals(A).sum().item():.6f}")
B = torch.arange(24.0).view(2, 3, 4)
print(f"batched over dims (1, 2) {[round(v, 6) for v in torch.norm(B, 'nuc', dim=(1, 2)).tolist()]} over (0, 2) shape {tuple(torch.norm(B, 'nuc', dim=(2, 0)).shape)} keepdim {tuple(torch.norm(B, 'nuc', dim=(1, 2), keepdim=True).shape)}")
print(f"fro {torch.norm(A, p='fro').item():.6f} dtype float32 {torch.norm(A.float(), 'nuc').dtype} dtype arg {torch.norm(A.float(), 'nuc', dtype=torch.float64).dtype}")
for bad in (lambda: torch.norm(B, p="nuc"), lambda: torch.norm(A.long(), p="nuc")):
    try:
        bad()
        print("no error")
    except RuntimeError:
        print("nuclear norm of a bad input: RuntimeError")

W = torch.from_numpy(rng.normal(size=(5, 4))).requires_grad_(True)
torch.norm(W, p="nuc").backward()
Us, S, Vh = torch.linalg.svd(W.detach(), full_matrices=False)
print(f"d nuc / dW == U V^T: {torch.allclose(W.grad, Us @ Vh, atol=1e-10)}")


def rmse(X, where):
    return torch.sqrt(((X - M)[where] ** 2).mean()).item()


# Soft-Impute
Z = torch.zeros(m, n)
lam = 2.0
for it in range(200):
    filled = torch.where(mask, M, Z)
    Uz, Sz, Vz = torch.linalg.svd(filled, full_matrices=False)
    Z_new = Uz @ torch.diag(torch.clamp(Sz - lam, min=0)) @ Vz
    if (Z_new - Z).norm() / Z.norm().clamp(min=1e-12) < 1e-7:
        break
    Z = Z_new
si = rmse(Z, test)
print(f"soft-impute iterations {it} rank {(torch.linalg.svdvals(Z) > 1e-6).sum().item()} train rmse {rmse(Z, mask):.4f} test rmse {si:.4f}")

# ALS with masked ridge normal equations
k, reg = 3, 0.1
P = torch.from_numpy(rng.normal(0, 0.3, (m, k)))
Q = torch.from_numpy(rng.normal(0, 0.3, (n, k)))
Mw = torch.where(mask, M, torch.zeros(()))
mf = mask.double()
for sweep in range(30):
    AtA = torch.einsum("ij,jk,jl->ikl", mf, Q, Q) + reg * torch.eye(k)
    P = torch.linalg.solve(AtA, (Mw @ Q)[..., None]).squeeze(-1)
    AtA = torch.einsum("ij,ik,il->jkl", mf, P, P) + reg * torch.eye(k)
    Q = torch.linalg.solve(AtA, (Mw.T @ P)[..., None]).squeeze(-1)
    if sweep % 10 == 0:
        print(f"als sweep {sweep} train rmse {rmse(P @ Q.T, mask):.5f}")
als = rmse(P @ Q.T, test)
print(f"als test rmse {als:.5f}")

# nuclear-norm regularized gradient descent on the full matrix
X = torch.zeros(m, n, requires_grad=True)
opt = torch.optim.SGD([X], lr=0.5)
for it in range(300):
    loss = 0.5 * ((X - M)[mask] ** 2).sum() / mask.sum() + 0.01 * torch.norm(X, p="nuc") / (m * n) ** 0.5
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 100 == 0:
        print(f"nuclear gd it {it} loss {loss.item():.6f}")
gd = rmse(X.detach(), test)
print(f"nuclear gd test rmse {gd:.4f} top singular values {[round(v, 3) for v in torch.linalg.svdvals(X.detach())[:4].tolist()]}")

# factorized model with Adam + weight decay
Pf = torch.nn.Parameter(torch.from_numpy(rng.normal(0, 0.3, (m, 4))))
Qf = torch.nn.Parameter(torch.from_numpy(rng.normal(0, 0.3, (n, 4))))
opt = torch.optim.Adam([Pf, Qf], lr=0.05, weight_decay=1e-4)
for it in range(400):
    loss = ((Pf @ Qf.T - M)[mask] ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"factorized adam train {rmse((Pf @ Qf.T).detach(), mask):.4f} test {rmse((Pf @ Qf.T).detach(), test):.4f}")
print(f"RESULT {si:.4f} {als:.5f} {gd:.4f}")
