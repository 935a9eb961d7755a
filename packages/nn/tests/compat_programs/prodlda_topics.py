"""Neural topic models in the style of the public ProdLDA (Srivastava & Sutton) and Pyro-tutorial
code: an encoder to the logistic-normal Laplace approximation of a Dirichlet prior (mu and
variance from the prior's alphas), reparameterized samples with NumPy noise, BatchNorm1d
(affine=False) on the product-of-experts decoder, the KL of diagonal Gaussians written out and
checked against kl_divergence(Independent(Normal), Independent(Normal)); a Dirichlet-VAE variant
checked through torch.distributions (Dirichlet log_prob / entropy / mean, kl_divergence of two
Dirichlets against the closed form with lgamma / digamma, constraint checks, the
StickBreakingTransform and biject_to(constraints.simplex) round trip with log_abs_det_jacobian),
and topic recovery by matching learned topic-word distributions to the generating ones with a
greedy assignment over cosine similarities. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last
loss> <topic recovery>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import (
    Dirichlet,
    Independent,
    Normal,
    biject_to,
    constraints,
    kl_divergence,
)
from torch.distributions.transforms import StickBreakingTransform

rng = np.random.default_rng(155)
K, VOCAB, DOCS = 4, 40, 400

# the generating model: sparse topics over disjoint-ish word blocks
beta_true = np.full((K, VOCAB), 0.002)
for k in range(K):
    beta_true[k, k * 10:(k + 1) * 10] = rng.dirichlet(np.ones(10))
beta_true /= beta_true.sum(1, keepdims=True)
theta = rng.dirichlet(0.3 * np.ones(K), DOCS)
counts = np.stack([rng.multinomial(60, th @ beta_true) for th in theta]).astype(np.float32)
bow = torch.from_numpy(counts)
print(f"corpus {tuple(bow.shape)} tokens {int(bow.sum())} empty docs {int((bow.sum(1) == 0).sum())}")


def laplace_prior(alpha):
    """Logistic-normal approximation to Dirichlet(alpha) (Hennig et al.), as ProdLDA."""
    a = torch.full((1, K), alpha)
    mu = a.log() - a.log().mean(1, keepdim=True)
    var = (1.0 / a) * (1 - 2.0 / K) + (1.0 / (K * K)) * (1.0 / a).sum(1, keepdim=True)
    return mu, var


class ProdLDA(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(VOCAB, hidden), nn.Softplus(), nn.Linear(hidden, hidden), nn.Softplus())
        self.mu, self.logvar = nn.Linear(hidden, K), nn.Linear(hidden, K)
        self.mu_bn, self.lv_bn = nn.BatchNorm1d(K, affine=False), nn.BatchNorm1d(K, affine=False)
        self.beta = nn.Linear(K, VOCAB, bias=False)
        self.bn = nn.BatchNorm1d(VOCAB, affine=False)
        prior_mu, prior_var = laplace_prior(0.3)
        self.register_buffer("prior_mu", prior_mu)
        self.register_buffer("prior_var", prior_var)

    def forward(self, x, eps):
        h = self.enc(x)
        mu, logvar = self.mu_bn(self.mu(h)), self.lv_bn(self.logvar(h))
        z = mu + (0.5 * logvar).exp() * eps
        theta = F.softmax(z, dim=1)
        recon = F.log_softmax(self.bn(self.beta(theta)), dim=1)
        nll = -(x * recon).sum(1)
        var = logvar.exp()
        kl = 0.5 * ((var / self.prior_var) + (mu - self.prior_mu).pow(2) / self.prior_var
                    + self.prior_var.log() - logvar - 1).sum(1)
        return (nll + kl).mean(), mu, logvar, kl


model = ProdLDA()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
print(f"laplace prior mu {[round(v, 4) for v in model.prior_mu[0].tolist()]} var {round(model.prior_var[0, 0].item(), 4)}")

eps0 = torch.from_numpy(rng.normal(size=(8, K)).astype(np.float32))
_, mu, logvar, kl = model(bow[:8], eps0)
q = Independent(Normal(mu, (0.5 * logvar).exp()), 1)
p = Independent(Normal(model.prior_mu.expand(8, K), model.prior_var.sqrt().expand(8, K)), 1)
print(f"closed-form kl == kl_divergence(Independent Normals): {torch.allclose(kl, kl_divergence(q, p), atol=1e-4)} "
      f"event shape {tuple(q.event_shape)} batch shape {tuple(q.batch_shape)}")

opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.999))
losses = []
for epoch in range(20):
    perm = rng.permutation(DOCS)
    for s in range(0, DOCS, 100):
        idx = torch.from_numpy(perm[s:s + 100])
        eps = torch.from_numpy(rng.normal(size=(100, K)).astype(np.float32))
        loss, *_ = model(bow[idx], eps)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if epoch % 5 == 0:
        print(f"epoch {epoch:2d} loss {np.mean(losses[-4:]):.3f}")

learned = F.softmax(model.beta.weight.detach().T, dim=1)  # (K, VOCAB)
sim = F.cosine_similarity(learned[:, None, :], torch.from_numpy(beta_true).float()[None, :, :], dim=-1)
taken, score = set(), 0.0
for _ in range(K):
    masked = sim.clone()
    for i, j in taken:
        masked[i, :] = -1
        masked[:, j] = -1
    i, j = divmod(int(masked.argmax()), K)
    taken.add((i, j))
    score += sim[i, j].item() / K
print(f"topic recovery (mean matched cosine) {score:.4f} top words of topic 0: {learned[0].topk(5).indices.sort().values.tolist()}")

# Dirichlet machinery of the Dirichlet-VAE variant
a = torch.tensor([[0.5, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
b = torch.tensor([[1.0, 1.0, 1.0, 1.0], [2.0, 0.5, 1.5, 1.0]])
pa, pb = Dirichlet(a), Dirichlet(b)
x = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
manual_lp = ((a - 1) * x.log()).sum(-1) + torch.lgamma(a.sum(-1)) - torch.lgamma(a).sum(-1)
a0, b0 = a.sum(-1), b.sum(-1)
manual_kl = (torch.lgamma(a0) - torch.lgamma(a).sum(-1) - torch.lgamma(b0) + torch.lgamma(b).sum(-1)
             + ((a - b) * (torch.digamma(a) - torch.digamma(a0).unsqueeze(-1))).sum(-1))
print(f"dirichlet log_prob {[round(v, 5) for v in pa.log_prob(x).tolist()]} matches: {torch.allclose(pa.log_prob(x), manual_lp)}")
print(f"dirichlet kl {[round(v, 5) for v in kl_divergence(pa, pb).tolist()]} matches: {torch.allclose(kl_divergence(pa, pb), manual_kl)}")
print(f"entropy {[round(v, 5) for v in pa.entropy().tolist()]} mean {[round(v, 4) for v in pa.mean[0].tolist()]} "
      f"support check {constraints.simplex.check(x).tolist()} {constraints.simplex.check(torch.tensor([0.5, 0.6])).item()}")
sb = StickBreakingTransform()
y = torch.tensor([[0.3, -0.2, 1.0]])
simplex = sb(y)
print(f"stick breaking {[round(v, 5) for v in simplex[0].tolist()]} sums to one {torch.allclose(simplex.sum(-1), torch.ones(1))} "
      f"inverse {torch.allclose(sb.inv(simplex), y, atol=1e-5)} log|det J| {sb.log_abs_det_jacobian(y, simplex).item():.5f}")
bij = biject_to(constraints.simplex)
print(f"biject_to(simplex) is stick breaking: {type(bij).__name__} round trip {torch.allclose(bij(bij.inv(x)), x, atol=1e-6)}")
print(f"RESULT {np.mean(losses[:4]):.3f} {np.mean(losses[-4:]):.3f} {score:.4f}")
