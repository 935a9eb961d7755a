"""A small GPT trained the way the public "speedrun" scripts do it: Muon for the 2-D hidden
weight matrices and AdamW for embeddings, gains and the head (two optimizers over split
parameter groups, both stepped each iteration), QK-norm attention (F.rms_norm on queries and
keys), ReLU^2 MLPs, zero-initialised output projections, a logit soft-cap (30 tanh(z / 30)),
untied embedding and head, a trapezoidal learning-rate schedule applied to both optimizers
through LambdaLR, momentum warmup for Muon written into param_groups, gradient accumulation
over two micro-batches, and validation loss under torch.no_grad with the model in eval mode.
Weights and data from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <val loss>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
VOCAB, D, HEADS, LAYERS, T = 32, 32, 4, 2, 24


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.proj = nn.Linear(D, D, bias=False)
        self.fc = nn.Linear(D, 4 * D, bias=False)
        self.fc_out = nn.Linear(4 * D, D, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        h = F.rms_norm(x, (D,))
        q, k, v = self.qkv(h).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        q, k = F.rms_norm(q, (D // HEADS,)), F.rms_norm(k, (D // HEADS,))  # QK-norm
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        h = F.rms_norm(x, (D,))
        return x + self.fc_out(F.relu(self.fc(h)).square())


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(F.rms_norm(x, (D,)))
        return 30 * torch.tanh(logits / 30)  # soft-capped logits


model = GPT()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        std = 1.0 if "embed" in name else 0.5 / math.sqrt(p.shape[1])
        p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))
    for block in model.blocks:  # zero-initialised output projections
        block.proj.weight.zero_()
        block.fc_out.weight.zero_()
    model.head.weight.zero_()

hidden = [p for n, p in model.named_parameters() if p.ndim == 2 and "blocks" in n]
others = [p for n, p in model.named_parameters() if not (p.ndim == 2 and "blocks" in n)]
muon = torch.optim.Muon(hidden, lr=0.02, momentum=0.95, weight_decay=0.0)
adam = torch.optim.AdamW(others, lr=0.01, betas=(0.8, 0.95), weight_decay=0.0)
print(f"muon tensors {len(hidden)} ({sum(p.numel() for p in hidden)} params), adamw tensors "
      f"{len(others)} ({sum(p.numel() for p in others)} params)")


def trapezoid(step, warmup=4, cooldown=12):
    if step < warmup:
        return (step + 1) / warmup
    if step < args.steps - cooldown:
        return 1.0
    return max(0.0, (args.steps - step) / cooldown)


schedulers = [torch.optim.lr_scheduler.LambdaLR(o, trapezoid) for o in (muon, adam)]

# a corpus with structure: runs of counting interleaved with a repeated motif
motif = rng.integers(0, VOCAB, 6)
stream = np.concatenate([np.concatenate([(np.arange(8) + rng.integers(0, VOCAB)) % VOCAB, motif])
                         for _ in range(300)])
data = torch.from_numpy(stream.astype(np.int64))
train, val = data[:3600], data[3600:]


def batch(src, start, n=8):
    starts = (start + np.arange(n) * 37) % (len(src) - T - 1)
    x = torch.stack([src[s:s + T] for s in starts])
    y = torch.stack([src[s + 1:s + T + 1] for s in starts])
    return x, y


losses = []
for step in range(args.steps):
    frac = min(step / 10, 1)
    for group in muon.param_groups:  # momentum warmup
        group["momentum"] = (1 - frac) * 0.85 + frac * 0.95
    total = 0.0
    for micro in range(2):  # gradient accumulation
        x, y = batch(train, step * 97 + micro * 11)
        loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1)) / 2
        loss.backward()
        total += loss.item()
    for opt in (muon, adam):
        opt.step()
    for sched in schedulers:
        sched.step()
    model.zero_grad(set_to_none=True)
    losses.append(total)
    if step % 10 == 0:
        print(f"step {step:2d} loss {total:.4f} lr muon {schedulers[0].get_last_lr()[0]:.5f} "
              f"adam {schedulers[1].get_last_lr()[0]:.5f} momentum "
              f"{muon.param_groups[0]['momentum']:.3f}")

model.eval()
with torch.no_grad():
    vals = [F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1)).item()
            for x, y in (batch(val, s) for s in (0, 50, 100))]
val_loss = float(np.mean(vals))
weights = torch.cat([p.detach().flatten() for p in hidden])
print(f"val loss {val_loss:.4f}; muon buffers {len(muon.state)}, hidden weight rms "
      f"{weights.pow(2).mean().sqrt().item():.4f}")
print(f"RESULT {losses[0]:.4f} {np.mean(losses[-5:]):.4f} {val_loss:.4f}")
