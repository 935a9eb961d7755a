"""Probabilistic time-series forecasting, in the style of the public temporal-convolution and
quantile-regression forecasting code: a noisy seasonal series with missing values (NaN),
sliding windows cut with Tensor.unfold, per-window scaling with torch.nanmean and
torch.nan_to_num, a temporal convolutional network (dilated causal Conv1d layers with left
padding by F.pad, residual connections, weight initialisation with nn.init.normal_), one output
per quantile trained with the pinball loss (torch.max of the two slopes), quantile crossing
checked (torch.diff / sort), the empirical coverage of the 10-90% band, and the statistics
forecasters print: torch.quantile with each interpolation mode and a 1-D q tensor, nanquantile
and nanmedian over series with gaps, kthvalue, torch.mode, median with indices, and the
CRPS-style average pinball loss. Weights and data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember.
Prints RESULT <first loss> <last loss> <coverage>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
QUANTILES = [0.1, 0.5, 0.9]
LOOKBACK, HORIZON = 24, 6

t = np.arange(900, dtype=np.float32)
series = (10 + 3 * np.sin(2 * np.pi * t / 24) + 0.01 * t
          + rng.gamma(2.0, 0.6, t.shape).astype(np.float32))
series[rng.random(t.shape) < 0.03] = np.nan  # sensor gaps
x = torch.from_numpy(series.astype(np.float32))

# statistics over series with gaps
print(f"nan count {int(torch.isnan(x).sum())}, nanmean {torch.nanmean(x).item():.4f}, "
      f"nanmedian {torch.nanmedian(x).item():.4f}")
clean = torch.nan_to_num(x, nan=0.0)
q = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95])
print("nanquantile:", [f"{v:.4f}" for v in torch.nanquantile(x, q).tolist()])
print("quantile of nan series:", torch.quantile(x[:100], 0.5).item())
for mode in ["linear", "lower", "higher", "midpoint", "nearest"]:
    v = torch.quantile(clean[:100], torch.tensor([0.1, 0.33, 0.9]), interpolation=mode)
    print(f"quantile {mode:8s}", [f"{a:.4f}" for a in v.tolist()])
rows = clean[:96].view(4, 24)
v, i = torch.kthvalue(rows, 5, dim=1)
print(f"kthvalue(5) values {[f'{a:.4f}' for a in v.tolist()]} indices {i.tolist()}")
med, mi = rows.median(dim=1)
print(f"median {[f'{a:.4f}' for a in med.tolist()]} indices {mi.tolist()}")
hours = (torch.arange(96) % 24).view(4, 24)
busy = (rows > rows.mean(dim=1, keepdim=True)).long() * hours
m = torch.mode(busy, dim=1)
at = busy.gather(1, m.indices.unsqueeze(1)).squeeze(1)
print(f"mode values {m.values.tolist()} indices {m.indices.tolist()}, point at them: "
      f"{torch.equal(at, m.values)}")
print(f"quantile keepdim {tuple(torch.quantile(rows, q, dim=1, keepdim=True).shape)}")

# windows: (N, LOOKBACK + HORIZON), the context scaled by its own mean
windows = torch.nan_to_num(x, nan=float("nan")).unfold(0, LOOKBACK + HORIZON, 3)
ok = ~torch.isnan(windows[:, LOOKBACK:]).any(dim=1)
windows = windows[ok]
scale = torch.nanmean(windows[:, :LOOKBACK], dim=1, keepdim=True)
context = torch.nan_to_num(windows[:, :LOOKBACK] / scale, nan=1.0)
target = windows[:, LOOKBACK:] / scale
print(f"windows {tuple(windows.shape)}, context {tuple(context.shape)}")
n_train = int(0.8 * len(context))


class CausalConv(nn.Module):
    def __init__(self, cin, cout, k, dilation):
        super().__init__()
        self.pad = (k - 1) * dilation
        self.conv = nn.Conv1d(cin, cout, k, dilation=dilation)

    def forward(self, x):
        return self.conv(F.pad(x, (self.pad, 0)))


class TCN(nn.Module):
    def __init__(self, ch=16, levels=3):
        super().__init__()
        self.inp = nn.Conv1d(1, ch, 1)
        self.blocks = nn.ModuleList(CausalConv(ch, ch, 3, 2 ** i) for i in range(levels))
        self.head = nn.Linear(ch, HORIZON * len(QUANTILES))

    def forward(self, x):
        h = self.inp(x.unsqueeze(1))
        for block in self.blocks:
            h = h + F.gelu(block(h))
        return self.head(h[:, :, -1]).view(-1, HORIZON, len(QUANTILES))


def pinball(pred, target, quantiles):
    qs = torch.tensor(quantiles).view(1, 1, -1)
    diff = target.unsqueeze(-1) - pred
    return torch.max(qs * diff, (qs - 1) * diff).mean()


model = TCN()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(p[0].numel()), tuple(p.shape))
                                     .astype(np.float32)))
        else:
            p.zero_()
    model.head.bias.copy_(torch.tensor(QUANTILES).repeat(HORIZON) * 0.5 + 0.75)
print(f"receptive field: {1 + sum(b.pad for b in model.blocks)} steps")

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for epoch in range(args.epochs):
    model.train()
    for i in range(0, n_train, 32):
        pred = model(context[i:i + 32])
        loss = pinball(pred, target[i:i + 32], QUANTILES)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(f"epoch {epoch} pinball {np.mean(losses[-(n_train // 32):]):.5f}")

model.eval()
with torch.no_grad():
    pred = model(context[n_train:])
    tgt = target[n_train:]
    lo, mid, hi = pred.unbind(-1)
    coverage = ((tgt >= lo) & (tgt <= hi)).float().mean().item()
    crossing = (torch.diff(pred, dim=-1) < 0).float().mean().item()
    sorted_pred, _ = torch.sort(pred, dim=-1)
    mae = (mid - tgt).abs().mean().item()
    test_loss = pinball(pred, tgt, QUANTILES).item()
    naive = pinball(context[n_train:, -HORIZON:].unsqueeze(-1).expand_as(pred), tgt,
                    QUANTILES).item()
print(f"test pinball {test_loss:.5f} (naive {naive:.5f}), median MAE {mae:.5f}")
print(f"10-90% coverage {coverage:.4f}, crossing rate {crossing:.4f}, "
      f"sorted == pred where not crossing: {torch.equal(sorted_pred, pred) or crossing > 0}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {coverage:.4f}")
