"""Keypoint detection by heatmap regression in the style of the public SimpleBaseline / HRNet /
integral-regression PyTorch code: Gaussian target heatmaps from meshgrid(indexing="xy") with
per-joint target weights for invisible joints, a small conv backbone with ConvTranspose2d
upsampling (and a PixelShuffle alternative), a joints-MSE loss weighted per joint, argmax
decoding with the quarter-pixel shift toward the higher neighbour, a differentiable soft-argmax
(spatial softmax with a temperature, expectations over linspace grids), flip testing with
flip-pair channel swaps by index_select and the one-pixel shift, and PCK@0.1 / mean pixel
error metrics. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <pck>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1513)
S, H, J = 32, 16, 4  # image size, heatmap size, joints
FLIP_PAIRS = [(0, 1), (2, 3)]


def gaussian_targets(joints, vis, sigma=1.0):
    xs, ys = torch.meshgrid(torch.arange(H, dtype=torch.float32), torch.arange(H, dtype=torch.float32), indexing="xy")
    mu = joints * (H / S)
    d2 = (xs - mu[..., 0, None, None]) ** 2 + (ys - mu[..., 1, None, None]) ** 2
    return torch.exp(-d2 / (2 * sigma ** 2)), vis.float()


def scenes(m):
    """A 'figure': four bright dots at joint locations (left / right hand, left / right foot),
    some occluded by a dark patch."""
    img = 0.1 * rng.normal(size=(m, 1, S, S))
    joints = np.zeros((m, J, 2))
    vis = np.ones((m, J))
    yy, xx = np.mgrid[0:S, 0:S]
    for i in range(m):
        cx, cy = rng.uniform(10, 22, 2)
        offs = np.array([[-6, -5], [6, -5], [-4, 7], [4, 7]]) + rng.normal(0, 1, (J, 2))
        joints[i] = np.stack([cx, cy]) + offs
        for j in range(J):
            amp = 1.0 + 0.25 * j  # joints differ in brightness so left and right are told apart
            img[i, 0] += amp * np.exp(-((xx - joints[i, j, 0]) ** 2 + (yy - joints[i, j, 1]) ** 2) / 3.0)
        if rng.uniform() < 0.3:
            j = rng.integers(0, J)
            vis[i, j] = 0
    return torch.from_numpy(img.astype(np.float32)), torch.from_numpy(joints.astype(np.float32)), torch.from_numpy(vis)


class PoseNet(nn.Module):
    def __init__(self, shuffle=False):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        if shuffle:
            self.up = nn.Sequential(nn.Conv2d(32, 16 * 4, 3, padding=1), nn.PixelShuffle(2), nn.ReLU())
        else:
            self.up = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Conv2d(16, J, 1)

    def forward(self, x):
        return self.head(self.up(self.backbone(x)))


def joints_mse(pred, target, weight):
    return 0.5 * (((pred - target) ** 2).mean((2, 3)) * weight).mean()


def argmax_decode(hm):
    b, j, h, w = hm.shape
    flat = hm.reshape(b, j, -1)
    idx = flat.argmax(-1)
    coords = torch.stack([idx % w, torch.div(idx, w, rounding_mode="floor")], -1).float()
    px, py = coords[..., 0].long(), coords[..., 1].long()
    bi, ji = torch.meshgrid(torch.arange(b), torch.arange(j), indexing="ij")
    inner_x = (px > 0) & (px < w - 1)
    inner_y = (py > 0) & (py < h - 1)
    dx = hm[bi, ji, py, (px + 1).clamp(max=w - 1)] - hm[bi, ji, py, (px - 1).clamp(min=0)]
    dy = hm[bi, ji, (py + 1).clamp(max=h - 1), px] - hm[bi, ji, (py - 1).clamp(min=0), px]
    shift = torch.stack([torch.sign(dx) * inner_x, torch.sign(dy) * inner_y], -1) * 0.25
    return (coords + shift) * (S / H)


def soft_argmax(hm, beta=20.0):
    b, j, h, w = hm.shape
    p = F.softmax(hm.reshape(b, j, -1) * beta, dim=-1).reshape(b, j, h, w)
    xs = torch.linspace(0, w - 1, w)
    ys = torch.linspace(0, h - 1, h)
    return torch.stack([(p.sum(2) * xs).sum(-1), (p.sum(3) * ys).sum(-1)], -1) * (S / H)


def flip_back(hm):
    hm = hm.flip(3)
    perm = list(range(J))
    for a, b in FLIP_PAIRS:
        perm[a], perm[b] = perm[b], perm[a]
    return hm.index_select(1, torch.tensor(perm))


def numpy_init(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2.0 / p[0].numel()), p.shape).astype(np.float32)))
            elif name.endswith("bias"):
                p.zero_()
    return model


img, joints, vis = scenes(2)
tgt, w = gaussian_targets(joints, vis)
peak = argmax_decode(tgt)
print(f"target peak decodes within a pixel: {bool(((peak - joints).abs() < 1.5).all())} heatmaps {tuple(tgt.shape)} max {tgt.amax().item():.4f}")
print(f"soft-argmax of targets error {(soft_argmax(tgt.log().clamp(min=-30), beta=1.0) - joints).abs().max().item():.4f}")
ps = nn.PixelShuffle(2)
z = torch.arange(16.0).view(1, 4, 2, 2)
print(f"pixel shuffle {ps(z)[0, 0].tolist()} unshuffle round trip {torch.equal(nn.PixelUnshuffle(2)(ps(z)), z)}")

model = numpy_init(PoseNet())
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[70], gamma=0.3)
losses = []
for step in range(90):
    img, joints, vis = scenes(16)
    tgt, w = gaussian_targets(joints, vis)
    out = model(img)
    loss = joints_mse(out, tgt, w) * 1000
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")

model.eval()
img, joints, vis = scenes(64)
with torch.no_grad():
    hm = model(img)
    hm_flip = flip_back(model(img.flip(3)))
    hm_flip = torch.cat([hm_flip[..., :1], hm_flip[..., :-1]], dim=-1)  # the one-pixel shift
    hm_avg = (hm + hm_flip) / 2
thr = 0.1 * S


def pck(pred):
    err = (pred - joints).norm(dim=-1)
    return ((err < thr).float() * vis).sum().item() / vis.sum().item(), (err * vis).sum().item() / vis.sum().item()


for name, pred in [("argmax", argmax_decode(hm)), ("soft-argmax", soft_argmax(hm)), ("flip test", argmax_decode(hm_avg))]:
    p, e = pck(pred)
    print(f"{name:11s} pck@0.1 {p:.4f} mean error {e:.4f} px")
p, _ = pck(argmax_decode(hm_avg))
shuffle_model = numpy_init(PoseNet(shuffle=True))
print(f"pixel-shuffle head output {tuple(shuffle_model(img[:2]).shape)}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {p:.4f}")
