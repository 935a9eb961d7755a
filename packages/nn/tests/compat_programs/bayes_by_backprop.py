"""Bayesian neural networks in the style of the public Bayes-by-Backprop / blitz code on 1-D
heteroscedastic regression with a gap in the data: BayesLinear layers holding mu and rho
parameters (sigma = softplus(rho), log1p(exp(rho)) checked), the local reparameterization trick
(output mean / variance from F.linear of mu and sigma^2), the closed-form KL to a Normal prior
by torch.distributions.kl_divergence on Independent Normals, checked against a Monte Carlo KL
from a scale-mixture prior (MixtureSameFamily of two zero-mean Normals), the ELBO with the KL
weighted per minibatch (Blundell's 2^(M-i) / (2^M - 1) schedule), predictive mean / epistemic spread from stacked
samples in and away from the gap, and a Gaussian NLL head (F.gaussian_nll_loss). Noise from NumPy. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first ELBO loss> <last ELBO loss> <gap / data spread ratio>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal, kl_divergence

rng = np.random.default_rng(136)
x = np.concatenate([rng.uniform(-3, -0.7, 80), rng.uniform(0.7, 3, 80)])
y = np.sin(1.5 * x) + (0.1 + 0.05 * np.abs(x)) * rng.normal(size=x.shape)
X, Y = torch.from_numpy(x.astype(np.float32)).unsqueeze(1), torch.from_numpy(y.astype(np.float32)).unsqueeze(1)


def noise(*shape):
    return torch.from_numpy(rng.normal(size=shape).astype(np.float32))


class BayesLinear(nn.Module):
    def __init__(self, i, o, prior_sd=1.0):
        super().__init__()
        self.w_mu = nn.Parameter(torch.from_numpy(rng.normal(0, 1 / math.sqrt(i), (o, i)).astype(np.float32)))
        self.w_rho = nn.Parameter(torch.full((o, i), -5.0))
        self.b_mu = nn.Parameter(torch.zeros(o))
        self.b_rho = nn.Parameter(torch.full((o,), -5.0))
        self.prior_sd = prior_sd

    def forward(self, x):
        w_var, b_var = F.softplus(self.w_rho).pow(2), F.softplus(self.b_rho).pow(2)
        mean = F.linear(x, self.w_mu, self.b_mu)
        var = F.linear(x.pow(2), w_var, b_var)
        return mean + var.sqrt() * noise(*mean.shape)

    def kl(self):
        total = 0
        for m, r in ((self.w_mu, self.w_rho), (self.b_mu, self.b_rho)):
            q = Independent(Normal(m, F.softplus(r)), m.dim())
            p = Independent(Normal(torch.zeros_like(m), torch.full_like(m, self.prior_sd)), m.dim())
            total = total + kl_divergence(q, p)
        return total


class BNN(nn.Module):
    def __init__(self, h=32):
        super().__init__()
        self.l1, self.l2, self.l3 = BayesLinear(1, h), BayesLinear(h, h), BayesLinear(h, 2)

    def forward(self, x):
        out = self.l3(torch.tanh(self.l2(torch.tanh(self.l1(x)))))
        return out[:, :1], F.softplus(out[:, 1:]) + 1e-3

    def kl(self):
        return self.l1.kl() + self.l2.kl() + self.l3.kl()


rho = torch.tensor([-5.0, 0.0, 3.0, 25.0])
print(f"softplus == log1p(exp): {torch.allclose(F.softplus(rho), torch.log1p(torch.exp(rho)))}")

layer = BayesLinear(3, 2)
with torch.no_grad():
    layer.w_rho.fill_(-1.0)
    q = Normal(layer.w_mu, F.softplus(layer.w_rho))
    prior = MixtureSameFamily(Categorical(torch.tensor([0.5, 0.5])), Normal(torch.zeros(2), torch.tensor([1.0, 0.1])))
    w = layer.w_mu + F.softplus(layer.w_rho) * noise(4000, 2, 3)
    mc_mix = (q.log_prob(w) - prior.log_prob(w.reshape(-1)).reshape(w.shape)).sum((1, 2)).mean()
    w_kl = kl_divergence(Independent(q, 2), Independent(Normal(torch.zeros(2, 3), torch.ones(2, 3)), 2))
    mc_n = (q.log_prob(w) - Normal(0.0, 1.0).log_prob(w)).sum((1, 2)).mean()
print(f"kl closed form {w_kl.item():.3f} monte carlo {mc_n.item():.3f} close: {abs(w_kl.item() - mc_n.item()) < 0.2} "
      f"mixture-prior kl {mc_mix.item():.2f}")

model = BNN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
M = 4
losses = []
for epoch in range(60):
    perm = torch.from_numpy(rng.permutation(len(X)))
    for i, idx in enumerate(perm.chunk(M)):
        pi_i = 2 ** (M - i - 1) / (2 ** M - 1)
        mean, sd = model(X[idx])
        nll = F.gaussian_nll_loss(mean, Y[idx], sd.pow(2), reduction="sum", full=True)
        loss = (nll + pi_i * model.kl()) / len(X)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if epoch % 15 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.5f} kl {model.kl().item():.3f}")

grid = torch.linspace(-3, 3, 25).unsqueeze(1)
with torch.no_grad():
    preds = torch.stack([model(grid)[0] for _ in range(50)])
spread = preds.std(0).squeeze(1)
gap = spread[(grid.squeeze(1).abs() < 0.5)].mean()
data = spread[(grid.squeeze(1).abs() > 1.0)].mean()
print(f"bnn: mean fit mse {F.mse_loss(preds.mean(0), torch.sin(1.5 * grid)).item():.5f} spread gap {gap.item():.5f} data {data.item():.5f}")


print(f"RESULT {losses[0]:.5f} {np.mean(losses[-M:]):.5f} {(gap / data).item():.4f}")
