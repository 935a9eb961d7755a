"""Tabular deep learning as the public rtdl / FT-Transformer / TabTransformer code writes it: a
feature tokenizer (per-feature weight and bias for numerical columns applied by broadcasting,
categorical columns through one nn.Embedding with per-column offsets from torch.cumsum of
cardinalities), periodic numerical embeddings (PLR: sin/cos of learned frequencies then a linear
layer and ReLU) built with einsum, a learned [CLS] token appended by torch.cat(expand), a
pre-norm Transformer block with ReGLU feed-forward (chunk(2, -1)) and attention from
nn.MultiheadAttention(batch_first=True), attention-map feature importance averaged over
heads (need_weights, average_attn_weights), quantile transformation of skewed features with
torch.quantile + torch.bucketize, piecewise-linear encoding of numerical features from bin
edges, and a TabTransformer variant (contextual embeddings only for categoricals). Trained with
AdamW, parameters without weight decay for norms/biases/embeddings, on a synthetic regression
task with feature interactions. Data from NumPy. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <test r2>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1615)
N_NUM, CARDS, D = 4, [3, 5, 4], 16


def make(n):
    num = rng.normal(size=(n, N_NUM))
    num[:, 3] = rng.lognormal(0, 1, n)  # a skewed column
    cat = np.stack([rng.integers(0, c, n) for c in CARDS], 1)
    y = (np.sin(2 * num[:, 0]) + num[:, 1] * num[:, 2] + 0.5 * np.log(num[:, 3]) +
         np.array([0.0, 1.0, -1.0])[cat[:, 0]] * num[:, 1] + 0.3 * cat[:, 1] + 0.1 * rng.normal(size=n))
    return (torch.from_numpy(num.astype(np.float32)), torch.from_numpy(cat),
            torch.from_numpy(y.astype(np.float32)))


def quantile_transform(col, ref, n_q=50):
    qs = torch.quantile(ref, torch.linspace(0, 1, n_q))
    idx = torch.bucketize(col, qs).clamp(1, n_q - 1)
    lo, hi = qs[idx - 1], qs[idx]
    frac = ((col - lo) / (hi - lo).clamp(min=1e-9)).clamp(0, 1)
    u = ((idx - 1).float() + frac) / (n_q - 1)
    return math.sqrt(2) * torch.erfinv(2 * u.clamp(1e-3, 1 - 1e-3) - 1)


def piecewise_linear(col, edges):
    """PLE: for bins [e_t, e_{t+1}), 1 before the bin, the fraction inside it, 0 after."""
    lo, hi = edges[:-1], edges[1:]
    return ((col[:, None] - lo) / (hi - lo)).clamp(0, 1)


class Tokenizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(N_NUM, D))
        self.b = nn.Parameter(torch.empty(N_NUM, D))
        self.register_buffer("offsets", torch.cumsum(torch.tensor([0] + CARDS[:-1]), 0))
        self.cat = nn.Embedding(sum(CARDS), D)
        self.freq = nn.Parameter(torch.empty(N_NUM, 8))
        self.plr = nn.Linear(16, D)

    def forward(self, num, cat):
        lin = num[..., None] * self.w + self.b  # (B, N_NUM, D)
        v = 2 * math.pi * torch.einsum("bf,fk->bfk", num, self.freq)
        per = F.relu(self.plr(torch.cat([torch.sin(v), torch.cos(v)], -1)))
        return torch.cat([lin + per, self.cat(cat + self.offsets)], 1)


class Block(nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, heads, batch_first=True)
        self.ff1, self.ff2 = nn.Linear(D, 4 * D), nn.Linear(2 * D, D)

    def forward(self, x):
        h = self.n1(x)
        a, w = self.attn(h, h, h, need_weights=True, average_attn_weights=True)
        x = x + a
        g, val = self.ff1(self.n2(x)).chunk(2, dim=-1)
        return x + self.ff2(F.relu(g) * val), w


class FTTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = Tokenizer()
        self.cls = nn.Parameter(torch.empty(1, 1, D))
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Sequential(nn.LayerNorm(D), nn.ReLU(), nn.Linear(D, 1))

    def forward(self, num, cat):
        x = self.tok(num, cat)
        x = torch.cat([x, self.cls.expand(x.shape[0], -1, -1)], 1)
        maps = []
        for blk in self.blocks:
            x, w = blk(x)
            maps.append(w)
        return self.head(x[:, -1]).squeeze(-1), torch.stack(maps)


def init(m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name or name.endswith((".n1.weight", ".n2.weight", "head.0.weight")):
                continue
            if name.endswith("bias") or name.endswith(("n1.bias", "n2.bias")):
                p.zero_()
            elif name == "tok.freq":
                p.copy_(torch.from_numpy(rng.normal(0, 0.5, p.shape).astype(np.float32)))
            else:
                fan = p.shape[-1] if p.dim() > 1 else D
                p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(fan), p.shape).astype(np.float32)))


num, cat, y = make(600)
ref = num[:400, 3].clone()
qt = quantile_transform(num[:, 3], ref)
print(f"quantile transform: skew before {((ref - ref.mean()) ** 3).mean().item() / ref.std().item() ** 3:.3f} after {((qt - qt.mean()) ** 3).mean().item() / qt.std().item() ** 3:.3f} monotone {bool((qt[torch.argsort(num[:, 3])].diff() >= -1e-6).all())}")
num = torch.cat([num[:, :3], qt[:, None]], 1)
edges = torch.quantile(num[:400, 0], torch.linspace(0, 1, 6))
ple = piecewise_linear(num[:5, 0], edges)
print(f"piecewise-linear encoding {tuple(ple.shape)} rows {[[round(v, 3) for v in r] for r in ple[:2].tolist()]}")
print(f"category offsets {torch.cumsum(torch.tensor([0] + CARDS[:-1]), 0).tolist()}")

model = FTTransformer()
init(model)
decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.dim() < 2 or "cat" in name or "cls" in name or name.startswith("tok.") else decay).append(p)
print(f"parameter groups: decay {len(decay)} no decay {len(no_decay)} total {sum(p.numel() for p in model.parameters())}")
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-3)
ymu, ysd = y[:400].mean(), y[:400].std()
losses = []
for epoch in range(12):
    for bidx in range(0, 400, 50):
        sl = slice(bidx, bidx + 50)
        pred, _ = model(num[sl], cat[sl])
        loss = F.mse_loss(pred, (y[sl] - ymu) / ysd)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if epoch % 4 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.4f}")
model.eval()
with torch.no_grad():
    pred, maps = model(num[400:], cat[400:])
pred = pred * ysd + ymu
r2 = 1 - ((pred - y[400:]) ** 2).sum().item() / ((y[400:] - y[400:].mean()) ** 2).sum().item()
importance = maps[:, :, -1, :-1].mean((0, 1))
print(f"attention maps {tuple(maps.shape)} rows sum to one {torch.allclose(maps.sum(-1), torch.ones(2, 200, 8), atol=1e-5)}")
print(f"cls attention feature importance {[round(v, 4) for v in importance.tolist()]} sums {importance.sum().item():.4f}")
print(f"test r2 {r2:.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {r2:.4f}")
