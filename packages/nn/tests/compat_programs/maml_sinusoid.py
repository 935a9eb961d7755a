"""Model-agnostic meta-learning (MAML) on sinusoid regression, in the style of the public MAML
implementations that use torch.func.functional_call: each task a sine with its own amplitude
and phase, support/query splits, an inner loop of SGD steps on a dict of "fast weights" built
with torch.autograd.grad(loss, params.values(), create_graph=True) (second-order MAML: the
meta-gradient flows through the inner updates), the first-order variant (create_graph=False and
detached fast weights), a meta-batch of tasks whose query losses are averaged into one backward,
Adam as the meta-optimizer with a learnable per-parameter inner learning rate (Meta-SGD,
nn.ParameterDict), and evaluation: query loss before and after adaptation on held-out tasks.
Weights and tasks from NumPy: the run is the same on both libraries. Written against `torch`;
the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first meta loss> <last meta loss> <pre-adaptation loss> <post-adaptation loss>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=40)
parser.add_argument("--inner-steps", type=int, default=2)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)

net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))
r = np.random.default_rng(1)
with torch.no_grad():
    for _, p in net.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
inner_lr = nn.ParameterDict({k.replace(".", "_"): nn.Parameter(torch.full_like(v, 0.01))
                             for k, v in net.named_parameters()})
meta_opt = torch.optim.Adam([{"params": net.parameters()},
                             {"params": inner_lr.parameters(), "lr": 1e-4}], lr=1e-3)
print(f"meta parameters: {sum(p.numel() for p in net.parameters())} + inner lrs "
      f"{sum(p.numel() for p in inner_lr.parameters())}")


def task(r):
    amp, phase = r.uniform(0.1, 5.0), r.uniform(0, np.pi)
    xs = r.uniform(-5, 5, (20, 1)).astype(np.float32)
    ys = (amp * np.sin(xs + phase)).astype(np.float32)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    return t(xs[:10]), t(ys[:10]), t(xs[10:]), t(ys[10:])


def adapt(params, xs, ys, steps, second_order):
    for _ in range(steps):
        loss = F.mse_loss(functional_call(net, params, (xs,)), ys)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=second_order)
        params = {k: v - inner_lr[k.replace(".", "_")] * g
                  for (k, v), g in zip(params.items(), grads)}
        if not second_order:
            params = {k: v.detach().requires_grad_() for k, v in params.items()}
    return params


meta_losses = []
for it in range(args.iters):
    meta_opt.zero_grad()
    total = 0.0
    for _ in range(4):
        xs, ys, xq, yq = task(rng)
        fast = adapt(dict(net.named_parameters()), xs, ys, args.inner_steps, True)
        qloss = F.mse_loss(functional_call(net, fast, (xq,)), yq)
        (qloss / 4).backward()
        total += qloss.item() / 4
    meta_opt.step()
    meta_losses.append(total)
    if it % 10 == 0:
        print(f"iter {it:3d} meta loss {total:.5f} inner lr[0] "
              f"{inner_lr['0_weight'].mean().item():.6f}")

# first-order MAML: no second derivatives; the gradients of the meta-parameters still flow
xs, ys, xq, yq = task(np.random.default_rng(99))
fo = adapt(dict(net.named_parameters()), xs, ys, 1, False)
qloss = F.mse_loss(functional_call(net, fo, (xq,)), yq)
grads = torch.autograd.grad(qloss, list(fo.values()))
print(f"first-order: {len(grads)} gradients, query loss {qloss.item():.5f}")

eval_rng = np.random.default_rng(123)
pre, post = [], []
for _ in range(10):
    xs, ys, xq, yq = task(eval_rng)
    params = dict(net.named_parameters())
    with torch.no_grad():
        pre.append(F.mse_loss(net(xq), yq).item())
    fast = adapt(params, xs, ys, 5, False)
    with torch.no_grad():
        post.append(F.mse_loss(functional_call(net, fast, (xq,)), yq).item())
print(f"held-out tasks: query loss {np.mean(pre):.4f} before, {np.mean(post):.4f} after 5 steps")
print(f"RESULT {meta_losses[0]:.5f} {np.mean(meta_losses[-10:]):.5f} {np.mean(pre):.4f} "
      f"{np.mean(post):.4f}")
