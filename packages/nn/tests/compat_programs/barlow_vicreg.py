"""Non-contrastive self-supervised learning in the style of the public Barlow Twins and VICReg
reference code on tiny synthetic 8x8 images: two augmented views per image (random circular
shifts by torch.roll, flips by torch.where over a per-sample mask, Gaussian noise, all drawn
by NumPy), a small CNN backbone with a projector ending in BatchNorm1d(affine=False), the
Barlow Twins cross-correlation loss (the off-diagonal elements by the flatten()[:-1].view(n - 1,
n + 1)[:, 1:] trick, Tensor.diagonal / add_(-1).pow_(2)), the VICReg loss (invariance MSE, a
variance hinge on sqrt(var + eps), covariance by fill_diagonal_), param groups that exclude
biases and norms from weight decay (a LARS-style trust ratio applied in a custom
torch.optim.Optimizer), a cosine warmup schedule by LambdaLR, and a linear probe solved in closed
form by torch.linalg.solve on frozen features (scored by its test MSE). Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<best probe mse>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(130)
N, C = 256, 4
protos = rng.normal(size=(C, 1, 8, 8)).astype(np.float32)
labels = rng.integers(0, C, N)
images = 0.6 * protos[labels] + 1.0 * rng.normal(size=(N, 1, 8, 8)).astype(np.float32)
X, Y = torch.from_numpy(images), torch.from_numpy(labels)


def augment(x):
    b = x.shape[0]
    shifts = rng.integers(-1, 2, size=(b, 2))
    views = torch.stack([torch.roll(x[i], shifts=(int(s[0]), int(s[1])), dims=(1, 2)) for i, s in enumerate(shifts)])
    flip = torch.from_numpy(rng.random(b) < 0.5).view(b, 1, 1, 1)
    views = torch.where(flip, views.flip(-1), views)
    return views + torch.from_numpy(0.1 * rng.normal(size=x.shape).astype(np.float32))


class Net(nn.Module):
    def __init__(self, d=32, p=64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, d, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projector = nn.Sequential(nn.Linear(d, p, bias=False), nn.BatchNorm1d(p), nn.ReLU(), nn.Linear(p, p))
        self.bn = nn.BatchNorm1d(p, affine=False)

    def forward(self, x):
        return self.projector(self.backbone(x))


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def barlow_loss(model, z1, z2, lambd=5e-3):
    c = model.bn(z1).T @ model.bn(z2) / z1.shape[0]
    on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
    return on_diag + lambd * off_diagonal(c).pow_(2).sum()


def vicreg_loss(z1, z2, sim=25.0, var=25.0, cov=1.0):
    inv = F.mse_loss(z1, z2)
    z1, z2 = z1 - z1.mean(0), z2 - z2.mean(0)
    std1, std2 = torch.sqrt(z1.var(0) + 1e-4), torch.sqrt(z2.var(0) + 1e-4)
    var_l = F.relu(1 - std1).mean() / 2 + F.relu(1 - std2).mean() / 2
    n, d = z1.shape
    c1, c2 = (z1.T @ z1) / (n - 1), (z2.T @ z2) / (n - 1)
    cov_l = off_diagonal(c1).pow(2).sum() / d + off_diagonal(c2).pow(2).sum() / d
    return sim * inv + var * var_l + cov * cov_l


class LARS(torch.optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.02):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta))

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                dp = p.grad
                if g["weight_decay"] != 0:  # trust ratio only where decay applies (not biases / norms)
                    dp = dp.add(p, alpha=g["weight_decay"])
                    pn, un = torch.norm(p), torch.norm(dp)
                    q = torch.where(pn > 0., torch.where(un > 0, (g["eta"] * pn / un), torch.ones_like(pn)), torch.ones_like(pn))
                    dp = dp.mul(q)
                state = self.state[p]
                if "mu" not in state:
                    state["mu"] = torch.zeros_like(p)
                mu = state["mu"]
                mu.mul_(g["momentum"]).add_(dp)
                p.add_(mu, alpha=-g["lr"])


def make(seed):
    torch.manual_seed(seed)
    model = Net()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p[0].numel()), p.shape).astype(np.float32)))
            elif "bias" in name:
                p.fill_(0.01)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    opt = LARS([{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0}], lr=0.1)
    return model, opt


def probe(model):
    model.eval()
    with torch.no_grad():
        f = model.backbone(X)
    model.train()
    f = torch.cat([(f - f.mean(0)) / (f.std(0) + 1e-6), torch.ones(N, 1)], 1)
    tr, te = slice(0, 192), slice(192, N)
    T = F.one_hot(Y[tr], C).float()
    W = torch.linalg.solve(f[tr].T @ f[tr] + 1e-2 * torch.eye(f.shape[1]), f[tr].T @ T)
    return F.mse_loss(f[te] @ W, F.one_hot(Y[te], C).float()).item()  # smooth, unlike accuracy


results = {}
steps = 40
for kind, loss_fn in (("barlow", None), ("vicreg", vicreg_loss)):
    model, opt = make(0)
    warm = 5
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))))
    acc0 = probe(model)
    losses = []
    for step in range(steps):
        idx = torch.from_numpy(rng.choice(N, 64, replace=False))
        x = X[idx]
        z1, z2 = model(augment(x)), model(augment(x))
        loss = barlow_loss(model, z1, z2) if loss_fn is None else loss_fn(z1, z2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 10 == 0:
            print(f"{kind} step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")
    acc = probe(model)
    results[kind] = (losses[0], losses[-1], acc)
    print(f"{kind}: loss {losses[0]:.4f} -> {losses[-1]:.4f} probe mse {acc0:.5f} -> {acc:.5f}")

c = torch.arange(16.).view(4, 4)
print(f"off-diagonal {off_diagonal(c).tolist()} groups {[len(g['params']) for g in opt.param_groups]}")
m, v = torch.var_mean(torch.tensor([1., 2., 4.]), correction=0)
print(f"var_mean {m.item():.4f} {v.item():.4f}")
first, last, a = results["barlow"]
print(f"RESULT {first:.5f} {last:.5f} {min(a, results['vicreg'][2]):.5f}")
