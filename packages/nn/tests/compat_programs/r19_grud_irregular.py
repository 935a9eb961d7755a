"""GRU-D for irregularly sampled clinical-style time series, in the style of the public PyTorch
re-implementations: observations with NaN for missing values, the mask from torch.isnan, time
since the last observation built with a loop over time steps, the last observed value carried
forward with torch.cummax over observed indices and torch.gather, input / hidden decays
exp(-relu(W delta)) as nn.Linear layers (the input one diagonal by a registered identity mask),
an empirical-mean imputation target, a GRUCell driven by [x_hat, h_decayed, mask], class
imbalance handled by BCEWithLogitsLoss(pos_weight=...), a ReduceLROnPlateau on the validation
loss, then evaluation: ROC AUC computed with torch.argsort / cumsum / torch.trapezoid, the
Mann-Whitney rank form of the AUC (torch.unique-based tie-aware average ranks) agreeing,
average precision, and a calibration table from torch.bucketize. Data from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <auc>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)
N, T, V = 240, 12, 4


def make():
    y = (rng.uniform(size=N) < 0.3).astype(np.float32)
    t = np.arange(T)[None, :, None]
    base = rng.normal(size=(N, 1, V))
    trend = (y[:, None, None] * 0.25 - 0.05) * t * np.array([1.0, -0.5, 0.0, 0.3])
    x = base + trend + 0.4 * rng.normal(size=(N, T, V))
    miss = rng.uniform(size=(N, T, V)) < 0.45
    miss[:, 0, 2] = True  # the third variable is never seen first
    x[miss] = np.nan
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


X, Y = make()
mask = (~torch.isnan(X)).float()
x0 = torch.nan_to_num(X, nan=0.0)
means = (x0 * mask).sum((0, 1)) / mask.sum((0, 1))
print("observed fraction", round(mask.mean().item(), 4), "means", [round(v, 4) for v in means.tolist()])

# time since last observation (time steps of one unit)
delta = torch.zeros_like(x0)
for t in range(1, T):
    delta[:, t] = 1.0 + (1 - mask[:, t - 1]) * delta[:, t - 1]
# last observation carried forward: the index of the latest observed step, by cummax
steps = torch.arange(T).view(1, T, 1).expand_as(mask)
last_idx = torch.where(mask.bool(), steps, torch.zeros_like(steps))
last_idx, _ = torch.cummax(last_idx, dim=1)
ever = torch.cummax(mask, dim=1).values
x_last = torch.gather(x0, 1, last_idx)
x_last = torch.where(ever.bool(), x_last, means.expand_as(x_last))
print("delta max", delta.max().item(), "locf sample", [round(v, 4) for v in x_last[0, :4, 2].tolist()])


class GRUD(nn.Module):
    def __init__(self, v, h):
        super().__init__()
        self.gamma_x = nn.Linear(v, v)
        self.gamma_h = nn.Linear(v, h)
        self.cell = nn.GRUCell(v + h + v, h)
        self.out = nn.Linear(h, 1)
        self.register_buffer("diag", torch.eye(v))
        self.register_buffer("x_mean", means.clone())
        self.h = h

    def forward(self, x, m, d, xl):
        h = x.new_zeros(x.shape[0], self.h)
        for t in range(x.shape[1]):
            gx = torch.exp(-F.relu(F.linear(d[:, t], self.gamma_x.weight * self.diag, self.gamma_x.bias)))
            gh = torch.exp(-F.relu(self.gamma_h(d[:, t])))
            x_hat = m[:, t] * x[:, t] + (1 - m[:, t]) * (gx * xl[:, t] + (1 - gx) * self.x_mean)
            h = self.cell(torch.cat([x_hat, gh * h, m[:, t]], dim=-1), gh * h)
        return self.out(h).squeeze(-1)


model = GRUD(V, 16)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.25, size=tuple(p.shape)).astype(np.float32)))
# the previous step's carried value feeds the decay (x_last at t-1)
xl_prev = torch.cat([means.expand(N, 1, V), x_last[:, :-1]], dim=1)
tr, va = slice(0, 180), slice(180, N)
pos_weight = (Y[tr] == 0).sum() / (Y[tr] == 1).sum()
crit = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
print("pos_weight", round(pos_weight.item(), 4))
losses = []
for epoch in range(12):
    for b in range(0, 180, 45):
        sl = slice(b, b + 45)
        logits = model(x0[sl], mask[sl], delta[sl], xl_prev[sl])
        loss = crit(logits, Y[sl])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        val = crit(model(x0[va], mask[va], delta[va], xl_prev[va]), Y[va]).item()
    sched.step(val)
    if epoch % 3 == 0:
        print(f"epoch {epoch:2d} train {losses[-1]:.5f} val {val:.5f} lr {opt.param_groups[0]['lr']:.5f}")

with torch.no_grad():
    score = torch.sigmoid(model(x0, mask, delta, xl_prev))
s, y = score[va], Y[va]
order = torch.argsort(s, descending=True, stable=True)
tp = torch.cumsum(y[order], 0)
fp = torch.cumsum(1 - y[order], 0)
tpr = torch.cat([torch.zeros(1), tp / tp[-1]])
fpr = torch.cat([torch.zeros(1), fp / fp[-1]])
auc = torch.trapezoid(tpr, fpr).item()
# Mann-Whitney: average ranks with ties
uniq, inv, counts = torch.unique(s, return_inverse=True, return_counts=True)
first_rank = torch.cumsum(counts, 0) - counts + 1
avg_rank = (first_rank + (counts - 1) / 2.0)[inv].double()
n1, n0 = y.sum().item(), (1 - y).sum().item()
auc_mw = (avg_rank[y.bool()].sum().item() - n1 * (n1 + 1) / 2) / (n1 * n0)
precision = tp / torch.arange(1, len(y) + 1)
ap = (precision * y[order]).sum().item() / n1
print(f"auc {auc:.6f} mann-whitney {auc_mw:.6f} agree {abs(auc - auc_mw) < 1e-6} ap {ap:.6f}")
bins = torch.bucketize(score, torch.tensor([0.2, 0.4, 0.6, 0.8]))
for k in range(5):
    sel = bins == k
    if sel.any():
        print(f"bin {k} n {int(sel.sum()):3d} mean score {score[sel].mean().item():.4f} positive rate {Y[sel].mean().item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {auc:.6f}")
