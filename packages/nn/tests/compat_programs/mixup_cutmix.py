"""Image-classification regularization as modern training recipes write it (the public mixup /
CutMix / label-smoothing recipes, written anew): mixing coefficients drawn from
torch.distributions.Beta(alpha, alpha) (its mean, variance, log_prob and entropy checked;
the coefficients themselves from NumPy so both runs mix alike), mixup of a batch with its
flipped order (torch.flip), CutMix boxes pasted with slicing and the area-corrected lambda,
soft targets built from F.one_hot with label smoothing and mixed, F.cross_entropy with
probability targets and with label_smoothing=0.1 (both equal to the hand-written soft-target
loss), SGD with nesterov momentum and weight decay on non-norm parameters only, a LinearLR
warmup chained to CosineAnnealingLR through SequentialLR, and top-1 / top-2 accuracy with topk.
Weights and data from NumPy. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <acc>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Beta

rng = np.random.default_rng(0)
K, S = 5, 10
protos = rng.normal(0, 1, (K, 3, S, S)).astype(np.float32)
ys = rng.integers(0, K, 300)
X = torch.from_numpy((protos[ys] + rng.normal(0, 1.5, (300, 3, S, S))).astype(np.float32))
Y = torch.from_numpy(ys.astype(np.int64))

model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, K))
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1 or name == "9.bias":
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))

beta = Beta(torch.tensor(0.4), torch.tensor(0.4))
lam_probe = torch.tensor([0.1, 0.5, 0.9])
print(f"Beta(0.4, 0.4): mean {beta.mean.item():.4f} var {beta.variance.item():.5f} "
      f"entropy {beta.entropy().item():.5f}")
print("log_prob", [round(v, 5) for v in beta.log_prob(lam_probe).tolist()])
draw = beta.sample((1000,))
print("sample", tuple(draw.shape), "in [0, 1]:", bool(((draw >= 0) & (draw <= 1)).all()),
      "rsample has grad:", Beta(torch.tensor(2.0, requires_grad=True), torch.tensor(2.0))
      .rsample().requires_grad)


def smooth_one_hot(y, eps=0.1):
    return F.one_hot(y, K).float() * (1 - eps) + eps / K


def soft_ce(logits, target):
    return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()


logits = torch.from_numpy(r.normal(size=(6, K)).astype(np.float32))
y6 = Y[:6]
a = soft_ce(logits, smooth_one_hot(y6))
b = F.cross_entropy(logits, smooth_one_hot(y6))
c = F.cross_entropy(logits, y6, label_smoothing=0.1)
print(f"soft ce {a.item():.5f} prob-target ce {b.item():.5f} label_smoothing {c.item():.5f}")

decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.dim() == 1 else decay).append(p)
opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                       {"params": no_decay, "weight_decay": 0.0}],
                      lr=0.05, momentum=0.9, nesterov=True)
steps = 60
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=10)
cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - 10, eta_min=1e-4)
sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[10])
losses = []
for step in range(steps):
    i = torch.from_numpy(rng.integers(0, 240, 32))
    x, y = X[i].clone(), smooth_one_hot(Y[i])
    lam = float(rng.beta(0.4, 0.4))
    if step % 2 == 0:  # mixup with the reversed batch
        x = lam * x + (1 - lam) * torch.flip(x, dims=[0])
    else:  # CutMix
        cut = math.sqrt(1 - lam)
        h, w = int(S * cut), int(S * cut)
        cy, cx = rng.integers(0, S, 2)
        y0, y1 = int(np.clip(cy - h // 2, 0, S)), int(np.clip(cy + h // 2, 0, S))
        x0, x1 = int(np.clip(cx - w // 2, 0, S)), int(np.clip(cx + w // 2, 0, S))
        x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]
        lam = 1 - (y1 - y0) * (x1 - x0) / (S * S)
    target = lam * y + (1 - lam) * y.flip(0)
    loss = F.cross_entropy(model(x), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.5f} lr {opt.param_groups[0]['lr']:.5f}")

model.eval()
with torch.no_grad():
    out = model(X[240:])
    top2 = out.topk(2, dim=1).indices
    acc1 = (top2[:, 0] == Y[240:]).float().mean().item()
    acc2 = (top2 == Y[240:, None]).any(dim=1).float().mean().item()
print(f"top-1 {acc1:.4f} top-2 {acc2:.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {acc1:.5f}")
