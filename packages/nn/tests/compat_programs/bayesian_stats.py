"""Statistical modelling with torch.distributions, in the style of the public variational
inference and extreme-value tutorials written in plain PyTorch: (1) Bayesian linear regression
by stochastic variational inference: a horseshoe-like prior (Normal weights whose scales have
HalfCauchy priors), a mean-field guide of Normal / LogNormal factors with softplus-constrained
scales, the ELBO estimated with rsample and log_prob (noise from NumPy through the
reparameterisation), torch.distributions.kl_divergence where closed forms exist, Adam;
(2) extreme-value analysis by peaks over threshold: exceedances of a heavy-tailed sample over
its 90% torch.quantile, a GeneralizedPareto fitted by maximum likelihood with L-BFGS
(unconstrained parameters, log-scale), the fitted tail's return levels from icdf, its
log_survival_function and a Kolmogorov-Smirnov distance from cdf on the sorted exceedances;
(3) an F-test between nested least-squares models (torch.linalg.lstsq), the p-value from
FisherSnedecor's density (exp of log_prob) integrated with torch.trapezoid. Data and noise from NumPy: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first elbo> <last elbo> <gpd shape> <F p-value>."""

import argparse
import sys

import numpy as np
import torch
import torch.distributions as D
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=150)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

# ---- (1) sparse Bayesian regression --------------------------------------------------------
N, P = 80, 6
X = torch.from_numpy(rng.normal(size=(N, P)).astype(np.float32))
true_w = torch.tensor([2.0, 0.0, 0.0, -1.5, 0.0, 0.3])
y = X @ true_w + 0.3 * torch.from_numpy(rng.normal(size=N).astype(np.float32))

params = {
    "w_loc": torch.zeros(P, requires_grad=True),
    "w_raw": torch.full((P,), -2.0, requires_grad=True),
    "lam_loc": torch.zeros(P, requires_grad=True),
    "lam_raw": torch.full((P,), -2.0, requires_grad=True),
    "sigma_loc": torch.tensor(0.0, requires_grad=True),
    "sigma_raw": torch.tensor(-2.0, requires_grad=True),
}
prior_lam = D.HalfCauchy(torch.ones(P))
prior_sigma = D.HalfCauchy(torch.tensor(1.0))
print(f"HalfCauchy prior: mean {prior_lam.mean[0].item()}, median "
      f"{prior_lam.icdf(torch.tensor(0.5))[0].item():.4f}, entropy {prior_sigma.entropy().item():.4f}")


def elbo(noise):
    q_w = D.Normal(params["w_loc"], F.softplus(params["w_raw"]))
    q_lam = D.LogNormal(params["lam_loc"], F.softplus(params["lam_raw"]))
    q_sigma = D.LogNormal(params["sigma_loc"], F.softplus(params["sigma_raw"]))
    eps_w, eps_l, eps_s = noise
    w = q_w.loc + q_w.scale * eps_w  # the reparameterisation with NumPy's normals
    lam = torch.exp(q_lam.loc + q_lam.scale * eps_l)
    sigma = torch.exp(q_sigma.loc + q_sigma.scale * eps_s)
    log_lik = D.Normal(X @ w, sigma).log_prob(y).sum()
    log_prior = (D.Normal(torch.zeros(P), lam).log_prob(w).sum() + prior_lam.log_prob(lam).sum()
                 + prior_sigma.log_prob(sigma))
    log_q = q_w.log_prob(w).sum() + q_lam.log_prob(lam).sum() + q_sigma.log_prob(sigma)
    return log_lik + log_prior - log_q


opt = torch.optim.Adam(params.values(), lr=0.05)
elbos = []
for step in range(args.steps):
    noise = [torch.from_numpy(rng.normal(size=s).astype(np.float32)) for s in (P, P, ())]
    loss = -elbo(noise)
    opt.zero_grad()
    loss.backward()
    opt.step()
    elbos.append(-loss.item())
    if step % 50 == 0:
        print(f"svi step {step:3d} elbo {-loss.item():.3f}")
w_mean = params["w_loc"].detach()
shrunk = (w_mean.abs() < 0.2).tolist()
print(f"posterior mean weights {[round(v, 2) for v in w_mean.tolist()]}, shrunk {shrunk}")
kl = D.kl_divergence(D.Normal(params["w_loc"], F.softplus(params["w_raw"])),
                     D.Normal(torch.zeros(P), torch.ones(P)))
print(f"KL(q(w) || N(0, 1)) {kl.sum().item():.4f}")

# ---- (2) peaks over threshold ---------------------------------------------------------------
sample = torch.from_numpy((rng.pareto(3.0, 4000) + 1.0).astype(np.float32))  # tail index 1/3
# (float32: torch's GeneralizedPareto.log_prob does not take float64)
u = torch.quantile(sample, 0.9)
exceed = sample[sample > u] - u
print(f"threshold {u.item():.4f}, {exceed.numel()} exceedances")
raw = torch.tensor([0.0, 0.1], requires_grad=True)  # log scale, shape
lbfgs = torch.optim.LBFGS([raw], lr=0.5, max_iter=60, line_search_fn="strong_wolfe")


def nll():
    lbfgs.zero_grad()
    gpd = D.GeneralizedPareto(torch.zeros(()), raw[0].exp(), raw[1], validate_args=False)
    loss = -gpd.log_prob(exceed).mean()
    loss.backward()
    return loss


lbfgs.step(nll)
scale, shape = raw[0].exp().item(), raw[1].item()
gpd = D.GeneralizedPareto(torch.tensor(0.0), raw[0].exp().detach(), raw[1].detach())
print(f"GPD fit: scale {scale:.4f}, shape {shape:.4f} (theory 1/3), nll {nll().item():.5f}")
levels = u + gpd.icdf(torch.tensor([0.9, 0.99, 0.999]))
print(f"return levels {[round(v, 3) for v in levels.tolist()]}, log survival at 1.0 "
      f"{gpd.log_survival_function(torch.tensor(1.0)).item():.4f}")
srt, _ = torch.sort(exceed)
emp = torch.arange(1, srt.numel() + 1, dtype=torch.float32) / srt.numel()
ks = (gpd.cdf(srt) - emp).abs().max().item()
print(f"KS distance {ks:.4f}, mean {gpd.mean.item():.4f}, variance {gpd.variance.item():.4f}")

# ---- (3) F-test between nested linear models ------------------------------------------------
Z = torch.from_numpy(rng.normal(size=(60, 4)))
target = Z[:, 0] * 1.0 + Z[:, 1] * 0.4 + torch.from_numpy(rng.normal(size=60)) * 1.0
full = torch.cat([torch.ones(60, 1, dtype=torch.float64), Z], 1)
reduced = full[:, :2]
rss = []
for design in (reduced, full):
    coef = torch.linalg.lstsq(design, target.unsqueeze(1)).solution
    rss.append(((design @ coef).squeeze(1) - target).pow(2).sum())
df1, df2 = full.shape[1] - reduced.shape[1], 60 - full.shape[1]
f_stat = ((rss[0] - rss[1]) / df1) / (rss[1] / df2)
fdist = D.FisherSnedecor(torch.tensor(float(df1), dtype=torch.float64),
                         torch.tensor(float(df2), dtype=torch.float64))
grid = torch.linspace(1e-6, f_stat.item(), 4001, dtype=torch.float64)
cdf_num = torch.trapezoid(fdist.log_prob(grid).exp(), grid)
p_value = 1 - cdf_num.item()
print(f"F = {f_stat.item():.4f} on ({df1}, {df2}) df, p = {p_value:.6f}; "
      f"F mean {fdist.mean.item():.4f}, mode {fdist.mode.item():.4f}")
print(f"RESULT {elbos[0]:.3f} {np.mean(elbos[-10:]):.3f} {shape:.4f} {p_value:.6f}")
