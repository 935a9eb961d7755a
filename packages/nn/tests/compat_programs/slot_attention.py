"""Object-centric learning with Slot Attention, in the style of the public Slot Attention
(Locatello et al., 2020) re-implementations on tiny synthetic scenes: a CNN encoder with a
soft position embedding (a 4-channel coordinate grid from torch.meshgrid + torch.stack with
its flipped copy, projected by a Linear), slots initialized as mu + sigma * noise (NumPy),
iterative attention with the softmax over the *slots* axis (dim=1) followed by a weighted mean
over inputs (normalized with + eps), the slot update through nn.GRUCell on flattened slots
(reshape(-1, D)) and a residual MLP, a spatial broadcast decoder (slots tiled with
expand over an 8x8 grid) producing RGB + alpha masks combined by softmax over slots, the
reconstruction loss, and evaluation by the best matching of masks to ground-truth objects
over itertools.permutations (a Hungarian match by brute force) with soft mask IoU, plus
torch.unflatten / Tensor.unflatten and torch.Tensor.amax. Data and weights from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <mean IoU>."""

import itertools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(60)
N, S, K = 64, 8, 3  # scenes, image size, slots (background + 2 objects)
imgs = np.zeros((N, 3, S, S), np.float32)
masks = np.zeros((N, K, S, S), np.float32)
masks[:, 0] = 1
colors = np.array([[0.9, 0.1, 0.1], [0.1, 0.8, 0.2], [0.2, 0.3, 0.9]], np.float32)
for n in range(N):
    for o, c in enumerate(rng.choice(3, 2, replace=False)):
        r, col = rng.integers(0, S - 3, 2)
        masks[n, :, r:r + 3, col:col + 3] = 0
        masks[n, o + 1, r:r + 3, col:col + 3] = 1
    imgs[n] = (masks[n, 1:, None] * colors[rng.choice(3, 2, replace=False), :, None, None]).sum(0) + 0.1 * masks[n, 0]
X, M = torch.from_numpy(imgs), torch.from_numpy(masks)
print(f"scenes {tuple(X.shape)} object pixels per scene {M[:, 1:].sum((1, 2, 3)).mean().item():.2f}")


def grid(size):
    ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    g = torch.stack([ys, xs], -1)
    return torch.cat([g, 1 - g], -1)  # (S, S, 4)


class SlotAttention(nn.Module):
    def __init__(self, dim, iters=3, eps=1e-8):
        super().__init__()
        self.iters, self.eps, self.scale = iters, eps, dim ** -0.5
        self.mu = nn.Parameter(torch.zeros(1, 1, dim))
        self.log_sigma = nn.Parameter(torch.zeros(1, 1, dim))
        self.q, self.k, self.v = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gru = nn.GRUCell(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.n_in, self.n_slots, self.n_mlp = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, x, noise):
        b, n, d = x.shape
        slots = self.mu + self.log_sigma.exp() * noise
        x = self.n_in(x)
        k, v = self.k(x), self.v(x)
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.n_slots(slots))
            attn = torch.softmax(torch.einsum("bkd,bnd->bkn", q, k) * self.scale, dim=1) + self.eps
            updates = torch.einsum("bkn,bnd->bkd", attn / attn.sum(-1, keepdim=True), v)
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).reshape(b, -1, d)
            slots = slots + self.mlp(self.n_mlp(slots))
        return slots, attn


class Model(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, d, 3, padding=1), nn.ReLU(), nn.Conv2d(d, d, 3, padding=1), nn.ReLU())
        self.pos_enc, self.pos_dec = nn.Linear(4, d), nn.Linear(4, d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.sa = SlotAttention(d)
        self.dec = nn.Sequential(nn.Conv2d(d, d, 3, padding=1), nn.ReLU(), nn.Conv2d(d, 4, 3, padding=1))
        self.register_buffer("grid", grid(S))

    def forward(self, x, noise):
        h = self.enc(x).permute(0, 2, 3, 1) + self.pos_enc(self.grid)
        h = self.mlp(h.flatten(1, 2))
        slots, attn = self.sa(h, noise)
        b, k, d = slots.shape
        z = slots.reshape(b * k, d, 1, 1).expand(-1, -1, S, S) + self.pos_dec(self.grid).permute(2, 0, 1)
        out = self.dec(z).unflatten(0, (b, k))  # (B, K, 4, S, S)
        rgb, alpha = out[:, :, :3], torch.softmax(out[:, :, 3:], dim=1)
        return (rgb * alpha).sum(1), alpha.squeeze(2), attn.unflatten(-1, (S, S))


model = Model()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1 and "log_sigma" not in name:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        elif "bias" in name:
            p.zero_()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
losses = []
for step in range(80):
    idx = torch.from_numpy(rng.choice(N, 16, replace=False))
    noise = torch.from_numpy(rng.normal(size=(16, K, 32)).astype(np.float32))
    recon, alpha, attn = model(X[idx], noise)
    loss = F.mse_loss(recon, X[idx])
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.6f} lr {sched.get_last_lr()[0]:.5f} attn max {attn.amax().item():.4f}")


def best_iou(pred, true):
    best = 0.0  # soft IoU: argmax of near-uniform masks would flip on rounding
    for perm in itertools.permutations(range(K)):
        p = pred[list(perm)]
        inter = (p * true).sum((1, 2))
        union = (p + true - p * true).sum((1, 2))
        best = max(best, (inter / union.clamp_min(1)).mean().item())
    return best


with torch.no_grad():
    noise = torch.from_numpy(rng.normal(size=(N, K, 32)).astype(np.float32))
    recon, alpha, attn = model(X, noise)
    ious = [best_iou(alpha[n], M[n]) for n in range(8)]
    print(f"alpha sums to one: {torch.allclose(alpha.sum(1), torch.ones(N, S, S), atol=1e-5)} attention {tuple(attn.shape)} "
          f"mean IoU {np.mean(ious):.4f} recon mse {F.mse_loss(recon, X).item():.6f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {np.mean(ious):.4f}")
