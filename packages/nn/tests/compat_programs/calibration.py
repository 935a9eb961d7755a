"""Post-hoc calibration of a classifier, in the style of the public temperature-scaling code
(Guo et al., 2017): an MLP trained to overfit, its validation logits collected under
torch.no_grad, a single temperature nn.Parameter fitted with optim.LBFGS(lr=0.01, max_iter=50)
on the NLL, the expected calibration error over 15 equal-width confidence bins
(torch.linspace boundaries, bucketize, per-bin accuracy and confidence with index_add_ and
bincount), the reliability diagram as a torch.histogram of the confidences (and a weighted one of
the correct predictions), Brier score with one_hot, vector scaling as a second method
(a diagonal affine map of the logits), and the held-out NLL before and after. Weights and data
from NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember.
Prints RESULT <ECE before> <ECE after> <temperature>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=30)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
K = 5

# overlapping Gaussian classes: an overfit network is overconfident on held-out data
means = rng.normal(0, 1.2, (K, 10))
y_np = rng.integers(0, K, 1200)
x_np = (means[y_np] + rng.normal(0, 1.0, (1200, 10))).astype(np.float32)
X, Y = torch.from_numpy(x_np), torch.from_numpy(y_np.astype(np.int64))
Xtr, Ytr, Xval, Yval, Xte, Yte = X[:400], Y[:400], X[400:800], Y[400:800], X[800:], Y[800:]

model = nn.Sequential(nn.Linear(10, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                      nn.Linear(128, K))
r = np.random.default_rng(1)
with torch.no_grad():
    for _, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(args.epochs):
    for i in range(0, 400, 50):
        opt.zero_grad()
        F.cross_entropy(model(Xtr[i:i + 50]), Ytr[i:i + 50]).backward()
        opt.step()
with torch.no_grad():
    logits_val, logits_te = model(Xval), model(Xte)
print(f"train acc {(model(Xtr).argmax(1) == Ytr).float().mean().item():.4f}, test acc "
      f"{(logits_te.argmax(1) == Yte).float().mean().item():.4f}")


def ece(logits, labels, n_bins=15):
    probs = F.softmax(logits, dim=1)
    conf, pred = probs.max(1)
    correct = pred.eq(labels).float()
    bounds = torch.linspace(0, 1, n_bins + 1)
    bin_idx = torch.bucketize(conf, bounds[1:-1], right=False)
    counts = torch.bincount(bin_idx, minlength=n_bins).float()
    acc_sum = torch.zeros(n_bins).index_add_(0, bin_idx, correct)
    conf_sum = torch.zeros(n_bins).index_add_(0, bin_idx, conf)
    nonempty = counts > 0
    gap = (acc_sum[nonempty] - conf_sum[nonempty]).abs()
    return gap.sum().item() / labels.numel(), counts


def nll(logits, labels):
    return F.cross_entropy(logits, labels).item()


before, counts = ece(logits_te, Yte)
print(f"before: NLL {nll(logits_te, Yte):.5f}, ECE {before:.5f}, bin counts {counts.long().tolist()}")


class TemperatureScaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.temperature = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, logits):
        return logits / self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))


scaler = TemperatureScaler()
lbfgs = torch.optim.LBFGS([scaler.temperature], lr=0.01, max_iter=50)


def closure():
    lbfgs.zero_grad()
    loss = F.cross_entropy(scaler(logits_val), Yval)
    loss.backward()
    return loss


lbfgs.step(closure)
T = scaler.temperature.item()
with torch.no_grad():
    scaled = scaler(logits_te)
after, _ = ece(scaled, Yte)
print(f"temperature {T:.5f}; after: NLL {nll(scaled, Yte):.5f}, ECE {after:.5f}")
print(f"accuracy unchanged: {torch.equal(scaled.argmax(1), logits_te.argmax(1))}")

conf = F.softmax(scaled, 1).max(1).values
hist = torch.histogram(conf, bins=10, range=(0.0, 1.0))
right = torch.histogram(conf, bins=10, range=(0.0, 1.0),
                        weight=scaled.argmax(1).eq(Yte).float())
acc_per_bin = torch.where(hist.hist > 0, right.hist / hist.hist.clamp_min(1), torch.zeros(10))
print(f"reliability: counts {hist.hist.long().tolist()}")
print(f"reliability: accuracy {[round(v, 3) for v in acc_per_bin.tolist()]}")
print(f"edges {[round(v, 2) for v in hist.bin_edges.tolist()]}")
dens = torch.histogram(conf, bins=5, density=True)
width = (dens.bin_edges[1] - dens.bin_edges[0]).item()
print(f"density integrates to 1: {abs(dens.hist.sum().item() * width - 1) < 1e-4}")

brier = (F.softmax(scaled, 1) - F.one_hot(Yte, K).float()).pow(2).sum(1).mean().item()
print(f"Brier score {brier:.5f}")

# vector scaling: a diagonal affine map of the logits fitted by Adam
w = torch.ones(K, requires_grad=True)
b = torch.zeros(K, requires_grad=True)
vopt = torch.optim.Adam([w, b], lr=0.05)
for _ in range(100):
    vopt.zero_grad()
    loss = F.cross_entropy(logits_val * w + b, Yval)
    loss.backward()
    vopt.step()
with torch.no_grad():
    vs = logits_te * w + b
print(f"vector scaling: NLL {nll(vs, Yte):.5f}, ECE {ece(vs, Yte)[0]:.5f}")
print(f"RESULT {before:.5f} {after:.5f} {T:.5f}")
