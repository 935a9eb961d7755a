"""Tabular classification the way Kaggle-style PyTorch notebooks do it (no pandas): mixed
numeric and categorical columns, numeric columns standardized with statistics of the training
split (torch.nanmean for missing values filled afterwards with torch.nan_to_num /
torch.where(isnan)), a skewed column quantile-binned with torch.quantile boundaries and
torch.bucketize, per-category nn.Embedding tables (sizes from a rule of thumb) held in an
nn.ModuleList, a Linear(bias=False) + BatchNorm1d + Dropout MLP, class imbalance handled both by
F.cross_entropy(weight=...) with inverse-frequency weights and by
BCEWithLogitsLoss(pos_weight=...), ReduceLROnPlateau on the validation loss, early stopping
keeping the best state through copy.deepcopy(model.state_dict()), a checkpoint written to an
io.BytesIO and reloaded with weights_only=True, and ROC-AUC computed from ranks (argsort,
cumsum). Weights and data from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first val loss> <best val loss> <AUC>."""

import copy
import io
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
N = 600
cards = [5, 12, 3]
cat_np = np.stack([rng.integers(0, c, N) for c in cards], 1)
num_np = rng.normal(0, 1, (N, 4))
num_np[:, 3] = rng.lognormal(0, 1, N)  # skewed
logit = (1.5 * num_np[:, 0] - num_np[:, 1] + 0.8 * np.log(num_np[:, 3])
         + np.array([0.5, -1, 0, 1, -0.5])[cat_np[:, 0]] + (cat_np[:, 1] % 3 == 0) - 2.0)
y_np = (rng.uniform(size=N) < 1 / (1 + np.exp(-logit))).astype(np.int64)
num_np[rng.uniform(size=num_np.shape) < 0.05] = np.nan  # missing values
num = torch.from_numpy(num_np.astype(np.float32))
cat = torch.from_numpy(cat_np)
y = torch.from_numpy(y_np)
tr, va, te = slice(0, 400), slice(400, 500), slice(500, 600)
print(f"positives {y.float().mean().item():.4f}, missing {torch.isnan(num).sum().item()}")

mean = torch.nanmean(num[tr], dim=0)
std = torch.sqrt(torch.nanmean((num[tr] - mean) ** 2, dim=0))
numz = torch.where(torch.isnan(num), torch.zeros(()), (num - mean) / std)
numz = torch.nan_to_num(numz, nan=0.0)
skew = num[:, 3]
bounds = torch.quantile(skew[tr][~torch.isnan(skew[tr])], torch.tensor([0.2, 0.4, 0.6, 0.8]))
bins = torch.bucketize(torch.nan_to_num(skew, nan=-1.0), bounds)
print("quantile boundaries", [round(v, 4) for v in bounds.tolist()], "bin counts",
      torch.bincount(bins[tr], minlength=5).tolist())
cats = torch.cat([cat, bins[:, None]], dim=1)
cards = cards + [5]


class TabularNet(nn.Module):
    def __init__(self, cards, n_num, out):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(c, min(8, (c + 1) // 2)) for c in cards)
        width = sum(e.embedding_dim for e in self.embs) + n_num
        # no bias before a BatchNorm: its gradient is zero up to rounding, which Adam would
        # blow up into full-size steps of either sign
        self.mlp = nn.Sequential(nn.Linear(width, 32, bias=False), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Dropout(0.0), nn.Linear(32, out))

    def forward(self, x_cat, x_num):
        e = [emb(x_cat[:, i]) for i, emb in enumerate(self.embs)]
        return self.mlp(torch.cat(e + [x_num], dim=1))


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bn" in name or name.startswith("mlp.1."):
                continue
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))


def auc(score, label):
    order = torch.argsort(score)
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(1, len(score) + 1)
    pos = label.bool()
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


counts = torch.bincount(y[tr], minlength=2).float()
class_w = counts.sum() / (2 * counts)
print("class weights", [round(v, 4) for v in class_w.tolist()])
for head in ("softmax", "sigmoid"):
    model = TabularNet(cards, 4, 2 if head == "softmax" else 1)
    init(model, 1)
    if head == "softmax":
        crit = lambda out, t: F.cross_entropy(out, t, weight=class_w)  # noqa: E731
    else:
        bce = nn.BCEWithLogitsLoss(pos_weight=counts[0] / counts[1])
        crit = lambda out, t: bce(out.squeeze(1), t.float())  # noqa: E731
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2)
    best, best_state, bad, val_losses = float("inf"), None, 0, []
    for epoch in range(30):
        model.train()
        perm = torch.from_numpy(rng.permutation(400))
        for i in range(0, 400, 50):
            b = perm[i:i + 50]
            loss = crit(model(cats[tr][b], numz[tr][b]), y[tr][b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            vl = crit(model(cats[va], numz[va]), y[va]).item()
        val_losses.append(vl)
        plateau.step(vl)
        if vl < best - 1e-4:
            best, best_state, bad = vl, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= 5:
                break
    print(f"{head}: stopped after epoch {epoch}, best val {best:.5f}, "
          f"lr {opt.param_groups[0]['lr']:.5f}")
    buf = io.BytesIO()
    torch.save(best_state, buf)
    buf.seek(0)
    model.load_state_dict(torch.load(buf, weights_only=True))
    model.eval()
    with torch.no_grad():
        out = model(cats[te], numz[te])
        score = out.softmax(1)[:, 1] if head == "softmax" else torch.sigmoid(out[:, 0])
    a = auc(score, y[te])
    print(f"{head}: test AUC {a:.5f}, bn running_mean[:2] "
          f"{[round(v, 4) for v in model.mlp[1].running_mean[:2].tolist()]}")
print(f"RESULT {val_losses[0]:.5f} {best:.5f} {a:.5f}")
