"""An RWKV-4 language model in the style of the public BlinkDL/RWKV-LM "GPT mode / RNN mode"
code: token shift by nn.ZeroPad2d((0, 0, 1, -1)), learned time-mix interpolations, the WKV
operator with per-channel decay w = -exp(time_decay) and bonus time_first computed three ways
(the numerically stable recurrence that carries (aa, bb, pp) with torch.maximum, a naive
parallel formula with an exp-decay matrix, and the RNN-mode state update used for generation),
channel mixing with squared ReLU and a receptance sigmoid gate, the "ln0" pre-norm, and the
head-init of the reference implementation (zeros for output projections). Trained on a
deterministic pattern language; RNN-mode inference must give the same logits as GPT mode.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <generation accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(147)
V, D, L = 10, 32, 2


def wkv_stable(w, u, k, v):
    """(B, T, C) keys / values; w < 0 the per-channel log decay, u the bonus for the current token."""
    b, t, c = k.shape
    aa = torch.zeros(b, c)
    bb = torch.zeros(b, c)
    pp = torch.full((b, c), -1e38)
    out = []
    for i in range(t):
        kk, vv = k[:, i], v[:, i]
        ww = u + kk
        p = torch.maximum(pp, ww)
        e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
        out.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
        ww = w + pp
        p = torch.maximum(ww, kk)
        e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
        aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
    return torch.stack(out, 1)


def wkv_naive(w, u, k, v):
    t = k.shape[1]
    idx = torch.arange(t)
    dist = (idx[:, None] - idx[None, :] - 1).clamp(min=0).float()  # (T, T)
    logits = w[None, None, :] * dist[..., None] + k[:, None, :, :]  # (B, T, T, C)
    strict = (idx[None, :] < idx[:, None])[None, :, :, None]
    diag = (idx[None, :] == idx[:, None])[None, :, :, None]
    logits = torch.where(diag, u + k[:, None, :, :], logits).masked_fill(~(strict | diag), float("-inf"))
    weights = torch.softmax(logits, dim=2)
    return (weights * v[:, None]).sum(2)


class Block(nn.Module):
    def __init__(self, layer_id):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
        ratio = 1 - layer_id / L
        x = torch.arange(D, dtype=torch.float32) / D
        self.time_decay = nn.Parameter(-5 + 8 * (torch.arange(D) / (D - 1)) ** (0.7 + 1.3 * layer_id / L))
        self.time_first = nn.Parameter(torch.ones(D) * 0.5)
        self.time_mix_k = nn.Parameter(x ** ratio)
        self.time_mix_v = nn.Parameter(x ** ratio + 0.3 * layer_id / L)
        self.time_mix_r = nn.Parameter(x ** (0.5 * ratio))
        self.key, self.value, self.receptance = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.output = nn.Linear(D, D, bias=False)
        self.ffn_mix_k = nn.Parameter(x ** ratio)
        self.ffn_mix_r = nn.Parameter(x ** ratio)
        self.ffn_key = nn.Linear(D, 2 * D, bias=False)
        self.ffn_receptance = nn.Linear(D, D, bias=False)
        self.ffn_value = nn.Linear(2 * D, D, bias=False)

    def mix(self, x, xx, m):
        return x * m + xx * (1 - m)

    def time_mixing(self, x, wkv=wkv_stable):
        xx = self.time_shift(x)
        k = self.key(self.mix(x, xx, self.time_mix_k))
        v = self.value(self.mix(x, xx, self.time_mix_v))
        r = torch.sigmoid(self.receptance(self.mix(x, xx, self.time_mix_r)))
        return self.output(r * wkv(-torch.exp(self.time_decay), self.time_first, k, v))

    def channel_mixing(self, x, xx=None):
        xx = self.time_shift(x) if xx is None else xx
        k = torch.square(torch.relu(self.ffn_key(self.mix(x, xx, self.ffn_mix_k))))
        return torch.sigmoid(self.ffn_receptance(self.mix(x, xx, self.ffn_mix_r))) * self.ffn_value(k)

    def forward(self, x, wkv=wkv_stable):
        x = x + self.time_mixing(self.ln1(x), wkv)
        return x + self.channel_mixing(self.ln2(x))

    def rnn_step(self, x, state):
        """x (B, C); state = (last x for time mix, aa, bb, pp, last x for channel mix)."""
        sx, aa, bb, pp, sf = state
        xt = self.ln1(x)
        k = self.key(self.mix(xt, sx, self.time_mix_k))
        v = self.value(self.mix(xt, sx, self.time_mix_v))
        r = torch.sigmoid(self.receptance(self.mix(xt, sx, self.time_mix_r)))
        ww = self.time_first + k
        p = torch.maximum(pp, ww)
        e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
        wkv = (e1 * aa + e2 * v) / (e1 * bb + e2)
        ww = pp - torch.exp(self.time_decay)
        p = torch.maximum(ww, k)
        e1, e2 = torch.exp(ww - p), torch.exp(k - p)
        x = x + self.output(r * wkv)
        xf = self.ln2(x)
        x = x + self.channel_mixing(xf, sf)
        return x, (xt, e1 * aa + e2 * v, e1 * bb + e2, p, xf)


class RWKV(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.ln0 = nn.LayerNorm(D)
        self.blocks = nn.ModuleList([Block(i) for i in range(L)])
        self.ln_out = nn.LayerNorm(D)
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, idx, wkv=wkv_stable):
        x = self.ln0(self.emb(idx))
        for blk in self.blocks:
            x = blk(x, wkv)
        return self.head(self.ln_out(x))

    def rnn(self, idx):
        b = idx.shape[0]
        states = [(torch.zeros(b, D), torch.zeros(b, D), torch.zeros(b, D), torch.full((b, D), -1e38), torch.zeros(b, D))
                  for _ in self.blocks]
        outs = []
        for t in range(idx.shape[1]):
            x = self.ln0(self.emb(idx[:, t]))
            for i, blk in enumerate(self.blocks):
                x, states[i] = blk.rnn_step(x, states[i])
            outs.append(self.head(self.ln_out(x)))
        return torch.stack(outs, 1)


model = RWKV()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() == 2:
            zero = name.endswith(("output.weight", "ffn_value.weight", "ffn_receptance.weight"))
            p.copy_(torch.zeros_like(p) if zero else torch.from_numpy(
                rng.normal(0, 1 / np.sqrt(p.shape[1]) if "emb" not in name else 1e-2, p.shape).astype(np.float32)))
print(f"parameters {sum(p.numel() for p in model.parameters())} zero-initialised output projections "
      f"{sum(int(not p.any()) for p in model.parameters())}")

k = torch.from_numpy(rng.normal(size=(2, 9, D)).astype(np.float32))
v = torch.from_numpy(rng.normal(size=(2, 9, D)).astype(np.float32))
w = -torch.exp(model.blocks[0].time_decay.detach())
u = model.blocks[0].time_first.detach()
print(f"stable wkv == naive softmax wkv: {torch.allclose(wkv_stable(w, u, k, v), wkv_naive(w, u, k, v), atol=1e-5)}")
xs = torch.arange(6.0).view(1, 3, 2)
print(f"token shift {model.blocks[0].time_shift(xs).tolist()}")


def batch(n, length=20):
    """Counting language: a start digit s, then s+1, s+2, ... mod 9 with a reset token 9 every 5."""
    seq = np.zeros((n, length + 1), dtype=np.int64)
    s = rng.integers(0, 9, n)
    for i in range(length + 1):
        seq[:, i] = np.where(i % 5 == 4, 9, (s + i - i // 5) % 9)
    t = torch.from_numpy(seq)
    return t[:, :-1], t[:, 1:]


opt = torch.optim.Adam(model.parameters(), lr=4e-3, betas=(0.9, 0.99), eps=1e-8)
losses = []
for step in range(50):
    inp, tgt = batch(16)
    loss = F.cross_entropy(model(inp).flatten(0, 1), tgt.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")

with torch.no_grad():
    inp, tgt = batch(4, 12)
    gpt = model(inp)
    rnn = model.rnn(inp)
    naive = model(inp, wkv=wkv_naive)
    acc = (gpt.argmax(-1) == tgt).float().mean().item()
print(f"rnn mode == gpt mode: {torch.allclose(gpt, rnn, atol=1e-4)} naive wkv model agrees: {torch.allclose(gpt, naive, atol=1e-4)}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
