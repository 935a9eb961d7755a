"""A categorical VAE with Gumbel-softmax latents, in the style of the public "categorical VAE"
examples: K categorical latent variables of C classes each, relaxed with F.gumbel_softmax and an
annealed temperature, straight-through hard samples, the KL to a uniform prior, and images
decoded from one-hot prior samples (torch.distributions.OneHotCategorical). Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import OneHotCategorical

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=12)
parser.add_argument("--hard", action="store_true", help="straight-through one-hot samples")
args = parser.parse_args(sys.argv[1:])

K, C, SIDE = 4, 4, 8  # latent variables, classes per variable, image side
torch.manual_seed(7)
rng = np.random.default_rng(7)


def bars(n):
    """Images with one horizontal and one vertical bar: 64 kinds, 8 x 8 pixels."""
    x = np.zeros((n, SIDE, SIDE), np.float32)
    rows, cols = rng.integers(0, SIDE, n), rng.integers(0, SIDE, n)
    x[np.arange(n), rows, :] = 1.0
    x[np.arange(n), :, cols] = 1.0
    return torch.from_numpy(x.reshape(n, -1))


train_x, test_x = bars(512), bars(128)


class CategoricalVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(SIDE * SIDE, 64), nn.ReLU(), nn.Linear(64, K * C))
        self.decoder = nn.Sequential(nn.Linear(K * C, 64), nn.ReLU(), nn.Linear(64, SIDE * SIDE))

    def forward(self, x, tau, hard=False):
        logits = self.encoder(x).view(-1, K, C)
        z = F.gumbel_softmax(logits, tau=tau, hard=hard, dim=-1)
        return self.decoder(z.view(-1, K * C)), logits


def loss_fn(recon_logits, x, logits):
    bce = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum") / x.size(0)
    q = F.softmax(logits, dim=-1)
    log_q = F.log_softmax(logits, dim=-1)
    kl = torch.sum(q * (log_q - math.log(1.0 / C)), dim=(1, 2)).mean()  # KL(q || uniform)
    return bce + kl, kl


model = CategoricalVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
tau0, anneal_rate, tau_min = 1.0, 3e-3, 0.5
step, batch = 0, 32
first = None
for epoch in range(1, args.epochs + 1):
    model.train()
    perm = torch.randperm(train_x.size(0))
    total = 0.0
    for i in range(0, train_x.size(0), batch):
        x = train_x[perm[i:i + batch]]
        tau = max(tau_min, tau0 * math.exp(-anneal_rate * step))
        recon, logits = model(x, tau, hard=args.hard)
        loss, kl = loss_fn(recon, x, logits)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * x.size(0)
        step += 1
    model.eval()
    with torch.no_grad():
        recon, logits = model(test_x, tau_min, hard=True)
        test_loss, test_kl = loss_fn(recon, test_x, logits)
    first = test_loss.item() if first is None else first
    print(f"epoch {epoch} | train {total / train_x.size(0):7.3f} | test {test_loss:7.3f} "
          f"| kl {test_kl:.3f} | tau {tau:.3f}")

# decode one-hot samples from the uniform prior
with torch.no_grad():
    prior = OneHotCategorical(probs=torch.full((K, C), 1.0 / C))
    z = prior.sample((16,))  # (16, K, C)
    assert z.shape == (16, K, C) and torch.equal(z.sum(-1), torch.ones(16, K))
    images = torch.sigmoid(model.decoder(z.view(16, K * C))).view(16, SIDE, SIDE)
    codes = logits.argmax(-1)  # the test images' latent codes
print(f"{len(set(map(tuple, codes.tolist())))} distinct codes for {test_x.size(0)} test images; "
      f"prior samples {(images > 0.5).float().mean().item():.1%} on")
print(f"RESULT {first:.6f} {test_loss.item():.6f}")
