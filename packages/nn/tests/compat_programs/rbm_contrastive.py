"""A Bernoulli restricted Boltzmann machine, in the style of the public "RBM in PyTorch"
tutorials: the free energy with F.softplus, Gibbs sampling written with NumPy uniforms
compared against probabilities (so both libraries draw the same states), contrastive
divergence (CD-1) and persistent CD with a chain buffer, the gradient written by hand
(outer products via torch.einsum / addmm_) and checked against autograd of the free-energy
difference, the exact log partition function by enumerating every hidden state with
torch.cartesian_prod and torch.logsumexp, the exact log-likelihood of the data, annealed
importance sampling of log Z along a geometric path (torch.linspace betas, log-weights
accumulated, logsumexp - log K), pseudo-likelihood by flipping one unit per sample
(torch.arange indexing), reconstruction error, and all pairs of hidden units through
torch.combinations for a correlation summary. float64. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first nll> <last nll> <ais error>."""

import math

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(44)
NV, NH = 12, 6
protos = rng.random((3, NV)) < 0.5
data = np.array([np.where(rng.random(NV) < 0.1, ~p, p) for p in protos[rng.integers(0, 3, 300)]])
V = torch.from_numpy(data.astype(np.float64))
print(f"data {tuple(V.shape)} mean activity {V.mean().item():.4f} distinct patterns {torch.unique(V, dim=0).shape[0]}")

W = torch.from_numpy(rng.normal(0, 0.01, (NV, NH)))
b = torch.zeros(NV)
c = torch.zeros(NH)


def free_energy(v, W, b, c):
    return -(v @ b) - F.softplus(v @ W + c).sum(-1)


def sample_h(v):
    p = torch.sigmoid(v @ W + c)
    return p, (torch.from_numpy(rng.random(p.shape)) < p).double()


def sample_v(h):
    p = torch.sigmoid(h @ W.T + b)
    return p, (torch.from_numpy(rng.random(p.shape)) < p).double()


H_all = torch.cartesian_prod(*[torch.tensor([0.0, 1.0])] * NH)  # (2^NH, NH)


def log_z(W, b, c):  # sum over h of exp(c.h) prod_i (1 + exp(b_i + W_i.h))
    return torch.logsumexp(H_all @ c + F.softplus(H_all @ W.T + b).sum(1), 0)


def nll():
    return (free_energy(V, W, b, c).mean() + log_z(W, b, c)).item()


# the hand-written CD gradient against autograd of the free-energy difference
v0 = V[:32]
ph0, h0 = sample_h(v0)
_, v1 = sample_v(h0)
ph1, _ = sample_h(v1)
dW = (torch.einsum("bi,bj->ij", v0, ph0) - torch.einsum("bi,bj->ij", v1, ph1)) / 32
Wg = W.clone().requires_grad_()
(free_energy(v1, Wg, b, c).mean() - free_energy(v0, Wg, b, c).mean()).backward()
print(f"hand gradient == autograd: {torch.allclose(dW, Wg.grad)} hidden states enumerated {H_all.shape[0]}")

lr, losses = 0.1, []
chains = torch.from_numpy((rng.random((64, NV)) < 0.5).astype(np.float64))
for epoch in range(40):
    persistent = epoch >= 20
    for batch in torch.from_numpy(rng.permutation(300)).split(50):
        v0 = V[batch]
        ph0, h0 = sample_h(v0)
        if persistent:
            _, hc = sample_h(chains)
            _, chains = sample_v(hc)
            vk = chains
        else:
            _, vk = sample_v(h0)
        phk, _ = sample_h(vk)
        W.addmm_(v0.T, ph0, alpha=lr / v0.shape[0]).addmm_(vk.T, phk, alpha=-lr / vk.shape[0])
        b += lr * (v0.mean(0) - vk.mean(0))
        c += lr * (ph0.mean(0) - phk.mean(0))
    losses.append(nll())
    if epoch % 10 == 0:
        recon = ((V - sample_v(sample_h(V)[0])[0]) ** 2).mean().item()
        print(f"epoch {epoch:2d} {'PCD' if persistent else 'CD-1'} exact nll {losses[-1]:.5f} recon {recon:.5f}")

# annealed importance sampling from the base-rate model (W = 0, visible biases only)
K, betas = 200, torch.linspace(0, 1, 300)
b0 = torch.zeros(NV)
v = (torch.from_numpy(rng.random((K, NV))) < torch.sigmoid(b0)).double()
logw = torch.zeros(K)


def log_p_star(v, beta):
    return (1 - beta) * (v @ b0) + beta * (v @ b) + F.softplus(beta * (v @ W + c)).sum(1)


for k in range(1, len(betas)):
    logw += log_p_star(v, betas[k]) - log_p_star(v, betas[k - 1])
    ph = torch.sigmoid(betas[k] * (v @ W + c))
    h = (torch.from_numpy(rng.random(ph.shape)) < ph).double()
    pv = torch.sigmoid((1 - betas[k]) * b0 + betas[k] * (h @ W.T + b))
    v = (torch.from_numpy(rng.random(pv.shape)) < pv).double()
log_z0 = NV * math.log(2) + NH * math.log(2)  # base model with the hidden units free
log_z_ais = (torch.logsumexp(logw, 0) - math.log(K)).item() + log_z0
exact = log_z(W, b, c).item()
err = abs(log_z_ais - exact)
print(f"log Z exact {exact:.4f} AIS {log_z_ais:.4f}")

idx = torch.from_numpy(rng.integers(0, NV, 300))
flipped = V.clone()
flipped[torch.arange(300), idx] = 1 - flipped[torch.arange(300), idx]
pl = NV * F.logsigmoid(free_energy(flipped, W, b, c) - free_energy(V, W, b, c)).mean().item()
pairs = torch.combinations(torch.arange(NH), r=2)
act = torch.sigmoid(V @ W + c)
corr = torch.corrcoef(act.T)[pairs[:, 0], pairs[:, 1]]
print(f"pseudo-likelihood {pl:.4f} hidden pairs {pairs.shape[0]} max |corr| {corr.abs().max().item():.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {err:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
