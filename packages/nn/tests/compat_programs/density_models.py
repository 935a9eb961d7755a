"""Density estimation as in the public normalizing-flow and mixture-density-network examples: a
RealNVP flow on the two-moons data (affine coupling layers with alternating binary masks
registered as buffers, tanh-bounded log-scales, the log-determinant summed per sample, a
MultivariateNormal base distribution, log_prob = base.log_prob(z) + logdet, sampling by the
inverse pass), and a mixture density network whose head parameterizes
MixtureSameFamily(Categorical(logits), Independent(Normal(mu, sigma), 1)) trained on a
multi-valued inverse problem; plus TransformedDistribution with AffineTransform and
SigmoidTransform, LowRankMultivariateNormal and MultivariateNormal(scale_tril) log-probs, and
Distribution.set_default_validate_args. Data and the flow's samples come from NumPy; the flow's
inverse-pass samples from each library's generator: from the same initial weights
(``--save-init``/``--init-from``) the training numbers agree with torch's. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
from torch import distributions as D

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=60)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)
D.Distribution.set_default_validate_args(True)


def two_moons(n):
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    pts = np.stack([x, y], 1) + rng.normal(0, 0.08, (n, 2))
    return torch.from_numpy(((pts - [0.5, 0.25]) / [0.9, 0.5]).astype(np.float32))


class Coupling(nn.Module):
    def __init__(self, mask, hidden=32):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, x):
        s, t = self.net(x * self.mask).chunk(2, dim=-1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        y = x * self.mask + (1 - self.mask) * (x * torch.exp(s) + t)
        return y, s.sum(-1)

    def inverse(self, y):
        s, t = self.net(y * self.mask).chunk(2, dim=-1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return y * self.mask + (1 - self.mask) * ((y - t) * torch.exp(-s))


class RealNVP(nn.Module):
    def __init__(self, n_layers=4):
        super().__init__()
        masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0])
                 for i in range(n_layers)]
        self.layers = nn.ModuleList(Coupling(m) for m in masks)
        self.register_buffer("loc", torch.zeros(2))
        self.register_buffer("cov", torch.eye(2))

    @property
    def base(self):
        return D.MultivariateNormal(self.loc, covariance_matrix=self.cov)

    def log_prob(self, x):
        logdet = torch.zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        return self.base.log_prob(x) + logdet

    def sample(self, n):
        z = self.base.sample((n,))
        for layer in reversed(self.layers):
            z = layer.inverse(z)
        return z


class MDN(nn.Module):
    def __init__(self, k=3, hidden=32):
        super().__init__()
        self.k = k
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                  nn.Tanh())
        self.logits = nn.Linear(hidden, k)
        self.mu = nn.Linear(hidden, k)
        self.log_sigma = nn.Linear(hidden, k)

    def forward(self, x):
        h = self.body(x)
        mix = D.Categorical(logits=self.logits(h))
        comp = D.Independent(D.Normal(self.mu(h).unsqueeze(-1),
                                      self.log_sigma(h).clamp(-5, 3).exp().unsqueeze(-1)), 1)
        return D.MixtureSameFamily(mix, comp)


flow, mdn = RealNVP(), MDN()
models = {"flow": flow, "mdn": mdn}
if args.save_init:
    np.savez(args.save_init, **{f"{n}.{k}": v.detach().numpy() for n, m in models.items()
                                for k, v in m.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        for n, m in models.items():
            m.load_state_dict({k[len(n) + 1:]: torch.from_numpy(f[k]) for k in f.files
                               if k.startswith(n + ".")})

# the flow is invertible and its log-density integrates as it should at the start
x = two_moons(8)
z = x
for layer in flow.layers:
    z, _ = layer(z)
back = z
for layer in reversed(flow.layers):
    back = layer.inverse(back)
print(f"flow inverts: {torch.allclose(back, x, atol=1e-5)}; buffers "
      f"{[n for n, _ in flow.named_buffers()][:3]}")
opt = torch.optim.Adam(flow.parameters(), lr=3e-3)
nlls = []
for it in range(args.iters):
    batch = two_moons(128)
    loss = -flow.log_prob(batch).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    nlls.append(loss.item())
    if it % 20 == 0:
        print(f"flow iter {it:3d} nll {loss.item():.4f}")
with torch.no_grad():
    samples = flow.sample(500)
print(f"flow samples {tuple(samples.shape)} finite: {bool(torch.isfinite(samples).all())}")

# the inverse problem: x = y + 0.3 sin(2 pi y) + noise; predict y from x (several answers)
y_np = rng.uniform(0, 1, (256, 1))
x_np = y_np + 0.3 * np.sin(2 * np.pi * y_np) + rng.normal(0, 0.05, (256, 1))
xm, ym = torch.from_numpy(x_np.astype(np.float32)), torch.from_numpy(y_np.astype(np.float32))
opt2 = torch.optim.Adam(mdn.parameters(), lr=3e-3)
mdn_losses = []
for it in range(args.iters * 2):
    dist = mdn(xm)
    loss = -dist.log_prob(ym).mean()
    opt2.zero_grad()
    loss.backward()
    opt2.step()
    mdn_losses.append(loss.item())
    if it % 20 == 0:
        print(f"mdn iter {it:3d} nll {loss.item():.4f}")
dist = mdn(torch.tensor([[0.5]]))
print(f"MDN: batch {tuple(dist.batch_shape)} event {tuple(dist.event_shape)}, nll "
      f"{mdn_losses[0]:.4f} -> {mdn_losses[-1]:.4f}, mixture weights sum "
      f"{dist.mixture_distribution.probs.sum().item():.4f}, mean {dist.mean.item():.4f}")

# the other distribution tools, at fixed points
base = D.Normal(torch.tensor(0.0), torch.tensor(1.0))
logit_normal = D.TransformedDistribution(base, [D.transforms.AffineTransform(0.5, 2.0),
                                                D.transforms.SigmoidTransform()])
print(f"logit-normal log_prob(0.3) {logit_normal.log_prob(torch.tensor(0.3)).item():.6f}")
lr_mvn = D.LowRankMultivariateNormal(torch.zeros(3), torch.tensor([[1.0], [0.5], [0.0]]),
                                     torch.ones(3))
full = D.MultivariateNormal(torch.zeros(3), covariance_matrix=lr_mvn.covariance_matrix)
tril = D.MultivariateNormal(torch.zeros(3), scale_tril=torch.linalg.cholesky(full.covariance_matrix))
pt = torch.tensor([0.3, -0.2, 1.0])
print(f"low-rank {lr_mvn.log_prob(pt).item():.6f} == full {full.log_prob(pt).item():.6f} == "
      f"tril {tril.log_prob(pt).item():.6f}")
try:
    D.Normal(torch.tensor(0.0), torch.tensor(-1.0))
except ValueError:
    print("validate_args refused a negative scale")
D.Distribution.set_default_validate_args(False)
print(f"RESULT {nlls[0]:.6f} {np.mean(nlls[-5:]):.6f} {mdn_losses[-1]:.6f}")
