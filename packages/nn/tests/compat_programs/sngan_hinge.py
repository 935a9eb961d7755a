"""A spectrally normalized GAN on a 2-D mixture of Gaussians, in the style of the public SNGAN /
StyleGAN-lite training loops: the discriminator's Linear layers wrapped with
torch.nn.utils.parametrizations.spectral_norm (power iteration in training mode, the largest
singular value checked against torch.linalg.matrix_norm(ord=2) and torch.linalg.svdvals), the
hinge loss (relu(1 - D(x)) + relu(1 + D(G(z)))), lazy R1 regularization every 4 steps with
torch.autograd.grad(create_graph=True) on real samples made to require grad, two optimizers
with Adam(betas=(0.0, 0.9)) at different learning rates (TTUR), requires_grad_(False) on the
discriminator during the generator step, and an EMA copy of the generator made with
copy.deepcopy and updated under torch.no_grad with lerp_. Weights, data and noise from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first D loss> <last D loss> <modes covered>."""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

rng = np.random.default_rng(0)
centers = np.array([[np.cos(a), np.sin(a)] for a in np.linspace(0, 2 * np.pi, 8, endpoint=False)])


def real_batch(n):
    return torch.from_numpy((2 * centers[rng.integers(0, 8, n)]
                             + rng.normal(0, 0.05, (n, 2))).astype(np.float32))


G = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
D = nn.Sequential(spectral_norm(nn.Linear(2, 64)), nn.LeakyReLU(0.1),
                  spectral_norm(nn.Linear(64, 64)), nn.LeakyReLU(0.1),
                  spectral_norm(nn.Linear(64, 1)))
r = np.random.default_rng(1)
with torch.no_grad():
    for net in (G, D):
        for name, p in net.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))
    for m in D:
        if hasattr(m, "parametrizations"):
            u = m.parametrizations.weight[0]._u
            u.copy_(F.normalize(torch.from_numpy(r.normal(size=tuple(u.shape)).astype(np.float32)),
                                dim=0))
            v = m.parametrizations.weight[0]._v
            v.copy_(F.normalize(torch.from_numpy(r.normal(size=tuple(v.shape)).astype(np.float32)),
                                dim=0))
print("D parameters:", [n for n, _ in D.named_parameters()])
print("D buffers:", sorted({n.split(".")[-1] for n, _ in D.named_buffers()}))
G_ema = copy.deepcopy(G).eval().requires_grad_(False)

opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.0, 0.9))
opt_d = torch.optim.Adam(D.parameters(), lr=4e-3, betas=(0.0, 0.9))
d_losses = []
for step in range(120):
    real = real_batch(64)
    z = torch.from_numpy(rng.normal(size=(64, 4)).astype(np.float32))
    D.requires_grad_(True)
    fake = G(z).detach()
    d_loss = F.relu(1.0 - D(real)).mean() + F.relu(1.0 + D(fake)).mean()
    if step % 4 == 0:  # lazy R1
        real.requires_grad_(True)
        out = D(real)
        (grad,) = torch.autograd.grad(outputs=out.sum(), inputs=real, create_graph=True)
        r1 = grad.pow(2).reshape(grad.size(0), -1).sum(1).mean()
        d_loss = d_loss + 0.5 * 4 * r1
    opt_d.zero_grad(set_to_none=True)
    d_loss.backward()
    opt_d.step()
    d_losses.append(d_loss.item())

    D.requires_grad_(False)
    z = torch.from_numpy(rng.normal(size=(64, 4)).astype(np.float32))
    g_loss = -D(G(z)).mean()
    opt_g.zero_grad(set_to_none=True)
    g_loss.backward()
    opt_g.step()
    with torch.no_grad():
        for pe, p in zip(G_ema.parameters(), G.parameters()):
            pe.lerp_(p, 0.1)
    if step % 20 == 0:
        print(f"step {step:3d} d_loss {d_loss.item():.5f} g_loss {g_loss.item():.5f}"
              + (f" r1 {r1.item():.5f}" if step % 4 == 0 else ""))

D.eval()
with torch.no_grad():
    for i, m in enumerate(m for m in D if hasattr(m, "parametrizations")):
        w = m.weight
        sv = torch.linalg.svdvals(m.parametrizations.weight.original)
        print(f"layer {i}: sigma(W_sn) {torch.linalg.matrix_norm(w, ord=2).item():.4f}, "
              f"sigma(W) {sv[0].item():.4f}")
    z = torch.from_numpy(rng.normal(size=(512, 4)).astype(np.float32))
    samples = G_ema(z)
    d = torch.cdist(samples, 2 * torch.from_numpy(centers).float())
    near, which = d.min(dim=1)
    modes = torch.unique(which[near < 0.5]).numel()
print(f"ema samples {tuple(samples.shape)}, near a mode: {(near < 0.5).float().mean().item():.4f}")
print(f"RESULT {d_losses[0]:.5f} {np.mean(d_losses[-10:]):.5f} {modes}")
