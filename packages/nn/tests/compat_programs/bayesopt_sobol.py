"""Bayesian optimization of a 2-D test function, in the style of the public "BO from scratch"
notebooks (the parts BoTorch users write by hand): initial designs from
torch.quasirandom.SobolEngine (scramble=False: draw, draw_base2, fast_forward, reset,
num_generated, the repr), inputs normalized and outputs standardized, an exact GP with an ARD RBF
kernel (torch.cdist on length-scaled inputs) whose hyperparameters (softplus-positive) are fitted
by maximizing the marginal likelihood with Adam (cholesky, cholesky_solve, the log-determinant
from the Cholesky diagonal), the posterior mean and variance, expected improvement in closed form
(torch.special.ndtr and the Normal log_prob) and its log form through torch.special.log_ndtr and
torch.logaddexp, the acquisition maximized over Sobol candidates then refined by projected
gradient ascent with clamp_, torch.linalg.solve_ex / inv_ex on an ill-conditioned kernel,
torch.cummin of the best-so-far trace, torch.unravel_index of a grid argmin, torch.gradient for
a finite-difference check, and torch.atleast_2d. Everything is deterministic (no random draws).
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first best> <last best> <grid minimum>."""

import math

import torch
from torch.distributions import Normal
from torch.quasirandom import SobolEngine

torch.set_default_dtype(torch.float64)


def branin(x):  # x in [0, 1]^2 mapped to the usual domain
    x1 = 15 * x[..., 0] - 5
    x2 = 15 * x[..., 1]
    return ((x2 - 5.1 / (4 * math.pi ** 2) * x1 ** 2 + 5 / math.pi * x1 - 6) ** 2
            + 10 * (1 - 1 / (8 * math.pi)) * torch.cos(x1) + 10)


sobol = SobolEngine(dimension=2, scramble=False)
print(sobol, "first draws", sobol.draw(4).tolist())
base2 = sobol.draw_base2(2)
try:
    sobol.draw_base2(2)
except ValueError as e:
    print("ValueError:", e)
print("draw_base2", tuple(base2.shape), "num_generated", sobol.num_generated)
sobol.fast_forward(5)
sobol.reset()
print("after reset", sobol.draw(2).tolist(), sobol.num_generated)
sobol.reset()
X = sobol.draw(8, dtype=torch.float64)
Y = branin(X)
print("initial best", round(Y.min().item(), 4))

# a grid for the true minimum, located with unravel_index
g = torch.linspace(0, 1, 101)
G = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1)
vals = branin(G)
i, j = torch.unravel_index(vals.argmin(), vals.shape)
print(f"grid min {vals.min().item():.5f} at {[round(g[i].item(), 2), round(g[j].item(), 2)]}")
gx, gy = torch.gradient(vals, spacing=(g, g))
print("finite-difference gradient shapes", tuple(gx.shape), tuple(gy.shape),
      "small at the minimum:", gx[i, j].abs().item() < 5 and gy[i, j].abs().item() < 5)


def kernel(a, b, ls, os):
    d = torch.cdist(a / ls, b / ls)
    return os * torch.exp(-0.5 * d ** 2)


def fit_gp(X, y, steps=60):
    raw = torch.zeros(4, requires_grad=True)  # log-ish lengthscales (2), outputscale, noise
    opt = torch.optim.Adam([raw], lr=0.1)
    for _ in range(steps):
        ls = torch.nn.functional.softplus(raw[:2]) + 0.02
        os = torch.nn.functional.softplus(raw[2]) + 0.01
        noise = torch.nn.functional.softplus(raw[3] - 4) + 1e-6
        K = kernel(X, X, ls, os) + noise * torch.eye(len(X))
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y[:, None], L)
        mll = -0.5 * (y[:, None] * alpha).sum() - torch.log(torch.diagonal(L)).sum() \
            - 0.5 * len(X) * math.log(2 * math.pi)
        opt.zero_grad()
        (-mll / len(X)).backward()
        opt.step()
    return ls.detach(), os.detach(), noise.detach(), mll.item()


def posterior(Xs, X, y, ls, os, noise):
    K = kernel(X, X, ls, os) + noise * torch.eye(len(X))
    L = torch.linalg.cholesky(K)
    Ks = kernel(Xs, X, ls, os)
    mean = Ks @ torch.cholesky_solve(y[:, None], L)
    v = torch.linalg.solve_triangular(L, Ks.T, upper=False)
    var = (os - (v ** 2).sum(0)).clamp_min(1e-12)
    return mean.squeeze(-1), var


def expected_improvement(mean, var, best):
    sd = var.sqrt()
    z = (best - mean) / sd
    return sd * (z * torch.special.ndtr(z) + Normal(0.0, 1.0).log_prob(z).exp())


def log_ei(mean, var, best):
    sd = var.sqrt()
    z = (best - mean) / sd
    # log(z * Phi(z) + phi(z)) for moderate z, as logaddexp of the two logs where z > 0
    return torch.log(sd) + torch.logaddexp(torch.log(z.clamp_min(1e-12)) + torch.special.log_ndtr(z),
                                           Normal(0.0, 1.0).log_prob(z))


trace = []
for it in range(8):
    mu, sigma = Y.mean(), Y.std()
    y = (Y - mu) / sigma
    ls, os, noise, mll = fit_gp(X, y)
    best = y.min()
    cand = SobolEngine(2, scramble=False).draw(256)[1:]
    m, v = posterior(cand, X, y, ls, os, noise)
    ei = expected_improvement(m, v, best)
    x0 = cand[ei.argmax()].clone().requires_grad_(True)
    opt = torch.optim.SGD([x0], lr=0.02)
    for _ in range(20):
        m1, v1 = posterior(torch.atleast_2d(x0), X, y, ls, os, noise)
        loss = -expected_improvement(m1, v1, best).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x0.clamp_(0.0, 1.0)
    xn = x0.detach()[None]
    X = torch.cat([X, xn])
    Y = torch.cat([Y, branin(xn)])
    trace.append(Y.min().item())
    print(f"iter {it} mll {mll:.4f} ls {[round(t, 3) for t in ls.tolist()]} ei {ei.max().item():.5f} "
          f"x {[round(t, 4) for t in xn[0].tolist()]} y {Y[-1].item():.4f}")
m, v = posterior(cand[:5], X, (Y - Y.mean()) / Y.std(), ls, os, noise)
both = torch.stack([expected_improvement(m, v, -1.0).log(), log_ei(m, v, -1.0)])
print("log EI agrees where z > 0:", torch.allclose(both[0][(-1.0 - m) > 0], both[1][(-1.0 - m) > 0], atol=1e-6))
best_so_far = torch.cummin(Y, 0)
print("best-so-far", [round(t, 3) for t in best_so_far.values[-4:].tolist()], "argmins", best_so_far.indices[-4:].tolist())
Kbad = kernel(X[:6], X[:6], torch.tensor([5.0, 5.0]), 1.0)
sol, info = torch.linalg.solve_ex(Kbad, torch.ones(6, 1))
inv, info2 = torch.linalg.inv_ex(torch.zeros(2, 2))
print("solve_ex info", info.item(), "finite:", bool(sol.isfinite().all()), "inv_ex of zeros info", info2.item())
print(f"RESULT {trace[0]:.4f} {trace[-1]:.4f} {vals.min().item():.5f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
