"""A CNN with fractional max-pooling (Graham, 2014) trained with mixup, in the style of public
CIFAR training scripts: nn.FractionalMaxPool2d(kernel_size=2, output_ratio=1/sqrt(2)) between
convolution blocks, whose pseudo-random windows are fixed per batch by passing _random_samples
drawn by NumPy (F.fractional_max_pool2d, as reproducible runs do; a module with a
_random_samples buffer for evaluation; return_indices with MaxUnpool2d-style index checks),
mixup with a Beta(0.4, 0.4) coefficient and a shuffled batch (NumPy's Beta and permutation),
cross_entropy with label_smoothing on both targets, SGD with nesterov momentum, a LinearLR
warmup chained to CosineAnnealingLR by SequentialLR, and test accuracy. Weights from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <test accuracy>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
RATIO = (1 / math.sqrt(2),) * 2  # F.fractional_max_pool2d takes a pair


class FracNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 12, 3, padding=1)
        self.c2 = nn.Conv2d(12, 24, 3, padding=1)
        self.c3 = nn.Conv2d(24, 32, 3, padding=1)
        self.fc = nn.Linear(32, 4)

    def forward(self, x, samples=None):
        for i, conv in enumerate((self.c1, self.c2, self.c3)):
            x = F.leaky_relu(conv(x), 0.1)
            u = None if samples is None else samples[i]
            x = F.fractional_max_pool2d(x, 2, output_ratio=RATIO, _random_samples=u)
        return self.fc(x.amax(dim=(2, 3)))


def det_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    * math.sqrt(3.0 / fan_in))


def samples_for(n, r):
    return [torch.from_numpy(r.uniform(size=(n, c, 2)).astype(np.float32)) for c in (12, 24, 32)]


# 4 classes of 16x16 images: a cross, a ring, a square outline, a diagonal stripe (+ noise)
yy, xx = np.mgrid[:16, :16]
proto = [((np.abs(yy - 8) < 2) | (np.abs(xx - 8) < 2)),
         (np.abs(np.hypot(yy - 7.5, xx - 7.5) - 5) < 1.2),
         ((np.maximum(np.abs(yy - 7.5), np.abs(xx - 7.5)) > 4.5) &
          (np.maximum(np.abs(yy - 7.5), np.abs(xx - 7.5)) < 6.5)),
         (np.abs(yy - xx) < 2)]
labels = rng.integers(0, 4, 320)
imgs = np.stack([np.roll(proto[c], rng.integers(-2, 3, 2), (0, 1)) for c in labels])
imgs = imgs.astype(np.float32)[:, None] + rng.normal(0, 0.4, (320, 1, 16, 16)).astype(np.float32)
X, Y = torch.from_numpy(imgs), torch.from_numpy(labels.astype(np.int64))
Xtr, Ytr, Xte, Yte = X[:256], Y[:256], X[256:], Y[256:]

model = FracNet()
det_init(model, 1)
shapes = []
h = torch.zeros(1, 1, 16, 16)
for _ in range(3):
    h = F.fractional_max_pool2d(h, 2, output_ratio=RATIO, _random_samples=torch.zeros(1, 1, 2))
    shapes.append(tuple(h.shape[-2:]))
print(f"feature map sizes: {shapes}")

steps_per_epoch = 256 // 32
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                      weight_decay=5e-4)
warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=steps_per_epoch)
cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps_per_epoch * (args.epochs - 1))
sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[steps_per_epoch])
losses = []
for epoch in range(args.epochs):
    model.train()
    order = torch.from_numpy(rng.permutation(256))
    for i in range(0, 256, 32):
        idx = order[i:i + 32]
        x, y = Xtr[idx], Ytr[idx]
        lam = float(rng.beta(0.4, 0.4))
        perm = torch.from_numpy(rng.permutation(32))
        mixed = lam * x + (1 - lam) * x[perm]
        out = model(mixed, samples_for(32, rng))
        loss = lam * F.cross_entropy(out, y, label_smoothing=0.1) + \
            (1 - lam) * F.cross_entropy(out, y[perm], label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    print(f"epoch {epoch} loss {np.mean(losses[-steps_per_epoch:]):.5f} "
          f"lr {sched.get_last_lr()[0]:.5f}")

# evaluation: one fixed set of windows per image, as a module buffer
model.eval()
fixed = samples_for(64, np.random.default_rng(5))
with torch.no_grad():
    acc = (model(Xte, fixed).argmax(1) == Yte).float().mean().item()
pool = nn.FractionalMaxPool2d(2, output_ratio=RATIO[0], return_indices=True,
                              _random_samples=fixed[0])
feat = F.leaky_relu(model.c1(Xte), 0.1)
with torch.no_grad():
    pooled, ind = pool(feat)
    again = feat.flatten(2).gather(2, ind.flatten(2)).view_as(pooled)
print(f"module buffer: {[n for n, _ in pool.named_buffers()]}, indices pick the maxima: "
      f"{torch.equal(again, pooled)}, output {tuple(pooled.shape)}")
g = torch.autograd.grad(F.fractional_max_pool2d(feat, 2, output_size=(5, 7),
                                                _random_samples=fixed[0]).sum(), feat)[0]
print(f"gradient routes to {int((g != 0).sum())} of {g.numel()} inputs, total {g.sum().item():.1f}")
print(f"test accuracy {acc:.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-steps_per_epoch:]):.5f} {acc:.4f}")
