"""Resampling and patch operators as augmentation, super-resolution and optical-flow code use
them: F.affine_grid + F.grid_sample for rotations / zooms / translations in every mode
(bilinear, nearest, bicubic) and padding mode (zeros, border, reflection) with and without
align_corners, a flow-field warp with a gradient through both image and flow, 3-D grid_sample,
F.interpolate in its modes (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area)
with align_corners, scale_factor vs size, recompute_scale_factor and antialias downsampling,
nn.Upsample / UpsamplingBilinear2d, F.pixel_shuffle / pixel_unshuffle (and the modules) round
trips, F.unfold / F.fold with stride, padding and dilation (overlap-add counts, a patch-wise
mean filter), and a tiny ESPCN-style upsampler trained to invert a bicubic downsampling. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <fold error>."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def checksum(t):
    """Sum, max |.|, and a position-weighted sum (0.0 + round(): no "-0.00000")."""
    vals = (t.sum(), t.abs().max(), (t * torch.arange(t.numel()).view_as(t).sin()).sum())
    return " ".join(f"{0.0 + round(v.item(), 5):.5f}" for v in vals)


H = W = 9
yy, xx = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
img = torch.stack([torch.sin(3 * xx) * torch.cos(2 * yy), xx * yy, (xx ** 2 + yy) / 2])[None]
img = torch.cat([img, img.flip(-1)], dim=0)  # (2, 3, 9, 9)


def rotation(theta, scale=1.0, tx=0.0, ty=0.0):
    c, s = math.cos(theta) * scale, math.sin(theta) * scale
    return torch.tensor([[c, -s, tx], [s, c, ty]])


thetas = torch.stack([rotation(0.4, 1.1, 0.1, -0.2), rotation(-1.0, 0.8)])
for align in (False, True):
    grid = F.affine_grid(thetas, (2, 3, 7, 8), align_corners=align)
    print("affine_grid", align, tuple(grid.shape), checksum(grid))
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            out = F.grid_sample(img, grid, mode=mode, padding_mode=pad, align_corners=align)
            print(f"grid_sample {mode:8s} {pad:10s} {align!s:5s}", checksum(out))

# a flow warp with gradients into image and flow
flow = 0.15 * torch.stack([torch.sin(2 * yy), torch.cos(3 * xx)], dim=-1)[None].repeat(2, 1, 1, 1)
flow.requires_grad_()
src = img.clone().requires_grad_()
base = torch.stack([xx, yy], dim=-1)[None]
warped = F.grid_sample(src, base + flow, mode="bilinear", padding_mode="border",
                       align_corners=True)
(warped * img.flip(-2)).sum().backward()
print("warp grads", checksum(src.grad), checksum(flow.grad))

vol = torch.arange(2 * 1 * 4 * 5 * 6, dtype=torch.float32).view(2, 1, 4, 5, 6).cos()
theta3 = torch.tensor([[[0.9, 0.1, 0.0, 0.05], [-0.1, 0.9, 0.0, 0.0], [0.0, 0.0, 1.0, -0.1]]])
g3 = F.affine_grid(theta3.repeat(2, 1, 1), (2, 1, 3, 4, 5), align_corners=False)
for mode in ("bilinear", "nearest"):
    print("grid_sample 3d", mode, checksum(F.grid_sample(vol, g3, mode=mode,
                                                         align_corners=False)))

# ---- interpolate ----
sig = img[:, :1, 0]  # (2, 1, 9)
for mode, kw in (("nearest", {}), ("nearest-exact", {}), ("linear", {"align_corners": False}),
                 ("linear", {"align_corners": True}), ("area", {})):
    print("interp 1d", mode, kw, checksum(F.interpolate(sig, size=14, mode=mode, **kw)),
          checksum(F.interpolate(sig, size=4, mode=mode, **kw)))
for mode, kw in (("nearest", {}), ("nearest-exact", {}), ("bilinear", {"align_corners": False}),
                 ("bilinear", {"align_corners": True}), ("bicubic", {"align_corners": False}),
                 ("bicubic", {"align_corners": True}), ("area", {})):
    up = F.interpolate(img, scale_factor=1.7, mode=mode, **kw)
    down = F.interpolate(img, size=(4, 5), mode=mode, **kw)
    print("interp 2d", mode, kw, tuple(up.shape), checksum(up), checksum(down))
for mode in ("bilinear", "bicubic"):
    aa = F.interpolate(img, size=(4, 3), mode=mode, antialias=True, align_corners=False)
    print("antialias", mode, checksum(aa))
print("recompute_scale_factor", checksum(F.interpolate(img, scale_factor=1.37, mode="bilinear",
                                                       recompute_scale_factor=True)),
      checksum(F.interpolate(img, scale_factor=1.37, mode="bilinear")))
print("trilinear", checksum(F.interpolate(vol, scale_factor=(1.5, 0.8, 1.2), mode="trilinear",
                                          align_corners=False)),
      checksum(F.interpolate(vol, size=(3, 3, 3), mode="nearest")))
print("nn.Upsample", checksum(nn.Upsample(scale_factor=2, mode="nearest")(img)),
      checksum(nn.UpsamplingBilinear2d(scale_factor=2)(img)))

# ---- pixel shuffle ----
feat = torch.arange(2 * 12 * 3 * 4, dtype=torch.float32).view(2, 12, 3, 4)
ps = F.pixel_shuffle(feat, 2)
print("pixel_shuffle", tuple(ps.shape), ps[0, 0, :2, :4].tolist())
back = F.pixel_unshuffle(ps, 2)
print("unshuffle round trip", torch.equal(back, feat), tuple(nn.PixelUnshuffle(3)(
    torch.zeros(1, 2, 6, 9)).shape), tuple(nn.PixelShuffle(3)(torch.zeros(1, 18, 2, 2)).shape))

# ---- unfold / fold ----
x = img[:, :2]
cols = F.unfold(x, kernel_size=3, padding=1, stride=1)
print("unfold", tuple(cols.shape), checksum(cols))
counts = F.fold(F.unfold(torch.ones_like(x), 3, padding=1), (H, W), 3, padding=1)
mean_filter = F.fold(cols, (H, W), kernel_size=3, padding=1) / counts
print("fold counts corners", counts[0, 0, 0, 0].item(), counts[0, 0, 4, 4].item(),
      "mean filter == avg_pool:", torch.allclose(
          mean_filter, F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), atol=1e-6))
cols2 = F.unfold(x, kernel_size=(2, 3), dilation=(2, 1), stride=(2, 2), padding=(1, 0))
print("unfold dilated", tuple(cols2.shape), checksum(cols2))
ref = F.fold(cols2, (H, W), kernel_size=(2, 3), dilation=(2, 1), stride=(2, 2), padding=(1, 0))
print("fold dilated", checksum(ref))
patches = F.unfold(x, kernel_size=3, stride=3)
rebuilt = F.fold(patches, (H, W), kernel_size=3, stride=3)
fold_err = (rebuilt - x).abs().max().item()
print("non-overlapping fold == identity:", fold_err == 0.0)
unf = nn.Unfold(kernel_size=2, stride=2)
print("nn.Unfold / nn.Fold", tuple(unf(x[:, :, :8, :8]).shape),
      nn.Fold(output_size=(8, 8), kernel_size=2, stride=2)(unf(x[:, :, :8, :8])).shape ==
      x[:, :, :8, :8].shape)


# ---- an ESPCN-style upsampler ----
class ESPCN(nn.Module):
    def __init__(self, r=3):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.Tanh(),
                                  nn.Conv2d(16, 3 * r * r, 3, padding=1))
        self.shuffle = nn.PixelShuffle(r)

    def forward(self, lr):
        up = F.interpolate(lr, scale_factor=3, mode="bicubic", align_corners=False)
        return up + self.shuffle(self.body(lr))


net = ESPCN()
with torch.no_grad():
    for i, p in enumerate(net.parameters()):
        p.copy_(0.1 * torch.sin(torch.arange(p.numel(), dtype=torch.float32) * (0.37 + i))
                .view_as(p))
hr = F.interpolate(img, size=(12, 12), mode="bilinear", align_corners=False)
lr = F.interpolate(hr, size=(4, 4), mode="bicubic", antialias=True, align_corners=False)
opt = torch.optim.Adam(net.parameters(), lr=5e-3)
losses = []
for step in range(40):
    loss = F.l1_loss(net(lr), hr)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"espcn l1 {losses[0]:.5f} -> {losses[-1]:.5f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {fold_err:.1e}")
