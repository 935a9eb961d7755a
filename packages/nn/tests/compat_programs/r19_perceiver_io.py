"""Perceiver IO in the style of the public minimal PyTorch ports: a learned latent array that
cross-attends to a long input (nn.MultiheadAttention with kdim / vdim different from embed_dim
and a key_padding_mask), Fourier position features built with torch.linspace / meshgrid /
torch.cat of sin and cos, a latent self-attention stack (nn.TransformerEncoder with norm_first,
activation="gelu", enable_nested_tensor=False), an output decoder whose queries cross-attend
to the latents through F.scaled_dot_product_attention with a boolean mask, weight sharing of
the latent block across iterations, parameter counting, and a per-point regression (each
output point predicts a weighted sum of its input neighbourhood). Weights and data from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first loss> <last loss> <r2 on held-out>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
# float64 (the default dtype for this run): the two libraries' runs then stay together
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(19)
N_IN, D_IN, D_LAT, N_LAT, N_BANDS = 48, 3, 32, 8, 4


def fourier_features(n, bands):
    pos = torch.linspace(-1.0, 1.0, n)
    freqs = torch.linspace(1.0, n / 2, bands)
    ang = pos[:, None] * freqs[None, :] * math.pi
    return torch.cat([pos[:, None], torch.sin(ang), torch.cos(ang)], dim=-1)  # (n, 1 + 2*bands)


class Perceiver(nn.Module):
    def __init__(self):
        super().__init__()
        d_kv = D_IN + 1 + 2 * N_BANDS
        self.latents = nn.Parameter(torch.randn(N_LAT, D_LAT) * 0.2)
        self.cross = nn.MultiheadAttention(D_LAT, 4, kdim=d_kv, vdim=d_kv, batch_first=True)
        self.cross_norm = nn.LayerNorm(D_LAT)
        layer = nn.TransformerEncoderLayer(D_LAT, 4, 64, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.latent_block = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.q_proj = nn.Linear(1 + 2 * N_BANDS, D_LAT)
        self.k_proj = nn.Linear(D_LAT, D_LAT)
        self.v_proj = nn.Linear(D_LAT, D_LAT)
        self.head = nn.Sequential(nn.LayerNorm(D_LAT), nn.Linear(D_LAT, 1))
        self.register_buffer("pos", fourier_features(N_IN, N_BANDS), persistent=False)

    def forward(self, x, pad_mask=None, iters=2):
        b = x.shape[0]
        kv = torch.cat([x, self.pos.expand(b, -1, -1)], dim=-1)
        lat = self.latents.unsqueeze(0).expand(b, -1, -1)
        for _ in range(iters):  # the same weights each iteration
            att, w = self.cross(self.cross_norm(lat), kv, kv, key_padding_mask=pad_mask)
            lat = lat + att
            lat = self.latent_block(lat)
        q = self.q_proj(self.pos).expand(b, -1, -1).unsqueeze(1)  # (b, 1, n, d)
        k = self.k_proj(lat).unsqueeze(1)
        v = self.v_proj(lat).unsqueeze(1)
        mask = torch.ones(N_IN, N_LAT, dtype=torch.bool)
        mask[:, -1] = False  # the last latent is never read by the decoder
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).squeeze(1)
        return self.head(out).squeeze(-1), w


def make(n):
    x = rng.normal(size=(n, N_IN, D_IN)).astype(np.float32)
    pos = np.linspace(-1.0, 1.0, N_IN)
    m = x.mean(axis=1) * np.sqrt(N_IN)  # per-sample summaries of the whole input, unit scale
    y = m[:, :1] * pos[None, :] + m[:, 1:2] + 0.5 * np.abs(m[:, 2:3]) * np.cos(np.pi * pos)[None, :]
    return torch.from_numpy(x).double(), torch.from_numpy(y)


model = Perceiver()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norm" in name:
            continue  # LayerNorm keeps its ones / zeros
        if p.dim() >= 2:
            p.copy_(torch.from_numpy(rng.normal(0, p.shape[-1] ** -0.5, size=tuple(p.shape))))
        else:
            p.zero_()
n_params = sum(p.numel() for p in model.parameters())
n_train = sum(p.numel() for n, p in model.named_parameters() if "latent_block" in n)
print("params", n_params, "latent block", n_train, "buffers", [n for n, _ in model.named_buffers()])
print("state_dict has pos", "pos" in model.state_dict())
xtr, ytr = make(96)
xte, yte = make(32)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
losses = []
for step in range(80):
    idx = torch.arange(step * 16, step * 16 + 16) % 96
    pred, _ = model(xtr[idx])
    loss = F.mse_loss(pred, ytr[idx])
    opt.zero_grad()
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} grad norm {gn.item():.4f}")
model.eval()
with torch.no_grad():
    pred, w = model(xte)
    r2 = 1 - ((pred - yte) ** 2).sum() / ((yte - yte.mean()) ** 2).sum()
    print("attn weights", tuple(w.shape), "rows sum to 1", torch.allclose(w.sum(-1), torch.ones(())))
    pad = torch.zeros(2, N_IN, dtype=torch.bool)
    pad[:, 40:] = True
    p1, w1 = model(xte[:2], pad)
    x2 = xte[:2].clone()
    x2[:, 40:] = 100.0  # padded inputs must not matter
    p2, _ = model(x2, pad)
    print("padded keys get zero weight", bool((w1[..., 40:] == 0).all()), "pad invariant", torch.allclose(p1, p2, atol=1e-5))
torch.set_default_dtype(torch.float32)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {r2.item():.6f}")
