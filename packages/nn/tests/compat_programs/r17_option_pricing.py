"""Quantitative finance in PyTorch as pricing notebooks write it: Black-Scholes prices with the
normal CDF from torch.special.ndtr, Greeks by autograd (delta, vega, rho by grad; gamma by
create_graph=True; a full Hessian by torch.autograd.functional.hessian), implied volatility by
Newton iterations on a batch, Monte Carlo with antithetic variates and a control variate from
NumPy normals, an Asian option by path simulation with cumsum, pathwise vs likelihood-ratio
delta estimators, Longstaff-Schwartz American put pricing with torch.linalg.lstsq on Laguerre
features, a binomial tree by backward induction with torch.maximum, and a Heston-free
local-volatility calibration of a small parametric smile by Adam. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<bs call> <mc call> <american put>."""

import math

import numpy as np
import torch
from torch.special import ndtr

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(1707)


def bs_call(S, K, T, r, sigma):
    d1 = (torch.log(S / K) + (r + sigma ** 2 / 2) * T) / (sigma * torch.sqrt(T))
    d2 = d1 - sigma * torch.sqrt(T)
    return S * ndtr(d1) - K * torch.exp(-r * T) * ndtr(d2)


S = torch.tensor(100.0, requires_grad=True)
K = torch.tensor(105.0)
T = torch.tensor(0.75, requires_grad=True)
r = torch.tensor(0.03, requires_grad=True)
sigma = torch.tensor(0.25, requires_grad=True)
price = bs_call(S, K, T, r, sigma)
delta, theta, rho, vega = torch.autograd.grad(price, (S, T, r, sigma), create_graph=True)
gamma, = torch.autograd.grad(delta, S)
print(f"bs call {price.item():.6f} delta {delta.item():.6f} gamma {gamma.item():.6f} vega {vega.item():.6f} rho {rho.item():.6f} dT {theta.item():.6f}")
d1 = (math.log(100 / 105) + (0.03 + 0.25 ** 2 / 2) * 0.75) / (0.25 * math.sqrt(0.75))
print(f"closed-form delta {0.5 * (1 + math.erf(d1 / math.sqrt(2))):.6f} gamma {math.exp(-d1 ** 2 / 2) / math.sqrt(2 * math.pi) / (100 * 0.25 * math.sqrt(0.75)):.6f}")
put = bs_call(S, K, T, r, sigma) - S + K * torch.exp(-r * T)
print(f"put by parity {put.item():.6f}")
H = torch.autograd.functional.hessian(lambda s, v: bs_call(s, K, T.detach(), r.detach(), v), (S.detach(), sigma.detach()))
print(f"hessian gamma {H[0][0].item():.6f} vanna {H[0][1].item():.6f} == {H[1][0].item():.6f} volga {H[1][1].item():.6f}")

# implied volatility by Newton on a strip of strikes
strikes = torch.linspace(80, 120, 9)
true_vol = 0.2 + 0.1 * ((strikes - 100) / 20) ** 2
quotes = bs_call(torch.tensor(100.0), strikes, torch.tensor(0.5), torch.tensor(0.01), true_vol)
iv = torch.full_like(strikes, 0.3)
for it in range(20):
    iv_ = iv.clone().requires_grad_(True)
    diff = bs_call(torch.tensor(100.0), strikes, torch.tensor(0.5), torch.tensor(0.01), iv_) - quotes
    g, = torch.autograd.grad(diff.sum(), iv_)
    iv = (iv - diff.detach() / g).clamp(1e-3, 3.0)
print(f"implied vols recovered {torch.allclose(iv, true_vol, atol=1e-8)} smile {[round(v, 4) for v in iv[::2].tolist()]}")

# Monte Carlo: antithetic + control variate
Z = torch.from_numpy(rng.standard_normal(100000))
Sd, Kd, Td, rd, sd = 100.0, 105.0, 0.75, 0.03, 0.25
ST = Sd * torch.exp((rd - sd ** 2 / 2) * Td + sd * math.sqrt(Td) * torch.cat([Z, -Z]))
pay = torch.clamp(ST - Kd, min=0) * math.exp(-rd * Td)
cv = ST * math.exp(-rd * Td) - Sd
beta = torch.cov(torch.stack([pay, cv]))[0, 1] / cv.var()
pay_cv = pay - beta * cv
mc = pay_cv.mean().item()
print(f"mc plain {pay.mean().item():.4f} se {pay.std().item() / math.sqrt(pay.numel()):.4f} control variate {mc:.4f} se {pay_cv.std().item() / math.sqrt(pay.numel()):.5f} beta {beta.item():.4f}")
# pathwise and likelihood-ratio deltas
S0 = torch.tensor(Sd, requires_grad=True)
STp = S0 * torch.exp((rd - sd ** 2 / 2) * Td + sd * math.sqrt(Td) * Z)
pw, = torch.autograd.grad((torch.relu(STp - Kd) * math.exp(-rd * Td)).mean(), S0)
payz = torch.relu(STp.detach() - Kd) * math.exp(-rd * Td)
lr_delta = (payz * Z / (Sd * sd * math.sqrt(Td))).mean()
print(f"pathwise delta {pw.item():.4f} likelihood ratio delta {lr_delta.item():.4f} exact {delta.item():.4f}")

# Asian (arithmetic average) call by path simulation
steps, paths = 50, 20000
dt = Td / steps
inc = (rd - sd ** 2 / 2) * dt + sd * math.sqrt(dt) * torch.from_numpy(rng.standard_normal((paths, steps)))
path = Sd * torch.exp(torch.cumsum(inc, 1))
asian = (torch.clamp(path.mean(1) - Kd, min=0) * math.exp(-rd * Td)).mean()
print(f"asian call {asian.item():.4f} below european {asian.item() < mc}")

# Longstaff-Schwartz American put
Kp = 100.0
paths_p = 20000
incp = (0.05 - 0.2 ** 2 / 2) * (1 / 50) + 0.2 * math.sqrt(1 / 50) * torch.from_numpy(rng.standard_normal((paths_p, 50)))
P = 100.0 * torch.exp(torch.cumsum(incp, 1))
disc = math.exp(-0.05 / 50)
cash = torch.clamp(Kp - P[:, -1], min=0)
for t in range(48, -1, -1):
    cash = cash * disc
    itm = P[:, t] < Kp
    x = P[itm, t] / Kp
    feats = torch.stack([torch.ones_like(x), torch.exp(-x / 2), torch.exp(-x / 2) * (1 - x), torch.exp(-x / 2) * (1 - 2 * x + x ** 2 / 2)], 1)
    coef = torch.linalg.lstsq(feats, cash[itm][:, None]).solution
    cont = (feats @ coef).squeeze(1)
    ex = Kp - P[itm, t]
    exercise = ex > cont
    idx = itm.nonzero().squeeze(1)[exercise]
    cash[idx] = ex[exercise]
amer = (cash * disc).mean().item()
euro_put = (bs_call(torch.tensor(100.0), torch.tensor(Kp), torch.tensor(1.0), torch.tensor(0.05), torch.tensor(0.2)) - 100 + Kp * math.exp(-0.05)).item()
print(f"american put {amer:.4f} european put {euro_put:.4f} early exercise premium positive {amer > euro_put}")

# binomial tree
N = 200
dtb = 1.0 / N
u = math.exp(0.2 * math.sqrt(dtb))
d = 1 / u
p = (math.exp(0.05 * dtb) - d) / (u - d)
j = torch.arange(N + 1)
V = torch.clamp(Kp - 100.0 * u ** (N - j).double() * d ** j.double(), min=0)
for n in range(N - 1, -1, -1):
    j = torch.arange(n + 1)
    Sn = 100.0 * u ** (n - j).double() * d ** j.double()
    V = torch.maximum(math.exp(-0.05 * dtb) * (p * V[:-1] + (1 - p) * V[1:]), Kp - Sn)
print(f"binomial american put {V.item():.4f} lsm within 0.1 {abs(V.item() - amer) < 0.1}")

# smile calibration: sigma(k) = a + b k + c k^2 fitted to the quotes
params = torch.zeros(3, requires_grad=True)
opt = torch.optim.Adam([params], lr=0.02)
kk = (strikes - 100) / 20
for it in range(300):
    vol = 0.25 + params[0] + params[1] * kk + params[2] * kk ** 2
    model = bs_call(torch.tensor(100.0), strikes, torch.tensor(0.5), torch.tensor(0.01), vol)
    loss = ((model - quotes) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 100 == 0:
        print(f"calibration it {it} loss {loss.item():.6e}")
print(f"calibrated smile a {0.25 + params[0].item():.4f} b {params[1].item():.4f} c {params[2].item():.4f}")
print(f"RESULT {price.item():.6f} {mc:.4f} {amer:.4f}")
