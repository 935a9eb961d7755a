"""A Conformer speech encoder, in the style of the public Conformer / torchaudio implementations
written from scratch: a Conv2d subsampling front end (two stride-2 convs, output length from the
conv arithmetic), macaron half-step feed-forward modules (LayerNorm, Linear, SiLU, Dropout),
multi-head self-attention with relative sinusoidal position scores (a learned u / v bias and the
"relative shift" done with F.pad, view and slicing), a key padding mask from lengths, the
convolution module (pointwise Conv1d to 2x channels, F.glu(dim=1), a depthwise Conv1d with
groups=channels and "same" padding, BatchNorm1d, SiLU, pointwise Conv1d) with padded frames
zeroed by masked_fill before the depthwise conv, a final LayerNorm; trained for frame
classification with masked cross-entropy (ignore_index=-100), SpecAugment-style time / frequency
masking done with arange comparisons, and checks that padding does not change the outputs of
real frames. Weights and data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <padding invariance error>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(13)
D, H, C_OUT = 32, 4, 5


class Subsample(nn.Module):
    def __init__(self, n_mels, d):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2), nn.ReLU())
        f = ((n_mels - 1) // 2 - 1) // 2
        self.out = nn.Linear(8 * f, d)

    def forward(self, x, lengths):  # x: (B, T, F)
        x = self.conv(x.unsqueeze(1))  # (B, 8, T', F')
        b, c, t, f = x.shape
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))
        lengths = torch.div(torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2, rounding_mode="floor")
        return x, lengths


class FeedForward(nn.Module):
    def __init__(self, d, dropout=0.0):  # dropout off: the libraries' draws differ
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Dropout(dropout),
                                 nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


def rel_positions(t, d):
    pos = torch.arange(t - 1, -t, -1.0)[:, None]  # t-1 ... -(t-1)
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    pe = torch.zeros(2 * t - 1, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class RelMHSA(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.dk = h, d // h
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.pos = nn.Linear(d, d, bias=False)
        self.u = nn.Parameter(torch.zeros(h, self.dk))
        self.v = nn.Parameter(torch.zeros(h, self.dk))
        self.out = nn.Linear(d, d)

    @staticmethod
    def rel_shift(x):  # (B, H, T, 2T-1) -> (B, H, T, T)
        b, h, t, n = x.shape
        x = F.pad(x, (1, 0)).view(b, h, n + 1, t)[:, :, 1:].reshape(b, h, t, n)
        return x[..., : n // 2 + 1]

    def forward(self, x, key_padding):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.h, self.dk).unbind(2)
        p = self.pos(rel_positions(t, d)).view(2 * t - 1, self.h, self.dk)
        ac = torch.einsum("bthd,bshd->bhts", q + self.u, k)
        bd = self.rel_shift(torch.einsum("bthd,phd->bhtp", q + self.v, p))
        s = (ac + bd) / math.sqrt(self.dk)
        s = s.masked_fill(key_padding[:, None, None, :], float("-inf"))
        y = torch.einsum("bhts,bshd->bthd", s.softmax(-1), v).reshape(b, t, d)
        return self.out(y)


class ConvModule(nn.Module):
    def __init__(self, d, k=7):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, k, padding="same", groups=d, bias=False)  # BatchNorm follows
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)

    def forward(self, x, pad_mask):
        y = F.glu(self.pw1(self.norm(x).transpose(1, 2)), dim=1)
        y = y.masked_fill(pad_mask[:, None, :], 0.0)
        y = self.pw2(F.silu(self.bn(self.dw(y))))
        return y.transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ff1, self.ff2 = FeedForward(d), FeedForward(d)
        self.attn = RelMHSA(d, h)
        self.conv = ConvModule(d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, pad):
        x = x + 0.5 * self.ff1(x)
        x = x + self.attn(x, pad)
        x = x + self.conv(x, pad)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class Encoder(nn.Module):
    def __init__(self, n_mels=20):
        super().__init__()
        self.sub = Subsample(n_mels, D)
        self.blocks = nn.ModuleList([ConformerBlock(D, H) for _ in range(2)])
        self.cls = nn.Linear(D, C_OUT)

    def forward(self, feats, lengths):
        x, lengths = self.sub(feats, lengths)
        pad = torch.arange(x.shape[1])[None, :] >= lengths[:, None]
        for blk in self.blocks:
            x = blk(x, pad)
        return self.cls(x), lengths, pad


model = Encoder()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.ndim > 1 or name.endswith("bias") and "norm" not in name and "bn" not in name:
            p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
print("parameters", sum(p.numel() for p in model.parameters()),
      "rel_shift ok:", RelMHSA.rel_shift(torch.arange(15.0).view(1, 1, 3, 5)).tolist())

B, T, NM = 6, 64, 20
lengths = torch.tensor([64, 60, 52, 64, 40, 48])
feats = torch.from_numpy(rng.normal(0, 1, (B, T, NM)).astype(np.float32))
frame_cls = torch.from_numpy(rng.integers(0, C_OUT, (B, 15)))
# the class is encoded in the features: a bump in mel band 3 * class
for b in range(B):
    for t in range(15):
        feats[b, 4 * t:4 * t + 4, 3 * int(frame_cls[b, t]):3 * int(frame_cls[b, t]) + 3] += 2.5
feats = feats.masked_fill(torch.arange(T)[None, :, None] >= lengths[:, None, None], 0.0)


def spec_augment(x, t0, tw, f0, fw):
    t_idx = torch.arange(x.shape[1])[None, :, None]
    f_idx = torch.arange(x.shape[2])[None, None, :]
    m = ((t_idx >= t0) & (t_idx < t0 + tw)) | ((f_idx >= f0) & (f_idx < f0 + fw))
    return x.masked_fill(m, 0.0)


# SGD, not Adam: the key bias's exact gradient is zero (softmax is shift invariant), and Adam
# would blow its rounding noise up to full-size steps that differ between libraries
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
losses = []
for step in range(40):
    model.train()
    x = spec_augment(feats, 8 * (step % 6), 6, step % 15, 2) if step % 2 else feats
    logits, out_len, pad = model(x, lengths)
    targets = frame_cls[:, :logits.shape[1]].masked_fill(pad, -100)
    loss = F.cross_entropy(logits.reshape(-1, C_OUT), targets.reshape(-1), ignore_index=-100)
    model.eval()
    with torch.no_grad():
        el, _, _ = model(feats, lengths)
        eval_loss = F.cross_entropy(el.reshape(-1, C_OUT), frame_cls[:, :el.shape[1]].masked_fill(pad, -100).reshape(-1))
    model.train()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(eval_loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} eval loss {eval_loss.item():.3f} out lengths {out_len.tolist()}")
model.eval()
with torch.no_grad():
    full, _, pad = model(feats, lengths)
    # the shortest utterance alone, without padding
    alone, _, _ = model(feats[4:5, :40], lengths[4:5])
    err = (full[4, :alone.shape[1]] - alone[0]).abs().max().item()
    acc = (full.argmax(-1) == frame_cls[:, :full.shape[1]])[~pad].float().mean().item()
print(f"padding invariant: {err < 1e-3} frame accuracy {acc:.3f}")
print(f"RESULT {losses[0]:.3f} {losses[-1]:.3f} {err:.1e}")
