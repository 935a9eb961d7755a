"""Portfolio construction and risk as quant research notebooks write them in PyTorch: log
returns from simulated correlated prices (torch.linalg.cholesky), Ledoit-Wolf shrinkage of the
sample covariance (torch.cov), the global minimum-variance portfolio by torch.linalg.solve,
the long-only mean-variance frontier by projected gradient descent with Euclidean projection
onto the simplex (sort + cumsum + searchsorted-free max trick), a max-Sharpe portfolio through
a softmax parametrization trained by Adam, risk parity by Newton-free multiplicative updates,
historical VaR / CVaR by torch.quantile and sorting, a CVaR-minimizing portfolio via the
Rockafellar-Uryasev relaxation, drawdowns by cummax, and rolling statistics with unfold.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <min var vol> <max sharpe> <cvar>."""

import math

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(1711)
N, T = 6, 750
vols = torch.tensor([0.10, 0.15, 0.20, 0.25, 0.18, 0.30]) / math.sqrt(252)
mus = torch.tensor([0.04, 0.06, 0.08, 0.10, 0.07, 0.12]) / 252
corr = torch.full((N, N), 0.3)
corr.fill_diagonal_(1.0)
corr[0, 1] = corr[1, 0] = 0.8
cov_true = corr * vols[:, None] * vols[None, :]
Lc = torch.linalg.cholesky(cov_true)
z = torch.from_numpy(rng.standard_t(5, size=(T, N)) / math.sqrt(5 / 3))
rets = mus + z @ Lc.T
prices = 100 * torch.exp(torch.cumsum(rets, 0))
print(f"prices {tuple(prices.shape)} final {[round(v, 2) for v in prices[-1].tolist()]}")

S = torch.cov(rets.T)
mean = rets.mean(0)
# Ledoit-Wolf shrinkage toward a scaled identity
X = rets - mean
mu_t = torch.trace(S) / N
F_t = mu_t * torch.eye(N)
d2 = ((S - F_t) ** 2).sum()
b2_bar = sum(((torch.outer(x, x) - S) ** 2).sum() for x in X) / T ** 2
b2 = torch.minimum(b2_bar, d2)
delta = (b2 / d2).item()
S_lw = delta * F_t + (1 - delta) * S
print(f"shrinkage intensity {delta:.6f} condition number sample {torch.linalg.cond(S).item():.3f} shrunk {torch.linalg.cond(S_lw).item():.3f}")

ones = torch.ones(N)
w_mv = torch.linalg.solve(S_lw, ones)
w_mv = w_mv / w_mv.sum()
vol_mv = math.sqrt((w_mv @ S_lw @ w_mv).item() * 252)
print(f"min-variance weights {[round(v, 4) for v in w_mv.tolist()]} annual vol {vol_mv:.4f}")


def project_simplex(v):
    u, _ = torch.sort(v, descending=True)
    css = torch.cumsum(u, 0) - 1
    k = torch.arange(1, v.numel() + 1)
    cond = u - css / k > 0
    rho = k[cond][-1]
    theta = css[cond][-1] / rho
    return torch.clamp(v - theta, min=0)


print(f"simplex projection {[round(v, 4) for v in project_simplex(torch.tensor([0.5, 1.2, -0.3, 0.1])).tolist()]}")
frontier = []
for lam in [0.0, 2.0, 10.0]:
    w = torch.full((N,), 1.0 / N)
    for it in range(400):
        grad = 2 * S_lw @ w * 252 - lam * mean * 252
        w = project_simplex(w - 0.5 * grad)
    frontier.append((lam, math.sqrt((w @ S_lw @ w).item() * 252), (w @ mean).item() * 252))
print(f"frontier (lambda, vol, return) {[(lm, round(v, 4), round(r, 4)) for lm, v, r in frontier]} monotone {frontier[0][1] <= frontier[1][1] <= frontier[2][1]}")

logits = torch.zeros(N, requires_grad=True)
opt = torch.optim.Adam([logits], lr=0.05)
for it in range(500):
    w = torch.softmax(logits, 0)
    sharpe = (w @ mean) / torch.sqrt(w @ S_lw @ w) * math.sqrt(252)
    opt.zero_grad()
    (-sharpe).backward()
    opt.step()
    if it % 200 == 0:
        print(f"max-sharpe it {it} sharpe {sharpe.item():.5f}")
w_sh = torch.softmax(logits.detach(), 0)
best_sharpe = sharpe.item()
print(f"max-sharpe weights {[round(v, 3) for v in w_sh.tolist()]}")

# risk parity
w = torch.full((N,), 1.0 / N)
for it in range(200):
    rc = w * (S_lw @ w)
    w = w * (rc.mean() / rc) ** 0.5
    w = w / w.sum()
rc = w * (S_lw @ w)
print(f"risk parity contributions equal {torch.allclose(rc / rc.sum(), torch.full((N,), 1.0 / N), atol=1e-8)} weights {[round(v, 4) for v in w.tolist()]}")

# historical VaR / CVaR at 95%
port = rets @ w_mv
var95 = -torch.quantile(port, 0.05).item()
sorted_losses, _ = torch.sort(-port, descending=True)
k = int(math.ceil(0.05 * T))
cvar95 = sorted_losses[:k].mean().item()
print(f"daily VaR95 {var95:.6f} CVaR95 {cvar95:.6f} cvar >= var {cvar95 >= var95}")

# Rockafellar-Uryasev CVaR minimization (subgradient on a smooth relaxation)
wl = torch.zeros(N, requires_grad=True)
alpha = torch.zeros((), requires_grad=True)
opt = torch.optim.Adam([wl, alpha], lr=0.01)
for it in range(600):
    ww = torch.softmax(wl, 0)
    loss_p = -(rets @ ww)
    obj = alpha + torch.nn.functional.softplus((loss_p - alpha) * 2000).mean() / 2000 / 0.05
    opt.zero_grad()
    obj.backward()
    opt.step()
ww = torch.softmax(wl.detach(), 0)
lp = -(rets @ ww)
cvar_opt = torch.sort(lp, descending=True).values[:k].mean().item()
print(f"cvar-optimal CVaR95 {cvar_opt:.6f} <= min-variance CVaR {cvar_opt <= cvar95 + 1e-4}")

# drawdowns and rolling volatility
wealth = torch.exp(torch.cumsum(port, 0))
peak = torch.cummax(wealth, 0).values
dd = 1 - wealth / peak
print(f"max drawdown {dd.max().item():.4f} at day {dd.argmax().item()} peak before {peak[dd.argmax()].item():.4f}")
roll = port.unfold(0, 21, 1)
rvol = roll.std(1) * math.sqrt(252)
print(f"rolling 21d vol windows {roll.shape[0]} min {rvol.min().item():.4f} max {rvol.max().item():.4f}")
print(f"RESULT {vol_mv:.4f} {best_sharpe:.4f} {cvar_opt:.6f}")
