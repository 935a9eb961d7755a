"""Optical flow in the style of the public PWC-Net / RAFT-lite code on synthetic image pairs
(smooth NumPy textures shifted by a known per-image translation plus a small rotation field): a
shared feature encoder, a local correlation cost volume built with F.unfold over a padded
second feature map (checked against an explicit loop over displacements with torch.roll), a
soft-argmin flow estimate (softmax over the (2r+1)^2 displacements times the displacement
grid), iterative refinement by backward warping with F.grid_sample(align_corners=True,
padding_mode="border") on a torch.meshgrid base grid normalized to [-1, 1], a two-level pyramid
with F.avg_pool2d and F.interpolate(bilinear, align_corners=True) flow upsampling (values
scaled by 2), the Charbonnier photometric loss plus a first-order smoothness term by
torch.diff, supervised endpoint error (EPE) on the known flows, and OneCycleLR, in float64. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first EPE> <last EPE> <photometric gain>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)  # soft-argmin training amplifies roundings: keep them small
rng = np.random.default_rng(147)
N, S, R = 48, 16, 2


def texture(n):
    f = rng.normal(size=(n, 1, S + 8, S + 8)).astype(np.float64)
    k = np.exp(-np.linspace(-2, 2, 5) ** 2)
    k = (k[:, None] * k[None]).astype(np.float64)
    k /= k.sum()
    return F.conv2d(torch.from_numpy(f), torch.from_numpy(k).view(1, 1, 5, 5)) * 3


def base_grid(h, w):
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64), indexing="ij")
    return torch.stack([xs, ys], 0)  # (2, H, W), x first as flow is (u, v)


def warp(img, flow):
    h, w = img.shape[-2:]
    coords = base_grid(h, w).unsqueeze(0) + flow
    gx = 2 * coords[:, 0] / (w - 1) - 1
    gy = 2 * coords[:, 1] / (h - 1) - 1
    return F.grid_sample(img, torch.stack([gx, gy], -1), mode="bilinear", padding_mode="border", align_corners=True)


tex = texture(N)[:, :, 2:2 + S, 2:2 + S]
shifts = torch.from_numpy(rng.uniform(-1.5, 1.5, (N, 2, 1, 1)).astype(np.float64))
yy, xx = base_grid(S, S)[1] - S / 2, base_grid(S, S)[0] - S / 2
rot = torch.from_numpy(rng.uniform(-0.05, 0.05, (N, 1, 1, 1)).astype(np.float64))
flow_gt = shifts + rot * torch.stack([-yy, xx], 0).unsqueeze(0)
img1 = tex
img2 = warp(img1, -flow_gt)  # img2(x) = img1(x - f): then warp(img2, f) recovers img1
print(f"pairs {tuple(img1.shape)} mean |flow| {flow_gt.norm(dim=1).mean().item():.4f}")


def cost_volume(f1, f2, r=R):
    b, c, h, w = f1.shape
    k = 2 * r + 1
    patches = F.unfold(F.pad(f2, (r, r, r, r)), k).view(b, c, k * k, h, w)
    return (f1.unsqueeze(2) * patches).sum(1) / c  # (B, (2r+1)^2, H, W), dy-major


f1 = torch.from_numpy(rng.normal(size=(2, 3, 6, 6)).astype(np.float64))
f2 = torch.from_numpy(rng.normal(size=(2, 3, 6, 6)).astype(np.float64))
cv = cost_volume(f1, f2)
loop = []
for dy in range(-R, R + 1):
    for dx in range(-R, R + 1):
        shifted = F.pad(f2, (R, R, R, R))[:, :, R + dy:R + dy + 6, R + dx:R + dx + 6]
        loop.append((f1 * shifted).mean(1))
print(f"unfold cost volume == shifted loop: {torch.allclose(cv, torch.stack(loop, 1), atol=1e-6)} shape {tuple(cv.shape)}")

disp = torch.stack(torch.meshgrid(torch.arange(-R, R + 1.0), torch.arange(-R, R + 1.0), indexing="ij")[::-1], 0).reshape(2, -1)


class FlowNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.LeakyReLU(0.1), nn.Conv2d(c, c, 3, padding=1))
        self.refine = nn.Sequential(nn.Conv2d((2 * R + 1) ** 2 + 2 + c, 32, 3, padding=1), nn.LeakyReLU(0.1),
                                    nn.Conv2d(32, 2, 3, padding=1))
        self.temp = nn.Parameter(torch.tensor(5.0))

    def level(self, a, b, flow):
        fa, fb = self.enc(a), self.enc(warp(b, flow))
        cv = cost_volume(fa, fb)
        soft = torch.einsum("dk,bkhw->bdhw", disp, torch.softmax(self.temp * cv, 1))
        return flow + soft + self.refine(torch.cat([cv, flow, fa], 1))

    def forward(self, a, b):
        a2, b2 = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
        coarse = self.level(a2, b2, torch.zeros(a.shape[0], 2, *a2.shape[-2:]))
        up = 2 * F.interpolate(coarse, scale_factor=2, mode="bilinear", align_corners=True)
        return self.level(a, b, up)


model = FlowNet()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 / np.sqrt(p[0].numel()), p.shape).astype(np.float64)))
        elif "bias" in name:
            p.zero_()


def charbonnier(x, eps=1e-3):
    return torch.sqrt(x * x + eps * eps).mean()


def epe(flow, gt):
    return (flow - gt).norm(dim=1).mean().item()


with torch.no_grad():
    zero_photo = charbonnier(img2 - img1).item()
    epe0 = epe(model(img1, img2), flow_gt)
steps = 60
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=steps)
for step in range(steps):
    idx = torch.from_numpy(rng.choice(N, 16, replace=False))
    a, b, gt = img1[idx], img2[idx], flow_gt[idx]
    flow = model(a, b)
    photo = charbonnier(warp(b, flow) - a)
    smooth = torch.diff(flow, dim=-1).abs().mean() + torch.diff(flow, dim=-2).abs().mean()
    loss = photo + 0.1 * smooth + 0.1 * (flow - gt).norm(dim=1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    if step % 15 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} photo {photo.item():.5f} smooth {smooth.item():.5f} lr {sched.get_last_lr()[0]:.6f}")
with torch.no_grad():
    flow = model(img1, img2)
    photo = charbonnier(warp(img2, flow) - img1).item()
    epe1 = epe(flow, flow_gt)
print(f"epe {epe0:.4f} -> {epe1:.4f} photometric zero-flow {zero_photo:.5f} learned {photo:.5f} temperature {model.temp.item():.4f}")
print(f"RESULT {epe0:.4f} {epe1:.4f} {zero_photo / photo:.4f}")
