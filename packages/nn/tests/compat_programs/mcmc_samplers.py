"""Markov chain Monte Carlo in the style of public PyTorch samplers (hamiltorch, Pyro's HMC
kernel written out, SVGD repositories): Bayesian logistic regression whose log-posterior comes
from torch.distributions (Normal prior, Bernoulli(logits=) likelihood) with gradients by
torch.autograd.grad; Hamiltonian Monte Carlo with a leapfrog integrator (energy error shrinking
as O(eps^2), exact reversibility of the flipped trajectory), Metropolis-adjusted Langevin
(MALA) with the asymmetric proposal correction, an effective sample size from an FFT
autocorrelation, Stein variational gradient descent with an RBF kernel, the median heuristic
(torch.pdist + torch.median) and the kernel's repulsive term by autograd, and a 2-D Ising model
sampled by checkerboard Metropolis updates with torch.roll neighbours (energy checked against a
circular-padded conv2d). All randomness (momenta, proposals, uniforms) comes from NumPy so the
chains are the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <hmc acceptance>
<mala acceptance> <svgd test accuracy>."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributions import Bernoulli, Normal

rng = np.random.default_rng(1603)
torch.set_default_dtype(torch.float64)

n, d = 120, 3
X = torch.from_numpy(rng.normal(size=(n, d)))
w_true = torch.tensor([1.5, -2.0, 0.5])
y = torch.from_numpy((rng.random(n) < torch.sigmoid(X @ w_true).numpy()).astype(np.float64))
Xt = torch.from_numpy(rng.normal(size=(400, d)))
yt = (torch.sigmoid(Xt @ w_true) > 0.5).double()
prior = Normal(torch.zeros(d), torch.ones(d) * 2.0)


def log_post(w):
    return prior.log_prob(w).sum(-1) + Bernoulli(logits=w @ X.T).log_prob(y).sum(-1)


def grad_log_post(w):
    w = w.detach().requires_grad_(True)
    lp = log_post(w)
    (g,) = torch.autograd.grad(lp.sum(), w)
    return lp.detach(), g


def leapfrog(w, p, eps, steps):
    _, g = grad_log_post(w)
    p = p + 0.5 * eps * g
    for i in range(steps):
        w = w + eps * p
        _, g = grad_log_post(w)
        if i < steps - 1:
            p = p + eps * g
    p = p + 0.5 * eps * g
    return w, p


def hamiltonian(w, p):
    return -log_post(w) + 0.5 * (p * p).sum(-1)


w0 = torch.zeros(d)
p0 = torch.from_numpy(rng.normal(size=d))
errs = []
for eps in (0.1, 0.05, 0.025):
    w1, p1 = leapfrog(w0, p0, eps, int(round(0.5 / eps)))
    errs.append(abs((hamiltonian(w1, p1) - hamiltonian(w0, p0)).item()))
print(f"leapfrog energy errors {[f'{e:.3e}' for e in errs]} ratios {errs[0] / errs[1]:.2f} {errs[1] / errs[2]:.2f}")
w1, p1 = leapfrog(w0, p0, 0.05, 10)
wb, pb = leapfrog(w1, -p1, 0.05, 10)
print(f"reversible: {torch.allclose(wb, w0, atol=1e-10)} {torch.allclose(-pb, p0, atol=1e-10)}")


def hmc(n_samples, eps=0.1, steps=6):
    w = torch.zeros(d)
    out, acc = [], 0
    for _ in range(n_samples):
        p = torch.from_numpy(rng.normal(size=d))
        w_new, p_new = leapfrog(w, p, eps, steps)
        log_alpha = hamiltonian(w, p) - hamiltonian(w_new, p_new)
        if math.log(rng.random()) < log_alpha.item():
            w, acc = w_new, acc + 1
        out.append(w)
    return torch.stack(out), acc / n_samples


def mala(n_samples, eps=0.12):
    w = torch.zeros(d)
    lp, g = grad_log_post(w)
    out, acc = [], 0
    for _ in range(n_samples):
        prop = w + 0.5 * eps ** 2 * g + eps * torch.from_numpy(rng.normal(size=d))
        lp_p, g_p = grad_log_post(prop)
        fwd = Normal(w + 0.5 * eps ** 2 * g, eps).log_prob(prop).sum()
        bwd = Normal(prop + 0.5 * eps ** 2 * g_p, eps).log_prob(w).sum()
        if math.log(rng.random()) < (lp_p - lp + bwd - fwd).item():
            w, lp, g, acc = prop, lp_p, g_p, acc + 1
        out.append(w)
    return torch.stack(out), acc / n_samples


def ess(chain):
    """Effective sample size per dimension from the FFT autocorrelation (Geyer's initial
    positive sequence, truncated at the first negative pair sum)."""
    m = chain.shape[0]
    c = chain - chain.mean(0)
    f = torch.fft.rfft(c, n=2 * m, dim=0)
    acf = torch.fft.irfft(f * f.conj(), n=2 * m, dim=0)[:m]
    acf = acf / acf[0]
    out = []
    for j in range(chain.shape[1]):
        pairs = acf[:-1:2, j] + acf[1::2, j]
        neg = torch.nonzero(pairs < 0)
        k = int(neg[0, 0]) if len(neg) else len(pairs)
        tau = -1 + 2 * pairs[:k].sum()
        out.append(m / tau.item())
    return out


samples, acc_h = hmc(200)
post = samples[50:]
print(f"hmc acceptance {acc_h:.3f} posterior mean {[round(v, 3) for v in post.mean(0).tolist()]} std {[round(v, 3) for v in post.std(0).tolist()]}")
print(f"hmc ess {[round(v, 1) for v in ess(post)]}")
msamples, acc_m = mala(200)
mpost = msamples[50:]
print(f"mala acceptance {acc_m:.3f} posterior mean {[round(v, 3) for v in mpost.mean(0).tolist()]}")
print(f"mala ess {[round(v, 1) for v in ess(mpost)]}")

# the MAP by Adam, for reference
w_map = torch.zeros(d, requires_grad=True)
opt = torch.optim.Adam([w_map], lr=0.1)
for _ in range(300):
    opt.zero_grad()
    (-log_post(w_map)).backward()
    opt.step()
print(f"map {[round(v, 3) for v in w_map.detach().tolist()]} hmc mean within 2 std: {bool(((post.mean(0) - w_map.detach()).abs() < 2 * post.std(0)).all())}")


def rbf(x, y, h):
    return torch.exp(-torch.cdist(x, y) ** 2 / h)


particles = torch.from_numpy(rng.normal(0, 1, (30, d)))
for it in range(100):
    _, g = grad_log_post(particles)
    xp = particles.detach().requires_grad_(True)
    med = torch.median(torch.pdist(xp.detach())) ** 2
    h = med / math.log(particles.shape[0] + 1)
    k = rbf(xp, xp.detach(), h)
    # the repulsive term sum_j grad_{x_j} k(x_j, x_i), by autograd through the first argument
    (gk,) = torch.autograd.grad(k.sum(), xp)
    phi = (k.detach() @ g - gk) / particles.shape[0]
    particles = particles + 0.05 * phi
    if it in (0, 99):
        print(f"svgd iter {it:3d} bandwidth {h.item():.4f} mean log posterior {log_post(particles).mean().item():.4f}")
prob = torch.sigmoid(Xt @ particles.T).mean(1)
acc_s = ((prob > 0.5).double() == yt).double().mean().item()
print(f"svgd particles spread {particles.std(0).mean().item():.4f} predictive accuracy {acc_s:.4f}")

# 2-D Ising model, checkerboard Metropolis
L = 16
yy, xx = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
masks = [((yy + xx) % 2 == c) for c in (0, 1)]


def neighbours(s):
    return torch.roll(s, 1, 0) + torch.roll(s, -1, 0) + torch.roll(s, 1, 1) + torch.roll(s, -1, 1)


def energy(s):
    return -(s * neighbours(s)).sum() / 2


kernel = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3)
s0 = torch.from_numpy(rng.choice([-1.0, 1.0], (L, L)))
conv_nb = F.conv2d(F.pad(s0.view(1, 1, L, L), (1, 1, 1, 1), mode="circular"), kernel)[0, 0]
print(f"roll neighbours == circular conv2d: {torch.equal(conv_nb, neighbours(s0))} energy {energy(s0).item():.0f}")
for T in (1.5, 2.269, 4.0):
    s = torch.ones(L, L)
    mags = []
    for sweep in range(80):
        for m in masks:
            dE = 2 * s * neighbours(s)
            u = torch.from_numpy(rng.random((L, L)))
            flip = m & ((dE <= 0) | (u < torch.exp(-dE / T)))
            s = torch.where(flip, -s, s)
        if sweep >= 30:
            mags.append(s.mean().abs().item())
    print(f"ising T {T:.3f} |m| {np.mean(mags):.3f} energy per site {(energy(s) / L ** 2).item():.3f}")
print(f"RESULT {acc_h:.4f} {acc_m:.4f} {acc_s:.4f}")
