"""Feature binning and target encoding for a tabular model, in the style of the public
preprocessing snippets of tabular deep-learning code (quantile discretizers, piecewise-linear
encodings, histogram features): quantile bin edges per column (torch.quantile over dim 0 with
interpolation="linear" / "lower" / "higher" / "midpoint" / "nearest", nanquantile with missing
values), torch.bucketize (right=False / True, out_int32) and torch.searchsorted (side="right",
a sorter from argsort) into those edges, histc (auto range when min == max == 0) and
torch.histogram (an int bin count, explicit edges, weight, density=True), histogramdd,
bincount with weights and minlength, unique(return_inverse, return_counts) and
unique_consecutive on sorted codes, scatter_reduce("mean", include_self=False) and index_add_
for smoothed target encoding, torch.mode / nanmedian / kthvalue / msort / cummax / argsort
(stable=True), F.one_hot of the bin ids, a piecewise-linear encoding clamped between edges, and a
logistic regression on the binned features trained with LBFGS. Data from NumPy: the run is the
same on both libraries. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(8)
n = 400
age = rng.gamma(4.0, 10.0, n)
income = np.exp(rng.normal(10, 0.6, n))
score = rng.uniform(0, 1, n)
logit = 0.08 * (age - 40) - 0.8 * (np.log(income) - 10) + 3 * (score > 0.7) - 0.5
y = (rng.uniform(0, 1, n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
X = torch.from_numpy(np.stack([age, income, score], 1).astype(np.float32))
Y = torch.from_numpy(y)

q = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])
for mode in ["linear", "lower", "higher", "midpoint", "nearest"]:
    e = torch.quantile(X[:, 0], q, interpolation=mode)
    print(f"age quantiles {mode:8s}", [round(v, 2) for v in e.tolist()])
edges = torch.quantile(X, torch.linspace(0, 1, 6), dim=0).T.contiguous()  # (3, 6)
print("edges shape", tuple(edges.shape), "keepdim shape",
      tuple(torch.quantile(X, 0.5, dim=0, keepdim=True).shape))
Xn = X[:, 2].clone()
Xn[::7] = float("nan")
print("nanquantile", [round(v, 4) for v in torch.nanquantile(Xn, q[1:4]).tolist()],
      "quantile with nan:", torch.quantile(Xn, 0.5).isnan().item())

inner = edges[:, 1:-1]
ids = torch.stack([torch.bucketize(X[:, j], inner[j]) for j in range(3)], 1)
ids_r = torch.bucketize(X[:, 0], inner[0], right=True, out_int32=True)
print("bucketize dtype", ids.dtype, ids_r.dtype, "counts", torch.bincount(ids[:, 0], minlength=5).tolist())
print("right differs only at edges:", int((ids_r.long() != ids[:, 0]).sum()))
ss = torch.searchsorted(inner, X.T.contiguous(), side="right")
print("searchsorted batched == bucketize(right):", torch.equal(ss[0], ids_r.long()))
perm = torch.randperm(4, generator=torch.Generator().manual_seed(0))
shuffled = inner[0][perm]
ss2 = torch.searchsorted(shuffled, X[:5, 0], sorter=torch.argsort(shuffled))
print("searchsorted with sorter:", torch.equal(ss2, ids[:5, 0]))

h = torch.histc(X[:, 2], bins=4, min=0, max=0)
print("histc auto range", h.tolist(), "sum", h.sum().item())
hist, be = torch.histogram(X[:, 2], bins=4, range=(0.0, 1.0))
print("histogram", hist.tolist(), [round(v, 3) for v in be.tolist()])
hw, _ = torch.histogram(X[:, 2], bins=torch.tensor([0.0, 0.5, 0.7, 1.0]), weight=Y)
hd, _ = torch.histogram(X[:, 2], bins=torch.tensor([0.0, 0.5, 0.7, 1.0]), density=True)
print("weighted histogram", hw.tolist(), "density", [round(v, 4) for v in hd.tolist()])
hdd = torch.histogramdd(X[:, [0, 2]], bins=[3, 2])
print("histogramdd", hdd.hist.shape, hdd.hist.sum().item(), len(hdd.bin_edges))
print("bincount weighted", [round(v, 2) for v in torch.bincount(ids[:, 2], weights=Y, minlength=5).tolist()])

codes = ids[:, 0] * 5 + ids[:, 2]
u, inv, cnt = torch.unique(codes, sorted=True, return_inverse=True, return_counts=True)
print("unique codes", len(u), "inverse ok:", torch.equal(u[inv], codes), "max count", cnt.max().item())
uc, cc = torch.unique_consecutive(torch.sort(codes).values, return_counts=True)
print("unique_consecutive agrees:", torch.equal(uc, u), torch.equal(cc, cnt))
rows_u = torch.unique(ids[:, :2], dim=0)
print("unique rows", tuple(rows_u.shape), rows_u[:3].tolist())

# smoothed target encoding per age bin
prior, m = Y.mean(), 10.0
mean_b = torch.zeros(5).scatter_reduce(0, ids[:, 0], Y, reduce="mean", include_self=False)
cnt_b = torch.zeros(5).index_add_(0, ids[:, 0], torch.ones(n))
enc = (cnt_b * mean_b + m * prior) / (cnt_b + m)
print("target encoding", [round(v, 4) for v in enc.tolist()])
print("mode", [v.item() for v in torch.mode(ids[:, 1])], "nanmedian", round(Xn.nanmedian().item(), 4),
      "kthvalue", round(X[:, 0].kthvalue(10).values.item(), 3))
print("msort first", [round(v, 3) for v in torch.msort(X[:4, :1]).flatten().tolist()],
      "cummax idx", torch.cummax(X[:6, 2], 0).indices.tolist())
print("stable argsort of ids", torch.argsort(ids[:12, 0], stable=True).tolist())

# piecewise-linear encoding: fraction of each bin covered
lo, hi = edges[:, :-1], edges[:, 1:]
ple = ((X[:, :, None] - lo[None]) / (hi - lo)[None]).clamp(0, 1)  # (n, 3, 5)
print("ple shape", tuple(ple.shape), "row 0", [round(v, 3) for v in ple[0, 0].tolist()])
feats = torch.cat([F.one_hot(ids, 5).flatten(1).float(), ple.flatten(1), enc[ids[:, 0]][:, None]], 1)
print("features", tuple(feats.shape))

w = torch.zeros(feats.shape[1], requires_grad=True)
b = torch.zeros(1, requires_grad=True)
opt = torch.optim.LBFGS([w, b], lr=0.5, max_iter=20, history_size=10, line_search_fn="strong_wolfe")
losses = []


def closure():
    opt.zero_grad()
    loss = F.binary_cross_entropy_with_logits(feats @ w + b, Y) + 1e-3 * w.pow(2).sum()
    loss.backward()
    return loss


for it in range(5):
    loss = opt.step(closure)
    losses.append(loss.item())
    print(f"lbfgs {it} loss {loss.item():.5f}")
acc = ((feats @ w + b > 0).float() == Y).float().mean().item()
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
