"""Autoregressive density estimation in the style of Karpathy's pytorch-made and the MADE paper
on binarized 4x4 "digit" patterns (NumPy): a MaskedLinear subclass of nn.Linear that registers
its connectivity mask as a buffer and multiplies it into the weight in forward (set_mask with
torch.from_numpy(mask.astype(uint8)).T), masks built from per-unit degrees for a natural and a
random input ordering (order-agnostic training cycles through orderings), a direct skip
connection masked strictly lower-triangular (torch.tril(diagonal=-1)), the exact negative
log-likelihood in nats by F.binary_cross_entropy_with_logits(reduction="none").sum(1), checks
that the Jacobian of the outputs w.r.t. the inputs respects the autoregressive order (by
torch.autograd.functional.jacobian), ensembling over orderings at test time (logsumexp of
log-likelihoods minus log K), and ancestral sampling d steps with NumPy uniforms. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first nll> <last nll> <ensemble test nll>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(142)
D = 16
protos = np.array([[1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0],
                   [0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0],
                   [1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1]], np.float32)


def sample_data(n):
    x = protos[rng.integers(0, 3, n)]
    flip = rng.random(x.shape) < 0.05
    return torch.from_numpy(np.where(flip, 1 - x, x).astype(np.float32))


Xtr, Xte = sample_data(512), sample_data(256)


class MaskedLinear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.register_buffer("mask", torch.ones(out_features, in_features))

    def set_mask(self, mask):
        self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))

    def forward(self, input):
        return F.linear(input, self.mask * self.weight, self.bias)


class MADE(nn.Module):
    def __init__(self, hidden=(64, 64), num_masks=4):
        super().__init__()
        sizes = [D, *hidden, D]
        self.layers = nn.ModuleList(MaskedLinear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.skip = nn.Linear(D, D, bias=False)
        self.num_masks, self.seed = num_masks, 0
        self.hidden = hidden
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape).astype(np.float32)))
        self.update_masks()

    def update_masks(self):
        r = np.random.RandomState(self.seed)
        self.seed = (self.seed + 1) % self.num_masks
        order = np.arange(D) if self.seed == 1 else r.permutation(D)
        m = {-1: order}
        for i, h in enumerate(self.hidden):
            m[i] = r.randint(m[i - 1].min(), D - 1, size=h)
        masks = [m[i - 1][:, None] <= m[i][None, :] for i in range(len(self.hidden))]
        masks.append(m[len(self.hidden) - 1][:, None] < m[-1][None, :])
        for layer, mask in zip(self.layers, masks):
            layer.set_mask(mask)
        self.order = torch.from_numpy(order)
        rank = torch.argsort(self.order)
        self.skip_mask = (rank.unsqueeze(0) < rank.unsqueeze(1)).float()  # input j feeds output i if earlier

    def forward(self, x):
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < len(self.layers) - 1:
                h = F.relu(h)
        return h + F.linear(x, self.skip.weight * self.skip_mask)


def nll(model, x):
    return F.binary_cross_entropy_with_logits(model(x), x, reduction="none").sum(1)


model = MADE()
J = torch.autograd.functional.jacobian(lambda v: model(v.unsqueeze(0)).squeeze(0), Xtr[0])
rank = torch.argsort(model.order)
allowed = rank.unsqueeze(0) < rank.unsqueeze(1)
print(f"autoregressive jacobian: {bool((J[~allowed].abs() == 0).all())} natural order tril: "
      f"{torch.equal(allowed, torch.tril(torch.ones(D, D, dtype=torch.bool), diagonal=-1))}")

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(200):
    idx = torch.from_numpy(rng.choice(512, 64, replace=False))
    model.update_masks()
    loss = nll(model, Xtr[idx]).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 50 == 0:
        print(f"step {step:3d} nll {loss.item():.5f} mask density {model.layers[0].mask.mean().item():.4f}")

with torch.no_grad():
    lls = []
    for k in range(model.num_masks):
        model.update_masks()
        lls.append(-nll(model, Xte))
        print(f"ordering {model.order.tolist()[:4]} test nll {-lls[-1].mean().item():.5f}")
    ens = -(torch.logsumexp(torch.stack(lls), 0) - math.log(len(lls))).mean().item()
print(f"ensemble test nll {ens:.5f} bits/dim {ens / D / math.log(2):.5f}")

model.seed = 0
model.update_masks()  # the natural order
with torch.no_grad():
    x = torch.zeros(8, D)
    u = torch.from_numpy(rng.random((8, D)).astype(np.float32))
    for d in model.order.tolist():
        p = torch.sigmoid(model(x)[:, d])
        x[:, d] = (u[:, d] < p).float()
    dist = torch.cdist(x, torch.from_numpy(protos), p=1).min(1).values
print(f"samples nearest-prototype hamming {dist.tolist()}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-20:]):.5f} {ens:.5f}")
