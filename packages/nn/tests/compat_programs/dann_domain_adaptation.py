"""Unsupervised domain adaptation in the style of the public DANN (Ganin & Lempitsky) and
Deep CORAL / MMD reference code: a labelled source domain and a rotated, shifted, unlabelled
target domain of 2-D two-moons-like points (NumPy), a feature extractor, a label classifier and
a domain discriminator behind a gradient reversal layer (a torch.autograd.Function whose
backward returns -lambda * grad and None for lambda, with ctx.save_for_backward-free state on
ctx), the progressive lambda schedule 2 / (1 + exp(-10 p)) - 1, an annealed SGD learning rate by
LambdaLR, an alternative CORAL loss (covariances by torch.cov on transposed features) and a
multi-kernel Gaussian MMD from torch.cdist, and target accuracy before and after adaptation.
Also checks the reversal with torch.autograd.grad. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember. Prints RESULT <source-only target
accuracy> <DANN target accuracy> <CORAL target accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(132)


def moons(n, angle=0.0, shift=(0.0, 0.0)):
    t = rng.uniform(0, np.pi, n)
    y = rng.integers(0, 2, n)
    x = np.stack([np.cos(t) + y * 1.0 - 0.5, np.sin(t) * (1 - 2 * y) + y * 0.5 - 0.25], 1)
    x += 0.1 * rng.normal(size=x.shape)
    c, s = np.cos(angle), np.sin(angle)
    x = x @ np.array([[c, -s], [s, c]]) + np.array(shift)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


Xs, Ys = moons(400)
Xt, Yt = moons(400, angle=0.6, shift=(0.3, 0.2))


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.lambd * grad, None


def grad_reverse(x, lambd=1.0):
    return GradReverse.apply(x, lambd)


x = torch.ones(3, requires_grad=True)
(g,) = torch.autograd.grad(grad_reverse(x * 2, 0.5).sum(), x)
print(f"reversed grad {g.tolist()}")


class DANN(nn.Module):
    def __init__(self, h=32):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(2, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())
        self.classifier = nn.Linear(h, 2)
        self.domain = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))

    def forward(self, x, lambd=0.0):
        f = self.features(x)
        return self.classifier(f), self.domain(grad_reverse(f, lambd)).squeeze(-1), f


def make():
    model = DANN()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(p.shape[-1]) if p.dim() > 1 else 0.01, p.shape).astype(np.float32)))
    return model


def coral(fs, ft):
    d = fs.shape[1]
    return (torch.cov(fs.T) - torch.cov(ft.T)).pow(2).sum() / (4 * d * d)


def mmd(fs, ft, scales=(0.5, 1.0, 2.0, 4.0)):
    z = torch.cat([fs, ft])
    d2 = torch.cdist(z, z).pow(2)
    k = sum(torch.exp(-d2 / (2 * s * s)) for s in scales)
    n = fs.shape[0]
    return k[:n, :n].mean() + k[n:, n:].mean() - 2 * k[:n, n:].mean()


def accuracy(model, x, y):
    with torch.no_grad():
        return model(x)[0].argmax(1).eq(y).float().mean().item()


def train(mode, steps=150):
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 / (1 + 10 * s / steps) ** 0.75)
    for step in range(steps):
        p = step / steps
        lambd = 2 / (1 + math.exp(-10 * p)) - 1
        si = torch.from_numpy(rng.choice(400, 64, replace=False))
        ti = torch.from_numpy(rng.choice(400, 64, replace=False))
        logits, dom_s, fs = model(Xs[si], lambd)
        _, dom_t, ft = model(Xt[ti], lambd)
        loss = F.cross_entropy(logits, Ys[si])
        extra = torch.zeros(())
        if mode == "dann":
            dom = torch.cat([dom_s, dom_t])
            target = torch.cat([torch.ones(64), torch.zeros(64)])
            extra = F.binary_cross_entropy_with_logits(dom, target)
        elif mode == "coral":
            extra = 10 * coral(fs, ft) + mmd(fs, ft)
        opt.zero_grad()
        (loss + extra).backward()
        opt.step()
        sched.step()
        if step % 50 == 0:
            print(f"{mode:6s} step {step:3d} cls {loss.item():.5f} extra {extra.item():.5f} lambda {lambd:.4f} lr {sched.get_last_lr()[0]:.5f}")
    return model


accs = []
for mode in ("source", "dann", "coral"):
    model = train(mode)
    src, tgt = accuracy(model, Xs, Ys), accuracy(model, Xt, Yt)
    accs.append(tgt)
    with torch.no_grad():
        fs, ft = model.features(Xs), model.features(Xt)
        print(f"{mode:6s} source acc {src:.4f} target acc {tgt:.4f} coral {coral(fs, ft).item():.6f} mmd {mmd(fs, ft).item():.6f}")
print(f"RESULT {accs[0]:.4f} {accs[1]:.4f} {accs[2]:.4f}")
