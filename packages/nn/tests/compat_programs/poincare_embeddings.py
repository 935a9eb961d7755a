"""Hyperbolic embeddings of a hierarchy, in the style of the public Poincare-embeddings
(Nickel & Kiela, 2017) and hyperbolic-neural-network code written in plain PyTorch: a tree's
transitive closure as positive pairs, the Poincare distance through torch.acosh with the
denominators clamped by torch.finfo(...).eps, Riemannian SGD that rescales the Euclidean
gradient by ((1 - |x|^2)^2 / 4) and retracts into the ball with Tensor.renorm (maxnorm 1 -
eps, the boundary found with torch.nextafter), negatives from NumPy with a softmax loss over
distances (F.cross_entropy on -d with the positive at index 0), the Lorentz model (the
Minkowski inner product, exp map with cosh / sinh, torch.arccosh distance) compared with the
Poincare distance after the isometry between them, Mobius addition and the exponential /
logarithmic maps at the origin (torch.tanh / torch.atanh, atanh clamped), and evaluation by
mean rank of the true ancestors and the Spearman correlation between depth and norm
(ranks by argsort of argsort). float64 throughout. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <depth-norm correlation>."""

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(4)
# a balanced tree of depth 3 with branching 3: 1 + 3 + 9 + 27 nodes
parent = [-1]
depth = [0]
for d in range(1, 4):
    for p in [i for i, dd in enumerate(depth) if dd == d - 1]:
        for _ in range(3):
            parent.append(p), depth.append(d)
N = len(parent)
pairs = []
for i in range(N):
    a = parent[i]
    while a >= 0:
        pairs.append((i, a))
        a = parent[a]
pairs = torch.tensor(pairs)
related = torch.zeros(N, N, dtype=torch.bool)
related[pairs[:, 0], pairs[:, 1]] = True
related = related | related.T | torch.eye(N, dtype=torch.bool)
print(f"nodes {N} closure pairs {pairs.shape[0]} related fraction {related.double().mean().item():.4f}")
EPS = torch.finfo(torch.float64).eps
BOUNDARY = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0)).item() - 1e-5


def poincare_dist(u, v):
    sq = ((u - v) ** 2).sum(-1)
    den = (1 - (u ** 2).sum(-1)).clamp_min(EPS) * (1 - (v ** 2).sum(-1)).clamp_min(EPS)
    return torch.acosh((1 + 2 * sq / den).clamp_min(1 + 1e-12))  # acosh' is infinite at 1


def to_lorentz(x):
    n2 = (x ** 2).sum(-1, keepdim=True)
    return torch.cat([(1 + n2), 2 * x], -1) / (1 - n2)


def lorentz_dist(a, b):
    inner = -a[..., 0] * b[..., 0] + (a[..., 1:] * b[..., 1:]).sum(-1)
    return torch.arccosh((-inner).clamp_min(1.0))


def mobius_add(x, y):
    xy, x2, y2 = (x * y).sum(-1, keepdim=True), (x ** 2).sum(-1, keepdim=True), (y ** 2).sum(-1, keepdim=True)
    return ((1 + 2 * xy + y2) * x + (1 - x2) * y) / (1 + 2 * xy + x2 * y2)


def expmap0(v):
    n = v.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    return torch.tanh(n) * v / n


def logmap0(x):
    n = x.norm(dim=-1, keepdim=True).clamp_min(1e-15)
    return torch.atanh(n.clamp_max(BOUNDARY)) * x / n


emb = torch.from_numpy(rng.uniform(-1e-3, 1e-3, (N, 2))).requires_grad_()
losses = []
K = 10
for epoch in range(120):
    lr = 0.03 if epoch < 20 else 1.0  # burn-in
    order = torch.from_numpy(rng.permutation(pairs.shape[0]))
    total = 0.0
    for b in order.split(32):
        u, v = pairs[b, 0], pairs[b, 1]
        negs = torch.from_numpy(rng.integers(0, N, (b.numel(), K)))
        cand = torch.cat([v[:, None], negs], 1)
        mask = related[u[:, None], cand]
        mask[:, 0] = False
        d = poincare_dist(emb[u][:, None], emb[cand])
        logits = (-d).masked_fill(mask, float("-inf"))
        loss = F.cross_entropy(logits, torch.zeros(b.numel(), dtype=torch.long))
        if emb.grad is not None:
            emb.grad.zero_()
        loss.backward()
        with torch.no_grad():
            scale = (1 - (emb ** 2).sum(1, keepdim=True)) ** 2 / 4
            emb.sub_(lr * scale * emb.grad)
            emb.copy_(emb.renorm(2, 0, BOUNDARY))
        total += loss.item() * b.numel()
    losses.append(total / pairs.shape[0])
    if epoch % 40 == 0:
        print(f"epoch {epoch:3d} loss {losses[-1]:.5f} max norm {emb.norm(dim=1).max().item():.5f}")

with torch.no_grad():
    D = poincare_dist(emb[:, None], emb[None])
    L = lorentz_dist(to_lorentz(emb)[:, None], to_lorentz(emb)[None])
    print(f"lorentz == poincare: {torch.allclose(D, L, atol=1e-5)} symmetric: {torch.allclose(D, D.T)} "
          f"diag max {D.diagonal().abs().max().item():.2e}")
    ranks = []
    for i, a in pairs.tolist():
        row = D[i].clone()
        row[related[i]] = float("inf")
        ranks.append(int((row < D[i, a]).sum()) + 1)
    norms = emb.norm(dim=1)
    dep = torch.tensor(depth, dtype=torch.float64)
    rank = lambda x: x.argsort(stable=True).argsort(stable=True).double()  # noqa: E731
    rho = torch.corrcoef(torch.stack([rank(norms), rank(dep)]))[0, 1].item()
    print(f"mean rank {np.mean(ranks):.4f} mean norm by depth {[round(norms[dep == k].mean().item(), 4) for k in range(4)]}")
    x, y = emb[5], emb[20]
    print(f"mobius: d(x, y) == 2 atanh|(-x) + y|: "
          f"{abs(poincare_dist(x, y).item() - 2 * torch.atanh(mobius_add(-x, y).norm()).item()) < 1e-8} "
          f"exp(log(x)) == x: {torch.allclose(expmap0(logmap0(emb)), emb, atol=1e-9)} boundary {BOUNDARY:.8f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {rho:.4f}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
