"""Survival analysis with censored data, in the style of the public DeepSurv / pycox-like
training code: right-censored event times, the Cox partial likelihood with the risk-set
log-sum written as torch.logcumsumexp over samples sorted by descending time (argsort
descending, stable) and Breslow handling of tied times (the last index of each tie group from
torch.unique_consecutive(return_counts) and cumsum), a small MLP risk model (DeepSurv) trained
with Adam and weight decay, Harrell's concordance index by broadcasting comparisons, the
Kaplan-Meier estimator (unique times, events and at-risk counts with bincount / flip / cumsum,
survival by cumprod, median survival by searchsorted), the Breslow baseline cumulative hazard
and per-subject survival curves, a discrete-time hazard model (logistic hazards over time bins
from bucketize, survival by cumprod of 1 - h, NLL from log-sigmoid terms), torch.diff for
the hazard increments and cummax for a monotone fix. Data from NumPy. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <c-index>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(13)
n = 300
X = torch.from_numpy(rng.normal(size=(n, 4)).astype(np.float32))
risk_true = 0.8 * X[:, 0] - 0.5 * X[:, 1] + 0.3 * X[:, 2] * X[:, 3]
T_event = torch.from_numpy(rng.exponential(size=n).astype(np.float32)) / risk_true.exp()
T_cens = torch.from_numpy(rng.exponential(1.5, size=n).astype(np.float32))
time = torch.minimum(T_event, T_cens)
time = torch.round(time * 20) / 20  # coarse times: ties
event = (T_event <= T_cens).float()
print(f"events {int(event.sum())} censored {int((1 - event).sum())} tied times "
      f"{n - torch.unique(time).numel()}")


def cox_ph_loss(log_h, time, event):
    order = torch.argsort(time, descending=True, stable=True)
    t, e, lh = time[order], event[order], log_h[order]
    _, counts = torch.unique_consecutive(t, return_counts=True)
    last = torch.cumsum(counts, 0) - 1  # Breslow: the whole tie group is at risk
    group = torch.repeat_interleave(torch.arange(counts.numel()), counts)
    log_risk = torch.logcumsumexp(lh, 0)[last][group]
    return -((lh - log_risk) * e).sum() / e.sum()


def c_index(risk, time, event):
    comparable = (time[:, None] < time[None, :]) & (event[:, None] == 1)
    concordant = (risk[:, None] > risk[None, :]).float() + 0.5 * (risk[:, None] == risk[None, :]).float()
    return ((concordant * comparable).sum() / comparable.sum()).item()


print(f"oracle c-index {c_index(risk_true, time, event):.4f}, oracle cox loss "
      f"{cox_ph_loss(risk_true, time, event).item():.4f}")
net = nn.Sequential(nn.Linear(4, 32), nn.SELU(), nn.Dropout(0.0), nn.Linear(32, 1, bias=False))
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=1e-4)
losses = []
for epoch in range(60):
    loss = cox_ph_loss(net(X).squeeze(1), time, event)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
with torch.no_grad():
    log_h = net(X).squeeze(1)
ci = c_index(log_h, time, event)
print(f"cox loss {losses[0]:.4f} -> {losses[-1]:.4f}, c-index {ci:.4f}")

# Kaplan-Meier
ut, inv = torch.unique(time, return_inverse=True)
d = torch.bincount(inv, weights=event, minlength=ut.numel())
c = torch.bincount(inv, minlength=ut.numel()).float()
at_risk = torch.flip(torch.cumsum(torch.flip(c, [0]), 0), [0])
km = torch.cumprod(1 - d / at_risk, 0)
median_idx = torch.searchsorted(-km, torch.tensor([-0.5]))
print("KM at first times", [round(v, 4) for v in km[:4].tolist()], "median survival",
      ut[median_idx].item(), "monotone:", bool((torch.diff(km) <= 0).all()))

# Breslow baseline hazard and individual survival curves
order = torch.argsort(ut)
risk_sum = torch.zeros_like(ut).index_add_(0, inv, log_h.exp())
risk_set = torch.flip(torch.cumsum(torch.flip(risk_sum, [0]), 0), [0])
H0 = torch.cumsum(d / risk_set, 0)
S = torch.exp(-H0[None, :] * log_h.exp()[:, None])
print("baseline cumulative hazard at quartiles",
      [round(v, 4) for v in H0[torch.tensor([ut.numel() // 4, ut.numel() // 2])].tolist()],
      "survival curves", tuple(S.shape), "start", round(S[:, 0].mean().item(), 4))

# discrete-time logistic hazards over 10 bins
cuts = torch.quantile(time, torch.linspace(0, 1, 11)[1:-1])
bin_idx = torch.bucketize(time, cuts)
print("bin counts", torch.bincount(bin_idx, minlength=10).tolist())
hazard_net = nn.Linear(4, 10)
with torch.no_grad():
    hazard_net.weight.copy_(torch.from_numpy(rng.normal(0, 0.1, (10, 4)).astype(np.float32)))
    hazard_net.bias.zero_()
opt2 = torch.optim.Adam(hazard_net.parameters(), lr=0.05)
steps = torch.arange(10)[None, :]
for it in range(80):
    logits = hazard_net(X)
    before = (steps < bin_idx[:, None]).float()
    at = (steps == bin_idx[:, None]).float()
    nll = -(before * F.logsigmoid(-logits) + at * (event[:, None] * F.logsigmoid(logits)
                                                  + (1 - event[:, None]) * F.logsigmoid(-logits))).sum(1).mean()
    opt2.zero_grad()
    nll.backward()
    opt2.step()
with torch.no_grad():
    surv = torch.cumprod(1 - torch.sigmoid(hazard_net(X)), 1)
    fixed = torch.cummax(-surv, dim=1).values.neg()
print(f"discrete-time nll {nll.item():.4f} mean survival at last bin {surv[:, -1].mean().item():.4f}",
      "already monotone:", torch.equal(fixed, surv))
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {ci:.4f}")
