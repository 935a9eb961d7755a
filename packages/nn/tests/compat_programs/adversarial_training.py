"""Adversarial robustness, in the style of the public FGSM / PGD / TRADES tutorials and
robustness libraries written in plain PyTorch: a small CNN trained clean first, FGSM examples
from torch.autograd.grad of the loss with respect to the input (torch.sign), L-inf PGD with a
NumPy random start, projection by torch.clamp with tensor bounds (min=x - eps, max=x + eps)
and onto the image box, an L2 PGD step normalized per sample (flatten, norm, view), the attack
run under model.eval() and torch.enable_grad() inside an outer torch.no_grad() (the decorator
form too), adversarial training (Madry) and the TRADES loss (F.kl_div with log_target=True
between log_softmax outputs, reduction="batchmean"), robust accuracy at several budgets,
gradient masking checks (loss increases along the PGD path), and the input-gradient saliency
of the trained model. Data and weights from NumPy. Written against `torch`; the test suite
runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <clean acc> <pgd acc before> <pgd acc after>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(27)
N = 256
labels = rng.integers(0, 2, N)
imgs = np.zeros((N, 1, 8, 8), np.float32)
imgs[labels == 0, :, 2:6, 3:5] = 0.8  # vertical bar
imgs[labels == 1, :, 3:5, 2:6] = 0.8  # horizontal bar
imgs = np.clip(imgs + 0.15 * rng.normal(size=imgs.shape), 0, 1).astype(np.float32)
X, y = torch.from_numpy(imgs), torch.from_numpy(labels)


def make():
    m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 2))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
    return m


def fgsm(model, x, y, eps):
    x = x.clone().requires_grad_(True)
    g, = torch.autograd.grad(F.cross_entropy(model(x), y), x)
    return (x + eps * g.sign()).clamp(0, 1).detach()


def pgd(model, x, y, eps, alpha, steps, record=None):
    was_training = model.training
    model.eval()
    delta = torch.from_numpy(rng.uniform(-eps, eps, x.shape).astype(np.float32))
    xa = (x + delta).clamp(0, 1)
    with torch.enable_grad():
        for _ in range(steps):
            xa.requires_grad_(True)
            loss = F.cross_entropy(model(xa), y)
            g, = torch.autograd.grad(loss, xa)
            if record is not None:
                record.append(loss.item())
            xa = torch.clamp(xa.detach() + alpha * g.sign(), min=x - eps, max=x + eps).clamp(0, 1)
    model.train(was_training)
    return xa


def pgd_l2(model, x, y, eps, alpha, steps):
    xa = x.clone()
    for _ in range(steps):
        xa.requires_grad_(True)
        g, = torch.autograd.grad(F.cross_entropy(model(xa), y), xa)
        gn = g.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1, 1)
        d = (xa.detach() + alpha * g / gn) - x
        dn = d.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        xa = (x + d * torch.clamp(eps / dn.clamp_min(1e-12), max=1.0)).clamp(0, 1)
    return xa.detach()


@torch.no_grad()
def accuracy(model, x):
    return (model(x).argmax(1) == y).float().mean().item()


model = make()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(15):
    loss = F.cross_entropy(model(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
clean = accuracy(model, X)
path = []
with torch.no_grad():  # the attack turns gradients back on itself
    xa = pgd(model, X, y, 0.3, 0.05, 10, record=path)
pgd_before = accuracy(model, xa)
print(f"clean acc {clean:.4f} fgsm(0.3) {accuracy(model, fgsm(model, X, y, 0.3)):.4f} pgd(0.3) {pgd_before:.4f} "
      f"l2 pgd(1.0) {accuracy(model, pgd_l2(model, X, y, 1.0, 0.25, 10)):.4f}")
print(f"pgd loss rises: {path[-1] > path[0]} ({path[0]:.4f} -> {path[-1]:.4f}) within budget: {bool(((xa - X).abs() <= 0.3 + 1e-6).all())}")

robust = make()
opt = torch.optim.SGD(robust.parameters(), lr=0.05, momentum=0.9)
losses = []
for epoch in range(25):
    xa = pgd(robust, X, y, 0.15, 0.05, 5)
    logits_c, logits_a = robust(X), robust(xa)
    trades = F.kl_div(F.log_softmax(logits_a, 1), F.log_softmax(logits_c, 1), reduction="batchmean", log_target=True)
    loss = F.cross_entropy(logits_a, y) + 1.0 * trades
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 8 == 0:
        print(f"adv epoch {epoch:2d} loss {loss.item():.5f} trades {trades.item():.5f} train mode {robust.training}")
for eps in (0.05, 0.15, 0.3):
    print(f"eps {eps}: standard {accuracy(model, pgd(model, X, y, eps, eps / 4, 10)):.4f} "
          f"robust {accuracy(robust, pgd(robust, X, y, eps, eps / 4, 10)):.4f}")
pgd_after = accuracy(robust, pgd(robust, X, y, 0.15, 0.0375, 10))
x0 = X[:4].clone().requires_grad_()
robust(x0).gather(1, y[:4, None]).sum().backward()
sal = x0.grad.abs().amax(1)
print(f"saliency peak rows {sal.flatten(1).argmax(1).div(8, rounding_mode='floor').tolist()} labels {y[:4].tolist()}")
print(f"RESULT {clean:.4f} {pgd_before:.4f} {pgd_after:.4f}")
