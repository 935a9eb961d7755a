"""Optimizers and schedules written by hand, as research repositories do: an Optimizer subclass
implementing AdamW from scratch (defaults dict, param_groups, per-parameter state created with
torch.zeros_like(p, memory_format=torch.preserve_format), @torch.no_grad() step with an optional
closure, addcdiv_/lerp_/mul_ updates) checked step for step against torch.optim.AdamW, a Lion
optimizer (sign updates), an LRScheduler subclass with linear warmup and cosine decay, a step
post-hook, state_dict save/load through io.BytesIO with torch.save/torch.load, add_param_group,
and a small regression fitted with each. No random draws after the initial weights: from the same
initial weights (``--save-init``/``--init-from``) the numbers agree with torch's. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import io
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)


class MyAdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                p.mul_(1 - group["lr"] * group["weight_decay"])
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias1 = 1 - beta1 ** state["step"]
                bias2 = 1 - beta2 ** state["step"]
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias2)).add_(group["eps"])
                p.addcdiv_(exp_avg, denom, value=-group["lr"] / bias1)
        return loss


class Lion(Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in filter(lambda p: p.grad is not None, group["params"]):
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                beta1, beta2 = group["betas"]
                p.data.mul_(1 - group["lr"] * group["weight_decay"])
                update = exp_avg.clone().mul_(beta1).add(p.grad, alpha=1 - beta1).sign_()
                p.add_(update, alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)
        return loss


class WarmupCosine(LRScheduler):
    def __init__(self, optimizer, warmup, total, min_ratio=0.1, last_epoch=-1):
        self.warmup, self.total, self.min_ratio = warmup, total, min_ratio
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        step = self.last_epoch
        if step < self.warmup:
            factor = (step + 1) / self.warmup
        else:
            progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
            factor = self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        return [base * factor for base in self.base_lrs]


rng = np.random.default_rng(0)
X = torch.from_numpy(rng.normal(0, 1, (128, 6)).astype(np.float32))
y = torch.sin(X[:, :1] * 2) + X[:, 1:2] * X[:, 2:3]


def make_model():
    return nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 1))


base = make_model()
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in base.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        base.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})


def clone_model():
    m = make_model()
    m.load_state_dict(base.state_dict())
    return m


def groups(model, wd):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


# the hand-written AdamW against the built-in one, step for step
mine, ref = clone_model(), clone_model()
opt_mine = MyAdamW(groups(mine, 0.1), lr=1e-2)
opt_ref = torch.optim.AdamW(groups(ref, 0.1), lr=1e-2)
for step in range(5):
    for m, o in ((mine, opt_mine), (ref, opt_ref)):
        o.zero_grad()
        F.mse_loss(m(X), y).backward()
        o.step()
diff = max((a - b).abs().max().item() for a, b in zip(mine.parameters(), ref.parameters()))
print(f"MyAdamW matches AdamW after 5 steps: {diff < 1e-5}")
print(f"defaults {sorted(opt_mine.defaults)}, groups {len(opt_mine.param_groups)}, state keys "
      f"{sorted(opt_mine.state[mine[0].weight])}")

hooked = []
handle = opt_mine.register_step_post_hook(lambda opt, a, kw: hooked.append(opt.__class__.__name__))
sched = WarmupCosine(opt_mine, warmup=5, total=args.steps)
lrs, losses = [], []


def closure():
    opt_mine.zero_grad()
    loss = F.mse_loss(mine(X), y)
    loss.backward()
    return loss


for step in range(args.steps):
    loss = opt_mine.step(closure)
    sched.step()
    losses.append(loss.item())
    lrs.append(sched.get_last_lr()[0])
    if step == 19:  # checkpoint the optimizer and scheduler mid-run, then continue from it
        buf = io.BytesIO()
        torch.save({"opt": opt_mine.state_dict(), "sched": sched.state_dict()}, buf)
        buf.seek(0)
        ck = torch.load(buf, weights_only=False)
        opt_mine.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
handle.remove()
print(f"post hook ran {len(hooked)} times ({hooked[0]})")
print("lrs", " ".join(f"{v:.5f}" for v in lrs[:6]), "...", f"{lrs[-1]:.5f}")
print("MyAdamW losses", " ".join(f"{v:.5f}" for v in losses[::8]))

lion_model = clone_model()
lion = Lion(lion_model.parameters(), lr=3e-3, weight_decay=0.01)
lion.add_param_group({"params": [nn.Parameter(torch.zeros(3))], "lr": 1e-3})
print(f"Lion groups {len(lion.param_groups)}, second lr {lion.param_groups[1]['lr']}, betas "
      f"{lion.param_groups[1]['betas']}")
lion_losses = []
for step in range(args.steps):
    lion.zero_grad(set_to_none=True)
    loss = F.mse_loss(lion_model(X), y)
    loss.backward()
    lion.step()
    lion_losses.append(loss.item())
print("Lion losses", " ".join(f"{v:.5f}" for v in lion_losses[::8]))
try:
    MyAdamW(mine.parameters(), lr=-1)
except ValueError as e:
    print("refused:", e)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {lion_losses[-1]:.6f}")
