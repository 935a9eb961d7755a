"""T5-style relative position biases and ALiBi in the style of the public HF T5 / BLOOM code:
the bucketing of relative positions (exact buckets for small distances, log-spaced beyond,
bidirectional halves, torch.where / torch.min / full_like / log with an eps) into a shared
nn.Embedding(num_buckets, heads) computed once in the first layer and passed down, ALiBi slopes
for power-of-two and other head counts (with the interleaved extra slopes), additive float
masks combined with boolean padding masks and passed to F.scaled_dot_product_attention
(attn_mask float and bool, is_causal, scale=), T5's unscaled attention (scale=1.0) and RMS
LayerNorm without mean subtraction, and a small encoder trained on a "copy the token k places
back" task at length 16 and evaluated at length 32 to compare extrapolation. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <accuracy at length 32 with T5 buckets>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1517)


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    rel_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    rel_if_large = torch.min(rel_if_large, torch.full_like(rel_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, rel_if_large)
    return relative_buckets


def alibi_slopes(n):
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]

    if math.log2(n).is_integer():
        return torch.tensor(pow2(n))
    closest = 2 ** math.floor(math.log2(n))
    return torch.tensor(pow2(closest) + pow2(2 * closest)[0::2][: n - closest])


rel = torch.arange(-10, 11)
print(f"bidirectional buckets {relative_position_bucket(rel, num_buckets=16, max_distance=20).tolist()}")
print(f"causal buckets {relative_position_bucket(rel, bidirectional=False, num_buckets=8, max_distance=16).tolist()}")
print(f"alibi slopes 8 {[round(s, 6) for s in alibi_slopes(8).tolist()]}")
print(f"alibi slopes 6 {[round(s, 6) for s in alibi_slopes(6).tolist()]}")


class T5RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class Attention(nn.Module):
    def __init__(self, d, heads, kind, has_bias=False, num_buckets=16, max_distance=32):
        super().__init__()
        self.h, self.dk, self.kind = heads, d // heads, kind
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        if has_bias:
            self.rel_bias = nn.Embedding(num_buckets, heads)
        if kind == "alibi":
            self.register_buffer("slopes", alibi_slopes(heads), persistent=False)

    def compute_bias(self, L):
        ctx = torch.arange(L)[:, None]
        mem = torch.arange(L)[None, :]
        buckets = relative_position_bucket(mem - ctx, num_buckets=self.num_buckets, max_distance=self.max_distance)
        return self.rel_bias(buckets).permute(2, 0, 1).unsqueeze(0)  # (1, h, L, L)

    def forward(self, x, pad, bias=None):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        if self.kind == "t5":
            if bias is None:
                bias = self.compute_bias(L)
            mask = bias.masked_fill(pad[:, None, None, :], torch.finfo(x.dtype).min)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
        elif self.kind == "alibi":
            dist = (torch.arange(L)[None, :] - torch.arange(L)[:, None]).abs().float()
            bias = -self.slopes.view(1, -1, 1, 1) * dist
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias + torch.where(pad[:, None, None, :], float("-inf"), 0.0))
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
        return self.o(out.transpose(1, 2).reshape(B, L, -1)), bias


class Encoder(nn.Module):
    def __init__(self, kind, vocab=12, d=32, heads=4, layers=2):
        super().__init__()
        self.kind = kind
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(64, d) if kind == "absolute" else None
        self.attn = nn.ModuleList([Attention(d, heads, kind, has_bias=(i == 0)) for i in range(layers)])
        self.norms = nn.ModuleList([T5RMSNorm(d) for _ in range(2 * layers)])
        self.ffn = nn.ModuleList([nn.Sequential(nn.Linear(d, 2 * d, bias=False), nn.ReLU(), nn.Linear(2 * d, d, bias=False)) for _ in range(layers)])
        self.out = nn.Linear(d, vocab)

    def forward(self, tok, pad):
        x = self.emb(tok)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tok.shape[1]))
        bias = None
        for i, (attn, ffn) in enumerate(zip(self.attn, self.ffn)):
            h, b = attn(self.norms[2 * i](x), pad, bias)
            if self.kind == "t5":
                bias = b  # the first layer's bias is shared by the others
            x = x + h
            x = x + ffn(self.norms[2 * i + 1](x))
        return self.out(x)


K = 3


def task(b, L):
    tok = torch.from_numpy(rng.integers(2, 12, (b, L)))
    lens = torch.from_numpy(rng.integers(L // 2, L + 1, b))
    pad = torch.arange(L)[None] >= lens[:, None]
    tok = tok.masked_fill(pad, 0)
    target = torch.full_like(tok, -100)
    target[:, K:] = tok[:, :-K]
    target = target.masked_fill(pad, -100)
    return tok, pad, target


results = {}
for kind in ("t5", "alibi", "absolute"):
    model = Encoder(kind)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norms" in name:
                continue
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 if "emb" in name or "rel_bias" in name or "pos" in name else 1 / math.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    losses = []
    for step in range(40):
        tok, pad, target = task(32, 16)
        loss = F.cross_entropy(model(tok, pad).reshape(-1, 12), target.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    accs = []
    for L in (16, 32):
        tok, pad, target = task(48, L)
        with torch.no_grad():
            pred = model(tok, pad).argmax(-1)
        keep = target != -100
        accs.append((pred[keep] == target[keep]).float().mean().item())
    results[kind] = (losses, accs)
    print(f"{kind:8s} loss {np.mean(losses[:3]):.4f} -> {np.mean(losses[-3:]):.4f} accuracy at 16 {accs[0]:.4f} at 32 {accs[1]:.4f}")
t5 = results["t5"]
print(f"RESULT {np.mean(t5[0][:3]):.4f} {np.mean(t5[0][-3:]):.4f} {t5[1][1]:.4f}")
