"""A toy neural radiance field in 2-d ("flatland" NeRF), in the style of the public NeRF
re-implementations: rays from a camera built with meshgrid(indexing="xy") and linspace, stratified
sample depths, Fourier positional encoding (sin/cos of 2^k x, concatenated), an MLP with a skip
connection predicting density and colour, volume rendering with alpha compositing (1 - exp(-sigma
delta), an exclusive cumprod of transmittance via torch.cat and cumprod), expected depth and
accumulated opacity, hierarchical sampling of a fine pass from the coarse weights with cumsum,
searchsorted(right=True) and gather (inverse-CDF sampling), an MSE photometric loss with
PSNR = -10 log10(mse), and Adam with ExponentialLR. The scene is a coloured disc; every "random"
offset comes from NumPy: from the same initial weights (``--save-init``/``--init-from``) the
numbers agree with torch's. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=60)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)
N_RAYS, N_COARSE, N_FINE, L_FREQ = 64, 16, 16, 4
NEAR, FAR = 0.5, 3.5


def scene(points):
    """Density and colour of a disc of radius 0.6 at the origin: red inside, blue rim."""
    r = points.norm(dim=-1, keepdim=True)
    sigma = 20.0 * torch.sigmoid((0.6 - r) * 30.0)
    rgb = torch.cat([torch.sigmoid((0.4 - r) * 20), torch.zeros_like(r),
                     torch.sigmoid((r - 0.4) * 20)], dim=-1)
    return sigma.squeeze(-1), rgb


def get_rays(angle, n):
    """A 1-d pinhole camera on a circle of radius 2 looking at the origin."""
    origin = torch.tensor([2.0 * math.cos(angle), 2.0 * math.sin(angle)])
    forward = -origin / origin.norm()
    right = torch.stack([-forward[1], forward[0]])
    u = torch.linspace(-0.5, 0.5, n)
    i, _ = torch.meshgrid(u, torch.zeros(1), indexing="xy")
    dirs = forward[None] + i.reshape(-1, 1) * right[None]
    dirs = F.normalize(dirs, dim=-1)
    return origin.expand(n, 2), dirs


def positional_encoding(x, L=L_FREQ):
    freqs = 2.0 ** torch.arange(L, dtype=x.dtype) * math.pi
    xb = x[..., None, :] * freqs[:, None]  # (..., L, 2)
    enc = torch.cat([torch.sin(xb), torch.cos(xb)], dim=-1).flatten(-2)
    return torch.cat([x, enc], dim=-1)


class NeRF(nn.Module):
    def __init__(self, width=64, in_dim=2 + 4 * L_FREQ):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(in_dim, width), nn.Linear(width, width),
                                     nn.Linear(width + in_dim, width)])
        self.sigma = nn.Linear(width, 1)
        self.rgb = nn.Sequential(nn.Linear(width, width // 2), nn.ReLU(), nn.Linear(width // 2, 3))

    def forward(self, x):
        h = x
        for i, layer in enumerate(self.layers):
            if i == 2:
                h = torch.cat([h, x], dim=-1)  # the skip connection
            h = F.relu(layer(h))
        return F.softplus(self.sigma(h)).squeeze(-1), torch.sigmoid(self.rgb(h))


def render(model, origins, dirs, t_vals):
    pts = origins[:, None] + dirs[:, None] * t_vals[..., None]  # (rays, samples, 2)
    if model is None:
        sigma, rgb = scene(pts)
    else:
        sigma, rgb = model(positional_encoding(pts))
    deltas = torch.cat([t_vals[:, 1:] - t_vals[:, :-1],
                        torch.full_like(t_vals[:, :1], 1e10)], dim=-1)
    alpha = 1.0 - torch.exp(-sigma * deltas)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1),
                          dim=-1)[:, :-1]
    weights = alpha * trans
    color = (weights[..., None] * rgb).sum(dim=1)
    depth = (weights * t_vals).sum(dim=1)
    acc = weights.sum(dim=1)
    return color + (1 - acc[:, None]), depth, acc, weights  # a white background


def stratified(n_rays, n_samples):
    t = torch.linspace(NEAR, FAR, n_samples + 1)
    lower, upper = t[:-1], t[1:]
    u = torch.from_numpy(rng.uniform(0, 1, (n_rays, n_samples)).astype(np.float32))
    return lower + (upper - lower) * u


def sample_pdf(bins, weights, n_samples):
    """Inverse-transform sampling of depths from piecewise-constant weights."""
    weights = weights + 1e-5
    pdf = weights / weights.sum(-1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)
    cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
    u = torch.from_numpy(rng.uniform(0, 1, (cdf.shape[0], n_samples)).astype(np.float32))
    inds = torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True)
    below = torch.clamp(inds - 1, min=0)
    above = torch.clamp(inds, max=cdf.shape[-1] - 1)
    cdf_g0, cdf_g1 = torch.gather(cdf, 1, below), torch.gather(cdf, 1, above)
    bins_g0, bins_g1 = torch.gather(bins, 1, below), torch.gather(bins, 1, above)
    denom = cdf_g1 - cdf_g0
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g0) / denom
    return bins_g0 + t * (bins_g1 - bins_g0)


coarse, fine = NeRF(), NeRF()
models = {"coarse": coarse, "fine": fine}
if args.save_init:
    np.savez(args.save_init, **{f"{n}.{k}": v.detach().numpy() for n, m in models.items()
                                for k, v in m.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        for n, m in models.items():
            m.load_state_dict({k[len(n) + 1:]: torch.from_numpy(f[k]) for k in f.files
                               if k.startswith(n + ".")})
print(f"encoding of (0.5, -0.25): {positional_encoding(torch.tensor([0.5, -0.25])).shape[-1]} "
      f"features, first sin {positional_encoding(torch.tensor([0.5, -0.25]))[2].item():.4f}")

angles = np.linspace(0, 2 * np.pi, 12, endpoint=False)
targets = []
with torch.no_grad():
    for a in angles:
        o, d = get_rays(float(a), N_RAYS)
        t = torch.linspace(NEAR, FAR, 128).expand(N_RAYS, 128)
        color, depth, acc, _ = render(None, o, d, t)
        targets.append((o, d, color))
center_depth = render(None, *get_rays(0.0, 3)[:2], torch.linspace(NEAR, FAR, 256).expand(3, 256))[1]
print(f"ground-truth centre depth {center_depth[1].item():.3f} (the disc's edge is at 1.4)")

params = list(coarse.parameters()) + list(fine.parameters())
optimizer = torch.optim.Adam(params, lr=5e-3)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)
psnrs = []
for it in range(args.iters):
    o, d, target = targets[it % len(targets)]
    t_c = stratified(N_RAYS, N_COARSE)
    color_c, _, _, w = render(coarse, o, d, t_c)
    mids = 0.5 * (t_c[:, 1:] + t_c[:, :-1])
    t_f = sample_pdf(mids, w[:, 1:-1].detach(), N_FINE)
    t_all, _ = torch.sort(torch.cat([t_c, t_f.detach()], -1), -1)
    color_f, depth_f, acc_f, _ = render(fine, o, d, t_all)
    loss = F.mse_loss(color_c, target) + F.mse_loss(color_f, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    psnr = -10.0 * torch.log10(F.mse_loss(color_f, target)).item()
    psnrs.append(psnr)
    if it % 20 == 0:
        print(f"iter {it:3d} loss {loss.item():.5f} psnr {psnr:.2f} acc {acc_f.mean().item():.3f} "
              f"lr {scheduler.get_last_lr()[0]:.5f}")
print(f"fine samples stay in range: {bool(((t_f >= NEAR) & (t_f <= FAR)).all())}")
print(f"RESULT {psnrs[0]:.6f} {np.mean(psnrs[-6:]):.6f}")
