"""Sparse coding in the style of the public LISTA / dictionary-learning code: signals that are
sparse combinations of atoms of a random dictionary (NumPy), ISTA and FISTA with the step from
the largest singular value (torch.linalg.matrix_norm(ord=2), checked against svdvals and power
iteration), soft thresholding by F.softshrink (checked against sign * relu(|x| - t)), learned
ISTA (LISTA) with untied per-layer thresholds and shared W_e / S matrices initialized from the
dictionary, trained by unrolled backprop, the hard-thresholding and tanhshrink variants
(F.hardshrink, F.tanhshrink) as baselines, support recovery F1 by boolean masks, an online
dictionary update with column renormalization (F.normalize dim=0), and least squares debiasing
on the recovered support by torch.linalg.lstsq. float64 throughout. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<ISTA mse at 8 iterations> <LISTA mse at 8 layers> <support F1>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(141)
M, N, K = 20, 40, 3  # measurements, atoms, nonzeros
D = F.normalize(torch.from_numpy(rng.normal(size=(M, N))), dim=0)


def sparse_codes(n):
    z = np.zeros((n, N))
    for i in range(n):
        idx = rng.choice(N, K, replace=False)
        z[i, idx] = rng.choice([-1, 1], K) * rng.uniform(0.5, 1.5, K)
    return torch.from_numpy(z)


Z_train, Z_test = sparse_codes(600), sparse_codes(200)
Y_train = Z_train @ D.T + 0.01 * torch.from_numpy(rng.normal(size=(600, M)))
Y_test = Z_test @ D.T + 0.01 * torch.from_numpy(rng.normal(size=(200, M)))

L = torch.linalg.matrix_norm(D, ord=2).pow(2)
v = torch.ones(N)
for _ in range(100):
    v = F.normalize(D.T @ (D @ v), dim=0)
power = (D @ v).norm().pow(2)
print(f"lipschitz {L.item():.6f} svdvals {torch.linalg.svdvals(D)[0].pow(2).item():.6f} power {power.item():.6f}")
x = torch.linspace(-2, 2, 9)
print(f"softshrink == sign*relu: {torch.equal(F.softshrink(x, 0.5), torch.sign(x) * F.relu(x.abs() - 0.5))} "
      f"hardshrink {F.hardshrink(x, 0.5).tolist()[:3]} tanhshrink(1) {F.tanhshrink(torch.tensor(1.0)).item():.6f}")

lam = 0.05


def ista(y, iters, fista=False):
    z = torch.zeros(y.shape[0], N)
    zp, t = z, 1.0
    for _ in range(iters):
        grad = (zp @ D.T - y) @ D
        z_new = F.softshrink(zp - grad / L, lam / L.item())
        if fista:
            t_new = (1 + (1 + 4 * t * t) ** 0.5) / 2
            zp = z_new + (t - 1) / t_new * (z_new - z)
            t = t_new
        else:
            zp = z_new
        z = z_new
    return z


for iters in (8, 50, 200):
    print(f"ista {iters:3d} mse {F.mse_loss(ista(Y_test, iters), Z_test).item():.6f} "
          f"fista {F.mse_loss(ista(Y_test, iters, True), Z_test).item():.6f}")
ista8 = F.mse_loss(ista(Y_test, 8), Z_test).item()


class LISTA(nn.Module):
    def __init__(self, layers=8, shrink="soft"):
        super().__init__()
        self.We = nn.Parameter((D.T / L).clone())
        self.S = nn.Parameter(torch.eye(N) - D.T @ D / L)
        self.theta = nn.Parameter(torch.full((layers,), lam / L.item()))
        self.layers, self.shrink = layers, shrink

    def act(self, x, t):
        if self.shrink == "soft":
            return torch.sign(x) * F.relu(x.abs() - t)  # a per-layer learned threshold tensor
        return x * (x.abs() > t)  # hard thresholding (its gradient ignores the threshold)

    def forward(self, y):
        b = y @ self.We.T
        z = self.act(b, self.theta[0])
        for k in range(1, self.layers):
            z = self.act(b + z @ self.S.T, self.theta[k])
        return z


results = {}
for shrink in ("soft", "hard"):
    model = LISTA(shrink=shrink)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for step in range(100):
        idx = torch.from_numpy(rng.choice(600, 64, replace=False))
        loss = F.mse_loss(model(Y_train[idx]), Z_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 0:
            print(f"lista-{shrink} step {step:3d} loss {loss.item():.6f}")
    with torch.no_grad():
        z = model(Y_test)
    results[shrink] = (F.mse_loss(z, Z_test).item(), z)
    print(f"lista-{shrink}: test mse {results[shrink][0]:.6f} thresholds {[round(t, 4) for t in model.theta.tolist()[:3]]}")

z = results["soft"][1]
pred, true = z.abs() > 0.1, Z_test != 0
tp = (pred & true).sum().item()
f1 = 2 * tp / (pred.sum().item() + true.sum().item())
debiased = torch.zeros_like(z)
for i in range(5):
    s = pred[i].nonzero().squeeze(1)
    sol = torch.linalg.lstsq(D[:, s], Y_test[i].unsqueeze(1)).solution.squeeze(1)
    debiased[i, s] = sol
print(f"support f1 {f1:.4f} debiased mse (5 signals) {F.mse_loss(debiased[:5], Z_test[:5]).item():.6f} "
      f"vs lista {F.mse_loss(z[:5], Z_test[:5]).item():.6f}")

# one epoch of online dictionary learning from a perturbed start
Dl = F.normalize(D + 0.3 * torch.from_numpy(rng.normal(size=(M, N))), dim=0)
err0 = (Dl - D).norm().item()
for i in range(0, 600, 50):
    zb = Z_train[i:i + 50]
    resid = Y_train[i:i + 50] - zb @ Dl.T
    Dl = F.normalize(Dl + 0.5 * resid.T @ zb / 50, dim=0)
print(f"dictionary error {err0:.4f} -> {(Dl - D).norm().item():.4f} unit columns: {torch.allclose(Dl.norm(dim=0), torch.ones(N))}")
print(f"RESULT {ista8:.6f} {results['soft'][0]:.6f} {f1:.4f}")
