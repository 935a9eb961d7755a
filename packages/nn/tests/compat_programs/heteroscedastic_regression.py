"""Regression with predicted uncertainty and count targets, in the style of the public
heteroscedastic-regression / deep-ensemble / count-model notebooks: a two-headed MLP (mean and
softplus variance) trained with nn.GaussianNLLLoss (full=True, eps, a variance broadcast from
one column (N, 1) and a homoscedastic scalar-per-sample (N,) form, reduction="none"), beta-NLL
weighting by var.detach() ** beta, nn.PoissonNLLLoss (log_input=True and False, full=True's
Stirling term) on counts from a rate model checked against distributions.Poisson.log_prob,
nn.HuberLoss(delta) versus nn.SmoothL1Loss(beta) (huber = beta * smooth_l1 at beta == delta),
nn.L1Loss and a pinball (quantile) loss for 10/50/90% heads with a non-crossing check, nn.KLDivLoss
(reduction="batchmean", log_target=True) between predictive Gaussians on a grid, calibration
of the predicted variance (the share of targets inside +-1.96 sigma), and the error for a
negative variance. Weights and data from NumPy: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first nll> <last nll> <coverage>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Poisson

rng = np.random.default_rng(21)
n = 256
x_np = rng.uniform(-3, 3, (n, 1))
noise = 0.1 + 0.4 * np.abs(x_np)
y_np = np.sin(x_np) * 2 + noise * rng.normal(0, 1, (n, 1))
x = torch.from_numpy(x_np.astype(np.float32))
y = torch.from_numpy(y_np.astype(np.float32))


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


# fixed-input checks of the losses
mu, tgt, var = arr(4, 3), arr(4, 3), arr(4, 3).abs() + 0.1
for kw in [{}, {"full": True}, {"eps": 0.5}, {"reduction": "sum"}]:
    print("GaussianNLLLoss", kw, round(nn.GaussianNLLLoss(**kw)(mu, tgt, var).item(), 5))
print("var (N, 1)", round(F.gaussian_nll_loss(mu, tgt, var[:, :1]).item(), 5),
      "var (N,)", [round(v, 4) for v in F.gaussian_nll_loss(mu, tgt, var[:, 0], reduction="none").flatten()[:4].tolist()])
print("reduction none shape", tuple(F.gaussian_nll_loss(mu, tgt, var, reduction="none").shape))
img_mu, img_t = arr(2, 3, 4, 4), arr(2, 3, 4, 4)
img_var = arr(2, 1, 4, 4).abs() + 0.2  # one variance map shared by the channels
print("var (N, 1, H, W)", round(F.gaussian_nll_loss(img_mu, img_t, img_var).item(), 5),
      "float var", round(F.gaussian_nll_loss(img_mu, img_t, 0.5).item(), 5))
try:
    F.gaussian_nll_loss(img_mu, img_t, img_var[:, :, :2])
except ValueError as e:
    print("ValueError:", e)
try:
    F.gaussian_nll_loss(mu, tgt, -var)
except ValueError as e:
    print("ValueError:", e)
lam = arr(5).abs() + 0.5
k = torch.tensor([0.0, 1.0, 3.0, 2.0, 7.0])
pn_log = nn.PoissonNLLLoss(log_input=True, full=True, reduction="none")(lam.log(), k)
ref = -Poisson(lam).log_prob(k)
print("PoissonNLL(full) == -Poisson.log_prob for k > 1:", torch.allclose(pn_log[k > 1], ref[k > 1], atol=0.1),
      [round(v, 5) for v in pn_log.tolist()])
print("PoissonNLL(log_input=False)", round(nn.PoissonNLLLoss(log_input=False, eps=1e-6)(lam, k).item(), 5),
      "(log_input=True)", round(F.poisson_nll_loss(lam.log(), k).item(), 5))
a, b = arr(20, s=2.0), arr(20)
for d in [0.5, 1.0, 2.0]:
    hub = nn.HuberLoss(delta=d)(a, b)
    sl1 = nn.SmoothL1Loss(beta=d)(a, b)
    print(f"huber delta={d}: {hub.item():.5f} = beta * smooth_l1: {torch.allclose(hub, d * sl1)}")
print("smooth_l1 beta=0 == l1:", torch.allclose(F.smooth_l1_loss(a, b, beta=0.0), nn.L1Loss()(a, b)))


class Net(nn.Module):
    def __init__(self, heads=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
        self.head = nn.Linear(32, heads)

    def forward(self, x):
        return self.head(self.body(x))


def init(net):
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(arr(*p.shape, s=0.5))
    return net


net = init(Net())
crit = nn.GaussianNLLLoss(full=True, reduction="none")
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
nlls = []
for step in range(150):
    out = net(x)
    mean, v = out[:, :1], F.softplus(out[:, 1:]) + 1e-4
    per = crit(mean, y, v)
    loss = (per * v.detach() ** 0.5).mean()  # beta-NLL with beta = 0.5
    opt.zero_grad()
    loss.backward()
    opt.step()
    nlls.append(per.mean().item())
    if step % 50 == 0:
        print(f"step {step:3d} nll {per.mean().item():.4f} beta-nll {loss.item():.4f}")
with torch.no_grad():
    out = net(x)
    mean, v = out[:, :1], F.softplus(out[:, 1:]) + 1e-4
    cover = ((y - mean).abs() <= 1.96 * v.sqrt()).float().mean().item()
    sd_edge, sd_mid = v[x.abs() > 2.5].sqrt().mean().item(), v[x.abs() < 0.5].sqrt().mean().item()
print(f"coverage {cover:.4f} sigma |x|>2.5 {sd_edge:.3f} |x|<0.5 {sd_mid:.3f} grows: {sd_edge > sd_mid}")

# quantile heads
qnet = init(Net(heads=3))
taus = torch.tensor([0.1, 0.5, 0.9])
qopt = torch.optim.Adam(qnet.parameters(), lr=1e-2)
for step in range(150):
    qs = qnet(x)
    err = y - qs
    pin = torch.maximum(taus * err, (taus - 1) * err).mean()
    qopt.zero_grad()
    pin.backward()
    qopt.step()
with torch.no_grad():
    qs = qnet(x).sort(dim=1).values
    frac = (y < qs).float().mean(0)
print(f"pinball {pin.item():.4f} below each quantile", [round(v, 3) for v in frac.tolist()])

# KL between predictive Gaussians on a grid
grid = torch.linspace(-4, 4, 81)
p1 = torch.distributions.Normal(0.0, 1.0).log_prob(grid).log_softmax(0)
p2 = torch.distributions.Normal(0.5, 1.5).log_prob(grid).log_softmax(0)
kl = nn.KLDivLoss(reduction="batchmean", log_target=True)(p2[None], p1[None])
kl_ref = (p1.exp() * (p1 - p2)).sum()
print(f"KLDivLoss(log_target) {kl.item():.5f} equals direct: {torch.allclose(kl, kl_ref)}",
      "sum", round(F.kl_div(p2, p1.exp(), reduction="sum").item(), 5))
print(f"RESULT {nlls[0]:.4f} {nlls[-1]:.4f} {cover:.4f}")
