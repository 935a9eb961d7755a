"""A small vision transformer trained the way timm-style scripts do: a Conv2d patch embedding,
a class token and learned positions (resized by bicubic F.interpolate for a larger input at
evaluation, as fine-tuning at a higher resolution does), pre-norm blocks with LayerScale and
stochastic depth (DropPath; identity at eval), CutMix boxes and MixUp lambdas drawn from NumPy,
soft targets mixed by one_hot and trained with label-smoothed cross_entropy on probabilities,
AdamW with parameter groups that skip weight decay on biases, norms and tokens (ndim <= 1 and
by name), a per-step warmup + cosine LambdaLR, gradient clipping, an EMA copy through
optim.swa_utils.AveragedModel(multi_avg_fn=get_ema_multi_avg_fn) with use_buffers=True, and
attention maps from the class token by a forward hook. Data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <ema accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

rng = np.random.default_rng(2024)
IMG, P, D, C = 16, 4, 32, 3


def make_images(n):
    """Three classes: horizontal bars, vertical bars, a centered blob."""
    y = rng.integers(0, C, n)
    x = rng.normal(0, 0.3, (n, 1, IMG, IMG)).astype(np.float32)
    for i, c in enumerate(y):
        k = rng.integers(2, IMG - 2)
        if c == 0:
            x[i, 0, k - 1:k + 1, :] += 1.5
        elif c == 1:
            x[i, 0, :, k - 1:k + 1] += 1.5
        else:
            x[i, 0, 5:11, 5:11] += 1.0
    return torch.from_numpy(x), torch.from_numpy(y)


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = torch.from_numpy((rng.random((x.shape[0],) + (1,) * (x.dim() - 1)) > self.p).astype(np.float32))
        return x * keep / (1 - self.p)


class Block(nn.Module):
    def __init__(self, dp):
        super().__init__()
        self.norm1 = nn.LayerNorm(D, eps=1e-6)
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.ls1 = nn.Parameter(torch.full((D,), 0.1))
        self.norm2 = nn.LayerNorm(D, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.ls2 = nn.Parameter(torch.full((D,), 0.1))
        self.drop_path = DropPath(dp)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.drop_path(self.ls1 * self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop_path(self.ls2 * self.mlp(self.norm2(x)))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, D, P, stride=P)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + (IMG // P) ** 2, D))
        self.blocks = nn.Sequential(*[Block(dp) for dp in torch.linspace(0, 0.1, 3).tolist()])
        self.norm = nn.LayerNorm(D, eps=1e-6)
        self.head = nn.Linear(D, C)

    def resized_pos(self, grid):
        cls_pos, patch_pos = self.pos_embed[:, :1], self.pos_embed[:, 1:]
        g0 = int(math.sqrt(patch_pos.shape[1]))
        if g0 == grid:
            return self.pos_embed
        patch_pos = patch_pos.reshape(1, g0, g0, D).permute(0, 3, 1, 2)
        patch_pos = F.interpolate(patch_pos, size=(grid, grid), mode="bicubic", align_corners=False)
        return torch.cat([cls_pos, patch_pos.permute(0, 2, 3, 1).flatten(1, 2)], 1)

    def forward(self, x):
        x = self.patch_embed(x)
        grid = x.shape[-1]
        x = x.flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.resized_pos(grid)
        return self.head(self.norm(self.blocks(x))[:, 0])


model = ViT()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 0.05, p.shape).astype(np.float32)))
        elif name.endswith("bias"):
            p.zero_()
decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.ndim <= 1 or name.endswith(("cls_token", "pos_embed")) else decay).append(p)
print("params", sum(p.numel() for p in model.parameters()), "decay tensors", len(decay), "no-decay tensors", len(no_decay))
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-3, betas=(0.9, 0.999))
STEPS, WARM = 90, 10
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / WARM if s < WARM else 0.5 * (1 + math.cos(math.pi * (s - WARM) / (STEPS - WARM))))
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=True)
print("ema copy is separate", ema.module.head.weight is not model.head.weight, "n_averaged", ema.n_averaged.item())

X, Y = make_images(400)
Xte, Yte = make_images(150)
losses = []
for step in range(STEPS):
    idx = torch.from_numpy(rng.choice(400, 32, replace=False))
    x, y = X[idx], Y[idx]
    perm = torch.from_numpy(rng.permutation(32))
    target = F.one_hot(y, C).float()
    if step % 2 == 0:  # CutMix
        lam = float(rng.beta(1.0, 1.0))
        cut = int(IMG * math.sqrt(1 - lam))
        cy, cx = rng.integers(0, IMG, 2)
        y0, y1 = max(cy - cut // 2, 0), min(cy + cut // 2, IMG)
        x0, x1 = max(cx - cut // 2, 0), min(cx + cut // 2, IMG)
        x = x.clone()
        x[:, :, y0:y1, x0:x1] = x[perm][:, :, y0:y1, x0:x1]
        lam = 1 - (y1 - y0) * (x1 - x0) / IMG ** 2
    else:  # MixUp
        lam = float(rng.beta(0.4, 0.4))
        x = lam * x + (1 - lam) * x[perm]
    target = lam * target + (1 - lam) * target[perm]
    loss = F.cross_entropy(model(x), target, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    ema.update_parameters(model)
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.6f} grad norm {gn.item():.4f}")

model.eval()
ema.eval()
with torch.no_grad():
    acc = (model(Xte).argmax(1) == Yte).float().mean().item()
    ema_acc = (ema(Xte).argmax(1) == Yte).float().mean().item()
    big = F.interpolate(Xte[:8], scale_factor=1.5, mode="bilinear", align_corners=False)
    big_logits = ema(big)
print(f"model acc {acc:.4f} ema acc {ema_acc:.4f} n_averaged {ema.n_averaged.item()}")
print("pos embed resized to", tuple(ema.module.resized_pos(6).shape), "logits at 24px", tuple(big_logits.shape))
maps = {}
blk = ema.module.blocks[-1]
# the usual trick: force need_weights through a kwargs pre-hook, read them in a forward hook
pre = blk.attn.register_forward_pre_hook(lambda m, a, kw: (a, {**kw, "need_weights": True, "average_attn_weights": True}), with_kwargs=True)
post = blk.attn.register_forward_hook(lambda m, a, out: maps.__setitem__("w", out[1]))
with torch.no_grad():
    ema(Xte[:4])
pre.remove()
post.remove()
cls_attn = maps["w"][:, 0, 1:]
print("cls attention rows sum", [round(v, 4) for v in cls_attn.sum(1).tolist()], "grid", tuple(cls_attn.reshape(4, 4, 4).shape))
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {ema_acc:.4f}")
