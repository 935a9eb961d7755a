"""A capsule network with dynamic routing, in the style of the public CapsNet implementations
(Sabour et al., 2017) on tiny synthetic glyphs: a Conv2d front end, primary capsules reshaped
from a second strided Conv2d (view/permute into (B, n_caps, dim)), the squash nonlinearity,
prediction vectors u_hat from a weight tensor of shape (1, in_caps, out_caps, out_dim, in_dim)
applied with torch.matmul on unsqueezed inputs, routing-by-agreement for three iterations
(softmax of the logits over output capsules, weighted sums, agreement added with detach on the
non-final iterations), the margin loss with relu(0.9 - |v|)^2 and 0.5 * relu(|v| - 0.1)^2,
and a reconstruction decoder masked by the true class through one_hot. Weights and data from
NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
C, S = 4, 12
templates = np.zeros((C, S, S), np.float32)
templates[0, 2:10, 5:7] = 1                       # vertical bar
templates[1, 5:7, 2:10] = 1                       # horizontal bar
templates[2][np.eye(S, dtype=bool)] = 1           # diagonal
templates[3, 3:9, 3:9] = 1
templates[3, 4:8, 4:8] = 0                        # square outline
ys = rng.integers(0, C, 200)
shift = rng.integers(-1, 2, (200, 2))
xs = np.stack([np.roll(templates[y], tuple(s), axis=(0, 1)) for y, s in zip(ys, shift)])
xs = (xs + rng.normal(0, 0.1, xs.shape)).astype(np.float32)[:, None]
X, Y = torch.from_numpy(xs), torch.from_numpy(ys.astype(np.int64))


def squash(s, dim=-1, eps=1e-8):
    sq = (s ** 2).sum(dim=dim, keepdim=True)
    return sq / (1 + sq) * s / torch.sqrt(sq + eps)


class CapsNet(nn.Module):
    def __init__(self, routing_iters=3):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 5)                      # 12 -> 8
        self.primary = nn.Conv2d(16, 8 * 4, 3, stride=2)     # 8 -> 3: 9 positions x 8 caps
        self.in_caps, self.in_dim, self.out_dim = 9 * 8, 4, 8
        self.W = nn.Parameter(torch.zeros(1, self.in_caps, C, self.out_dim, self.in_dim))
        self.iters = routing_iters
        self.decoder = nn.Sequential(nn.Linear(C * self.out_dim, 64), nn.ReLU(inplace=True),
                                     nn.Linear(64, S * S), nn.Sigmoid())

    def forward(self, x, y=None):
        b = x.size(0)
        h = F.relu(self.conv(x))
        u = self.primary(h).view(b, 8, 4, -1).permute(0, 3, 1, 2).reshape(b, -1, self.in_dim)
        u = squash(u)
        u_hat = torch.matmul(self.W, u[:, :, None, :, None]).squeeze(-1)  # (b, in, C, out_dim)
        logits = torch.zeros(b, self.in_caps, C)
        for it in range(self.iters):
            c = F.softmax(logits, dim=2)
            v = squash((c.unsqueeze(-1) * u_hat).sum(dim=1))           # (b, C, out_dim)
            if it < self.iters - 1:
                logits = logits + (u_hat.detach() * v.detach().unsqueeze(1)).sum(-1)
        lengths = v.norm(dim=-1)
        if y is None:
            y = lengths.argmax(dim=1)
        mask = F.one_hot(y, num_classes=C).float()
        recon = self.decoder((v * mask.unsqueeze(-1)).flatten(1))
        return lengths, recon.view(b, 1, S, S), c


def margin_loss(lengths, y, m_pos=0.9, m_neg=0.1, lam=0.5):
    t = F.one_hot(y, C).float()
    loss = t * F.relu(m_pos - lengths) ** 2 + lam * (1 - t) * F.relu(lengths - m_neg) ** 2
    return loss.sum(dim=1).mean()


model = CapsNet()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        scale = 0.5 if name == "W" else 1 / math.sqrt(p[0].numel() if p.dim() > 1 else p.numel())
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32)) * scale)
v = squash(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
print("squash lengths", [round(x, 5) for x in v.norm(dim=-1).tolist()])
lengths, recon, coup = model(X[:4])
print("lengths", tuple(lengths.shape), "in (0, 1):", bool(((lengths > 0) & (lengths < 1)).all()),
      "coupling sums to 1:", torch.allclose(coup.sum(2), torch.ones(4, 72)))

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(50):
    i = torch.from_numpy(rng.integers(0, 160, 20))
    lengths, recon, _ = model(X[i], Y[i])
    loss = margin_loss(lengths, Y[i]) + 0.0005 * F.mse_loss(recon, X[i], reduction="sum") / 20
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")

with torch.no_grad():
    lengths, recon, _ = model(X[160:])
    acc = (lengths.argmax(1) == Y[160:]).float().mean().item()
print(f"recon {tuple(recon.shape)} mse {F.mse_loss(recon, X[160:]).item():.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {acc:.5f}")
