"""A small image classifier with dynamic (CondConv-style) convolutions, in the style of the
public timm-like PyTorch code (written anew): per-sample kernels mixed from K experts by a
routing softmax over pooled features and applied in one call through the grouped-convolution
trick (batch folded into channels, groups=B), checked against a per-sample loop; stochastic
depth (DropPath) with per-sample Bernoulli keep masks from NumPy scaled by 1/keep_prob, a
linearly increasing drop rate over blocks, squeeze-and-excitation, channels_last memory format
(is_contiguous(memory_format=...), strides), label-smoothed cross-entropy, SGD with nesterov
and a warmup + cosine LambdaLR, then conv + BatchNorm folding for inference with
torch.nn.utils.fuse_conv_bn_eval and fuse_conv_bn_weights, checked to give the same logits.
Weights and data from NumPy. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import fuse_conv_bn_eval, fuse_conv_bn_weights

rng = np.random.default_rng(37)


class DynamicConv(nn.Module):
    def __init__(self, cin, cout, k, experts=3):
        super().__init__()
        self.cin, self.cout, self.k = cin, cout, k
        self.weight = nn.Parameter(torch.zeros(experts, cout, cin, k, k))
        self.route = nn.Linear(cin, experts)

    def forward(self, x, loop=False):
        b = x.shape[0]
        r = torch.softmax(self.route(x.mean((2, 3))), dim=-1)  # (B, E)
        w = torch.einsum("be,eoikl->boikl", r, self.weight)
        if loop:
            return torch.cat([F.conv2d(x[i:i + 1], w[i], padding=self.k // 2) for i in range(b)])
        out = F.conv2d(x.reshape(1, b * self.cin, *x.shape[2:]), w.reshape(b * self.cout, self.cin, self.k, self.k),
                       padding=self.k // 2, groups=b)
        return out.reshape(b, self.cout, *out.shape[2:])


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p
        self.draws = None  # set from NumPy before each training step

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = torch.from_numpy((self.draws[: x.shape[0]] < keep).astype(np.float32)).view(-1, 1, 1, 1)
        return x * mask / keep

    def extra_repr(self):
        return f"p={self.p:.3f}"


class Block(nn.Module):
    def __init__(self, c, drop):
        super().__init__()
        self.dyn = DynamicConv(c, c, 3)
        self.bn = nn.BatchNorm2d(c)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 2, 1), nn.ReLU(), nn.Conv2d(c // 2, c, 1), nn.Sigmoid())
        self.drop = DropPath(drop)

    def forward(self, x):
        h = F.relu(self.bn(self.dyn(x)))
        return x + self.drop(h * self.se(h))


class Net(nn.Module):
    def __init__(self, depth=3, c=8, drop_max=0.2):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(c)
        rates = torch.linspace(0, drop_max, depth).tolist()
        self.blocks = nn.Sequential(*[Block(c, r) for r in rates])
        self.head = nn.Linear(c, 4)

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        return self.head(self.blocks(x).mean((2, 3)))


def data(n):
    y = rng.integers(0, 4, size=n)
    yy, xx = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    imgs = np.zeros((n, 1, 12, 12), dtype=np.float32)
    for i, c in enumerate(y):
        pattern = [(xx + yy) % 4 < 2, xx % 3 == 0, yy % 3 == 0, ((xx - 6) ** 2 + (yy - 6) ** 2) < 16][c]
        imgs[i, 0] = pattern + 0.3 * rng.normal(size=(12, 12))
    return torch.from_numpy(imgs), torch.from_numpy(y)


model = Net()
with torch.no_grad():
    for name, p in model.named_parameters():
        if "bn" in name:
            continue
        fan = p[0].numel() if p.dim() > 1 else 1
        if name.endswith("dyn.weight"):
            fan = p[0, 0].numel()
        p.copy_(torch.from_numpy(rng.normal(0, math.sqrt(2 / fan) if p.dim() > 1 else 0.0, size=tuple(p.shape)).astype(np.float32)))
print([repr(b.drop) for b in model.blocks])
x, y = data(256)
xc = x[:4].to(memory_format=torch.channels_last)
print("channels_last", xc.is_contiguous(), xc.is_contiguous(memory_format=torch.channels_last), xc.stride())
dyn = model.blocks[0].dyn
h = torch.from_numpy(rng.normal(size=(4, 8, 6, 6)).astype(np.float32))
print("grouped == per-sample loop", torch.allclose(dyn(h), dyn(h, loop=True), atol=1e-5))

opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
total, warm = 60, 6
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm))))
crit = nn.CrossEntropyLoss(label_smoothing=0.1)
losses = []
for step in range(total):
    idx = torch.arange(step * 32, step * 32 + 32) % 256
    for b in model.blocks:
        b.drop.draws = rng.uniform(size=32)
    loss = crit(model(x[idx].contiguous(memory_format=torch.channels_last)), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 15 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")

model.eval()
xt, yt = data(128)
with torch.no_grad():
    logits = model(xt)
    acc = (logits.argmax(1) == yt).float().mean().item()
    fused_stem = fuse_conv_bn_eval(model.stem, model.stem_bn)
    w, b = fuse_conv_bn_weights(model.stem.weight, model.stem.bias, model.stem_bn.running_mean, model.stem_bn.running_var,
                                model.stem_bn.eps, model.stem_bn.weight, model.stem_bn.bias)
    ref = model.stem_bn(model.stem(xt))
    print("fused stem == conv+bn", torch.allclose(fused_stem(xt), ref, atol=1e-5), "weights agree", torch.allclose(w, fused_stem.weight), type(b).__name__, b.requires_grad)
    model.stem, model.stem_bn = fused_stem, nn.Identity()
    print("fused model logits equal", torch.allclose(model(xt), logits, atol=1e-4))
print(f"accuracy {acc:.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {acc:.6f}")
