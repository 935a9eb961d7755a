"""A single-cell count autoencoder in the style of the public scVI / DCA code: synthetic
gene-expression counts from a negative binomial with dropout zeros (NumPy gamma-Poisson), a
VAE on log1p-normalized counts with a softplus-scaled Normal posterior, a decoder producing
per-gene proportions by softmax scaled by the observed library size, a gene-wise inverse
dispersion parameter (exp of a learned vector), the zero-inflated negative binomial
log-likelihood written with torch.lgamma / softplus / log as scVI does (its NB part checked
against torch.distributions.NegativeBinomial(total_count, logits)), KL warm-up, and latent
clustering quality by the silhouette of the true cell types in the posterior means
(torch.cdist). Weights from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<silhouette>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import NegativeBinomial, Normal, kl_divergence

rng = np.random.default_rng(139)
CELLS, GENES, TYPES, LAT = 240, 50, 3, 4
programs = rng.gamma(0.6, 1.0, size=(TYPES, GENES))
types = rng.integers(0, TYPES, CELLS)
lib = rng.lognormal(np.log(400), 0.3, CELLS)
rate = programs[types] / programs[types].sum(1, keepdims=True) * lib[:, None]
theta_true = 5.0
counts = rng.poisson(rng.gamma(theta_true, rate / theta_true))
counts[rng.random(counts.shape) < 0.1] = 0  # technical dropout
X = torch.from_numpy(counts.astype(np.float32))
T = torch.from_numpy(types)
print(f"counts {tuple(X.shape)} zeros {(X == 0).float().mean().item():.4f} mean library {X.sum(1).mean().item():.2f}")


def log_zinb(x, mu, theta, pi_logits, eps=1e-8):
    softplus_pi = F.softplus(-pi_logits)
    log_theta_eps = torch.log(theta + eps)
    log_theta_mu_eps = torch.log(theta + mu + eps)
    pi_theta_log = -pi_logits + theta * (log_theta_eps - log_theta_mu_eps)
    case_zero = F.softplus(pi_theta_log) - softplus_pi
    mul_case_zero = (x < eps).float() * case_zero
    case_non_zero = (-softplus_pi + pi_theta_log + x * (torch.log(mu + eps) - log_theta_mu_eps)
                     + torch.lgamma(x + theta) - torch.lgamma(theta) - torch.lgamma(x + 1))
    mul_case_non_zero = (x > eps).float() * case_non_zero
    return mul_case_zero + mul_case_non_zero


def log_nb(x, mu, theta, eps=1e-8):
    log_theta_mu_eps = torch.log(theta + mu + eps)
    return (theta * (torch.log(theta + eps) - log_theta_mu_eps) + x * (torch.log(mu + eps) - log_theta_mu_eps)
            + torch.lgamma(x + theta) - torch.lgamma(theta) - torch.lgamma(x + 1))


mu, theta = torch.tensor([3.0, 10.0, 0.5]), torch.tensor([2.0, 5.0, 1.0])
x = torch.tensor([0.0, 12.0, 2.0])
ref = NegativeBinomial(total_count=theta, logits=torch.log(mu) - torch.log(theta)).log_prob(x)
print(f"nb log-likelihood matches distributions: {torch.allclose(log_nb(x, mu, theta), ref, atol=1e-4)} "
      f"zinb with pi -> 0 matches nb: {torch.allclose(log_zinb(x, mu, theta, torch.full((3,), -30.0)), ref, atol=1e-4)}")


def linear(i, o):
    layer = nn.Linear(i, o)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(i), (o, i)).astype(np.float32)))
        layer.bias.zero_()
    return layer


class SCVI(nn.Module):
    def __init__(self, h=64):
        super().__init__()
        self.enc = nn.Sequential(linear(GENES, h), nn.BatchNorm1d(h, momentum=0.01, eps=1e-3), nn.ReLU())
        self.mean, self.var = linear(h, LAT), linear(h, LAT)
        self.dec = nn.Sequential(linear(LAT, h), nn.BatchNorm1d(h, momentum=0.01, eps=1e-3), nn.ReLU())
        self.scale, self.dropout = linear(h, GENES), linear(h, GENES)
        self.px_r = nn.Parameter(torch.zeros(GENES))

    def forward(self, x, eps):
        h = self.enc(torch.log1p(x))
        qz = Normal(self.mean(h), F.softplus(self.var(h)) + 1e-4)
        z = qz.loc + qz.scale * eps
        d = self.dec(z)
        library = x.sum(1, keepdim=True)
        px_mu = library * torch.softmax(self.scale(d), -1)
        return qz, px_mu, torch.exp(self.px_r), self.dropout(d)


model = SCVI()
opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=0.01)
prior = Normal(torch.zeros(LAT), torch.ones(LAT))
losses = []
for epoch in range(40):
    perm = torch.from_numpy(rng.permutation(CELLS))
    kl_weight = min(1.0, epoch / 20)
    for idx in perm.split(60):
        x = X[idx]
        qz, px_mu, theta, pi = model(x, torch.from_numpy(rng.normal(size=(len(idx), LAT)).astype(np.float32)))
        rec = -log_zinb(x, px_mu, theta, pi).sum(-1)
        kl = kl_divergence(qz, prior).sum(-1)
        loss = (rec + kl_weight * kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if epoch % 10 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.4f} rec {rec.mean().item():.4f} kl {kl.mean().item():.4f} "
              f"dispersion {theta.mean().item():.4f}")

model.eval()
with torch.no_grad():
    qz, px_mu, theta, pi = model(X, torch.zeros(CELLS, LAT))
    z = qz.loc
    d = torch.cdist(z, z)
    same = T.unsqueeze(0) == T.unsqueeze(1)
    a = (d * same).sum(1) / (same.sum(1) - 1)
    b = torch.stack([(d * (T == t)).sum(1) / (T == t).sum() for t in range(TYPES)], 1)
    b = b.masked_fill(F.one_hot(T, TYPES).bool(), float("inf")).min(1).values
    sil = ((b - a) / torch.maximum(a, b)).mean().item()
    dropout_p = torch.sigmoid(pi).mean().item()
print(f"silhouette {sil:.4f} dropout probability {dropout_p:.4f} mean inverse dispersion {theta.mean().item():.4f}")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-4:]):.4f} {sil:.4f}")
