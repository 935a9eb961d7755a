"""Stochastic differential equations in the style of the public torchsde-free PyTorch notebooks:
Euler-Maruyama and Milstein schemes (the diffusion's derivative by torch.autograd.grad of an
elementwise sum, checked against torch.func.vmap of torch.func.grad) driven by Brownian
increments from NumPy, strong / weak convergence orders estimated by least squares in log-log
(torch.linalg.lstsq) against geometric Brownian motion's exact solution, an Ornstein-Uhlenbeck
process fitted by its exact Gaussian transition likelihood (torch.distributions.Normal,
softplus-constrained parameters, Adam), the same fit by a neural drift / diffusion (an MLP drift,
a softplus diffusion) through the Euler pseudo-likelihood, moment checks with torch.std_mean,
torch.var(correction=0), torch.quantile and windowed statistics from Tensor.unfold, and the
stationary variance sigma^2 / (2 theta) recovered. Data from NumPy. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first nll> <last nll> <theta estimate>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import grad, vmap

rng = np.random.default_rng(31)
torch.set_default_dtype(torch.float64)

# geometric Brownian motion: dX = mu X dt + s X dW, exact X_T = X0 exp((mu - s^2/2) T + s W_T)
MU, SIG, X0, T = 0.8, 0.6, 1.0, 1.0
PATHS = 2000
fine = 2 ** 9
dW_fine = torch.from_numpy(rng.normal(0, (T / fine) ** 0.5, size=(PATHS, fine)))
W_T = dW_fine.sum(1)
exact = X0 * torch.exp((MU - SIG ** 2 / 2) * T + SIG * W_T)


def drift(x):
    return MU * x


def diffusion(x):
    return SIG * x


d_diff = vmap(grad(lambda x: diffusion(x)))
xs = torch.linspace(0.5, 2.0, 4, requires_grad=True)
g_auto, = torch.autograd.grad(diffusion(xs).sum(), xs, create_graph=True)
print("vmap(grad) == autograd", torch.allclose(d_diff(xs.detach()), g_auto), "linear diffusion: derivative has a graph", g_auto.requires_grad)


def solve(n_steps, scheme):
    dt = T / n_steps
    dW = dW_fine.reshape(PATHS, n_steps, -1).sum(-1)
    x = torch.full((PATHS,), X0)
    for k in range(n_steps):
        dw = dW[:, k]
        nx = x + drift(x) * dt + diffusion(x) * dw
        if scheme == "milstein":
            # the diffusion is elementwise: one backward of its sum gives every path's g'(x)
            xr = x.detach().requires_grad_(True)
            dg, = torch.autograd.grad(diffusion(xr).sum(), xr)
            nx = nx + 0.5 * diffusion(x) * dg * (dw ** 2 - dt)
        x = nx
    return x


rows = []
for scheme in ("euler", "milstein"):
    errs, weak = [], []
    steps = [2 ** k for k in range(3, 8)]
    for n in steps:
        xt = solve(n, scheme)
        errs.append((xt - exact).abs().mean())
        weak.append((xt.mean() - exact.mean()).abs())
    h = torch.log(torch.tensor([T / n for n in steps]))
    Amat = torch.stack([h, torch.ones_like(h)], 1)
    strong_order = torch.linalg.lstsq(Amat, torch.log(torch.stack(errs)).unsqueeze(1)).solution[0, 0].item()
    print(f"{scheme:8s} strong errors {[round(e.item(), 5) for e in errs]} order {strong_order:.3f}")
    rows.append(strong_order)
print("milstein converges faster", rows[1] > rows[0] + 0.3)

# Ornstein-Uhlenbeck: dX = theta (m - X) dt + s dW, sampled exactly
TH, M, S_OU, DT, NOBS = 2.0, 0.5, 0.7, 0.05, 800
a = np.exp(-TH * DT)
sd = S_OU * np.sqrt((1 - a ** 2) / (2 * TH))
path = np.empty(NOBS)
path[0] = 0.0
for t in range(1, NOBS):
    path[t] = M + (path[t - 1] - M) * a + sd * rng.normal()
obs = torch.from_numpy(path)
mean_, std_ = torch.std_mean(obs[200:])
print(f"sample mean {mean_.item():.4f} std {std_.item():.4f} var(corr=0) {torch.var(obs[200:], correction=0).item():.4f}")
q = torch.quantile(obs, torch.tensor([0.05, 0.5, 0.95]), interpolation="linear")
win = obs.unfold(0, 100, 50)
print("quantiles", [round(v, 4) for v in q.tolist()], "windows", tuple(win.shape), "window mean spread", round(win.mean(1).std().item(), 4))

raw = torch.zeros(3, requires_grad=True)  # softplus(theta), m, softplus(sigma)
opt = torch.optim.Adam([raw], lr=0.05)
first = None
for it in range(300):
    th, m, s = F.softplus(raw[0]), raw[1], F.softplus(raw[2])
    aa = torch.exp(-th * DT)
    sdd = s * torch.sqrt((1 - aa ** 2) / (2 * th))
    nll = -torch.distributions.Normal(m + (obs[:-1] - m) * aa, sdd).log_prob(obs[1:]).sum()
    if first is None:
        first = nll.item()
    opt.zero_grad()
    nll.backward()
    opt.step()
    if it % 100 == 0:
        print(f"ou iter {it:3d} nll {nll.item():.4f}")
th, m, s = F.softplus(raw[0]).item(), raw[1].item(), F.softplus(raw[2]).item()
print(f"theta {th:.4f} m {m:.4f} sigma {s:.4f} stationary var {s * s / (2 * th):.4f} empirical {torch.var(obs[200:]).item():.4f}")


class NeuralSDE(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        self.g = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        return self.f(x), F.softplus(self.g(x)) + 1e-3


net = NeuralSDE()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.4, size=tuple(p.shape))))
opt = torch.optim.Adam(net.parameters(), lr=0.01)
x_prev, x_next = obs[:-1, None], obs[1:, None]
for it in range(150):
    f, g = net(x_prev)
    nll = -torch.distributions.Normal(x_prev + f * DT, g * DT ** 0.5).log_prob(x_next).sum()
    opt.zero_grad()
    nll.backward()
    opt.step()
with torch.no_grad():
    grid = torch.tensor([[0.0], [0.5], [1.0]])
    f, g = net(grid)
print(f"neural nll {nll.item():.4f} drift at 0, 0.5, 1 {[round(v, 3) for v in f.flatten().tolist()]} diffusion {[round(v, 3) for v in g.flatten().tolist()]}")
torch.set_default_dtype(torch.float32)
print(f"RESULT {first:.6f} {nll.item():.6f} {th:.6f}")
