"""Image preprocessing as torchvision-style tensor transforms do it, written with torch ops only
(no torchvision): uint8 HWC arrays to float CHW tensors (permute, div 255, contiguous), a
Resize with antialias=True (F.interpolate bilinear and bicubic with antialias, as
torchvision.transforms.v2.functional.resize does for tensors), CenterCrop by slicing, a
per-channel Normalize, histogram equalization (torch.histogram, cumsum, bucketize and a lookup
with gather), a random-resized-crop whose boxes come from NumPy, horizontal flips by a mask,
RandomErasing with NumPy boxes, the batch's channel statistics with index_reduce (amax/amin per
image), tensors handed to NumPy through torch.utils.dlpack, and a small CNN's logits on the
result. Everything is deterministic: the test compares ember's output with torch's line by
line. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <mean abs pixel> <equalized std> <logit sum>."""

import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.dlpack import from_dlpack, to_dlpack

_ = sys.argv
rng = np.random.default_rng(0)
raw = [(rng.integers(0, 256, (h, w, 3)) * np.linspace(0.3, 1.0, w)[None, :, None]).astype(np.uint8)
       for h, w in [(61, 47), (40, 80), (96, 64), (33, 33)]]


def to_tensor(img):
    return torch.from_numpy(img).permute(2, 0, 1).contiguous().float().div(255)


def resize(x, size, mode):
    h, w = x.shape[-2:]
    short = min(h, w)
    oh, ow = (size, int(size * w / h)) if h == short else (int(size * h / w), size)
    out = F.interpolate(x.unsqueeze(0), size=(oh, ow), mode=mode, antialias=True,
                        align_corners=False).squeeze(0)
    return out.clamp_(0, 1) if mode == "bicubic" else out


def center_crop(x, size):
    h, w = x.shape[-2:]
    top, left = (h - size) // 2, (w - size) // 2
    return x[..., top:top + size, left:left + size]


def equalize(x, bins=64):
    out = torch.empty_like(x)
    for c in range(x.shape[0]):
        hist = torch.histogram(x[c], bins=bins, range=(0.0, 1.0)).hist
        cdf = hist.cumsum(0)
        cdf = (cdf - cdf[0]) / (cdf[-1] - cdf[0]).clamp_min(1)
        edges = torch.linspace(0, 1, bins + 1)[1:-1]
        idx = torch.bucketize(x[c].reshape(-1), edges)
        out[c] = cdf.gather(0, idx).reshape(x[c].shape)
    return out


mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
batch, eq_stds = [], []
for i, img in enumerate(raw):
    x = to_tensor(img)
    mode = "bilinear" if i % 2 == 0 else "bicubic"
    r = resize(x, 24, mode)
    c = center_crop(r, 24)
    e = equalize(c)
    eq_stds.append(e.std().item())
    print(f"image {i}: {tuple(x.shape)} -> resize {mode} {tuple(r.shape)} -> crop "
          f"{tuple(c.shape)}; mean {c.mean().item():.6f}, equalized std {e.std().item():.6f}")
    batch.append((c - mean) / std)
batch = torch.stack(batch)

# random-resized crops and flips with NumPy-drawn parameters
crops = []
for i in range(batch.shape[0]):
    area = rng.uniform(0.3, 1.0) * 24 * 24
    ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
    w = min(24, int(round(math.sqrt(area * ratio))))
    h = min(24, int(round(math.sqrt(area / ratio))))
    top, left = int(rng.integers(0, 24 - h + 1)), int(rng.integers(0, 24 - w + 1))
    patch = batch[i:i + 1, :, top:top + h, left:left + w]
    crops.append(F.interpolate(patch, size=(16, 16), mode="bilinear", antialias=True)[0])
crops = torch.stack(crops)
flip = torch.from_numpy(rng.uniform(size=crops.shape[0]) < 0.5)
crops = torch.where(flip.view(-1, 1, 1, 1), crops.flip(-1), crops)
print(f"flipped {flip.tolist()}, crops {tuple(crops.shape)}")

# random erasing
for i in range(crops.shape[0]):
    if rng.uniform() < 0.5:
        top, lft = rng.integers(0, 10, 2)
        crops[i, :, top:top + 5, lft:lft + 6] = torch.from_numpy(rng.normal(size=(3, 5, 6)).astype(np.float32))
print(f"after erasing: mean {crops.mean().item():.6f}, std {crops.std().item():.6f}")

# per-image channel extremes with index_reduce over the flattened pixels
flat = crops.permute(0, 2, 3, 1).reshape(-1, 3)
owner = torch.arange(crops.shape[0]).repeat_interleave(16 * 16)
hi = torch.full((crops.shape[0], 3), float("-inf")).index_reduce(0, owner, flat, "amax")
lo = torch.full((crops.shape[0], 3), float("inf")).index_reduce(0, owner, flat, "amin")
print(f"per-image max {[round(v, 4) for v in hi[:, 0].tolist()]}, min "
      f"{[round(v, 4) for v in lo[:, 0].tolist()]}")
assert torch.equal(hi, crops.amax(dim=(2, 3)))

arr = np.from_dlpack(crops) if hasattr(np, "from_dlpack") else crops.numpy()
back = from_dlpack(to_dlpack(crops))
print(f"dlpack round trip shares memory: {back.data_ptr() == crops.data_ptr()}, numpy sum "
      f"{float(arr.sum()):.4f}")

net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                    nn.Flatten(), nn.Linear(32, 5))
r = np.random.default_rng(1)
with torch.no_grad():
    for _, p in net.named_parameters():
        p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
    logits = net(crops)
print(f"logits {tuple(logits.shape)}, argmax {logits.argmax(1).tolist()}")
print(f"RESULT {batch.abs().mean().item():.6f} {np.mean(eq_stds):.6f} {logits.sum().item():.6f}")
