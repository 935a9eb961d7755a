"""A mixture density network on an inverse problem, in the style of the public MDN tutorials:
x = y + 0.3 sin(2 pi y) + noise is inverted (y given x is multimodal), an MLP emits mixture
logits, means and log-scales, the conditional density is
MixtureSameFamily(Categorical(logits=...), Independent(Normal(loc, scale), 1)) (and the same
negative log-likelihood written by hand with torch.logsumexp), trained with Adam and
gradient-norm clipping; the mixture's mean and variance are checked against the law of total
variance, samples are drawn (shape and sample-mean checks only, since the two libraries' random
streams differ), log_prob is checked against numerical integration with torch.trapezoid, and
the modes are read from the mixture weights with torch.argmax/gather. Weights and data from
NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first nll> <last nll> <density integral>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal

rng = np.random.default_rng(0)
K = 5
y_np = rng.uniform(0, 1, 1000)
x_np = y_np + 0.3 * np.sin(2 * np.pi * y_np) + rng.uniform(-0.1, 0.1, 1000)
X = torch.from_numpy(x_np.astype(np.float32))[:, None]
Y = torch.from_numpy(y_np.astype(np.float32))[:, None]


class MDN(nn.Module):
    def __init__(self, hidden=32, k=K):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                  nn.Tanh())
        self.pi, self.mu, self.log_sigma = (nn.Linear(hidden, k), nn.Linear(hidden, k),
                                            nn.Linear(hidden, k))

    def forward(self, x):
        h = self.body(x)
        return self.pi(h), self.mu(h), self.log_sigma(h).clamp(-7, 3)

    def dist(self, x):
        logits, mu, log_sigma = self(x)
        comp = Independent(Normal(mu.unsqueeze(-1), log_sigma.exp().unsqueeze(-1)), 1)
        return MixtureSameFamily(Categorical(logits=logits), comp)


def nll_by_hand(logits, mu, log_sigma, y):
    log_w = F.log_softmax(logits, dim=-1)
    log_n = -0.5 * ((y - mu) / log_sigma.exp()) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(log_w + log_n, dim=-1).mean()


model = MDN()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
d = model.dist(X[:3])
print("batch_shape", tuple(d.batch_shape), "event_shape", tuple(d.event_shape))
a = -d.log_prob(Y[:3]).mean()
b = nll_by_hand(*model(X[:3]), Y[:3])
print(f"library nll {a.item():.5f} by hand {b.item():.5f}")

opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for step in range(100):
    i = torch.from_numpy(rng.integers(0, 900, 100))
    loss = -model.dist(X[i]).log_prob(Y[i]).mean()
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:3d} nll {loss.item():.5f} grad norm {norm.item():.5f}")

with torch.no_grad():
    x0 = torch.tensor([[0.5]])
    d = model.dist(x0)
    logits, mu, log_sigma = model(x0)
    w = logits.softmax(-1)
    mean = (w * mu).sum()
    var = (w * (log_sigma.exp() ** 2 + mu ** 2)).sum() - mean ** 2
    print(f"mixture mean {d.mean.item():.5f} (by hand {mean.item():.5f}), variance "
          f"{d.variance.item():.5f} (by hand {var.item():.5f})")
    grid = torch.linspace(-1.0, 2.0, 3001)[:, None]
    dens = model.dist(x0.expand(3001, 1)).log_prob(grid).exp()
    integral = torch.trapezoid(dens, grid[:, 0]).item()
    s = d.sample((2000,))
    print("sample", tuple(s.shape), f"sample mean near mean: {abs(s.mean().item() - mean.item()) < 0.05}")
    top = torch.argmax(w, dim=-1, keepdim=True)
    print(f"heaviest component mean {torch.gather(mu, 1, top).item():.5f}, weight "
          f"{torch.gather(w, 1, top).item():.5f}")
    test_nll = -model.dist(X[900:]).log_prob(Y[900:]).mean().item()
print(f"test nll {test_nll:.5f}, density integrates to {integral:.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {integral:.5f}")
