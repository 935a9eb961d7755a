"""Deformable convolution (DCNv1 / DCNv2 "modulated") written the way public re-implementations
do it without torchvision's C++ op: an offset branch (a zero-initialized Conv2d predicting 2*k*k
offsets) and a sigmoid modulation mask, sampling positions built from torch.meshgrid kernel and
base grids, bilinear sampling of every kernel tap with F.grid_sample(align_corners=True) on
normalized coordinates, the sampled columns folded into an (N, C*k*k, H*W) matrix and multiplied
by the flattened weight; at zero offsets it is checked against F.conv2d and against the
F.unfold (im2col) formulation, integer offsets are checked against torch.roll, and the
bilinear sampler against a manual gather. A small DCN classifier then learns to recognize
rotated / scaled bars where the offsets have to move. Weights and data from NumPy. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1601)


def t(a, dtype=np.float32):
    return torch.from_numpy(np.asarray(a, dtype=dtype))


def deform_conv2d(x, offset, weight, bias=None, mask=None, padding=1, stride=1, dilation=1):
    n, c, h, w = x.shape
    out_c, _, kh, kw = weight.shape
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    ky, kx = torch.meshgrid(torch.arange(kh, dtype=x.dtype) * dilation,
                            torch.arange(kw, dtype=x.dtype) * dilation, indexing="ij")
    by, bx = torch.meshgrid(torch.arange(oh, dtype=x.dtype) * stride - padding,
                            torch.arange(ow, dtype=x.dtype) * stride - padding, indexing="ij")
    # (k*k, oh, ow) absolute sampling positions before the learned offsets
    py = ky.reshape(-1, 1, 1) + by.unsqueeze(0)
    px = kx.reshape(-1, 1, 1) + bx.unsqueeze(0)
    off = offset.view(n, kh * kw, 2, oh, ow)
    py = py.unsqueeze(0) + off[:, :, 0]
    px = px.unsqueeze(0) + off[:, :, 1]
    grid = torch.stack((2 * px / (w - 1) - 1, 2 * py / (h - 1) - 1), dim=-1)  # (n, kk, oh, ow, 2)
    grid = grid.view(n, kh * kw * oh, ow, 2)
    cols = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    cols = cols.view(n, c, kh * kw, oh, ow)
    if mask is not None:
        cols = cols * mask.view(n, 1, kh * kw, oh, ow)
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    out = weight.view(out_c, -1) @ cols
    if bias is not None:
        out = out + bias.view(1, -1, 1)
    return out.view(n, out_c, oh, ow)


class DeformConv(nn.Module):
    def __init__(self, cin, cout, k=3, modulated=True):
        super().__init__()
        self.weight = nn.Parameter(t(rng.normal(0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k))))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.offset = nn.Conv2d(cin, 3 * k * k if modulated else 2 * k * k, k, padding=1)
        nn.init.zeros_(self.offset.weight)
        nn.init.zeros_(self.offset.bias)
        self.k, self.modulated = k, modulated

    def forward(self, x):
        o = self.offset(x)
        kk = self.k * self.k
        if self.modulated:
            offset, mask = o[:, : 2 * kk], torch.sigmoid(o[:, 2 * kk:])
        else:
            offset, mask = o, None
        return deform_conv2d(x, offset, self.weight, self.bias, mask)


x = t(rng.normal(size=(2, 3, 9, 11)))
wt = t(rng.normal(size=(4, 3, 3, 3)))
b = t(rng.normal(size=4))
zero = torch.zeros(2, 18, 9, 11)
ref = F.conv2d(x, wt, b, padding=1)
dcn = deform_conv2d(x, zero, wt, b)
print(f"zero offsets == conv2d: {torch.allclose(dcn, ref, atol=1e-5)}")
cols = F.unfold(x, kernel_size=3, padding=1)
im2col = (wt.view(4, -1) @ cols + b.view(1, 4, 1)).view(2, 4, 9, 11)
print(f"unfold im2col == conv2d: {torch.allclose(im2col, ref, atol=1e-5)} cols {tuple(cols.shape)}")
folded = F.fold(cols, output_size=(9, 11), kernel_size=3, padding=1)
counts = F.fold(F.unfold(torch.ones(1, 1, 9, 11), 3, padding=1), (9, 11), 3, padding=1)
print(f"fold(unfold(x)) == x * counts: {torch.allclose(folded, x * counts)} corner count {counts[0, 0, 0, 0].item():.0f} center {counts[0, 0, 4, 4].item():.0f}")
s = deform_conv2d(x, torch.zeros(2, 18, 5, 6), wt, None, stride=2, padding=1)
print(f"stride 2 == conv2d: {torch.allclose(s, F.conv2d(x, wt, stride=2, padding=1), atol=1e-5)} shape {tuple(s.shape)}")
d = deform_conv2d(x, torch.zeros(2, 18, 7, 9), wt, None, padding=1, dilation=2)
print(f"dilation 2 == conv2d: {torch.allclose(d, F.conv2d(x, wt, padding=1, dilation=2), atol=1e-5)} shape {tuple(d.shape)}")

# a constant integer offset of (0, +1) on every tap shifts the input one column left
shift = torch.zeros(2, 9, 2, 9, 11)
shift[:, :, 1] = 1.0
shifted = deform_conv2d(x, shift.view(2, 18, 9, 11), wt, b)
xs = torch.roll(x, shifts=-1, dims=3)
xs[..., -1] = 0
rolled = F.conv2d(xs, wt, b, padding=1)
# the first output column reads real pixels where the rolled input reads padding
print(f"offset +1 column == conv2d of rolled input: {torch.allclose(shifted[..., 1:], rolled[..., 1:], atol=1e-5)} first column differs {not torch.allclose(shifted[..., 0], rolled[..., 0])}")

# half-pixel offsets against a manual bilinear gather
img = t(rng.normal(size=(1, 1, 5, 5)))
yy, xx = torch.tensor([1.5, 2.25, 0.0]), torch.tensor([0.5, 3.75, 4.0])
g = torch.stack((2 * xx / 4 - 1, 2 * yy / 4 - 1), -1).view(1, 1, 3, 2)
gs = F.grid_sample(img, g, align_corners=True).flatten()
y0, x0 = yy.floor().long(), xx.floor().long()
y1, x1 = (y0 + 1).clamp(max=4), (x0 + 1).clamp(max=4)
wy, wx = yy - y0, xx - x0
im = img[0, 0]
manual = (im[y0, x0] * (1 - wy) * (1 - wx) + im[y0, x1] * (1 - wy) * wx + im[y1, x0] * wy * (1 - wx) + im[y1, x1] * wy * wx)
print(f"grid_sample == manual bilinear: {torch.allclose(gs, manual, atol=1e-6)} values {[round(v, 4) for v in gs.tolist()]}")

# gradients flow into offsets and masks
off = (0.3 * torch.from_numpy(rng.normal(size=(2, 18, 9, 11)).astype(np.float32))).requires_grad_(True)
msk = torch.full((2, 9, 9, 11), 0.5, requires_grad=True)
out = deform_conv2d(x, off, wt, b, msk)
out.square().mean().backward()
print(f"offset grad norm {off.grad.norm().item():.4f} mask grad norm {msk.grad.norm().item():.4f}")


def bars(m):
    """Class 0: a horizontal bar, class 1: a vertical bar, both thickened at random scales and
    rotated slightly."""
    xs = np.zeros((m, 1, 12, 12), np.float32)
    ys = rng.integers(0, 2, m)
    for i in range(m):
        c, half, th = rng.integers(4, 8), rng.integers(2, 5), rng.integers(1, 3)
        ang = rng.normal(0, 0.2)
        for s in np.linspace(-half, half, 4 * half + 1):
            r, q = 6 + s * np.sin(ang), c + s * np.cos(ang)
            if ys[i]:
                r, q = q, r
            rr, qq = int(round(r)), int(round(q))
            xs[i, 0, max(rr - th + 1, 0):rr + th, max(qq, 0):qq + 1] = 1.0
        xs[i] += 0.1 * rng.normal(size=(1, 12, 12))
    return torch.from_numpy(xs), torch.from_numpy(ys)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.dcn = DeformConv(6, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = F.relu(self.dcn(F.max_pool2d(x, 2)))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


model = Net()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.startswith("dcn.offset") or name == "dcn.weight":
            continue
        p.copy_(t(rng.normal(0, 0.3, p.shape)) if p.dim() > 1 else torch.zeros_like(p))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(40):
    xb, yb = bars(32)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} offset weight norm {model.dcn.offset.weight.norm().item():.4f}")
xt, yt = bars(200)
with torch.no_grad():
    acc = (model(xt).argmax(1) == yt).float().mean().item()
print(f"offsets learned: {model.dcn.offset.weight.abs().sum().item() > 0} accuracy {acc:.4f}")
print(f"RESULT {np.mean(losses[:5]):.4f} {np.mean(losses[-5:]):.4f} {acc:.4f}")
