"""A latent neural process for 1-D function regression, in the style of the public
(attentive) neural-process re-implementations: tasks sampled from a family of sine curves,
random context / target splits (NumPy), a deterministic path (mean-aggregated
representations) and a latent path whose posterior q(z | context + target) and prior q(z |
context) are Independent(Normal(mu, sigma), 1) with sigma = 0.1 + 0.9 * sigmoid, the ELBO with
kl_divergence between them, reparameterized samples with NumPy noise, a decoder giving a
Normal predictive, plus distribution-heavy evaluation: the predictive mixture over latent
samples as MixtureSameFamily, a StudentT fit of the residuals (with outliers) by L-BFGS, a GP baseline whose marginal
likelihood uses LowRankMultivariateNormal(cov_factor, cov_diag) (checked against
MultivariateNormal), a custom Distribution subclass with its own KL registered by
torch.distributions.kl.register_kl, Normal.cdf / icdf for calibration of the predictive
intervals, and torch.distributions.constraints checks. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <coverage>."""

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import (
    Categorical,
    Distribution,
    Independent,
    LowRankMultivariateNormal,
    MixtureSameFamily,
    MultivariateNormal,
    Normal,
    StudentT,
    constraints,
    kl_divergence,
)
from torch.distributions.kl import register_kl

rng = np.random.default_rng(35)


def task(batch=16, n=24):
    a = rng.uniform(0.5, 2.0, (batch, 1))
    ph = rng.uniform(0, np.pi, (batch, 1))
    x = rng.uniform(-3, 3, (batch, n))
    y = a * np.sin(x + ph) + 0.05 * rng.normal(size=(batch, n))
    nc = int(rng.integers(3, 12))
    t = lambda v: torch.from_numpy(v.astype(np.float32))[..., None]  # noqa: E731
    return t(x), t(y), nc


class NP(nn.Module):
    def __init__(self, h=32, z=8):
        super().__init__()
        self.det = nn.Sequential(nn.Linear(2, h), nn.ReLU(), nn.Linear(h, h))
        self.lat = nn.Sequential(nn.Linear(2, h), nn.ReLU(), nn.Linear(h, 2 * z))
        self.dec = nn.Sequential(nn.Linear(1 + h + z, h), nn.ReLU(), nn.Linear(h, 2))

    def latent(self, x, y):
        mu, raw = self.lat(torch.cat([x, y], -1)).mean(1).chunk(2, -1)
        return Independent(Normal(mu, 0.1 + 0.9 * torch.sigmoid(raw)), 1)

    def forward(self, xc, yc, xt, z):
        r = self.det(torch.cat([xc, yc], -1)).mean(1, keepdim=True).expand(-1, xt.shape[1], -1)
        out = self.dec(torch.cat([xt, r, z[:, None].expand(-1, xt.shape[1], -1)], -1))
        mu, raw = out.chunk(2, -1)
        return Normal(mu, 0.05 + 0.95 * nn.functional.softplus(raw))


model = NP()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.8 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for it in range(150):
    x, y, nc = task()
    prior = model.latent(x[:, :nc], y[:, :nc])
    post = model.latent(x, y)
    eps = torch.from_numpy(rng.normal(size=post.mean.shape).astype(np.float32))
    z = post.mean + post.stddev * eps
    pred = model(x[:, :nc], y[:, :nc], x, z)
    loss = -pred.log_prob(y).sum((1, 2)).mean() + kl_divergence(post, prior).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if it % 50 == 0:
        print(f"it {it:3d} loss {loss.item():.4f} kl {kl_divergence(post, prior).mean().item():.4f} context {nc}")

with torch.no_grad():
    x, y, nc = task(batch=8, n=40)
    prior = model.latent(x[:, :nc], y[:, :nc])
    S = 16
    eps = torch.from_numpy(rng.normal(size=(S,) + prior.mean.shape).astype(np.float32))
    zs = prior.mean + prior.stddev * eps
    preds = [model(x[:, :nc], y[:, :nc], x, zs[s]) for s in range(S)]
    loc = torch.stack([p.loc for p in preds], -1).squeeze(-2)
    scale = torch.stack([p.scale for p in preds], -1).squeeze(-2)
    mix = MixtureSameFamily(Categorical(logits=torch.zeros(S)), Normal(loc, scale))
    ll = mix.log_prob(y.squeeze(-1)).mean().item()
    base = preds[0]
    lo, hi = base.icdf(torch.tensor(0.05)), base.icdf(torch.tensor(0.95))
    coverage = ((y >= lo) & (y <= hi)).float().mean().item()
    pit = base.cdf(y)
    print(f"predictive mixture log-lik {ll:.4f} 90% interval coverage {coverage:.4f} PIT mean {pit.mean().item():.4f}")
    resid = (y - base.loc).flatten()
    resid = torch.cat([resid, torch.from_numpy(3 * rng.standard_t(1.5, 60).astype(np.float32))])  # outliers
print(f"mixture mean shape {tuple(mix.mean.shape)} variance positive: {bool((mix.variance > 0).all())}")

df_raw, sc_raw = torch.zeros((), requires_grad=True), torch.zeros((), requires_grad=True)
o = torch.optim.LBFGS([df_raw, sc_raw], max_iter=50)


def closure():
    o.zero_grad()
    nll = -StudentT(1 + torch.exp(df_raw), 0.0, torch.exp(sc_raw)).log_prob(resid).mean()
    nll.backward()
    return nll


o.step(closure)
print(f"student-t residual fit df {1 + df_raw.exp().item():.3f} scale {sc_raw.exp().item():.4f}")

xg = x[0, :nc, 0].double()
W = torch.stack([torch.sin(xg), torch.cos(xg), xg / 3], 1)
lr_mvn = LowRankMultivariateNormal(torch.zeros(nc, dtype=torch.float64), W, torch.full((nc,), 0.01, dtype=torch.float64))
full = MultivariateNormal(torch.zeros(nc, dtype=torch.float64), covariance_matrix=W @ W.T + 0.01 * torch.eye(nc, dtype=torch.float64))
yy = y[0, :nc, 0].double()
print(f"low-rank == full: {abs(lr_mvn.log_prob(yy).item() - full.log_prob(yy).item()) < 1e-8} log-lik {lr_mvn.log_prob(yy).item():.4f} "
      f"entropy {lr_mvn.entropy().item():.4f}")


class Spike(Distribution):
    arg_constraints = {"loc": constraints.real}
    support = constraints.real

    def __init__(self, loc):
        self.loc = loc
        super().__init__(batch_shape=loc.shape, validate_args=False)


@register_kl(Spike, Spike)
def _kl_spike(p, q):
    return torch.where(p.loc == q.loc, 0.0, float("inf"))


print(f"custom KL {kl_divergence(Spike(torch.tensor([1.0, 2.0])), Spike(torch.tensor([1.0, 3.0]))).tolist()} "
      f"constraints: {constraints.positive.check(torch.tensor([-1.0, 2.0])).tolist()} {constraints.unit_interval.check(torch.tensor(0.5)).item()}")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-10:]):.4f} {coverage:.4f}")
