"""Image inpainting with partial convolutions (Liu et al.), in the style of the public PyTorch
re-implementations: a PartialConv2d subclass of nn.Conv2d overriding forward, the mask
convolved with a ones kernel under torch.no_grad (a registered non-persistent buffer), the
renormalization ratio window_size / (mask_sum + eps) times the updated mask (clamp(0, 1)), the
bias added back outside the ratio, a U-Net of stride-2 partial convs and nearest F.interpolate
decoding with skip concatenation of images and masks, hole / valid L1 losses, a total-variation
loss over hole-dilated pixels (the dilation by F.max_pool2d), a Gram-matrix style loss, and a
mask-size schedule. Checks that a full mask makes PartialConv2d an ordinary Conv2d and that the
output on the valid region ignores the hole's content. Weights and data from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <hole psnr>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(17)
S = 16


class PartialConv2d(nn.Conv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("ones_kernel", torch.ones(1, 1, *self.kernel_size), persistent=False)
        self.window = float(self.kernel_size[0] * self.kernel_size[1])

    def forward(self, x, mask):
        with torch.no_grad():
            msum = F.conv2d(mask, self.ones_kernel, stride=self.stride, padding=self.padding)
            new_mask = torch.clamp(msum, 0, 1)
            ratio = self.window / (msum + 1e-8) * new_mask
        raw = F.conv2d(x * mask, self.weight, None, self.stride, self.padding)
        out = raw * ratio
        if self.bias is not None:
            out = (out + self.bias.view(1, -1, 1, 1)) * new_mask
        return out, new_mask


class PConvUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = PartialConv2d(1, 8, 5, stride=2, padding=2)
        self.e2 = PartialConv2d(8, 16, 3, stride=2, padding=1)
        self.e3 = PartialConv2d(16, 16, 3, stride=2, padding=1)
        self.d3 = PartialConv2d(16 + 16, 16, 3, padding=1)
        self.d2 = PartialConv2d(16 + 8, 8, 3, padding=1)
        self.d1 = PartialConv2d(8 + 1, 1, 3, padding=1)

    def forward(self, x, m):
        h1, m1 = self.e1(x, m)
        h1 = F.relu(h1)
        h2, m2 = self.e2(h1, m1)
        h2 = F.relu(h2)
        h3, m3 = self.e3(h2, m2)
        h3 = F.relu(h3)

        def up(t):
            return F.interpolate(t, scale_factor=2, mode="nearest")

        d, dm = self.d3(torch.cat([up(h3), h2], 1), torch.cat([up(m3), m2], 1)[:, :1])
        d = F.leaky_relu(d, 0.2)
        d, dm = self.d2(torch.cat([up(d), h1], 1), torch.cat([up(dm), m1], 1)[:, :1])
        d = F.leaky_relu(d, 0.2)
        d, _ = self.d1(torch.cat([up(d), x], 1), torch.cat([up(dm), m], 1)[:, :1])
        return d


def images(n):
    yy, xx = np.meshgrid(np.linspace(-1, 1, S), np.linspace(-1, 1, S), indexing="ij")
    f = rng.uniform(1, 3, size=(n, 1, 1, 1))
    ph = rng.uniform(0, np.pi, size=(n, 1, 1, 1))
    img = np.sin(f * xx + ph) * np.cos(f * yy)
    return torch.from_numpy(img.astype(np.float32))


def masks(n, size):
    m = np.ones((n, 1, S, S), dtype=np.float32)
    for i in range(n):
        r, c = rng.integers(0, S - size, size=2)
        m[i, :, r:r + size, c:c + size] = 0
    return torch.from_numpy(m)


def gram(x):
    b, c, h, w = x.shape
    f = x.reshape(b, c, h * w)
    return f @ f.transpose(1, 2) / (c * h * w)


# a full mask: PartialConv2d is an ordinary Conv2d
pc = PartialConv2d(2, 3, 3, padding=1, bias=True)
with torch.no_grad():
    pc.weight.copy_(torch.from_numpy(rng.normal(size=tuple(pc.weight.shape)).astype(np.float32)))
    pc.bias.copy_(torch.tensor([0.1, -0.2, 0.3]))
x = torch.from_numpy(rng.normal(size=(1, 2, 6, 6)).astype(np.float32))
out, new_mask = pc(x, torch.ones(1, 1, 6, 6))
ref = F.conv2d(x, pc.weight, pc.bias, padding=1)
interior = (slice(None), slice(None), slice(1, -1), slice(1, -1))
print("full mask == conv2d inside", torch.allclose(out[interior], ref[interior], atol=1e-5), "mask stays full", bool((new_mask == 1).all()))
print("state_dict keys", sorted(pc.state_dict()))
hole = torch.ones(1, 1, 6, 6)
hole[..., 2:4, 2:4] = 0
x2 = x.clone()
x2[..., 2:4, 2:4] = 50.0
print("hole content ignored", torch.allclose(pc(x, hole)[0], pc(x2, hole)[0]), "updated mask zeros", int((pc(x, hole)[1] == 0).sum()))

model = PConvUNet()
with torch.no_grad():
    for name, p in model.named_parameters():
        fan = p[0].numel() if p.dim() > 1 else 1
        p.copy_(torch.from_numpy(rng.normal(0, math.sqrt(2 / fan) if p.dim() > 1 else 0.0, size=tuple(p.shape)).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
imgs = images(64)
losses = []
for step in range(60):
    size = 4 + (step // 20) * 2  # holes grow
    idx = torch.arange(step * 8, step * 8 + 8) % 64
    gt = imgs[idx]
    m = masks(8, size)
    pred = model(gt * m, m)
    comp = m * gt + (1 - m) * pred
    valid = F.l1_loss(m * pred, m * gt)
    hole_l = F.l1_loss((1 - m) * pred, (1 - m) * gt)
    dil = F.max_pool2d(1 - m, 3, stride=1, padding=1)
    tv = (dil[..., :, 1:] * (comp[..., :, 1:] - comp[..., :, :-1]).abs()).mean() + \
         (dil[..., 1:, :] * (comp[..., 1:, :] - comp[..., :-1, :]).abs()).mean()
    style = F.l1_loss(gram(comp.expand(-1, 3, -1, -1)), gram(gt.expand(-1, 3, -1, -1)))
    loss = valid + 6 * hole_l + 0.1 * tv + 10 * style
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 15 == 0:
        print(f"step {step:2d} size {size} loss {loss.item():.5f} hole {hole_l.item():.5f} tv {tv.item():.5f}")
with torch.no_grad():
    gt = images(16)
    m = masks(16, 6)
    pred = model(gt * m, m)
    mse = (((1 - m) * (pred - gt)) ** 2).sum() / (1 - m).sum()
    psnr = 10 * torch.log10(4.0 / mse)  # the images span [-1, 1]
    base = (((1 - m) * gt) ** 2).sum() / (1 - m).sum()
    print(f"hole psnr {psnr.item():.4f} vs zero-fill {10 * torch.log10(4.0 / base).item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {psnr.item():.6f}")
