"""Temporal convolutional networks in the style of the public locuslab TCN code on the adding
problem and a sequential classification task: TemporalBlocks of dilated causal Conv1d layers
with padding (k - 1) * d removed by a Chomp1d module (x[:, :, :-chomp].contiguous()), weight
normalization through torch.nn.utils.parametrizations.weight_norm (original0 / original1 as the
g / v split, checked against the norm over dims 1 and 2), 1x1 downsample residuals, the
receptive field computed from the dilations and verified by a gradient probe (the input
positions with nonzero gradient for the last output), causality checked by perturbing future
inputs, torch.nn.utils.parametrize.remove_parametrizations to bake the weights for inference
(outputs unchanged), the legacy torch.nn.utils.weight_norm hook form compared with the
parametrization, gradient clipping, and ReduceLROnPlateau. Data and weights from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <receptive field>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

rng = np.random.default_rng(143)
T = 48


def adding(n):
    x = np.zeros((n, 2, T), np.float32)
    x[:, 0] = rng.uniform(0, 1, (n, T))
    y = np.zeros(n, np.float32)
    for i in range(n):
        a, b = rng.choice(T, 2, replace=False)
        x[i, 1, [a, b]] = 1
        y[i] = x[i, 0, a] + x[i, 0, b]
    return torch.from_numpy(x), torch.from_numpy(y)


Xtr, Ytr = adding(512)
Xte, Yte = adding(256)


def conv(i, o, k, d):
    c = nn.Conv1d(i, o, k, padding=(k - 1) * d, dilation=d)
    with torch.no_grad():
        c.weight.copy_(torch.from_numpy(rng.normal(0, 0.1, c.weight.shape).astype(np.float32)))
        c.bias.zero_()
    return c


class Chomp1d(nn.Module):
    def __init__(self, chomp):
        super().__init__()
        self.chomp = chomp

    def forward(self, x):
        return x[:, :, :-self.chomp].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, i, o, k, d):
        super().__init__()
        self.net = nn.Sequential(weight_norm(conv(i, o, k, d)), Chomp1d((k - 1) * d), nn.ReLU(),
                                 weight_norm(conv(o, o, k, d)), Chomp1d((k - 1) * d), nn.ReLU())
        self.down = nn.Conv1d(i, o, 1) if i != o else None
        if self.down is not None:
            with torch.no_grad():
                self.down.weight.copy_(torch.from_numpy(rng.normal(0, 0.1, self.down.weight.shape).astype(np.float32)))
                self.down.bias.zero_()

    def forward(self, x):
        res = x if self.down is None else self.down(x)
        return F.relu(self.net(x) + res)


class TCN(nn.Module):
    def __init__(self, channels=(16, 16, 16, 16), k=3):
        super().__init__()
        layers, prev = [], 2
        for i, c in enumerate(channels):
            layers.append(TemporalBlock(prev, c, k, 2 ** i))
            prev = c
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(prev, 1)
        with torch.no_grad():
            self.head.weight.copy_(torch.from_numpy(rng.normal(0, 0.3, (1, prev)).astype(np.float32)))
            self.head.bias.fill_(1.0)  # the mean of the target
        self.rf = 1 + 2 * (k - 1) * sum(2 ** i for i in range(len(channels)))

    def forward(self, x):
        return self.head(self.body(x)[:, :, -1]).squeeze(-1)


model = TCN()
c0 = model.body[0].net[0]
g, v = c0.parametrizations.weight.original0, c0.parametrizations.weight.original1
print(f"weight_norm split: g {tuple(g.shape)} v {tuple(v.shape)} "
      f"g == ||v||: {torch.allclose(g, v.norm(dim=(1, 2), keepdim=True))} "
      f"weight == g v / ||v||: {torch.allclose(c0.weight, g * v / v.norm(dim=(1, 2), keepdim=True))}")

probe = torch.from_numpy(rng.uniform(0, 1, (1, 2, 64)).astype(np.float32)).requires_grad_()
model.body(probe)[0, :, -1].sum().backward()
seen = (probe.grad.abs().sum(1)[0] > 0).nonzero().squeeze(1)
print(f"receptive field {model.rf} gradient reaches back {64 - seen.min().item()} steps")
x = Xte[:2].clone()
base = model.body(x)[:, :, :30]
x[:, :, 30:] = torch.from_numpy(rng.normal(size=(2, 2, T - 30)).astype(np.float32))
print(f"causal: {torch.allclose(model.body(x)[:, :, :30], base)}")

opt = torch.optim.Adam(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2)
losses = []
for epoch in range(6):
    perm = torch.from_numpy(rng.permutation(512))
    for idx in perm.split(32):
        loss = F.mse_loss(model(Xtr[idx]), Ytr[idx])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        val = F.mse_loss(model(Xte), Yte).item()
    sched.step(val)
    print(f"epoch {epoch} train {np.mean(losses[-16:]):.5f} val {val:.5f} lr {opt.param_groups[0]['lr']:.5f}")

model.eval()
with torch.no_grad():
    before = model(Xte)
    for block in model.body:
        for m in block.net:
            if parametrize.is_parametrized(m):
                parametrize.remove_parametrizations(m, "weight")
    after = model(Xte)
print(f"baked: parametrized left {sum(parametrize.is_parametrized(m) for m in model.modules())} "
      f"outputs equal: {torch.allclose(before, after, atol=1e-5)} weight is Parameter: "
      f"{isinstance(model.body[0].net[0].weight, nn.Parameter)}")

legacy = nn.utils.weight_norm(conv(2, 4, 3, 1))
modern = weight_norm(conv(2, 4, 3, 1))
with torch.no_grad():
    modern.parametrizations.weight.original0.copy_(legacy.weight_g)
    modern.parametrizations.weight.original1.copy_(legacy.weight_v)
print(f"legacy hook == parametrization: {torch.allclose(legacy(Xte[:3]), modern(Xte[:3]), atol=1e-6)} "
      f"names {sorted(n for n, _ in legacy.named_parameters())}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-16:]):.5f} {model.rf}")
