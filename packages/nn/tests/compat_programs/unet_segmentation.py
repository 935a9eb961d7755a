"""A small U-Net trained to segment synthetic shapes, in the style of the public U-Net
implementations: double-conv blocks (Conv2d, BatchNorm2d, ReLU(inplace=True)), MaxPool2d down,
ConvTranspose2d up (and a bilinear F.interpolate variant), skip connections joined with torch.cat
after F.pad to matching sizes, a BCEWithLogits + soft Dice loss, pos_weight, Adam with
ReduceLROnPlateau, per-image IoU, a channels_last forward and the model's state saved and loaded
back. Training is deterministic (no shuffling, no dropout), so from the same initial weights
(``--save-init``/``--init-from``) the losses agree with torch's to float32 rounding. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember."""

import argparse
import io
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--bilinear", action="store_true")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
S = 20  # odd sizes after pooling: 20 -> 10 -> 5, and the up path pads 2x2 -> ...


def make_data(n, rng):
    """Noisy images with a filled disc or square; the mask is the shape."""
    yy, xx = np.mgrid[0:S, 0:S]
    imgs = rng.normal(0, 0.4, (n, 1, S, S)).astype(np.float32)
    masks = np.zeros((n, 1, S, S), np.float32)
    for i in range(n):
        cy, cx, r = rng.integers(5, S - 5), rng.integers(5, S - 5), rng.integers(2, 5)
        if i % 2:
            m = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            m = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
        masks[i, 0][m] = 1
        imgs[i, 0][m] += 1.0
    return torch.from_numpy(imgs), torch.from_numpy(masks)


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout, mid=None):
        mid = mid or cout
        super().__init__(
            nn.Conv2d(cin, mid, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, kernel_size=3, padding=1, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True))


class Down(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.MaxPool2d(2), DoubleConv(cin, cout))


class Up(nn.Module):
    def __init__(self, cin, cout, bilinear):
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.conv = DoubleConv(cin, cout, cin // 2)
        else:
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin, cout)

    def forward(self, x1, x2):
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="bilinear", align_corners=True)
        else:
            x1 = self.up(x1)
        dy, dx = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels=1, n_classes=1, bilinear=False, base=8):
        super().__init__()
        f = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4 // f)
        self.up1 = Up(base * 4, base * 2 // f, bilinear)
        self.up2 = Up(base * 2, base, bilinear)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


def dice_loss(logits, target, eps=1.0):
    p = torch.sigmoid(logits).flatten(1)
    t = target.flatten(1)
    inter = (p * t).sum(1)
    return 1 - ((2 * inter + eps) / (p.sum(1) + t.sum(1) + eps)).mean()


def iou(logits, target):
    pred = logits > 0
    t = target.bool()
    inter = (pred & t).sum((1, 2, 3)).float()
    union = (pred | t).sum((1, 2, 3)).float()
    return (inter / union.clamp(min=1)).mean().item()


rng = np.random.default_rng(0)
x_train, m_train = make_data(96, rng)
x_val, m_val = make_data(32, rng)
model = UNet(bilinear=args.bilinear)
if args.save_init:
    np.savez(args.save_init, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
print(f"UNet: {sum(p.numel() for p in model.parameters())} parameters, "
      f"{sum(1 for m in model.modules() if isinstance(m, nn.BatchNorm2d))} BatchNorm2d")
out = model(x_train[:2])
print(f"output {tuple(out.shape)} from input {tuple(x_train[:2].shape)}")

pos_weight = (1 - m_train.mean()) / m_train.mean()
bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight.reshape(1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-8)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", patience=0, factor=0.5)
BATCH = 16


def validate():
    model.eval()
    with torch.no_grad():
        logits = model(x_val)
        loss = (bce(logits, m_val) + dice_loss(logits, m_val)).item()
    model.train()
    return loss, iou(logits, m_val)


first, iou0 = validate()
print(f"before training: val loss {first:.4f} IoU {iou0:.3f}")
for epoch in range(1, args.epochs + 1):
    running = 0.0
    for i in range(0, len(x_train), BATCH):
        xb, mb = x_train[i:i + BATCH], m_train[i:i + BATCH]
        logits = model(xb)
        loss = bce(logits, mb) + dice_loss(logits, mb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item() * len(xb)
    val_loss, val_iou = validate()
    scheduler.step(val_loss)
    print(f"epoch {epoch}: train {running / len(x_train):.4f} val {val_loss:.4f} "
          f"IoU {val_iou:.3f} lr {optimizer.param_groups[0]['lr']:.5f}")

model.eval()
with torch.no_grad():
    ref = model(x_val[:4])
    cl = model.to(memory_format=torch.channels_last)(x_val[:4].to(memory_format=torch.channels_last))
print(f"channels_last agrees: {torch.allclose(ref, cl, atol=1e-4)}")
probs = torch.sigmoid(ref)
masks = (probs > 0.5).float()
upsampled = F.interpolate(masks, size=(2 * S, 2 * S), mode="nearest")
print(f"mask upsampled {tuple(upsampled.shape)} keeps {upsampled.mean().item():.4f} == "
      f"{masks.mean().item():.4f}")
buf = io.BytesIO()
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": args.epochs},
           buf)
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
again = UNet(bilinear=args.bilinear)
again.load_state_dict(ckpt["model"])
again.eval()
with torch.no_grad():
    print(f"reloaded (epoch {ckpt['epoch']}) agrees: {torch.allclose(again(x_val[:4]), ref)}")
print(f"RESULT {first:.6f} {val_loss:.6f} {val_iou:.4f}")
