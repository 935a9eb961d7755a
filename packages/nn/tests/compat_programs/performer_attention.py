"""Linear-complexity attention, in the style of the public Performer (FAVOR+) and "linear
transformer" re-implementations: positive orthogonal random features (Gaussian blocks made
orthogonal by torch.linalg.qr, rows rescaled by chi-distributed norms from NumPy), the
softmax-kernel feature map exp(w.x - |x|^2 / 2) stabilized by subtracting amax, bidirectional
attention as phi(Q) (phi(K)^T V) with the normalizer phi(Q) (phi(K)^T 1), causal attention by
torch.cumsum of the outer products (einsum over a (B, H, L, m, d) prefix) checked against a
step-by-step recurrent state, the elu(x) + 1 feature map, approximation error against
F.scaled_dot_product_attention (is_causal too) as the number of features grows, feature
redrawing between steps, and a small causal language model trained with each attention on a
copy task. Data and weights from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <rel error at 256 features>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(50)


def orthogonal_features(m, d):
    blocks = []
    for _ in range(math.ceil(m / d)):
        q, _ = torch.linalg.qr(torch.from_numpy(rng.normal(size=(d, d)).astype(np.float32)))
        blocks.append(q.T)
    W = torch.cat(blocks)[:m]
    norms = torch.from_numpy(np.sqrt(rng.chisquare(d, m)).astype(np.float32))
    return W * norms[:, None]


def softmax_kernel(x, W, is_query):
    x = x * x.shape[-1] ** -0.25
    proj = x @ W.T
    sq = (x ** 2).sum(-1, keepdim=True) / 2
    stab = proj.amax(-1, keepdim=True) if is_query else proj.amax((-1, -2), keepdim=True)
    return torch.exp(proj - sq - stab.detach()) / math.sqrt(W.shape[0]) + 1e-6


def linear_attention(q, k, v, causal=False):
    if causal:
        kv = torch.einsum("bhlm,bhld->bhlmd", k, v).cumsum(2)
        num = torch.einsum("bhlm,bhlmd->bhld", q, kv)
        den = torch.einsum("bhlm,bhlm->bhl", q, k.cumsum(2))
    else:
        num = q @ (k.transpose(-1, -2) @ v)
        den = q @ k.sum(2)[..., None]
        den = den.squeeze(-1)
    return num / den[..., None]


def recurrent(q, k, v):
    S = torch.zeros(q.shape[0], q.shape[1], q.shape[-1], v.shape[-1])
    z = torch.zeros(q.shape[0], q.shape[1], q.shape[-1])
    outs = []
    for t in range(q.shape[2]):
        S = S + k[:, :, t, :, None] * v[:, :, t, None, :]
        z = z + k[:, :, t]
        outs.append((q[:, :, t, None, :] @ S).squeeze(-2) / (q[:, :, t] * z).sum(-1, keepdim=True))
    return torch.stack(outs, 2)


B, H, L, d = 2, 2, 16, 8
q, k, v = (0.5 * torch.from_numpy(rng.normal(size=(B, H, L, d)).astype(np.float32)) for _ in range(3))
for causal in (False, True):
    exact = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    errs = []
    for m in (16, 64, 256):
        W = orthogonal_features(m, d)
        approx = linear_attention(softmax_kernel(q, W, True), softmax_kernel(k, W, False), v, causal)
        errs.append(((approx - exact).norm() / exact.norm()).item())
    print(f"{'causal' if causal else 'bidirectional'} favor+ rel error by features {[round(e, 4) for e in errs]}")
rel256 = errs[-1]
W = orthogonal_features(32, d)
fq, fk = softmax_kernel(q, W, True), softmax_kernel(k, W, False)
print(f"cumsum == recurrent: {torch.allclose(linear_attention(fq, fk, v, True), recurrent(fq, fk, v), rtol=1e-4, atol=1e-5)} "
      f"orthogonal block: {torch.allclose(W[:8] @ W[:8].T / (W[:8].norm(dim=1)[:, None] * W[:8].norm(dim=1)[None]), torch.eye(8), atol=1e-5)}")


class Block(nn.Module):
    def __init__(self, dim, heads, kind):
        super().__init__()
        self.h, self.kind = heads, kind
        self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.W = orthogonal_features(32, dim // heads)

    def forward(self, x):
        Bn, Ln, Dn = x.shape
        q, k, v = self.qkv(self.n1(x)).view(Bn, Ln, 3, self.h, Dn // self.h).permute(2, 0, 3, 1, 4)
        if self.kind == "elu":
            a = linear_attention(F.elu(q) + 1, F.elu(k) + 1, v, causal=True)
        elif self.kind == "favor":
            a = linear_attention(softmax_kernel(q, self.W, True), softmax_kernel(k, self.W, False), v, causal=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(Bn, Ln, Dn))
        return x + self.ff(self.n2(x))


seqs = rng.integers(1, 8, (64, 6))
data = torch.from_numpy(np.concatenate([seqs, np.zeros((64, 1), np.int64), seqs], 1))
results = {}
for kind in ("softmax", "elu", "favor"):
    emb, pos = nn.Embedding(8, 32), nn.Parameter(torch.zeros(13, 32))
    blocks, head = nn.Sequential(Block(32, 4, kind), Block(32, 4, kind)), nn.Linear(32, 8)
    params = list(emb.parameters()) + [pos] + list(blocks.parameters()) + list(head.parameters())
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 / math.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
    opt = torch.optim.Adam(params, lr=3e-3)
    losses = []
    for step in range(60):
        if kind == "favor" and step % 20 == 0:
            for blk in blocks:
                blk.W = orthogonal_features(32, 8)  # redraw
        logits = head(blocks(emb(data[:, :-1]) + pos[:12]))
        loss = F.cross_entropy(logits[:, 6:].reshape(-1, 8), data[:, 7:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    results[kind] = losses
    print(f"{kind:7s} copy loss {losses[0]:.4f} -> {losses[-1]:.4f}")
print(f"RESULT {results['favor'][0]:.4f} {results['favor'][-1]:.4f} {rel256:.4f}")
