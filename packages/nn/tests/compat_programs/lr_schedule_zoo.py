"""Learning-rate schedules and gradient hygiene as training scripts chain them, in the style of
the public fine-tuning and one-cycle recipes: OneCycleLR (three_phase, linear annealing, momentum
cycled through Adam's betas), CyclicLR (exp_range, SGD momentum cycled), CosineAnnealingWarmRestarts
(T_mult=2, stepped with fractional epochs), ChainedScheduler, SequentialLR over
ConstantLR / PolynomialLR / ExponentialLR, MultiStepLR, LambdaLR and MultiplicativeLR, and
ReduceLROnPlateau (mode="max", threshold_mode="abs", cooldown, per-group min_lr); the printed
learning rates of every schedule; scheduler and optimizer state_dict round trips in the middle
of a run (the resumed run continues exactly); per-group learning rates; activation
checkpointing of a residual MLP (torch.utils.checkpoint, use_reentrant=False) with
clip_grad_norm_ for norm types 2, 1 and inf (foreach), clip_grad_value_ and
error_if_nonfinite on an injected NaN. Weights and data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <final lr>."""

import copy
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler as S
from torch.utils.checkpoint import checkpoint

rng = np.random.default_rng(0)


def params():
    return [nn.Parameter(torch.zeros(2))]


def trace(opt, sched, steps, key="lr", metric=None):
    vals = []
    for i in range(steps):
        opt.step()
        if metric is None:
            sched.step()
        else:
            sched.step(metric[i])
        vals.append(round(opt.param_groups[0][key] if key != "beta1"
                          else opt.param_groups[0]["betas"][0], 6))
    return vals


opt = torch.optim.Adam(params(), lr=0.1)
oc = S.OneCycleLR(opt, max_lr=0.1, total_steps=12, three_phase=True, anneal_strategy="linear")
print("onecycle lr", trace(opt, oc, 11))
opt = torch.optim.Adam(params(), lr=0.1)
oc = S.OneCycleLR(opt, max_lr=[0.2], epochs=2, steps_per_epoch=5, pct_start=0.4,
                  div_factor=10, final_div_factor=100)
print("onecycle beta1", trace(opt, oc, 9, key="beta1"))
opt = torch.optim.SGD(params(), lr=0.1, momentum=0.9)
cy = S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range", gamma=0.9)
print("cyclic exp_range lr", trace(opt, cy, 10))
print("cyclic momentum", opt.param_groups[0]["momentum"])
opt = torch.optim.SGD(params(), lr=0.1)
cw = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.01)
lrs = []
for epoch in range(4):
    for i in range(4):
        opt.step()
        cw.step(epoch + i / 4)
        lrs.append(round(opt.param_groups[0]["lr"], 6))
print("warm restarts", lrs)
opt = torch.optim.SGD(params(), lr=1.0)
ch = S.ChainedScheduler([S.ExponentialLR(opt, gamma=0.9), S.MultiStepLR(opt, [3, 5], 0.5)])
print("chained", trace(opt, ch, 7))
opt = torch.optim.SGD(params(), lr=1.0)
sq = S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.25, total_iters=2),
                          S.PolynomialLR(opt, total_iters=4, power=2.0),
                          S.ExponentialLR(opt, gamma=0.5)], milestones=[3, 7])
print("sequential", trace(opt, sq, 10))
opt = torch.optim.SGD([{"params": params()}, {"params": params(), "lr": 0.5}], lr=1.0)
la = S.LambdaLR(opt, [lambda e: 1 / (e + 1), lambda e: 0.9 ** e])
for _ in range(3):
    opt.step()
    la.step()
print("lambda per group", [round(v, 6) for v in la.get_last_lr()])
opt = torch.optim.SGD(params(), lr=1.0)
mu = S.MultiplicativeLR(opt, lambda e: 0.8)
print("multiplicative", trace(opt, mu, 4))
opt = torch.optim.SGD([{"params": params()}, {"params": params()}], lr=1.0)
pl = S.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=1, threshold=0.05,
                         threshold_mode="abs", cooldown=1, min_lr=[0.1, 0.3])
acc = [0.5, 0.6, 0.62, 0.63, 0.64, 0.64, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7]
vals = []
for a in acc:
    opt.step()
    pl.step(a)
    vals.append((opt.param_groups[0]["lr"], opt.param_groups[1]["lr"]))
print("plateau", vals)
print("plateau best", pl.best, "bad epochs", pl.num_bad_epochs, "last lr", pl.get_last_lr())


# training: a checkpointed residual MLP with gradient clipping, schedule resumed mid-run
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)

    def forward(self, x):
        return x + self.fc2(F.silu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d=16, depth=3, ckpt=True):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.inp, self.out, self.ckpt = nn.Linear(4, d), nn.Linear(d, 1), ckpt

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = checkpoint(b, h, use_reentrant=False) if self.ckpt else b(h)
        return self.out(h).squeeze(-1)


net = Net()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
X = torch.from_numpy(rng.normal(size=(128, 4)).astype(np.float32))
Y = X[:, 0] * X[:, 1] - X[:, 2] + 0.5 * X[:, 3] ** 2
plain = copy.deepcopy(net)
plain.ckpt = False
F.mse_loss(net(X), Y).backward()
F.mse_loss(plain(X), Y).backward()
print("checkpointed grads == plain:", all(torch.allclose(a.grad, b.grad, atol=1e-6)
                                          for a, b in zip(net.parameters(), plain.parameters())))
norms = [torch.nn.utils.get_total_norm([p.grad for p in net.parameters()], t).item()
         for t in (2.0, 1.0, float("inf"))]
print(f"grad norms l2 {norms[0]:.5f} l1 {norms[1]:.5f} inf {norms[2]:.5f}")
total = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0, norm_type="inf", foreach=True)
print(f"clip inf returned {total.item():.5f} now max "
      f"{max(p.grad.abs().max().item() for p in net.parameters()):.5f}")
torch.nn.utils.clip_grad_value_(plain.parameters(), 0.05)
print("clip value max", max(p.grad.abs().max().item() for p in plain.parameters()))
plain.inp.weight.grad[0, 0] = float("nan")
try:
    torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0, error_if_nonfinite=True)
except RuntimeError as e:
    print("non-finite norm raises RuntimeError:", "non-finite" in str(e))
net.zero_grad(set_to_none=True)


def make(model):
    opt = torch.optim.AdamW([{"params": model.blocks.parameters(), "lr": 1e-2},
                             {"params": list(model.inp.parameters()) + list(model.out.parameters()),
                              "lr": 3e-2}], weight_decay=0.01)
    warm = S.LinearLR(opt, start_factor=0.1, total_iters=5)
    cos = S.CosineAnnealingLR(opt, T_max=35, eta_min=1e-4)
    return opt, S.SequentialLR(opt, [warm, cos], milestones=[5])


opt, sched = make(net)
losses, buf, batches = [], None, []
for step in range(40):
    if step == 20:
        buf = io.BytesIO()
        torch.save({"model": net.state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict()}, buf)
    idx = torch.from_numpy(rng.integers(0, 128, 32))
    batches.append(idx)
    loss = F.mse_loss(net(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 2.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lrs {[round(v, 6) for v in sched.get_last_lr()]}")
final_lr = sched.get_last_lr()[0]
# resume from step 20 and replay the same batches: the same end point
buf.seek(0)
ck = torch.load(buf, weights_only=True)
net2 = Net()
net2.load_state_dict(ck["model"])
opt2, sched2 = make(net2)
opt2.load_state_dict(ck["opt"])
sched2.load_state_dict(ck["sched"])
print("resumed lr", [round(v, 6) for v in sched2.get_last_lr()],
      "last_epoch", sched2.last_epoch, "state steps", opt2.state_dict()["state"][0]["step"].item())
for idx in batches[20:]:
    loss = F.mse_loss(net2(X[idx]), Y[idx])
    opt2.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net2.parameters(), 2.0)
    opt2.step()
    sched2.step()
print("resumed run ends where the run ended:",
      all(torch.allclose(a, b, atol=1e-6) for a, b in zip(net.parameters(), net2.parameters())),
      sched2.get_last_lr() == sched.get_last_lr())
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {final_lr:.6f}")
