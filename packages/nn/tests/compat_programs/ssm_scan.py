"""A selective state-space sequence model, in the style of the public minimal Mamba / S4D
implementations in plain PyTorch: an input projection split with torch.chunk / split, a
causal depthwise Conv1d (groups=channels, padding k-1 then sliced), an input-dependent step
size through F.softplus, a diagonal state matrix A = -exp(A_log) with A_log an nn.Parameter
initialized from torch.arange repeated per channel, the discretization exp(delta * A) with
torch.einsum, the recurrence as a sequential scan (torch.stack over time) checked against a
parallel form built from torch.cumsum of log-decays and a lower-triangular segment-sum mask
(torch.tril, masked_fill with -inf, exp), a SiLU gate, RMSNorm, residual blocks and a
delayed-recall objective (emit the token seen three steps earlier). Weights and data from NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
V = 8


class SelectiveSSM(nn.Module):
    def __init__(self, d_model=16, d_state=4, d_conv=4, expand=2):
        super().__init__()
        d_inner = expand * d_model
        self.d_inner, self.d_state = d_inner, d_state
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, 1 + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(1, d_inner)
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)

    def forward(self, x, parallel=False):
        b, seq_len, _ = x.shape
        xz = self.in_proj(x)
        u, z = xz.chunk(2, dim=-1)
        u = self.conv1d(u.transpose(1, 2))[:, :, :seq_len].transpose(1, 2)
        u = F.silu(u)
        dt, B, C = torch.split(self.x_proj(u), [1, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))                       # (b, l, d_inner)
        A = -torch.exp(self.A_log)                                 # (d_inner, n)
        y = (self.scan_parallel if parallel else self.scan)(u, delta, A, B, C)
        y = y + u * self.D
        return self.out_proj(y * F.silu(z))

    @staticmethod
    def scan(u, delta, A, B, C):
        dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
        dBu = torch.einsum("bld,bln,bld->bldn", delta, B, u)
        h = torch.zeros(u.size(0), u.size(2), A.size(1))
        ys = []
        for t in range(u.size(1)):
            h = dA[:, t] * h + dBu[:, t]
            ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
        return torch.stack(ys, dim=1)

    @staticmethod
    def scan_parallel(u, delta, A, B, C):
        log_decay = torch.einsum("bld,dn->bdnl", delta, A)        # (b, d, n, l)
        cs = torch.cumsum(log_decay, dim=-1)
        seg = cs[..., :, None] - cs[..., None, :]                  # (b, d, n, t, s)
        n_steps = u.size(1)
        causal = torch.tril(torch.ones(n_steps, n_steps, dtype=torch.bool))
        seg = seg.masked_fill(~causal, float("-inf"))
        dBu = torch.einsum("bld,bln,bld->bdnl", delta, B, u)
        h = torch.einsum("bdnts,bdns->bdnt", torch.exp(seg), dBu)
        return torch.einsum("bdnt,btn->btd", h, C)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.RMSNorm(d)
        self.mixer = SelectiveSSM(d)

    def forward(self, x, parallel=False):
        return x + self.mixer(self.norm(x), parallel)


class Model(nn.Module):
    def __init__(self, d=16, n_layers=2):
        super().__init__()
        self.emb = nn.Embedding(V + 1, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(n_layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, V + 1, bias=False)

    def forward(self, idx, parallel=False):
        x = self.emb(idx)
        for layer in self.layers:
            x = layer(x, parallel)
        return self.head(self.norm(x))


def batch(n, length=16, delay=3):
    """Delayed recall: the target at t is the input at t - delay (blank, token V, before)."""
    seq = rng.integers(0, V, (n, length))
    target = np.concatenate([np.full((n, delay), V), seq[:, :-delay]], 1)
    return torch.from_numpy(seq), torch.from_numpy(target)


model = Model()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith(("A_log", "D")) or "norm" in name:
            continue
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
print("parameters:", sum(p.numel() for p in model.parameters()))
xb, yb = batch(2)
with torch.no_grad():
    a, b = model(xb), model(xb, parallel=True)
print("sequential scan == parallel form:", torch.allclose(a, b, atol=1e-4))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
losses = []
for step in range(50):
    xb, yb = batch(8)
    logits = model(xb, parallel=step % 4 == 0)
    loss = F.cross_entropy(logits.reshape(-1, V + 1), yb.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")
xb, yb = batch(32)
with torch.no_grad():
    pred = model(xb).argmax(-1)
acc = (pred == yb).float().mean().item()
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {acc:.5f}")
