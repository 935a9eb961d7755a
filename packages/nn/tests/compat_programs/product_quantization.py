"""Approximate nearest-neighbour search by product quantization, in the style of the public
FAISS-free PyTorch implementations used for retrieval and embedding compression: vectors split
into sub-spaces with view / unbind, one k-means codebook per sub-space (batched with torch.cdist
over a leading sub-space dim and scatter_add_ / bincount centroid updates), codes stored as
torch.uint8, asymmetric distance computation through per-query lookup tables gathered with the
codes (long indices from the uint8 codes), an inverted file (coarse quantizer) with the residuals
encoded and candidate lists found by torch.isin / nonzero, recall@k against brute force (torch.topk;
kthvalue thresholds where codes tie), the compression ratio from element_size(), a learnable rotation (orthogonal
parametrization via torch.linalg.qr of a parameter) trained to lower the quantization error
with a straight-through estimator, and reconstruction by torch.gather on the stacked
codebooks. Data from NumPy: torch and ember print the same numbers. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <recall@10>."""

import numpy as np
import torch

rng = np.random.default_rng(33)
D, M, K = 16, 4, 16  # dim, sub-spaces, centroids per sub-space
d = D // M
clusters = rng.normal(0, 2, size=(12, D))
X = torch.from_numpy((clusters[rng.integers(0, 12, 1200)] + rng.normal(0, 0.5, (1200, D))).astype(np.float32))
Q = torch.from_numpy((clusters[rng.integers(0, 12, 20)] + rng.normal(0, 0.5, (20, D))).astype(np.float32))


def kmeans_batched(V, k, iters=15):
    """V: (M, N, d) -> codebooks (M, k, d), one k-means per leading index."""
    C = V[:, torch.linspace(0, V.shape[1] - 1, k).long()].clone()
    for _ in range(iters):
        assign = torch.cdist(V, C).argmin(-1)  # (M, N)
        sums = torch.zeros_like(C).scatter_add_(1, assign[..., None].expand(-1, -1, V.shape[-1]), V)
        counts = torch.stack([torch.bincount(a, minlength=k) for a in assign]).float()
        C = torch.where(counts[..., None] > 0, sums / counts.clamp(min=1)[..., None], C)
    return C


def encode(V, C):
    return torch.cdist(V, C).argmin(-1).to(torch.uint8)  # (M, N)


def decode(codes, C):
    idx = codes.long()[..., None].expand(-1, -1, C.shape[-1])
    return torch.gather(C, 1, idx).permute(1, 0, 2).reshape(codes.shape[1], -1)


sub = X.view(-1, M, d).permute(1, 0, 2).contiguous()  # (M, N, d)
C = kmeans_batched(sub, K)
codes = encode(sub, C)
rec = decode(codes, C)
mse = ((rec - X) ** 2).sum(1).mean().item()
ratio = X.element_size() * D / (codes.element_size() * M)
print("codebooks", tuple(C.shape), "codes", codes.dtype, tuple(codes.shape), f"compression x{ratio:.0f}",
      f"reconstruction mse {mse:.4f}")

# asymmetric distance: per-query tables (M, nq, K), summed through the codes
qs = Q.view(-1, M, d).permute(1, 0, 2)
tables = torch.cdist(qs, C) ** 2  # (M, nq, K)
adc = torch.stack([tables[m][:, codes[m].long()] for m in range(M)]).sum(0)  # (nq, N)
exact = torch.cdist(Q, X, compute_mode="donot_use_mm_for_euclid_dist") ** 2  # exact, for ties
print("adc == distance to reconstruction:", torch.allclose(adc, torch.cdist(Q, rec) ** 2, rtol=1e-4, atol=1e-3))
true_nn = exact.topk(10, largest=False).indices
# points with equal codes tie exactly: take every candidate within the 10th distance (topk's
# order among ties is not specified)
thr = adc.kthvalue(10, dim=1, keepdim=True).values
approx = [torch.nonzero(row <= t).squeeze(1) for row, t in zip(adc, thr)]


def recall(a, b):
    return sum(len(set(x.tolist()) & set(y.tolist())) for x, y in zip(a, b)) / b.numel()


print(f"recall@10 pq {recall(approx, true_nn):.4f} candidates returned",
      sum(a.numel() for a in approx))

# inverted file: coarse centroids, residual PQ, search in the nearest 3 lists
coarse = kmeans_batched(X[None], 8)[0]
lists = torch.cdist(X, coarse).argmin(1)
resid = (X - coarse[lists]).view(-1, M, d).permute(1, 0, 2).contiguous()
Cr = kmeans_batched(resid, K)
rcodes = encode(resid, Cr)
probe = torch.cdist(Q, coarse).topk(3, largest=False).indices
ivf_hits = []
for qi in range(Q.shape[0]):
    cand = torch.nonzero(torch.isin(lists, probe[qi])).squeeze(1)
    approx_x = coarse[lists[cand]] + decode(rcodes[:, cand], Cr)
    dist = ((approx_x - Q[qi]) ** 2).sum(1)
    kth = dist.kthvalue(min(10, cand.numel())).values
    ivf_hits.append(cand[dist <= kth])
ivf_recall = recall(ivf_hits, true_nn)
print(f"ivf lists sizes {torch.bincount(lists, minlength=8).tolist()} recall@10 {ivf_recall:.4f}")

# learn a rotation R = qr(W).Q that lowers the PQ error (straight-through codes)
W = torch.nn.Parameter(torch.eye(D) + 0.01 * torch.from_numpy(rng.normal(size=(D, D)).astype(np.float32)))
opt = torch.optim.Adam([W], lr=0.01)
losses = []
for step in range(25):
    R, _ = torch.linalg.qr(W)
    Xr = X @ R
    s = Xr.view(-1, M, d).permute(1, 0, 2)
    with torch.no_grad():
        Cs = kmeans_batched(s.detach(), K, iters=5)
        cds = encode(s, Cs)
    q = decode(cds, Cs)
    loss = ((Xr - (Xr + (q - Xr).detach())) ** 2).sum(1).mean() + ((q - Xr) ** 2).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
R, _ = torch.linalg.qr(W.detach())
print(f"rotation orthogonal: {torch.allclose(R.T @ R, torch.eye(D), atol=1e-5)} "
      f"pq loss {losses[0]:.4f} -> {losses[-1]:.4f}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {recall(approx, true_nn):.4f}")
