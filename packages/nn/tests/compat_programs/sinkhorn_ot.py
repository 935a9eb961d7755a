"""Entropic optimal transport with the Sinkhorn algorithm in log space, in the style of the
public OT / Sinkhorn-loss implementations written in plain PyTorch (no OT library): a squared
Euclidean cost matrix from torch.cdist(p=2) ** 2, uniform marginals as log weights,
alternating torch.logsumexp updates of the dual potentials, the transport plan from exp of the
dual-adjusted kernel (its marginals checked), the debiased Sinkhorn divergence
S(a, b) = OT(a, b) - (OT(a, a) + OT(b, b)) / 2, a Wasserstein gradient flow that moves a
particle cloud (an nn.Parameter) onto a target ring by Adam on the divergence, and an
assignment check against the sorted 1-D transport (torch.sort). Data from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first divergence> <last divergence> <1-D error>."""

import numpy as np
import torch

rng = np.random.default_rng(0)
torch.set_default_dtype(torch.float64)


def sinkhorn(x, y, eps=0.05, iters=50):
    n, m = x.shape[0], y.shape[0]
    C = torch.cdist(x, y, p=2) ** 2
    log_a = torch.full((n,), -np.log(n))
    log_b = torch.full((m,), -np.log(m))
    f, g = torch.zeros(n), torch.zeros(m)
    for _ in range(iters):
        f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], dim=1)
        g = -eps * torch.logsumexp((f[:, None] - C) / eps + log_a[:, None], dim=0)
    P = torch.exp((f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :])
    return (P * C).sum(), P


def divergence(x, y, eps=0.05):
    return sinkhorn(x, y, eps)[0] - 0.5 * (sinkhorn(x, x, eps)[0] + sinkhorn(y, y, eps)[0])


theta = rng.uniform(0, 2 * np.pi, 96)
target = torch.from_numpy(np.stack([np.cos(theta), np.sin(theta)], 1) * 1.5
                          + rng.normal(0, 0.05, (96, 2)))
source = torch.from_numpy(rng.normal(0, 0.3, (64, 2)))
cost, P = sinkhorn(source, target)
print(f"plan {tuple(P.shape)} {P.dtype}: row sums {P.sum(1).mean().item():.6f} "
      f"col sums ok {torch.allclose(P.sum(0), torch.full((96,), 1 / 96), atol=1e-4)}")
print(f"cost {cost.item():.6f}, divergence(x, x) == 0: {abs(divergence(source, source).item()) < 1e-12}")

particles = torch.nn.Parameter(source.clone())
opt = torch.optim.Adam([particles], lr=0.05)
divs = []
for step in range(40):
    loss = divergence(particles, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    divs.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} divergence {loss.item():.6f} grad norm "
              f"{particles.grad.norm().item():.6f}")
radius = particles.detach().norm(dim=1)
print(f"particle radius mean {radius.mean().item():.4f} std {radius.std().item():.4f}")

# in 1-D the optimal plan between equal-size uniform clouds matches sorted orders
a = torch.from_numpy(rng.normal(0, 1, 32))
b = torch.from_numpy(rng.normal(0.5, 0.5, 32))
_, P1 = sinkhorn(a[:, None], b[:, None], eps=0.01, iters=200)
match = P1.argmax(dim=1)
ia, ib = torch.sort(a).indices, torch.sort(b).indices
expect = torch.empty_like(ia)
expect[ia] = ib
rank_b = torch.argsort(torch.argsort(b))
near = ((rank_b[match] - rank_b[expect]).abs() <= 1).float().mean()
print(f"1-D plan's argmax within one rank of the sorted matching: {near.item():.4f}")
w1 = (torch.sort(a).values - torch.sort(b).values).pow(2).mean()
err = abs((P1 * (a[:, None] - b[None, :]) ** 2).sum().item() - w1.item())
torch.set_default_dtype(torch.float32)
print(f"RESULT {divs[0]:.6f} {divs[-1]:.6f} {err:.6f}")
