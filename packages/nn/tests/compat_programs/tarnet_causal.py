"""Treatment-effect estimation in the style of the public TARNet / CFRNet / DragonNet PyTorch
code: a shared representation with two outcome heads selected per unit by torch.where on the
treatment, an integral probability metric between treated and control representations (linear
MMD and an RBF MMD from torch.cdist), DragonNet's propensity head with targeted regularization
(an epsilon parameter), inverse-propensity weights clipped by quantiles, weighted statistics
(torch.cov with aweights / fweights, corrcoef, nanmean over masked entries, bincount with
weights, histc of propensities, quantile with interpolation modes), and the evaluation metrics
PEHE and ATE error on a synthetic confounded dataset with known potential outcomes. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <sqrt pehe>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1514)


def make_data(n, d=8):
    x = rng.normal(size=(n, d))
    logit = 1.2 * x[:, 0] - 0.8 * x[:, 1]
    t = rng.uniform(size=n) < 1 / (1 + np.exp(-logit))
    mu0 = x[:, 0] + 0.5 * x[:, 2] ** 2
    tau = 1.0 + np.sin(2 * x[:, 3])
    mu1 = mu0 + tau
    y = np.where(t, mu1, mu0) + 0.2 * rng.normal(size=n)
    def f(a):
        return torch.from_numpy(a.astype(np.float32))

    return f(x), f(t.astype(float)), f(y), f(mu0), f(mu1)


class DragonNet(nn.Module):
    def __init__(self, d=8, h=32):
        super().__init__()
        self.rep = nn.Sequential(nn.Linear(d, h), nn.ELU(), nn.Linear(h, h), nn.ELU())
        self.h0 = nn.Sequential(nn.Linear(h, h // 2), nn.ELU(), nn.Linear(h // 2, 1))
        self.h1 = nn.Sequential(nn.Linear(h, h // 2), nn.ELU(), nn.Linear(h // 2, 1))
        self.prop = nn.Linear(h, 1)
        self.epsilon = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        phi = self.rep(x)
        return self.h0(phi).squeeze(-1), self.h1(phi).squeeze(-1), self.prop(phi).squeeze(-1), phi


def mmd_linear(a, b):
    return ((a.mean(0) - b.mean(0)) ** 2).sum()


def mmd_rbf(a, b, sigma=1.0):
    def k(u, v):
        return torch.exp(-torch.cdist(u, v) ** 2 / (2 * sigma ** 2))

    return k(a, a).mean() + k(b, b).mean() - 2 * k(a, b).mean()


x, t, y, mu0, mu1 = make_data(600)
xt, tt, yt, mu0t, mu1t = make_data(400)
tb = t.bool()
print(f"treated fraction {t.mean().item():.4f} naive difference {(y[tb].mean() - y[~tb].mean()).item():.4f} true ate {(mu1 - mu0).mean().item():.4f}")
w_ipw = torch.where(tb, 1 / t.mean(), 1 / (1 - t.mean()))
cov_w = torch.cov(torch.stack([x[:, 0], y]), aweights=w_ipw)
cov_f = torch.cov(torch.stack([x[:, 0], y]), fweights=t.long() + 1, correction=0)
print(f"weighted cov {[round(v, 4) for v in cov_w.flatten().tolist()]} fweights cov {[round(v, 4) for v in cov_f.flatten().tolist()]}")
print(f"corrcoef {[round(v, 4) for v in torch.corrcoef(torch.stack([x[:, 0], x[:, 1], y]))[0].tolist()]}")
masked_y = torch.where(tb, y, torch.full_like(y, float("nan")))
print(f"nanmean of treated {torch.nanmean(masked_y).item():.4f} nansum {torch.nansum(masked_y).item():.3f} "
      f"nanmedian {torch.nanmedian(masked_y).item():.4f}")
groups = (x[:, 0] > 0).long() * 2 + t.long()
print(f"group counts {torch.bincount(groups, minlength=4).tolist()} weighted sums "
      f"{[round(v, 3) for v in torch.bincount(groups, weights=y.double(), minlength=4).tolist()]}")

model = DragonNet()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(1.0 / p.shape[1]), p.shape).astype(np.float32)))
        else:
            p.zero_()
opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=5, threshold=1e-3)
losses = []
for epoch in range(25):
    perm = torch.from_numpy(rng.permutation(600))
    total = 0.0
    for i in range(0, 600, 100):
        idx = perm[i:i + 100]
        xb, tbb, yb = x[idx], t[idx], y[idx]
        y0, y1, logit, phi = model(xb)
        pred = torch.where(tbb.bool(), y1, y0)
        g = torch.sigmoid(logit).clamp(0.01, 0.99)
        # targeted regularization: y_tilde = pred + eps * (t / g - (1 - t) / (1 - g))
        h = tbb / g - (1 - tbb) / (1 - g)
        y_tilde = pred + model.epsilon * h
        treated = tbb.bool()
        ipm = mmd_rbf(phi[treated], phi[~treated]) if treated.any() and (~treated).any() else phi.sum() * 0
        loss = F.mse_loss(pred, yb) + F.binary_cross_entropy_with_logits(logit, tbb) + 0.5 * F.mse_loss(y_tilde, yb) + 0.3 * ipm
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    sched.step(total)
    losses.append(total / 6)
    if epoch % 8 == 0:
        print(f"epoch {epoch:2d} loss {total / 6:.5f} lr {opt.param_groups[0]['lr']:.5f}")

model.eval()
with torch.no_grad():
    y0, y1, logit, phi = model(xt)
    g = torch.sigmoid(logit)
ite = y1 - y0
pehe = torch.sqrt(((ite - (mu1t - mu0t)) ** 2).mean()).item()
ate_err = (ite.mean() - (mu1t - mu0t).mean()).abs().item()
lo, hi = torch.quantile(g, torch.tensor([0.05, 0.95])).tolist()
print(f"propensity quantiles {lo:.4f} {hi:.4f} nearest {torch.quantile(g, 0.5, interpolation='nearest').item():.4f} "
      f"midpoint {torch.quantile(g, 0.5, interpolation='midpoint').item():.4f}")
print(f"propensity histogram {torch.histc(g, bins=5, min=0, max=1).tolist()}")
gc = g.clamp(lo, hi)
ipw_ate = (tt * yt / gc - (1 - tt) * yt / (1 - gc)).mean().item()
print(f"mmd linear {mmd_linear(phi[tt.bool()], phi[~tt.bool()]).item():.5f} rbf {mmd_rbf(phi[tt.bool()], phi[~tt.bool()]).item():.5f}")
print(f"sqrt pehe {pehe:.4f} ate error {ate_err:.4f} ipw ate {ipw_ate:.4f} epsilon {model.epsilon.item():.5f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {pehe:.4f}")
