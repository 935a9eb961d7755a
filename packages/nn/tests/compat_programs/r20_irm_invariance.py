"""Invariant risk minimisation (IRMv1, Arjovsky et al., in the style of the public
facebookresearch/InvariantRiskMinimization colored-MNIST code) on a synthetic two-environment
problem with a spurious feature whose correlation with the label flips at test time: the
penalty as the squared gradient of each environment's risk with respect to a dummy scale
(torch.autograd.grad with create_graph=True, the unbiased version from two halves of the
batch), a penalty weight annealed in after a warm-up (loss rescaled by it, as in the reference),
against ERM and V-REx (variance of the risks, torch.stack(...).var()), Adam with L2 by hand;
test accuracy on the flipped environment, the weight put on the spurious feature, and a double
backward checked against torch.autograd.gradcheck / gradgradcheck in float64. Data from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <IRM test accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(31)


def make_env(n, p_spurious):
    y = rng.integers(0, 2, size=n)
    core = (2 * y - 1)[:, None] * 0.6 + rng.normal(size=(n, 2))
    noisy_y = np.where(rng.uniform(size=n) < 0.25, 1 - y, y)  # label noise caps the core feature at 75%
    s_sign = np.where(rng.uniform(size=n) < p_spurious, 2 * noisy_y - 1, 1 - 2 * noisy_y)
    spur = s_sign[:, None] * 1.0 + 0.3 * rng.normal(size=(n, 1))
    x = np.concatenate([core, spur, rng.normal(size=(n, 2))], 1)
    return torch.from_numpy(x).float(), torch.from_numpy(noisy_y).float()


envs = [make_env(400, 0.9), make_env(400, 0.8)]
test_env = make_env(400, 0.1)


def penalty(logits, y):
    scale = torch.ones(1, dtype=logits.dtype, requires_grad=True)
    l1 = F.binary_cross_entropy_with_logits(logits[::2] * scale, y[::2])
    l2 = F.binary_cross_entropy_with_logits(logits[1::2] * scale, y[1::2])
    g1 = torch.autograd.grad(l1, [scale], create_graph=True)[0]
    g2 = torch.autograd.grad(l2, [scale], create_graph=True)[0]
    return (g1 * g2).sum()


def train(method):
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, size=tuple(p.shape))).float())
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(150):
        risks, pens = [], []
        for x, y in envs:
            logits = model(x).squeeze(1)
            risks.append(F.binary_cross_entropy_with_logits(logits, y))
            pens.append(penalty(logits, y))
        risk = torch.stack(risks).mean()
        l2 = sum((p ** 2).sum() for p in model.parameters() if p.dim() > 1)
        loss = risk + 1e-3 * l2
        weight = 1.0
        if method == "irm":
            weight = 1000.0 if step >= 60 else 1.0
            loss = loss + weight * torch.stack(pens).mean()
        elif method == "vrex":
            weight = 300.0 if step >= 60 else 1.0
            loss = loss + weight * torch.stack(risks).var()
        if weight > 1.0:
            loss = loss / weight
        if step == 60:  # the reference resets Adam when the penalty switches on
            opt = torch.optim.Adam(model.parameters(), lr=0.01)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"{method} step {step} risk {risk.item():.5f} penalty {torch.stack(pens).mean().item():.6f}")
    return model, losses


def accuracy(model, env):
    x, y = env
    with torch.no_grad():
        return ((model(x).squeeze(1) > 0).float() == y).float().mean().item()


results = {}
for method in ["erm", "irm", "vrex"]:
    model, losses = train(method)
    train_acc = np.mean([accuracy(model, e) for e in envs])
    test_acc = accuracy(model, test_env)
    x = test_env[0].clone().requires_grad_(True)
    sal = torch.autograd.grad(model(x).sum(), x)[0].abs().mean(0)
    results[method] = (losses, test_acc)
    print(f"{method} train acc {train_acc:.4f} test acc {test_acc:.4f} spurious share {(sal[2] / sal.sum()).item():.4f}")

w = torch.from_numpy(rng.normal(size=5)).requires_grad_(True)
xd, yd = envs[0][0][:40].double(), envs[0][1][:40].double()
print("penalty gradcheck", torch.autograd.gradcheck(lambda v: penalty(xd @ v, yd), (w,)),
      "gradgradcheck", torch.autograd.gradgradcheck(lambda v: penalty(xd @ v, yd), (w,)))
losses, test_acc = results["irm"]
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {test_acc:.6f}")
