"""Semantic segmentation in the style of the public SegNet / ENet code on synthetic 16x16 scenes
(NumPy rectangles and discs of three classes on a background): an encoder with
F.max_pool2d(return_indices=True) whose indices drive F.max_unpool2d in the decoder (with an
explicit output_size), the functional norms as ENet-style code calls them (F.instance_norm,
F.group_norm with learned affine tensors, F.batch_norm with running buffers updated in training
and used in eval), F.prelu with a per-channel weight, an L2 power-pooled context branch
(F.lp_pool2d, norm_type=2) upsampled by F.interpolate(nearest), class weights from inverse
median frequency (torch.bincount + torch.median), F.cross_entropy with weight and
ignore_index on a void border, and per-class IoU / mean IoU from a confusion matrix built by
bincount(n * target + pred). Weights from NumPy. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last
loss> <mean IoU>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(138)
N, S, C, VOID = 48, 16, 4, 255


def scene():
    img = 0.1 * rng.normal(size=(3, S, S)).astype(np.float32)
    lab = np.zeros((S, S), np.int64)
    yy, xx = np.mgrid[:S, :S]
    for _ in range(2):
        c = int(rng.integers(1, C))
        if c == 3:
            cy, cx, r = rng.integers(4, 12, 2).tolist() + [int(rng.integers(2, 4))]
            m = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            y0, x0 = rng.integers(0, S - 6, 2)
            m = np.zeros((S, S), bool)
            m[y0:y0 + 4 + c, x0:x0 + 6 - c] = True
        lab[m] = c
        img[:, m] += np.eye(3, dtype=np.float32)[c - 1][:, None]
    lab[0, :] = VOID  # an unlabelled border row as in annotated datasets
    return img, lab


data = [scene() for _ in range(N)]
X = torch.from_numpy(np.stack([d[0] for d in data]))
Y = torch.from_numpy(np.stack([d[1] for d in data]))


def param(*shape, scale=None):
    return nn.Parameter(torch.from_numpy(rng.normal(0, scale or 1 / np.sqrt(np.prod(shape[1:])), shape).astype(np.float32)))


class SegNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.w1, self.w2 = param(c, 3, 3, 3), param(2 * c, c, 3, 3)
        self.d2, self.d1 = param(c, 2 * c, 3, 3), param(c, c, 3, 3)
        self.ctx = param(c, 2 * c, 1, 1)
        self.head = param(C, c, 1, 1)
        self.prelu = nn.Parameter(torch.full((c,), 0.25))
        self.gn_w, self.gn_b = nn.Parameter(torch.ones(2 * c)), nn.Parameter(torch.zeros(2 * c))
        self.bn_w, self.bn_b = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.register_buffer("bn_mean", torch.zeros(c))
        self.register_buffer("bn_var", torch.ones(c))

    def forward(self, x):
        h1 = F.prelu(F.instance_norm(F.conv2d(x, self.w1, padding=1)), self.prelu)
        p1, i1 = F.max_pool2d(h1, 2, return_indices=True)
        h2 = F.relu(F.group_norm(F.conv2d(p1, self.w2, padding=1), 4, self.gn_w, self.gn_b))
        p2, i2 = F.max_pool2d(h2, 2, return_indices=True)
        ctx = F.interpolate(F.lp_pool2d(p2, 2, kernel_size=2), scale_factor=2, mode="nearest")
        u2 = F.max_unpool2d(p2 + F.conv2d(ctx, torch.eye(ctx.shape[1]).view(ctx.shape[1], -1, 1, 1)) * 0.1, i2, 2, output_size=h2.shape[-2:])
        g2 = F.relu(F.batch_norm(F.conv2d(u2, self.d2, padding=1), self.bn_mean, self.bn_var, self.bn_w, self.bn_b,
                                 training=self.training, momentum=0.1))
        g2 = g2 + F.conv2d(F.interpolate(ctx, size=g2.shape[-2:]), self.ctx)
        u1 = F.max_unpool2d(g2, i1, 2, output_size=h1.shape[-2:])
        g1 = F.relu(F.conv2d(u1, self.d1, padding=1))
        return F.conv2d(g1, self.head)


counts = torch.bincount(Y[Y != VOID].flatten(), minlength=C).float()
freq = counts / counts.sum()
weights = freq.median() / freq
print(f"class pixels {counts.long().tolist()} weights {[round(w, 4) for w in weights.tolist()]}")

pooled, idx = F.max_pool2d(torch.arange(16.).view(1, 1, 4, 4), 2, return_indices=True)
print(f"unpool {F.max_unpool2d(pooled, idx, 2).view(4, 4).tolist()[1]} indices {idx.flatten().tolist()}")

model = SegNet()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for step in range(80):
    b = torch.from_numpy(rng.choice(N, 12, replace=False))
    logits = model(X[b])
    loss = F.cross_entropy(logits, Y[b], weight=weights, ignore_index=VOID)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} bn mean[0] {model.bn_mean[0].item():.5f}")

model.eval()
with torch.no_grad():
    pred = model(X).argmax(1)
valid = Y != VOID
conf = torch.bincount(C * Y[valid] + pred[valid], minlength=C * C).view(C, C)
iou = conf.diag().float() / (conf.sum(0) + conf.sum(1) - conf.diag()).float().clamp_min(1)
print(f"confusion diag {conf.diag().tolist()} iou {[round(v, 4) for v in iou.tolist()]} pixel acc {(conf.diag().sum() / conf.sum()).item():.4f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {iou.mean().item():.4f}")
