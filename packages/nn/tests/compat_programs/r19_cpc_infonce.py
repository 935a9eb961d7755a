"""Contrastive predictive coding on 1-D signals, in the style of the public CPC / wav2vec-like
PyTorch code: a strided Conv1d encoder (GroupNorm(1, C) as layer norm, GELU), a GRU
autoregressive context network, one nn.Linear predictor per future step k, the InfoNCE loss
with every other sequence's latent at the same time as a negative (a (B, B) score matrix, the
diagonal the positive, F.cross_entropy against torch.arange), prediction accuracy per step,
then a linear probe on frozen context features (torch.no_grad, detach, requires_grad_(False) on
the encoder) to read the signal's hidden class, and the contrastive score matrix symmetric
version (the CLIP-style average of both directions with a learnable log temperature clamped by
clamp_), and a Blackman-windowed torch.stft baseline. Weights and data from NumPy. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <probe
accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(43)
B, LEN, C, K = 16, 160, 16, 3


def signals(n):
    cls = rng.integers(0, 3, size=n)
    t = np.arange(LEN)
    freq = np.array([0.05, 0.11, 0.2])[cls][:, None] * (1 + 0.1 * rng.normal(size=(n, 1)))
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1))
    amp = 1 + 0.5 * np.sin(2 * np.pi * t / 80 + rng.uniform(0, 6, size=(n, 1)))
    x = amp * np.sin(2 * np.pi * freq * t + phase) + 0.2 * rng.normal(size=(n, LEN))
    return torch.from_numpy(x.astype(np.float32)).unsqueeze(1), torch.from_numpy(cls)


class CPC(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv1d(1, C, 8, stride=4, padding=2), nn.GroupNorm(1, C), nn.GELU(),
                                 nn.Conv1d(C, C, 4, stride=2, padding=1), nn.GroupNorm(1, C), nn.GELU())
        self.ar = nn.GRU(C, C, batch_first=True)
        self.pred = nn.ModuleList([nn.Linear(C, C) for _ in range(K)])
        self.log_temp = nn.Parameter(torch.tensor(0.0))

    def forward(self, x):
        z = self.enc(x).transpose(1, 2)  # (B, T, C)
        c, _ = self.ar(z)
        return z, c


def info_nce(z, c, preds, t0):
    losses, accs = [], []
    for k, head in enumerate(preds, start=1):
        p = head(c[:, t0])  # (B, C)
        target = z[:, t0 + k]
        scores = p @ target.T  # (B, B): the diagonal is the positive
        lbl = torch.arange(scores.shape[0])
        losses.append(F.cross_entropy(scores, lbl))
        accs.append((scores.argmax(1) == lbl).float().mean())
    return torch.stack(losses).mean(), torch.stack(accs)


model = CPC()
with torch.no_grad():
    norms = {id(p) for m in model.modules() if isinstance(m, nn.GroupNorm) for p in m.parameters()}
    for name, p in model.named_parameters():
        if id(p) in norms or name == "log_temp":
            continue  # GroupNorm affine and the temperature keep their defaults
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape)).astype(np.float32)))
x, y = signals(160)
z, c = model(x[:2])
print("latents", tuple(z.shape), "context", tuple(c.shape))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(80):
    idx = torch.arange(step * B, step * B + B) % 160
    z, c = model(x[idx])
    t0 = 5 + step % 8
    loss, acc = info_nce(z, c, model.pred, t0)
    # the symmetric CLIP-style term between two halves of the context with a learned temperature
    a = F.normalize(c[:, 8], dim=-1)
    b = F.normalize(c[:, 15], dim=-1)
    logits = a @ b.T * model.log_temp.exp()
    lbl = torch.arange(B)
    sym = 0.5 * (F.cross_entropy(logits, lbl) + F.cross_entropy(logits.T, lbl))
    total = loss + 0.5 * sym
    opt.zero_grad()
    total.backward()
    opt.step()
    with torch.no_grad():
        model.log_temp.clamp_(0, 4.6)
    losses.append(total.item())
    if step % 20 == 0:
        print(f"step {step:2d} nce {loss.item():.5f} sym {sym.item():.5f} acc per k {[round(v, 3) for v in acc.tolist()]} temp {model.log_temp.exp().item():.4f}")

# linear probe on frozen features
model.requires_grad_(False)
with torch.no_grad():
    feats = model(x)[1].mean(1)
feats = (feats - feats.mean(0)) / feats.std(0)
probe = nn.Linear(C, 3)
with torch.no_grad():
    probe.weight.zero_()
    probe.bias.zero_()
popt = torch.optim.LBFGS(probe.parameters(), lr=0.5, max_iter=50)


def closure():
    popt.zero_grad()
    l_ = F.cross_entropy(probe(feats[:120]), y[:120]) + 1e-3 * probe.weight.pow(2).sum()
    l_.backward()
    return l_


popt.step(closure)
with torch.no_grad():
    acc = (probe(feats[120:]).argmax(1) == y[120:]).float().mean().item()
print("encoder frozen", not any(p.requires_grad for p in model.parameters()), f"probe accuracy {acc:.4f}")
# a classical baseline: Blackman-windowed STFT magnitudes, averaged over time
win = torch.blackman_window(32)
print("window ends", win[:2], "float64 end", torch.blackman_window(32, dtype=torch.float64)[0].item())
spec = torch.stft(x.squeeze(1), 32, hop_length=16, window=win, return_complex=True).abs().mean(-1)
peak = spec.argmax(1)
print("stft", tuple(spec.shape), "peak bin by class", [sorted(set(peak[y == k].tolist())) for k in range(3)])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.6f}")
