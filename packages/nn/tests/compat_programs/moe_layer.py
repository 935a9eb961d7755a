"""A sparse mixture-of-experts (MoE) feed-forward layer, in the style of public Switch/Mixtral
style implementations: a router Linear, softmax probabilities, torch.topk(k=2) expert choice with
renormalized gates, token dispatch by torch.where(expert_mask) / index_select and combination
with index_add_, an expert capacity limit (cumsum over the one-hot assignment, dropped tokens
counted), the Switch load-balancing auxiliary loss (fraction of tokens x mean router
probability), the router z-loss (logsumexp squared), experts held in an nn.ModuleList, a
pre-norm residual block with nn.MultiheadAttention, and the per-expert token counts read with
torch.bincount. A regression task whose target depends on a token's cluster, so experts can
specialize. Weights from NumPy, batches in order: the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <aux loss> <dropped fraction>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
D, E, TOPK = 16, 4, 2


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1, self.w2 = nn.Linear(D, 32), nn.Linear(32, D)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class MoE(nn.Module):
    def __init__(self, capacity_factor=1.25):
        super().__init__()
        self.router = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(E))
        self.capacity_factor = capacity_factor

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, D)
        n = x.size(0)
        logits = self.router(x)
        probs = logits.softmax(dim=-1)
        gate, choice = probs.topk(TOPK, dim=-1)
        gate = gate / gate.sum(dim=-1, keepdim=True)
        capacity = math.ceil(self.capacity_factor * n * TOPK / E)
        onehot = F.one_hot(choice, E)  # (n, k, E)
        # position of each assignment in its expert's queue: first choices first
        flat = onehot.permute(1, 0, 2).reshape(-1, E)
        pos = (torch.cumsum(flat, dim=0) - 1).reshape(TOPK, n, E).permute(1, 0, 2)
        keep = ((pos * onehot).sum(-1) < capacity)  # (n, k)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where((choice == e) & keep)
            if tok.numel() == 0:
                continue
            y = expert(x.index_select(0, tok))
            out.index_add_(0, tok, y * gate[tok, slot].unsqueeze(-1))
        frac = onehot[:, 0].float().mean(0)  # fraction of tokens whose first choice is e
        aux = E * (frac * probs.mean(0)).sum()
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        self.stats = (torch.bincount(choice[:, 0], minlength=E), 1 - keep.float().mean())
        return out.reshape(shape), aux, z


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.moe = MoE()
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        y, aux, z = self.moe(self.ln2(x))
        return self.head(x + y).squeeze(-1), aux, z


model = Block()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(p.shape[1]), tuple(p.shape))
                                     .astype(np.float32)))
        elif "ln" not in name:
            p.zero_()
print(f"parameters: {sum(p.numel() for p in model.parameters())}, experts "
      f"{sum(p.numel() for p in model.moe.experts.parameters())}")

centers = rng.normal(size=(E, D)).astype(np.float32) * 2
X = np.empty((256, 6, D), np.float32)
cl = rng.integers(0, E, (256, 6))
X[:] = centers[cl] + rng.normal(size=(256, 6, D)).astype(np.float32) * 0.3
targets = np.sin(X.sum(-1) * 0.2) * (cl + 1)
X, Y = torch.from_numpy(X), torch.from_numpy(targets.astype(np.float32))

opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
losses = []
for step in range(args.steps):
    i = (step * 32) % 256
    pred, aux, z = model(X[i:i + 32])
    mse = F.mse_loss(pred, Y[i:i + 32])
    loss = mse + 0.01 * aux + 1e-3 * z
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(mse.item())
    if step % 15 == 0:
        counts, dropped = model.moe.stats
        print(f"step {step:3d} mse {mse.item():.5f} aux {aux.item():.5f} z {z.item():.4f} "
              f"counts {counts.tolist()} dropped {dropped.item():.4f}")

model.eval()
with torch.no_grad():
    pred, aux, z = model(X)
    counts, dropped = model.moe.stats
print(f"eval mse {F.mse_loss(pred, Y).item():.5f}, counts {counts.tolist()}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-8:]):.5f} {aux.item():.5f} {dropped.item():.4f}")
