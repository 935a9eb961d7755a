"""Unsupervised 3-D image registration, in the style of the public VoxelMorph-like
implementations: pairs of small synthetic volumes (a blob moved by a random affine map made
with F.affine_grid on (N, 3, 4) thetas and warped by F.grid_sample on (N, C, D, H, W)
volumes), a 3-D convolutional network (Conv3d, LeakyReLU, MaxPool3d, F.interpolate with
mode="trilinear") predicting a dense displacement field, a SpatialTransformer module that adds
the field to an identity grid built with torch.meshgrid and registered as a buffer, normalises
it to [-1, 1] and reorders the channels to the grid's (x, y, z) with flip / permute, the
similarity loss (MSE) plus a smoothness penalty on the field's spatial gradients, Adam, then
the Dice overlap of the thresholded moving and fixed volumes before and after registration,
and a global affine alignment fitted by gradient descent through affine_grid and grid_sample
(gradients with respect to theta). Weights and data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <dice before> <dice after>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
S = 12  # volumes of S x S x S voxels

zz, yy, xx = np.meshgrid(*(np.linspace(-1, 1, S),) * 3, indexing="ij")


def blob():
    c = rng.uniform(-0.2, 0.2, 3)
    r = rng.uniform(0.35, 0.5, 3)
    v = np.exp(-(((xx - c[0]) / r[0]) ** 2 + ((yy - c[1]) / r[1]) ** 2
                 + ((zz - c[2]) / r[2]) ** 2))
    return v.astype(np.float32)


def random_theta(n, strength=0.12):
    return (np.tile(np.eye(3, 4), (n, 1, 1))
            + rng.uniform(-strength, strength, (n, 3, 4))).astype(np.float32)


fixed = torch.from_numpy(np.stack([blob() for _ in range(16)])[:, None])  # (16, 1, S, S, S)
theta = torch.from_numpy(random_theta(16))
grid = F.affine_grid(theta, list(fixed.shape), align_corners=False)
moving = F.grid_sample(fixed, grid, mode="bilinear", padding_mode="border",
                       align_corners=False)
print(f"volumes {tuple(fixed.shape)}, affine grid {tuple(grid.shape)}, "
      f"moved mass ratio {(moving.sum() / fixed.sum()).item():.4f}")


class SpatialTransformer(nn.Module):
    def __init__(self, size):
        super().__init__()
        vectors = [torch.arange(0, s, dtype=torch.float32) for s in size]
        grids = torch.stack(torch.meshgrid(vectors, indexing="ij")).unsqueeze(0)
        self.register_buffer("grid", grids, persistent=False)
        self.size = size

    def forward(self, src, flow):
        new_locs = self.grid + flow
        for i, s in enumerate(self.size):
            new_locs[:, i] = 2 * (new_locs[:, i] / (s - 1) - 0.5)
        new_locs = new_locs.permute(0, 2, 3, 4, 1).flip(-1)  # (z, y, x) -> the grid's (x, y, z)
        return F.grid_sample(src, new_locs, align_corners=True, mode="bilinear")


class RegNet(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.enc1 = nn.Conv3d(2, ch, 3, padding=1)
        self.enc2 = nn.Conv3d(ch, 2 * ch, 3, padding=1)
        self.dec = nn.Conv3d(3 * ch, ch, 3, padding=1)
        self.flow = nn.Conv3d(ch, 3, 3, padding=1)
        self.transformer = SpatialTransformer((S, S, S))

    def forward(self, mov, fix):
        x = torch.cat([mov, fix], dim=1)
        e1 = F.leaky_relu(self.enc1(x), 0.2)
        e2 = F.leaky_relu(self.enc2(F.max_pool3d(e1, 2)), 0.2)
        up = F.interpolate(e2, scale_factor=2, mode="trilinear", align_corners=False)
        d = F.leaky_relu(self.dec(torch.cat([up, e1], dim=1)), 0.2)
        flow = self.flow(d)
        return self.transformer(mov, flow), flow


def smoothness(flow):
    dz = flow[:, :, 1:] - flow[:, :, :-1]
    dy = flow[:, :, :, 1:] - flow[:, :, :, :-1]
    dx = flow[..., 1:] - flow[..., :-1]
    return (dz.pow(2).mean() + dy.pow(2).mean() + dx.pow(2).mean()) / 3


def dice(a, b, thr=0.5):
    a, b = a > thr, b > thr
    inter = (a & b).flatten(1).sum(1).float()
    return (2 * inter / (a.flatten(1).sum(1) + b.flatten(1).sum(1)).float()).mean().item()


model = RegNet()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(p[0].numel()), tuple(p.shape))
                                     .astype(np.float32)))
        else:
            p.zero_()
    model.flow.weight.mul_(0.01)  # start near the identity
print(f"identity grid buffer {tuple(model.transformer.grid.shape)}, in state_dict: "
      f"{'transformer.grid' in model.state_dict()}")
with torch.no_grad():
    warped0, _ = model(moving, fixed)
print(f"near-identity warp changes little: {(warped0 - moving).abs().max().item() < 0.05}")

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(args.steps):
    i = (step * 4) % 16
    warped, flow = model(moving[i:i + 4], fixed[i:i + 4])
    sim = F.mse_loss(warped, fixed[i:i + 4])
    loss = sim + 0.05 * smoothness(flow)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(sim.item())
    if step % 10 == 0:
        print(f"step {step:2d} mse {sim.item():.6f} smooth {smoothness(flow).item():.6f}")

with torch.no_grad():
    warped, flow = model(moving, fixed)
before, after = dice(moving, fixed), dice(warped, fixed)
print(f"dice before {before:.4f}, after {after:.4f}; mean |flow| {flow.abs().mean().item():.4f}")

# a global affine fit by gradient descent through affine_grid + grid_sample
est = torch.eye(3, 4).repeat(2, 1, 1).requires_grad_(True)
aopt = torch.optim.Adam([est], lr=0.02)
for it in range(60):
    g = F.affine_grid(est, [2, 1, S, S, S], align_corners=False)
    back = F.grid_sample(moving[:2], g, padding_mode="border", align_corners=False)
    aloss = F.mse_loss(back, fixed[:2])
    aopt.zero_grad()
    aloss.backward()
    aopt.step()
print(f"affine fit mse {aloss.item():.6f}, theta grad finite {bool(torch.isfinite(est.grad).all())}")
print(f"RESULT {losses[0]:.6f} {np.mean(losses[-4:]):.6f} {before:.4f} {after:.4f}")
