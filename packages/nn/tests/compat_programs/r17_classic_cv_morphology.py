"""Classical image processing in PyTorch the way kornia-style utility code writes it: binary and
grey morphology (dilation by max_pool2d, erosion as -max_pool2d(-x), opening / closing, the
morphological gradient and top-hat), connected-component labelling by iterated masked max
pooling of pixel ids, a chamfer distance transform, Sobel gradients by conv2d with atan2
orientations, Canny-style non-maximum suppression by gathering neighbours along quantized
directions and hysteresis by repeated dilation, Harris corners with a Gaussian window and NMS
by max_pool2d equality, a Hough transform for lines by index_put_(accumulate=True), Otsu's
threshold from torch.histc, and integral images by double cumsum for box filters. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <components> <otsu threshold> <hough theta>."""

import math

import numpy as np
import torch
import torch.nn.functional as F

H = W = 40
img = torch.zeros(1, 1, H, W)
img[..., 5:15, 5:15] = 1.0  # square
yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
img[0, 0][((yy - 28) ** 2 + (xx - 28) ** 2) <= 36] = 1.0  # disc
img[..., 30:33, 5:20] = 1.0  # bar
img[..., 20, 20] = 1.0  # speck


def dilate(x, k=3):
    return F.max_pool2d(x, k, 1, k // 2)


def erode(x, k=3):
    return -F.max_pool2d(-x, k, 1, k // 2)


opened = dilate(erode(img))
closed = erode(dilate(img))
grad = dilate(img) - erode(img)
tophat = img - opened
print(f"pixels {int(img.sum())} opened {int(opened.sum())} closed {int(closed.sum())} gradient {int(grad.sum())} top-hat removes the speck {tophat[0, 0, 20, 20].item() == 1.0 and int(tophat.sum()) < 20}")

# connected components: each foreground pixel takes the max id among its 4-neighbourhood
ids = (torch.arange(H * W, dtype=torch.float32).view(1, 1, H, W) + 1) * img
cross = torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
for it in range(200):
    padded = F.pad(ids, (1, 1, 1, 1))
    patches = F.unfold(padded, 3).view(1, 9, H, W)
    new = (patches * cross.flatten()[None, :, None, None]).amax(1, keepdim=True) * img
    if torch.equal(new, ids):
        break
    ids = new
labels, counts = torch.unique(ids[ids > 0], return_counts=True)
print(f"connected components {labels.numel()} sizes {sorted(counts.tolist())} iterations {it}")

# chamfer distance transform (3-4 weights) by repeated min over shifted copies
INF = 1e4
dist = torch.where(img[0, 0] > 0, torch.zeros(H, W), torch.full((H, W), INF))
offsets = [(-1, 0, 3), (1, 0, 3), (0, -1, 3), (0, 1, 3), (-1, -1, 4), (-1, 1, 4), (1, -1, 4), (1, 1, 4)]
for _ in range(60):
    p = F.pad(dist[None, None], (1, 1, 1, 1), value=INF)[0, 0]
    cand = [p[1 + dy:1 + dy + H, 1 + dx:1 + dx + W] + w for dy, dx, w in offsets]
    dist = torch.minimum(dist, torch.stack(cand).amin(0))
print(f"chamfer distance max {dist.max().item() / 3:.3f} at corner {dist[39, 39].item() / 3:.3f}")

# Sobel and Canny-style NMS
rng = np.random.default_rng(1709)
smooth = F.avg_pool2d(F.pad(img, (1, 1, 1, 1), mode="replicate"), 3, 1)
kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
k = torch.stack([kx, kx.T])[:, None]
g = F.conv2d(F.pad(smooth, (1, 1, 1, 1), mode="replicate"), k)
mag = g.pow(2).sum(1).sqrt()[0]
ang = torch.atan2(g[0, 1], g[0, 0])
q = (torch.round(ang / (math.pi / 4)) % 4).long()  # 0: horizontal, 1: 45, 2: vertical, 3: 135
dirs = torch.tensor([[0, 1], [1, 1], [1, 0], [1, -1]])
dy, dx = dirs[q][..., 0], dirs[q][..., 1]
pm = F.pad(mag, (1, 1, 1, 1))
n1 = pm[(yy + 1 + dy).clamp(0, H + 1), (xx + 1 + dx).clamp(0, W + 1)]
n2 = pm[(yy + 1 - dy).clamp(0, H + 1), (xx + 1 - dx).clamp(0, W + 1)]
nms = mag * ((mag >= n1) & (mag >= n2))
strong = nms > 2.0
weak = (nms > 0.8) & ~strong
edges = strong.clone()
for _ in range(20):
    edges = edges | (weak & (dilate(edges.float()[None, None])[0, 0] > 0))
print(f"sobel max {mag.max().item():.4f} orientation bins {torch.bincount(q[mag > 0.5].flatten(), minlength=4).tolist()} edges strong {int(strong.sum())} final {int(edges.sum())}")

# Harris corners
Ix, Iy = g[0, 0], g[0, 1]
gk = torch.exp(-torch.arange(-2, 3.0) ** 2 / 2)
gk = (gk[:, None] * gk[None, :]) / gk.sum() ** 2


def win(a):
    return F.conv2d(F.pad(a[None, None], (2, 2, 2, 2)), gk[None, None])[0, 0]


Sxx, Syy, Sxy = win(Ix * Ix), win(Iy * Iy), win(Ix * Iy)
R = Sxx * Syy - Sxy ** 2 - 0.05 * (Sxx + Syy) ** 2
peaks = (R == F.max_pool2d(R[None, None], 5, 1, 2)[0, 0]) & (R > 0.2 * R.max())
corners = peaks.nonzero().tolist()
print(f"harris corners {len(corners)} square corners found {sum(1 for c in corners if c[0] < 18 and c[1] < 18)}")

# Hough transform of a line
line = torch.zeros(H, W)
xs_l = torch.arange(W)
ys_l = (0.5 * xs_l + 4).round().long()
ok = ys_l < H
line[ys_l[ok], xs_l[ok]] = 1
pts = line.nonzero().float()
thetas = torch.linspace(0, math.pi, 180)
rhos = pts[:, 1:2] * torch.cos(thetas) + pts[:, 0:1] * torch.sin(thetas)
rbin = (rhos.round() + 60).long()
acc = torch.zeros(121, 180)
acc.index_put_((rbin.flatten(), torch.arange(180).repeat(pts.shape[0])), torch.ones(rbin.numel()), accumulate=True)
best = acc.argmax()
rb, tb = divmod(best.item(), 180)
theta_deg = math.degrees(thetas[tb].item())
print(f"hough votes {int(acc.max().item())} of {pts.shape[0]} theta {theta_deg:.2f} rho {rb - 60}")

# Otsu on a bimodal image
noisy = torch.from_numpy(np.concatenate([rng.normal(0.3, 0.05, 600), rng.normal(0.7, 0.08, 400)]).astype(np.float32)).clamp(0, 1)
hist = torch.histc(noisy, bins=64, min=0, max=1)
p = hist / hist.sum()
centers = (torch.arange(64) + 0.5) / 64
w0 = torch.cumsum(p, 0)
mu = torch.cumsum(p * centers, 0)
between = (mu[-1] * w0 - mu) ** 2 / (w0 * (1 - w0)).clamp(min=1e-12)
otsu = centers[between.argmax()].item()
print(f"otsu threshold {otsu:.4f} foreground fraction {(noisy > otsu).float().mean().item():.3f}")

# integral image box filter == avg_pool2d
im = torch.from_numpy(rng.uniform(size=(H, W)).astype(np.float64))
S = F.pad(im.cumsum(0).cumsum(1), (1, 0, 1, 0))
box = (S[5:, 5:] - S[:-5, 5:] - S[5:, :-5] + S[:-5, :-5]) / 25
print(f"integral image box == avg_pool2d: {torch.allclose(box, F.avg_pool2d(im[None, None], 5, 1)[0, 0])}")
print(f"RESULT {labels.numel()} {otsu:.4f} {theta_deg:.2f}")
