"""Robust and distributional regression losses as forecasting and ranking code writes them,
in the style of the public quantile-regression / robust-regression / metric-learning examples:
multi-quantile pinball losses written with torch.where and with torch.maximum, kept
non-crossing by a softplus-cumsum head, the Huber / smooth-L1 family (F.huber_loss with delta,
F.smooth_l1_loss with beta including beta=0), a hand-written Cauchy / Tukey loss with clamp and
where, Gaussian and Poisson NLL (F.gaussian_nll_loss full / eps, F.poisson_nll_loss log_input
False, full Stirling term), F.kl_div with log_target, margin and ranking losses
(margin_ranking, hinge_embedding, soft_margin, multilabel_soft_margin, multi_margin with p=2 and
weights, cosine_embedding, triplet_margin_with_distance_loss with a custom distance and swap),
every reduction ("none", "sum", "mean") and their gradients; torch.clamp with tensor bounds,
clamp_ with min only, torch.where with Python scalars and broadcasting, nan-safe masking
(where on both branches so no NaN gradient leaks); then a quantile regression on heteroscedastic
data trained with Adam, reporting coverage and the interval score. Weights and data from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<coverage>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)


def arr(*shape, s=1.0):
    return torch.from_numpy((s * rng.normal(size=shape)).astype(np.float32))


def pinball_where(pred, y, qs):
    e = y.unsqueeze(-1) - pred
    return torch.where(e >= 0, qs * e, (qs - 1) * e).mean()


def pinball_max(pred, y, qs):
    e = y.unsqueeze(-1) - pred
    return torch.maximum(qs * e, (qs - 1) * e).mean()


qs = torch.tensor([0.1, 0.5, 0.9])
p, y = arr(6, 3), arr(6)
print(f"pinball where {pinball_where(p, y, qs).item():.6f} max {pinball_max(p, y, qs).item():.6f}")


def report(name, fn, *inputs, **kw):
    leaves = [t.detach().clone().requires_grad_(i == 0) for i, t in enumerate(inputs)]
    vals = []
    for red in ("none", "sum", "mean"):
        out = fn(*leaves, reduction=red, **kw)
        vals.append(out.sum().item() if red == "none" else out.item())
    fn(*leaves, reduction="mean", **kw).backward()
    g = leaves[0].grad
    print(f"{name}: none-sum {vals[0]:.5f} sum {vals[1]:.5f} mean {vals[2]:.5f} "
          f"grad {g.abs().sum().item():.5f}")


a, b = arr(8, 3), arr(8, 3)
report("huber d=0.5", F.huber_loss, a, b, delta=0.5)
report("smooth_l1 b=2", F.smooth_l1_loss, a, b, beta=2.0)
report("smooth_l1 b=0", F.smooth_l1_loss, a, b, beta=0.0)
var = arr(8, 3).exp()
report("gaussian_nll", lambda i, t, v, reduction: F.gaussian_nll_loss(i, t, v, full=True, eps=1e-3,
                                                                      reduction=reduction), a, b, var)
report("gaussian_nll var per row", lambda i, t, v, reduction: F.gaussian_nll_loss(
    i, t, v[:, :1], reduction=reduction), a, b, var)
rate = arr(8, 3).exp()
counts = torch.from_numpy(rng.poisson(2.0, (8, 3)).astype(np.float32))
report("poisson_nll", lambda i, t, reduction: F.poisson_nll_loss(i, t, log_input=False, full=True,
                                                                 reduction=reduction), rate, counts)
logp, logq = a.log_softmax(-1), b.log_softmax(-1)
for red in ("batchmean", "sum"):
    print(f"kl_div log_target {red}: {F.kl_div(logp, logq, reduction=red, log_target=True).item():.5f}"
          f" prob target {F.kl_div(logp, logq.exp(), reduction=red).item():.5f}")
x1, x2 = arr(8), arr(8)
sign = torch.from_numpy(rng.choice([-1.0, 1.0], 8).astype(np.float32))
report("margin_ranking", lambda u, v, s, reduction: F.margin_ranking_loss(u, v, s, margin=0.3,
                                                                          reduction=reduction), x1, x2, sign)
report("hinge_embedding", lambda u, s, reduction: F.hinge_embedding_loss(u, s, margin=0.5,
                                                                         reduction=reduction), x1.abs(), sign)
report("soft_margin", F.soft_margin_loss, a, torch.sign(b))
multi = (b > 0).float()
report("multilabel_soft_margin", F.multilabel_soft_margin_loss, a, multi)
cls = torch.from_numpy(rng.integers(0, 3, 8))
report("multi_margin p=2", lambda i, t, reduction: F.multi_margin_loss(
    i, t, p=2, margin=0.7, weight=torch.tensor([1.0, 2.0, 0.5]), reduction=reduction), a, cls)
report("cosine_embedding", lambda u, v, s, reduction: F.cosine_embedding_loss(
    u, v, s, margin=0.2, reduction=reduction), a, b, sign)
anchor, pos, neg = arr(8, 4), arr(8, 4), arr(8, 4)
report("triplet custom distance", lambda u, v, w, reduction: F.triplet_margin_with_distance_loss(
    u, v, w, distance_function=lambda s, t: 1 - F.cosine_similarity(s, t), margin=0.5, swap=True,
    reduction=reduction), anchor, pos, neg)
report("triplet p=1", lambda u, v, w, reduction: F.triplet_margin_loss(u, v, w, p=1, eps=1e-6,
                                                                       reduction=reduction), anchor, pos, neg)


def cauchy(r, c=1.0):
    return (c ** 2 / 2) * torch.log1p((r / c) ** 2)


def tukey(r, c=1.5):
    inside = (1 - (1 - (r / c) ** 2) ** 3) * c ** 2 / 6
    return torch.where(r.abs() <= c, inside, torch.full_like(r, c ** 2 / 6))


r = torch.linspace(-3, 3, 13, requires_grad=True)
(cauchy(r).sum() + tukey(r).sum()).backward()
print(f"cauchy+tukey grad {[round(v, 4) for v in r.grad.tolist()]}")

# clamp / where corner cases
lo, hi = torch.tensor([-1.0, 0.0, 0.5]), torch.tensor([1.0, 0.2, 0.4])
v = torch.tensor([[-2.0, 0.1, 0.45], [2.0, -1.0, 0.3]], requires_grad=True)
c = torch.clamp(v, lo, hi)
c.sum().backward()
print("clamp tensor bounds", c.tolist(), "grad", v.grad.tolist())
w = torch.tensor([-1.5, 0.5, 3.0])
print("clamp_ min only", w.clone().clamp_(min=0.0).tolist(), "clamp max only",
      torch.clamp(w, max=1).tolist(), "int clamp", torch.clamp(torch.tensor([-3, 4]), -2, 2).tolist())
print("where scalars", torch.where(w > 0, 1.0, -1.0).tolist(), torch.where(w > 0, w, 0).tolist(),
      torch.where(torch.tensor([[True], [False]]), w, -w).tolist())
z = torch.tensor([0.0, 1.0, 4.0], requires_grad=True)
safe = torch.where(z > 0, torch.sqrt(torch.where(z > 0, z, torch.ones_like(z))), torch.zeros_like(z))
safe.sum().backward()
print("double-where sqrt grad (no nan):", z.grad.tolist())


# quantile regression with a non-crossing head
class QuantileNet(nn.Module):
    def __init__(self, nq=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.base, self.gaps = nn.Linear(32, 1), nn.Linear(32, nq - 1)

    def forward(self, x):
        h = self.body(x)
        return torch.cat([self.base(h), self.base(h) + torch.cumsum(F.softplus(self.gaps(h)), -1)], -1)


X = torch.from_numpy(rng.uniform(-2, 2, (512, 1)).astype(np.float32))
Y = (torch.sin(2 * X[:, 0]) + (0.2 + 0.4 * X[:, 0].abs()) * arr(512))
net = QuantileNet()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(arr(*p.shape, s=0.4))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
losses = []
for step in range(80):
    idx = torch.from_numpy(rng.integers(0, 512, 128))
    loss = pinball_where(net(X[idx]), Y[idx], qs)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} pinball {loss.item():.5f}")
with torch.no_grad():
    P = net(X)
    cover = ((Y >= P[:, 0]) & (Y <= P[:, 2])).float().mean().item()
    alpha = 0.2
    width = (P[:, 2] - P[:, 0])
    score = (width + 2 / alpha * (P[:, 0] - Y).clamp(min=0) + 2 / alpha * (Y - P[:, 2]).clamp(min=0)).mean()
    crossing = (P.diff(dim=-1) < 0).any().item()
print(f"coverage {cover:.4f} interval score {score.item():.5f} crossing {crossing}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {cover:.5f}")
