"""Data preprocessing for a tabular model as feature-engineering scripts write it with tensor ops
instead of pandas: NaN-aware statistics (nanmedian, nanquantile, nanmean, nansum), quantile
with every interpolation mode, robust scaling by the interquartile range, quantile binning with
bucketize (right=False / right=True) and searchsorted (side="right", a sorter), frequency encoding
of categoricals by unique(return_inverse, return_counts) and bincount, run-length encoding by
unique_consecutive, rare-category folding with isin, histc / histogram (weights, density),
kthvalue / mode / topk(largest=False) for outlier clipping, cummax / cummin / logcumsumexp
features over time, stable sorts and argsort, aminmax, std_mean / var_mean with correction,
then a small MLP trained on the engineered features. Data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(2018)
N = 600
num = rng.normal(size=(N, 4)) * np.array([1.0, 5.0, 0.2, 30.0]) + np.array([0.0, 10.0, -1.0, 100.0])
num[rng.random((N, 4)) < 0.07] = np.nan
cat = rng.choice(12, size=N, p=np.array([30, 20, 15, 10, 8, 6, 4, 3, 2, 1, 0.6, 0.4]) / 100.0)
X = torch.tensor(num, dtype=torch.float32)
C = torch.tensor(cat)
y = torch.tensor(((np.nan_to_num(num[:, 0]) + 0.1 * np.nan_to_num(num[:, 1] - 10) + (cat % 3 == 0)) > 0.5).astype(np.int64))


def r(t, n=4):
    return [round(float(v), n) for v in torch.as_tensor(t).reshape(-1)]


print("nan count per column", torch.isnan(X).sum(0).tolist())
# summary statistics computed by NumPy and collected into a tensor keep NumPy's float64
np_stats = torch.tensor([np.nanmean(num[:, 3]), np.nanstd(num[:, 3]), np.float32(0.5)])
print("numpy stats tensor", np_stats.dtype, [round(v, 6) for v in np_stats.tolist()])
flags = torch.tensor([np.bool_(True), np.isnan(num[0, 0])])
print("numpy bools", flags.dtype, "int8 codes", torch.tensor([np.int8(c % 3) for c in cat[:4]]).dtype)
med = X.nanmedian(dim=0)
print("nanmedian", r(med.values), "indices valid", bool((med.indices >= 0).all()))
print("nanmean", r(X.nanmean(0)), "nansum", r(X.nansum(0), 2))
q = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9])
print("nanquantile col0", r(torch.nanquantile(X[:, 0], q)))
full = torch.nan_to_num(X, nan=0.0)
for mode in ("linear", "lower", "higher", "nearest", "midpoint"):
    print(f"quantile {mode:8s}", r(torch.quantile(full[:50, 1], torch.tensor([0.05, 0.33, 0.5, 0.95]), interpolation=mode)))
print("quantile keepdim shape", tuple(torch.quantile(full, 0.5, dim=0, keepdim=True).shape))

# impute by the median, robust-scale by the IQR
filled = torch.where(torch.isnan(X), med.values, X)
q1, q3 = torch.quantile(filled, torch.tensor([0.25, 0.75]), dim=0)
scaled = (filled - med.values) / (q3 - q1)
print("iqr", r(q3 - q1))
mn, mx = scaled.aminmax()
print("aminmax", round(mn.item(), 4), round(mx.item(), 4), "per column", r(torch.aminmax(scaled, dim=0).max))
s, m = torch.std_mean(scaled, dim=0, correction=0)
v, m2 = torch.var_mean(scaled, dim=0, unbiased=True)
print("std_mean", r(s), r(m), "var_mean", r(v), torch.equal(m, m2))

# outlier clipping at the 3rd smallest / largest
k3 = torch.kthvalue(scaled, 3, dim=0)
hi = torch.topk(scaled, 3, dim=0).values[-1]
lo = torch.topk(scaled, 3, dim=0, largest=False).values[-1]
print("kthvalue == topk(largest=False)", torch.equal(k3.values, lo), "kth indices", k3.indices.tolist())
clipped = scaled.clamp(min=lo, max=hi)
print("clip changed", (clipped != scaled).sum().item())

# quantile bins
edges = torch.quantile(clipped[:, 3], torch.linspace(0, 1, 6)[1:-1])
col3 = clipped[:, 3].contiguous()
b_left = torch.bucketize(col3, edges)
b_right = torch.bucketize(col3, edges, right=True)
print("bucket counts", torch.bincount(b_left, minlength=5).tolist(), "right differs", (b_left != b_right).sum().item())
print("bucketize ties", torch.bucketize(torch.tensor([1.0, 2.0, 2.5]), torch.tensor([1.0, 2.0, 3.0])).tolist(),
      torch.bucketize(torch.tensor([1.0, 2.0, 2.5]), torch.tensor([1.0, 2.0, 3.0]), right=True).tolist())
unsorted = torch.tensor([3.0, 1.0, 2.0, 5.0])
sorter = torch.argsort(unsorted)
print("searchsorted sorter", torch.searchsorted(unsorted, torch.tensor([2.0, 4.0]), sorter=sorter).tolist(),
      "side right", torch.searchsorted(torch.tensor([1, 2, 2, 3]), torch.tensor([2, 3]), side="right").tolist(),
      "int32", torch.searchsorted(torch.tensor([1, 2, 3]), torch.tensor([2]), out_int32=True).dtype)

# categoricals: frequency encoding, rare folding
vals, inv, counts = torch.unique(C, sorted=True, return_inverse=True, return_counts=True)
print("categories", vals.tolist(), "counts", counts.tolist())
freq = counts.float()[inv] / N
rare = vals[counts < 10]
folded = torch.where(torch.isin(C, rare), torch.full_like(C, -1), C)
print("rare", rare.tolist(), "folded", (folded == -1).sum().item(), "isin invert", torch.isin(C, rare, invert=True).sum().item())
print("bincount weights", r(torch.bincount(C, weights=freq.double(), minlength=12)[:4], 3))
order = torch.argsort(C, stable=True)
print("stable argsort keeps order", bool((order[:-1] < order[1:])[C[order][:-1] == C[order][1:]].all()))
sv, si = torch.sort(C, descending=True, stable=True)
print("stable descending first", si[:5].tolist())
rle_vals, rle_counts = torch.unique_consecutive(C[:40], return_counts=True)
_, rle_inv = torch.unique_consecutive(C[:40], return_inverse=True)
print("rle", len(rle_vals), rle_counts[:8].tolist(), rle_inv[:10].tolist())
rows = torch.tensor([[1, 2], [1, 2], [0, 5], [1, 2], [0, 5]])
u, ui = torch.unique(rows, dim=0, return_inverse=True)
print("unique rows", u.tolist(), ui.tolist())

# histograms
h = torch.histc(clipped[:, 2], bins=8, min=-2, max=2)
hist, bin_edges = torch.histogram(clipped[:, 2], bins=5, range=(-2.0, 2.0), weight=torch.ones(N) * 0.5, density=False)
dens, _ = torch.histogram(clipped[:, 2], bins=torch.tensor([-3.0, -1.0, 0.0, 1.0, 3.0]), density=True)
print("histc", h.tolist(), "histogram", hist.tolist(), r(bin_edges), "density", r(dens))

# time features: the rows as a time series
series = clipped[:, 1]
cmx, cmx_i = torch.cummax(series, 0)
cmn, _ = torch.cummin(series, 0)
lcse = torch.logcumsumexp(series, 0)
print("cummax last", round(cmx[-1].item(), 4), "argmax idx", cmx_i[-1].item(), "cummin last", round(cmn[-1].item(), 4), "logcumsumexp", r(lcse[[0, 9, -1]]))
print("diff prepend", r(torch.diff(series[:5], prepend=series[:1])), "n=2", r(torch.diff(series[:5], n=2)))
md = torch.mode(C[:30])
print("mode", md.values.item(), md.indices.item())

feats = torch.cat([clipped, freq[:, None], F.one_hot(b_left, 5).float(), F.one_hot(folded.clamp(min=0), 12).float()], 1)
print("features", tuple(feats.shape))
W = [torch.from_numpy(rng.normal(0, 0.2, s).astype(np.float32)) for s in ((32, feats.shape[1]), (2, 32))]
model = nn.Sequential(nn.Linear(feats.shape[1], 32), nn.ReLU(), nn.Linear(32, 2))
with torch.no_grad():
    model[0].weight.copy_(W[0])
    model[0].bias.zero_()
    model[2].weight.copy_(W[1])
    model[2].bias.zero_()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for epoch in range(60):
    loss = F.cross_entropy(model(feats), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 20 == 0:
        print(f"epoch {epoch} loss {loss.item():.5f}")
acc = (model(feats).argmax(1) == y).float().mean().item()
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
