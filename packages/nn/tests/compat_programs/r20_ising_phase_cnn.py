"""The 2-D Ising model by checkerboard Metropolis on a batch of lattices, then a CNN that learns
the phase from the configurations (Carrasquilla & Melko's "machine learning phases of matter",
in the style of public PyTorch notebooks): neighbour sums by torch.roll with periodic
boundaries, the checkerboard mask from arange parity, acceptance by exp(-beta dE) against NumPy
uniforms, int8 spins converted for the energy, magnetization, susceptibility and the Binder
cumulant per temperature (torch.var_mean with correction=0), then a circular-padded
Conv2d(padding_mode="circular") + AdaptiveAvgPool2d classifier trained on temperatures far from
T_c, its predicted ordered-probability crossing 1/2 located by linear interpolation, and the
Z2 symmetry built in by averaging the logits over flips. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <estimated T_c>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(24)
L, CHAINS = 10, 16
temps = torch.tensor([1.5, 1.8, 2.1, 2.3, 2.5, 2.8, 3.2, 3.6], dtype=torch.float64)
ii, jj = torch.meshgrid(torch.arange(L), torch.arange(L), indexing="ij")
black = (ii + jj) % 2 == 0


def neighbours(s):
    return (torch.roll(s, 1, -1) + torch.roll(s, -1, -1) + torch.roll(s, 1, -2) + torch.roll(s, -1, -2))


def sweep(s, beta):
    for colour in (black, ~black):
        dE = 2.0 * s * neighbours(s)
        u = torch.from_numpy(rng.uniform(size=tuple(s.shape)))
        flip = (u < torch.exp(-beta[:, None, None, None] * dE)) & colour
        s = torch.where(flip, -s, s)
    return s


# all temperatures at once: (T, CHAINS, L, L), cold start
spins = torch.ones(len(temps), CHAINS, L, L, dtype=torch.float64)
beta = 1.0 / temps
for _ in range(40):
    spins = sweep(spins, beta)
samples = []
for t in range(40):
    spins = sweep(spins, beta)
    if t % 4 == 0:
        samples.append(spins.to(torch.int8))
S = torch.stack(samples, 2)  # (T, CHAINS, 10, L, L) int8
sf = S.to(torch.float64)
m = sf.mean((-1, -2)).abs()
energy = -(sf * (torch.roll(sf, 1, -1) + torch.roll(sf, 1, -2))).sum((-1, -2)) / (L * L)
var_m, mean_m = torch.var_mean(m.flatten(1), dim=1, correction=0)
m2 = (sf.mean((-1, -2)) ** 2).flatten(1).mean(1)
m4 = (sf.mean((-1, -2)) ** 4).flatten(1).mean(1)
binder = 1 - m4 / (3 * m2 ** 2)
chi = L * L * var_m / temps
for k in range(len(temps)):
    print(f"T {temps[k].item():.2f} |m| {mean_m[k].item():.4f} E {energy[k].mean().item():.4f} chi {chi[k].item():.4f} binder {binder[k].item():.4f}")
print("dtype", S.dtype, "shape", tuple(S.shape), "exact T_c", round(2 / math.log(1 + math.sqrt(2)), 4))

# phase classifier on the far temperatures (ordered: T < 2.0, disordered: T > 2.6)
far = (temps < 2.0) | (temps > 2.6)
X = sf[far].reshape(-1, 1, L, L).float()
Y = (temps[far] < 2.0).repeat_interleave(CHAINS * S.shape[2]).long()
class Z2Symmetric(nn.Module):
    """Averages the logits over a lattice and its flip: the phase does not depend on the sign."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return 0.5 * (self.net(x) + self.net(-x))


model = Z2Symmetric(nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1, padding_mode="circular"), nn.ReLU(),
    nn.Conv2d(8, 8, 3, padding=1, padding_mode="circular"), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2)))
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
opt = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for epoch in range(8):
    perm = torch.from_numpy(rng.permutation(len(X)))
    tot = 0.0
    for i in range(0, len(X), 160):
        idx = perm[i:i + 160]
        # Z2 augmentation: a flipped lattice is in the same phase
        xb = X[idx] * torch.from_numpy(rng.choice([-1.0, 1.0], size=(len(idx), 1, 1, 1))).float()
        loss = F.cross_entropy(model(xb), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += loss.item() * len(idx)
    losses.append(tot / len(X))
    print(f"epoch {epoch} loss {losses[-1]:.5f}")

with torch.no_grad():
    p_ord = torch.softmax(model(sf.reshape(-1, 1, L, L).float()), 1)[:, 1].reshape(len(temps), -1).mean(1)
    print("p(ordered)", [round(v, 4) for v in p_ord.tolist()])
    above = (p_ord < 0.5).nonzero()[0, 0].item()
    t0, t1 = temps[above - 1].item(), temps[above].item()
    p0, p1 = p_ord[above - 1].item(), p_ord[above].item()
    tc = t0 + (0.5 - p0) * (t1 - t0) / (p1 - p0)
    flipped = torch.softmax(model(-sf.reshape(-1, 1, L, L).float()), 1)[:, 1].reshape(len(temps), -1).mean(1)
    print(f"estimated T_c {tc:.4f} flip symmetric max diff {(flipped - p_ord).abs().max().item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {tc:.6f}")
