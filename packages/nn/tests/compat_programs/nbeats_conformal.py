"""Interpretable N-BEATS forecasting with split-conformal intervals, in the style of the public
N-BEATS re-implementations and the conformal-prediction tutorials: sliding windows cut from a
series with Tensor.unfold, per-window scaling, a trend stack whose basis is a polynomial in
normalized time built with torch.vander (increasing=True) and a seasonality stack with a
cos / sin Fourier basis, doubly residual stacking (backcast subtracted, forecasts summed), the
sMAPE / MASE metrics (the seasonal naive scale from torch.diff with a lag), AdamW with a
StepLR, then split conformal prediction: absolute residuals on a calibration split, the
finite-sample quantile torch.quantile(q, interpolation="higher"), nanquantile with missing
values, interval coverage on a test split, an isotonic (pool-adjacent-violators) recalibration of
the residual ranks, and torch.histc of the residuals. Float64, data from NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <coverage>."""

import math

import numpy as np
import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)  # L1 training amplifies float32 rounding
rng = np.random.default_rng(41)
L, H, P = 24, 6, 12  # lookback, horizon, season
t = np.arange(900)
series = torch.from_numpy((0.01 * t + 2 * np.sin(2 * np.pi * t / P) + 0.5 * np.cos(2 * np.pi * t / 6)
                           + rng.normal(0, 0.3, t.size)))
windows = series.unfold(0, L + H, 3)
print("windows", tuple(windows.shape), windows.stride())
x, y = windows[:, :L], windows[:, L:]
loc = x.mean(1, keepdim=True)
x, y = x - loc, y - loc


class Block(nn.Module):
    def __init__(self, basis_b, basis_f, hidden=64):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(L, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.theta = nn.Linear(hidden, basis_b.shape[0], bias=False)
        self.register_buffer("basis_b", basis_b)
        self.register_buffer("basis_f", basis_f)

    def forward(self, x):
        th = self.theta(self.fc(x))
        return th @ self.basis_b, th @ self.basis_f


def trend_basis(deg):
    tb = torch.arange(L) / (L + H)
    tf = torch.arange(L, L + H) / (L + H)
    return torch.vander(tb, deg, increasing=True).T.contiguous(), torch.vander(tf, deg, increasing=True).T.contiguous()


def season_basis(harmonics):
    def make(tt):
        k = torch.arange(1, harmonics + 1)[:, None]
        ang = 2 * math.pi * k * tt[None, :] / P
        return torch.cat([torch.cos(ang), torch.sin(ang)])
    return make(torch.arange(L)), make(torch.arange(L, L + H))


class NBeats(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(*trend_basis(3)), Block(*season_basis(3)), Block(*season_basis(3))])

    def forward(self, x):
        residual, forecast = x, 0
        for b in self.blocks:
            back, fore = b(residual)
            residual = residual - back
            forecast = forecast + fore
        return forecast


print("vander", torch.vander(torch.tensor([1.0, 2.0, 3.0]), 3).tolist(),
      torch.vander(torch.tensor([2, 3]), increasing=True).tolist())
model = NBeats()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape)))
n = x.shape[0]
tr, cal, te = slice(0, int(0.6 * n)), slice(int(0.6 * n), int(0.8 * n)), slice(int(0.8 * n), n)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=40, gamma=0.5)
losses = []
for epoch in range(120):
    loss = nn.functional.l1_loss(model(x[tr]), y[tr])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
print(f"train mae {losses[0]:.4f} -> {losses[-1]:.4f} lr {sched.get_last_lr()[0]:.2e}")

with torch.no_grad():
    pred = model(x) + loc
truth = y + loc


def smape(p, a):
    return (200 * (p - a).abs() / (p.abs() + a.abs())).mean().item()


naive_scale = torch.diff(x[te] + loc[te], n=1, dim=1).abs().mean()
seasonal = torch.diff(series, n=1)[:5]
print(f"test sMAPE {smape(pred[te], truth[te]):.4f} MASE "
      f"{((pred[te] - truth[te]).abs().mean() / naive_scale).item():.4f}", "diff", [round(v, 4) for v in seasonal.tolist()],
      "lag diff", torch.diff(torch.tensor([1, 4, 9, 16]), prepend=torch.tensor([0])).tolist())

# split conformal: per-horizon absolute residual quantiles
scores = (pred[cal] - truth[cal]).abs()
alpha = 0.1
m = scores.shape[0]
qlevel = min(1.0, math.ceil((m + 1) * (1 - alpha)) / m)
qhat = torch.quantile(scores, qlevel, dim=0, interpolation="higher")
covered = ((truth[te] >= pred[te] - qhat) & (truth[te] <= pred[te] + qhat)).float()
coverage = covered.mean().item()
print("qhat per horizon", [round(v, 4) for v in qhat.tolist()], f"coverage {coverage:.4f}")
s2 = scores[:, 0].clone()
s2[::5] = float("nan")
print("nanquantile", round(torch.nanquantile(s2, 0.9).item(), 5), "quantile with nan",
      torch.quantile(s2, 0.9).isnan().item(),
      "interpolations", [round(torch.quantile(scores[:, 0], 0.5, interpolation=i).item(), 5)
                         for i in ("linear", "lower", "higher", "midpoint", "nearest")])


def pava(yv):
    vals, wts = [], []
    for v in yv.tolist():
        vals.append(v)
        wts.append(1.0)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            w = wts[-2] + wts[-1]
            vals[-2:] = [(vals[-2] * wts[-2] + vals[-1] * wts[-1]) / w]
            wts[-2:] = [w]
    return torch.repeat_interleave(torch.tensor(vals), torch.tensor(wts).long())


order = torch.argsort(pred[cal, 0])
iso = pava(scores[order, 0])
print("isotonic fit monotone:", bool((torch.diff(iso) >= -1e-7).all()), "levels", torch.unique(iso).numel(),
      "mean kept", abs(iso.mean().item() - scores[:, 0].mean().item()) < 1e-5)
hist = torch.histc(scores[:, 0], bins=5, min=0, max=float(scores[:, 0].max()))
print("residual histogram", hist.tolist())
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {coverage:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
