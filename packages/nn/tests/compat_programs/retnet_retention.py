"""Retentive networks (RetNet, Sun et al.) in the style of the public reference code: multi-scale
retention with per-head decays gamma = 1 - 2^(-5 - arange(h)), an xPos-like rotation of queries
and keys (complex multiplication through torch.view_as_complex / torch.polar / view_as_real),
the parallel form (Q K^T masked by the decay matrix D built from tril + masked_fill and row
normalized), the recurrent form (S = gamma S + k^T v, one token at a time) and the chunkwise form
(inner-chunk parallel + cross-chunk state), all checked equal; a head-wise GroupNorm and a swish
gate. A small retention LM is trained on a periodic token stream, then generates greedily with
the O(1)-per-token recurrent state, which must agree with re-running the parallel form. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <generation accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(146)
torch.set_default_dtype(torch.float64)
V, D, H = 12, 32, 4
HD = D // H


def rotate(x, offset=0):
    """Rotates (b, h, n, hd) by position through complex multiplication."""
    n, hd = x.shape[-2], x.shape[-1]
    theta = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    pos = torch.arange(offset, offset + n, dtype=torch.float64)
    rot = torch.polar(torch.ones(n, hd // 2, dtype=torch.float64), torch.outer(pos, theta))
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], hd // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).flatten(-2)


class MultiScaleRetention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.g = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.out = nn.Linear(D, D, bias=False)
        self.group_norm = nn.GroupNorm(H, D, affine=False)
        self.register_buffer("gamma", 1 - torch.exp2(-5.0 - torch.arange(H, dtype=torch.float64)))

    def decay_mask(self, n):
        idx = torch.arange(n, dtype=torch.float64)
        diff = idx[:, None] - idx[None, :]
        dmat = torch.log(self.gamma)[:, None, None] * diff
        dmat = torch.exp(dmat.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf")))
        return dmat

    def qkv(self, x, offset=0):
        b, n, _ = x.shape
        split = lambda t: t.view(b, n, H, HD).transpose(1, 2)  # noqa: E731
        q = rotate(split(self.q(x)), offset)
        k = rotate(split(self.k(x)), offset) * HD ** -0.5
        return q, k, split(self.v(x))

    def finish(self, o, x):
        b, n = x.shape[:2]
        o = o.transpose(1, 2).reshape(b * n, D)
        o = self.group_norm(o).view(b, n, D)
        return self.out(F.silu(self.g(x)) * o)

    def parallel(self, x):
        q, k, v = self.qkv(x)
        return self.finish((q @ k.transpose(-1, -2) * self.decay_mask(x.shape[1])) @ v, x)

    def recurrent(self, x, state=None, offset=0):
        outs = []
        for t in range(x.shape[1]):
            q, k, v = self.qkv(x[:, t:t + 1], offset + t)
            kv = k.transpose(-1, -2) @ v
            state = kv if state is None else self.gamma.view(1, H, 1, 1) * state + kv
            outs.append(q @ state)
        return self.finish(torch.cat(outs, 2), x), state

    def chunkwise(self, x, chunk=4):
        b, n, _ = x.shape
        q, k, v = self.qkv(x)
        dm = self.decay_mask(chunk)
        g = self.gamma.view(1, H, 1, 1)
        pos = torch.arange(chunk, dtype=torch.float64)
        inner_decay = self.gamma.view(H, 1, 1) ** (pos + 1).view(1, chunk, 1)
        kdecay = self.gamma.view(H, 1, 1) ** (chunk - 1 - pos).view(1, chunk, 1)
        state = torch.zeros(b, H, HD, HD)
        outs = []
        for s in range(0, n, chunk):
            qc, kc, vc = q[:, :, s:s + chunk], k[:, :, s:s + chunk], v[:, :, s:s + chunk]
            inner = (qc @ kc.transpose(-1, -2) * dm) @ vc
            cross = (qc @ state) * inner_decay
            outs.append(inner + cross)
            state = g ** chunk * state + (kc * kdecay).transpose(-1, -2) @ vc
        return self.finish(torch.cat(outs, 2), x)


class RetNetLM(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.ret = nn.ModuleList([MultiScaleRetention() for _ in range(layers)])
        self.ffn = nn.ModuleList([nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D)) for _ in range(layers)])
        self.ln1 = nn.ModuleList([nn.LayerNorm(D) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(D) for _ in range(layers)])
        self.head = nn.Linear(D, V)

    def forward(self, tokens):
        x = self.emb(tokens)
        for ret, ffn, l1, l2 in zip(self.ret, self.ffn, self.ln1, self.ln2):
            x = x + ret.parallel(l1(x))
            x = x + ffn(l2(x))
        return self.head(x)

    def step(self, token, states, offset):
        x = self.emb(token)
        new = []
        for ret, ffn, l1, l2, s in zip(self.ret, self.ffn, self.ln1, self.ln2, states):
            y, s = ret.recurrent(l1(x), s, offset)
            x = x + y
            x = x + ffn(l2(x))
            new.append(s)
        return self.head(x), new


model = RetNetLM()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[-1]), p.shape)))
        elif "ln" not in name:
            p.zero_()

msr = model.ret[0]
x = torch.from_numpy(rng.normal(size=(2, 12, D)))
par = msr.parallel(x)
rec, _ = msr.recurrent(x)
chk = msr.chunkwise(x, chunk=4)
print(f"gamma {[round(g, 6) for g in msr.gamma.tolist()]}")
print(f"parallel == recurrent: {torch.allclose(par, rec, atol=1e-10)} parallel == chunkwise: "
      f"{torch.allclose(par, chk, atol=1e-10)} max diff {max((par - rec).abs().max().item(), (par - chk).abs().max().item()) < 1e-10}")

period = [3, 1, 4, 1, 5, 9, 2, 6]


def batch(n, length=24):
    starts = rng.integers(0, len(period), n)
    seq = np.array([[period[(s + i) % len(period)] for i in range(length + 1)] for s in starts])
    noise = rng.random(seq.shape) < 0.05
    seq = np.where(noise, rng.integers(0, V, seq.shape), seq)
    t = torch.from_numpy(seq)
    return t[:, :-1], t[:, 1:]


opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(60):
    inp, tgt = batch(16)
    loss = F.cross_entropy(model(inp).reshape(-1, V), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")

with torch.no_grad():
    prompt = torch.tensor([[4, 1, 5]])
    states = [None, None]
    for t in range(prompt.shape[1]):
        logits, states = model.step(prompt[:, t:t + 1], states, t)
    out = prompt
    for t in range(prompt.shape[1], prompt.shape[1] + 10):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        out = torch.cat([out, nxt], 1)
        logits, states = model.step(nxt, states, t)
    full = model(out[:, :-1]).argmax(-1)
print(f"generated {out[0].tolist()}")
print(f"recurrent generation == parallel argmax: {torch.equal(full[0, 2:], out[0, 3:])}")
want = [period[(2 + i) % len(period)] for i in range(13)]
gen_acc = float(np.mean([a == b for a, b in zip(out[0].tolist()[3:], want[3:])]))
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {gen_acc:.4f}")
