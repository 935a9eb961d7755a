"""Matrix product states in the style of public tensor-network PyTorch code (TensorNetwork /
Stoudenmire-Schwab MPS classifiers): a state vector split into an MPS by successive truncated
SVDs (torch.linalg.svd(full_matrices=False), bond dimensions capped), the truncation error
against the discarded singular values, left-canonical form by QR sweeps (each core an isometry),
overlaps and norms by einsum transfer contractions, and an MPS classifier over local feature
maps [cos(pi x / 2), sin(pi x / 2)] with an output index on the middle core, trained by Adam on
a tiny image task; the contraction is checked against the dense tensor built by
einsum / reshape. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1503)
torch.set_default_dtype(torch.float64)


def to_mps(psi, n, chi):
    cores, discarded = [], 0.0
    rest = psi.reshape(1, -1)
    for site in range(n - 1):
        left = rest.shape[0]
        u, s, vh = torch.linalg.svd(rest.reshape(left * 2, -1), full_matrices=False)
        keep = min(chi, s.numel())
        discarded += (s[keep:] ** 2).sum().item()
        cores.append(u[:, :keep].reshape(left, 2, keep))
        rest = torch.diag(s[:keep]) @ vh[:keep]
    cores.append(rest.reshape(rest.shape[0], 2, 1))
    return cores, discarded


def to_dense(cores):
    out = cores[0]
    for c in cores[1:]:
        out = torch.einsum("...a,asb->...sb", out, c)
    return out.reshape(-1)


def overlap(a, b):
    env = torch.ones(1, 1)
    for x, y in zip(a, b):
        env = torch.einsum("ab,asc,bsd->cd", env, x, y)
    return env.squeeze()


def left_canonical(cores):
    cores = [c.clone() for c in cores]
    for i in range(len(cores) - 1):
        left, d, r = cores[i].shape
        q, rr = torch.linalg.qr(cores[i].reshape(left * d, r))
        cores[i] = q.reshape(left, d, q.shape[1])
        cores[i + 1] = torch.einsum("ab,bsc->asc", rr, cores[i + 1])
    return cores


n = 10
psi = torch.from_numpy(rng.normal(size=2 ** n))
# a smooth (low-entanglement) state plus a little noise
grid = torch.linspace(0, 1, 2 ** n)
psi = torch.sin(4 * math.pi * grid) * torch.exp(-grid) + 0.01 * psi
psi = psi / torch.linalg.norm(psi)
for chi in (2, 4, 8, 32):
    cores, disc = to_mps(psi, n, chi)
    err = torch.linalg.norm(to_dense(cores) - psi).item() ** 2
    bonds = [c.shape[2] for c in cores[:-1]]
    shown = f"{err:.3e}" if err > 1e-20 else "exact"
    print(f"chi {chi:2d} bonds {bonds} error {shown} discarded {disc:.3e} params {sum(c.numel() for c in cores)}")
cores, _ = to_mps(psi, n, 4)
canon = left_canonical(cores)
iso = all(torch.allclose(torch.einsum("asb,asc->bc", c, c), torch.eye(c.shape[2]), atol=1e-10) for c in canon[:-1])
print(f"left-canonical isometries: {iso} same state: {torch.allclose(to_dense(canon), to_dense(cores))} "
      f"norm^2 {overlap(canon, canon).item():.6f} == last core {torch.sum(canon[-1] ** 2).item():.6f}")


class MPSClassifier(nn.Module):
    def __init__(self, n_sites, n_classes, bond=6):
        super().__init__()
        self.mid = n_sites // 2
        eye = torch.eye(bond).unsqueeze(1).repeat(1, 2, 1)
        cores = []
        for i in range(n_sites):
            left = 1 if i == 0 else bond
            r = 1 if i == n_sites - 1 else bond
            c = eye[:left, :, :r].clone() + torch.from_numpy(rng.normal(0, 0.01, (left, 2, r)))
            cores.append(nn.Parameter(c))
        self.cores = nn.ParameterList(cores)
        self.label = nn.Parameter(torch.from_numpy(rng.normal(0, 0.01, (bond, n_classes, bond))) +
                                  torch.eye(bond).unsqueeze(1))

    def forward(self, x):
        phi = torch.stack([torch.cos(math.pi * x / 2), torch.sin(math.pi * x / 2)], -1)  # (B, n, 2)
        mats = [torch.einsum("bs,lsr->blr", phi[:, i], c) for i, c in enumerate(self.cores)]
        left = mats[0]
        for m in mats[1:self.mid]:
            left = torch.bmm(left, m)
        right = mats[-1]
        for m in reversed(mats[self.mid:-1]):
            right = torch.bmm(m, right)
        return torch.einsum("bxl,lcr,bry->bc", left, self.label, right)


def bars(m):
    """4x4 images: horizontal (0) or vertical (1) bars, flattened in a snake order."""
    y = rng.integers(0, 2, m)
    img = rng.uniform(0, 0.3, (m, 4, 4))
    for i in range(m):
        k = rng.integers(0, 4)
        if y[i] == 0:
            img[i, k, :] += 0.7
        else:
            img[i, :, k] += 0.7
    img[:, 1::2] = img[:, 1::2, ::-1]
    return torch.from_numpy(img.reshape(m, 16).clip(0, 1)), torch.from_numpy(y)


model = MPSClassifier(16, 2)
xb, yb = bars(4)
with torch.no_grad():
    # left to right through every site, the label core inserted in the middle: one contraction
    # order against the model's two half-chains met at the label
    phi = torch.stack([torch.cos(math.pi * xb / 2), torch.sin(math.pi * xb / 2)], -1)
    env = torch.ones(4, 1)
    for i, c in enumerate(model.cores):
        if i == model.mid:
            env = torch.einsum("bl,lcr->bcr", env, model.label)
            env = torch.einsum("bcl,bs,lsr->bcr", env, phi[:, i], c)
        elif i > model.mid:
            env = torch.einsum("bcl,bs,lsr->bcr", env, phi[:, i], c)
        else:
            env = torch.einsum("bl,bs,lsr->br", env, phi[:, i], c)
    sweep = env.squeeze(-1)
print(f"two half-chains == one sweep: {torch.allclose(model(xb), sweep)} logits {tuple(model(xb).shape)}")

opt = torch.optim.Adam(model.parameters(), lr=0.02)
losses = []
for step in range(60):
    xb, yb = bars(32)
    logits = model(xb)
    loss = F.cross_entropy(logits / logits.detach().abs().max().clamp(min=1.0) * 4, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
xt, yt = bars(200)
with torch.no_grad():
    acc = (model(xt).argmax(1) == yt).double().mean().item()
print(f"accuracy {acc:.4f} parameters {sum(p.numel() for p in model.parameters())}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {acc:.4f}")
