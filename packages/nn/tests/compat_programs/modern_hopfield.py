"""Modern Hopfield networks ("Hopfield Networks is All You Need", Ramsauer et al.) in the style of
the public hopfield-layers code: the energy E = -lse(beta, X^T xi) + xi^T xi / 2 + const by
torch.logsumexp, the one-step update xi <- X softmax(beta X^T xi) retrieving stored patterns,
retrieval accuracy against beta and the number of stored patterns (with pattern separation
measured by cdist), the energy decreasing monotonically along updates, the update as the
gradient step of the concave-convex procedure checked with torch.autograd.grad, and a
HopfieldPooling layer (a learned query attending over a bag) trained for multiple-instance
learning with padded bags and a boolean mask. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss>
<last loss> <bag accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1505)


def energy(xi, X, beta):
    lse = torch.logsumexp(beta * X.T @ xi, dim=0) / beta
    M = X.norm(dim=0).max()
    n = X.shape[1]
    return -lse + 0.5 * xi @ xi + math.log(n) / beta + 0.5 * M ** 2


def update(xi, X, beta):
    return X @ torch.softmax(beta * X.T @ xi, dim=0)


d, n = 32, 20
X = torch.from_numpy(rng.choice([-1.0, 1.0], (d, n)).astype(np.float32)) / math.sqrt(d)
dist = torch.cdist(X.T, X.T)
sep = (dist + torch.eye(n) * 1e3).min().item()
print(f"stored {n} patterns in R^{d}, min separation {sep:.4f} self-distance {torch.diagonal(torch.cdist(X.T, X.T)).abs().max().item():.4f}")

target = X[:, 3]
noisy = target.clone()
flip = torch.from_numpy(rng.permutation(d)[:8])
noisy[flip] = -noisy[flip]
xi = noisy.clone()
es = [energy(xi, X, 8.0).item()]
for _ in range(3):
    xi = update(xi, X, 8.0)
    es.append(energy(xi, X, 8.0).item())
print(f"energies {[round(e, 5) for e in es]} monotone {all(b <= a + 1e-6 for a, b in zip(es, es[1:]))}")
print(f"retrieved pattern 3: {torch.argmax(X.T @ xi).item() == 3} error {torch.linalg.vector_norm(xi - target).item():.5f}")

# the update is xi - grad of the concave part: xi_new = grad_xi lse
xr = noisy.clone().requires_grad_(True)
lse = torch.logsumexp(8.0 * X.T @ xr, 0) / 8.0
(g,) = torch.autograd.grad(lse, xr)
print(f"update == grad of lse: {torch.allclose(g, update(noisy, X, 8.0), atol=1e-6)}")

for beta in (0.5, 2.0, 8.0, 32.0):
    hits = 0
    for k in range(n):
        q = X[:, k] + 0.05 * torch.from_numpy(rng.normal(size=d).astype(np.float32))
        hits += int(torch.argmax(X.T @ update(q, X, beta)).item() == k)
    p = torch.softmax(beta * X.T @ X[:, 0], 0)
    ent = -(p * p.clamp_min(1e-30).log()).sum().item()
    print(f"beta {beta:5.1f} retrieved {hits}/{n} attention entropy on a stored pattern {ent:.4f}")


class HopfieldPooling(nn.Module):
    def __init__(self, dim, hidden, beta=None, heads=2):
        super().__init__()
        self.query = nn.Parameter(torch.from_numpy(rng.normal(0, 0.1, (1, 1, hidden)).astype(np.float32)))
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True, kdim=dim, vdim=dim)
        self.scale = beta

    def forward(self, bags, pad_mask):
        q = self.query.expand(bags.shape[0], -1, -1)
        out, w = self.attn(q, bags, bags, key_padding_mask=pad_mask)
        return out.squeeze(1), w.squeeze(1)


class MIL(nn.Module):
    def __init__(self, dim=6, hidden=16):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.pool = HopfieldPooling(hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, bags, mask):
        z, w = self.pool(self.embed(bags), mask)
        return self.head(z).squeeze(-1), w


def make_bags(m, max_len=8, dim=6):
    """Positive bags hold at least one instance near a witness prototype."""
    lens = rng.integers(3, max_len + 1, m)
    y = rng.integers(0, 2, m)
    x = rng.normal(0, 1, (m, max_len, dim))
    witness = np.array([2.5, -2.5, 2.5, 0, 0, 0])
    for i in range(m):
        if y[i]:
            x[i, rng.integers(0, lens[i])] = witness + 0.3 * rng.normal(size=dim)
    mask = np.arange(max_len)[None] >= lens[:, None]
    x[mask] = 0.0
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(mask), torch.from_numpy(y.astype(np.float32))


model = MIL()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name == "pool.query":
            continue
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)) if p.dim() > 1 else torch.zeros_like(p))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(80):
    xb, mb, yb = make_bags(32)
    logits, w = model(xb, mb)
    loss = F.binary_cross_entropy_with_logits(logits, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
xt, mt, yt = make_bags(200)
with torch.no_grad():
    logits, w = model(xt, mt)
acc = ((logits > 0).float() == yt).float().mean().item()
print(f"padding gets no attention: {bool((w[mt] == 0).all())} rows sum to one: {torch.allclose(w.sum(-1), torch.ones(200))}")
pos = yt.bool()
print(f"bag accuracy {acc:.4f} attention peak on positives {w[pos].max(-1).values.mean().item():.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
