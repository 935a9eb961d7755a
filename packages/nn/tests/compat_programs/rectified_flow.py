"""Flow matching / rectified flow on a 2-D distribution, in the style of the public minimal
flow-matching and rectified-flow training scripts: straight-line interpolants x_t = (1 - t) x0
+ t x1 with the velocity target x1 - x0, times from a logit-normal distribution
(torch.sigmoid of NumPy normals) and the same drawn with
TransformedDistribution(Normal, SigmoidTransform()) for its log-density, a time-conditioned MLP
with sinusoidal Fourier features, an EMA of the weights updated with torch._foreach_lerp_
(and checked against torch._foreach_mul_ / _foreach_add_), warmup then cosine decay by
SequentialLR(LinearLR, CosineAnnealingLR), sampling by Euler and by Heun steps under
torch.inference_mode, the second rectification (reflow) on the model's own couplings, the
straightness of the learned paths, and the sliced Wasserstein distance to the data (random
projections from NumPy, torch.sort of both projected sets). Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <sliced W>."""

import math

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import SigmoidTransform

rng = np.random.default_rng(23)


def sample_data(n):
    theta = rng.uniform(0, 2 * np.pi, n)
    r = 2.0 + 0.15 * rng.normal(size=n)
    return torch.from_numpy(np.stack([r * np.cos(theta), r * np.sin(theta)], 1).astype(np.float32))


def fourier(t, k=8):
    f = 2 ** torch.arange(k, dtype=torch.float32) * math.pi
    return torch.cat([torch.sin(t[:, None] * f), torch.cos(t[:, None] * f)], 1)


class VelocityNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 + 16, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 2))

    def forward(self, x, t):
        return self.net(torch.cat([x, fourier(t)], 1))


def init(m):
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
    return m


logit_normal = TransformedDistribution(Normal(0.0, 1.0), [SigmoidTransform()])
print(f"logit-normal density at 0.5 {logit_normal.log_prob(torch.tensor(0.5)).exp().item():.5f} "
      f"at 0.9 {logit_normal.log_prob(torch.tensor(0.9)).exp().item():.5f}")


def train(model, pairs_fn, steps, tag):
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [torch.optim.lr_scheduler.LinearLR(opt, 0.1, 1.0, total_iters=10),
                                                        torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps - 10, eta_min=1e-4)], milestones=[10])
    losses = []
    for step in range(steps):
        x0, x1 = pairs_fn(256)
        t = torch.sigmoid(torch.from_numpy(rng.normal(size=256).astype(np.float32)))
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        loss = ((model(xt, t) - (x1 - x0)) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 0.05)
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"{tag} step {step:3d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.6f}")
    return losses, ema


@torch.inference_mode()
def sample(model, x0, n_steps, heun=False):
    x, dt = x0.clone(), 1.0 / n_steps
    for i in range(n_steps):
        t = torch.full((x.shape[0],), i * dt)
        v = model(x, t)
        if heun:
            v2 = model(x + dt * v, t + dt)
            v = 0.5 * (v + v2)
        x = x + dt * v
    return x


def sliced_w(a, b, n_proj=32):
    dirs = torch.from_numpy(rng.normal(size=(2, n_proj)).astype(np.float32))
    dirs = dirs / dirs.norm(dim=0)
    pa, pb = torch.sort(a @ dirs, 0).values, torch.sort(b @ dirs, 0).values
    return ((pa - pb) ** 2).mean().sqrt().item()


model = init(VelocityNet())
noise = lambda n: torch.from_numpy(rng.normal(size=(n, 2)).astype(np.float32))  # noqa: E731
losses, ema = train(model, lambda n: (noise(n), sample_data(n)), 150, "flow")
ema_model = VelocityNet()
with torch.no_grad():
    for p, e in zip(ema_model.parameters(), ema):
        p.copy_(e)
a, b = [torch.ones(3), torch.zeros(2)], [torch.zeros(3), torch.ones(2)]
c = [x.clone() for x in a]
torch._foreach_lerp_(a, b, 0.25)
torch._foreach_mul_(c, 0.75)
torch._foreach_add_(c, b, alpha=0.25)
print(f"foreach lerp == mul+add: {all(torch.allclose(x, y) for x, y in zip(a, c))}")
z = noise(512)
data = sample_data(512)
for name, m in [("model", model), ("ema", ema_model)]:
    print(f"{name:5s} sliced W euler-4 {sliced_w(sample(m, z, 4), data):.4f} euler-32 {sliced_w(sample(m, z, 32), data):.4f} "
          f"heun-8 {sliced_w(sample(m, z, 8, heun=True), data):.4f}")


def straightness(m, x0):
    xs, dt = [x0], 1.0 / 16
    with torch.no_grad():
        for i in range(16):
            xs.append(xs[-1] + dt * m(xs[-1], torch.full((x0.shape[0],), i * dt)))
    path = torch.stack(xs)
    return ((path[1:] - path[:-1]).norm(dim=-1).sum(0) / (path[-1] - path[0]).norm(dim=-1)).mean().item()


reflow = init(VelocityNet())
pairs = lambda n: (lambda x0: (x0, sample(ema_model, x0, 16)))(noise(n))  # noqa: E731
rl, _ = train(reflow, pairs, 60, "reflow")
sw = sliced_w(sample(reflow, z, 1), data)
print(f"path length ratio: flow {straightness(ema_model, z):.4f} reflow {straightness(reflow, z):.4f} one-step W {sw:.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {sliced_w(sample(ema_model, z, 32), data):.4f}")
