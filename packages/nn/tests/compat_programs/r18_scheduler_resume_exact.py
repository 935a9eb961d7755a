"""Training-loop bookkeeping that checkpoint-resume code depends on: a warmup LinearLR chained
into CosineAnnealingWarmRestarts by SequentialLR, OneCycleLR with cycle_momentum on SGD and on
AdamW (beta1 cycling), CyclicLR in triangular2 mode, ReduceLROnPlateau driven by a validation
loss (mode="min", threshold_mode="rel", cooldown, min_lr), a custom LRScheduler subclass with
get_lr / _get_closed_form_lr, and for each: the whole training state (model, optimizer with its
per-parameter state, scheduler, step counter, a torch.Generator's state for the data order)
saved to io.BytesIO with torch.save in the middle of the run, restored into fresh objects, and the
resumed run's learning rates and losses required to equal the uninterrupted run exactly.
Weights and data from NumPy. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <max resume diff>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler as S

rng = np.random.default_rng(1234)
X = torch.from_numpy(rng.normal(size=(256, 6)).astype(np.float32))
W = torch.from_numpy(rng.normal(size=(6, 1)).astype(np.float32))
Y = X @ W + 0.1 * torch.from_numpy(rng.normal(size=(256, 1)).astype(np.float32))
INIT = [rng.normal(0, 0.3, s).astype(np.float32) for s in ((16, 6), (16,), (1, 16), (1,))]


class WarmupInverseSqrt(S.LRScheduler):
    def __init__(self, optimizer, warmup, last_epoch=-1):
        self.warmup = warmup
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        s = max(self.last_epoch, 1)
        factor = min(s / self.warmup, (self.warmup / s) ** 0.5)
        return [base * factor for base in self.base_lrs]


def build(kind):
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p, v in zip(model.parameters(), INIT):
            p.copy_(torch.from_numpy(v))
    if kind == "sequential":
        opt = torch.optim.AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
        sched = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=5),
                                     S.CosineAnnealingWarmRestarts(opt, T_0=6, T_mult=2, eta_min=1e-4)], milestones=[5])
    elif kind == "onecycle_sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
        sched = S.OneCycleLR(opt, max_lr=0.05, total_steps=40, pct_start=0.25, three_phase=True)
    elif kind == "onecycle_adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        sched = S.OneCycleLR(opt, max_lr=0.02, total_steps=40, anneal_strategy="linear", base_momentum=0.85, max_momentum=0.95)
    elif kind == "cyclic":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        sched = S.CyclicLR(opt, base_lr=0.002, max_lr=0.03, step_size_up=4, mode="triangular2")
    elif kind == "plateau":
        opt = torch.optim.Adam(model.parameters(), lr=0.03)
        sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, threshold=0.05, cooldown=1, min_lr=1e-3)
    else:
        opt = torch.optim.RMSprop(model.parameters(), lr=0.01, momentum=0.5, centered=True)
        sched = WarmupInverseSqrt(opt, warmup=6)
    return model, opt, sched


def train(kind, steps, state=None, stop_at=None):
    model, opt, sched = build(kind)
    order = np.random.default_rng(0)  # the data order (NumPy: the same on both libraries)
    gen = torch.Generator().manual_seed(0)  # a torch generator for dropout-like noise
    start = 0
    if state is not None:
        buf = io.BytesIO(state)
        ck = torch.load(buf, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        gen.set_state(ck["gen"])
        order.bit_generator.state = ck["order"]
        start = ck["step"]
    lrs, losses, draws = [], [], []
    for step in range(start, steps):
        idx = torch.from_numpy(order.permutation(256)[:32])
        noise = torch.rand(32, 1, generator=gen)  # resumed runs must draw the same numbers
        loss = F.mse_loss(model(X[idx]), Y[idx]) + 0.0 * noise.sum()
        draws.append(noise.sum().item())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if kind == "plateau":
            with torch.no_grad():
                val = F.mse_loss(model(X[:64]), Y[:64]).item()
            sched.step(val)
        else:
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(loss.item())
        if stop_at is not None and step + 1 == stop_at:
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "gen": gen.get_state(), "order": order.bit_generator.state, "step": step + 1}, buf)
            return lrs, losses, buf.getvalue(), opt, draws
    return lrs, losses, None, opt, draws


max_diff = 0.0
first = last = None
for kind in ("sequential", "onecycle_sgd", "onecycle_adamw", "cyclic", "plateau", "custom"):
    full_lrs, full_losses, _, opt, full_draws = train(kind, 40)
    head_lrs, head_losses, blob, _, head_draws = train(kind, 40, stop_at=17)
    tail_lrs, tail_losses, _, opt2, tail_draws = train(kind, 40, state=blob)
    resumed_lrs = head_lrs + tail_lrs
    resumed_losses = head_losses + tail_losses
    diff = max(abs(a - b) for a, b in zip(full_losses, resumed_losses))
    max_diff = max(max_diff, diff)
    same_lr = all(abs(a - b) <= 1e-12 * max(1.0, abs(a)) for a, b in zip(full_lrs, resumed_lrs))
    print(f"{kind:15s} lr@[0,5,17,39] {[round(full_lrs[i], 7) for i in (0, 5, 17, 39)]} resumed lrs equal {same_lr} losses equal {diff == 0.0} draws equal {full_draws == head_draws + tail_draws}")
    extra = {k: v for k, v in opt.param_groups[0].items() if k in ("momentum", "betas")}
    print(f"{kind:15s} final group {extra} loss {full_losses[-1]:.6f}")
    if first is None:
        first = full_losses[0]
    last = full_losses[-1]
model, opt, sched = build("sequential")
sd = sched.state_dict()
print("SequentialLR state keys", sorted(sd), "inner", [sorted(s) for s in sd["_schedulers"]])
model, opt, sched = build("plateau")
print("plateau state keys", sorted(sched.state_dict()))
print(f"RESULT {first:.6f} {last:.6f} {max_diff:.3e}")
