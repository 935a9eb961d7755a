"""An autoregressive PixelCNN on tiny binary images, in the style of the public PixelCNN
implementations: a MaskedConv2d subclass of nn.Conv2d whose mask ("A" for the first layer, "B"
after it) is a registered buffer multiplied into the weight in forward (weight.data *= mask in
the older style), gated residual blocks, a per-pixel 2-way softmax trained with
F.cross_entropy on (N, C, H, W) logits, the receptive field checked by a gradient of one output
pixel with respect to the input (no pixel at or after it may contribute), and sampling pixel by
pixel with torch.multinomial from a seeded torch.Generator. Weights and data from NumPy.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <bits per pixel>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
H = W = 8
# stripes and blocks: strong spatial structure that an autoregressive model can learn
imgs = np.zeros((96, 1, H, W), np.float32)
for i in range(96):
    if i % 2:
        imgs[i, 0, :, rng.integers(0, W)] = 1
    else:
        r, c = rng.integers(0, H - 3, 2)
        imgs[i, 0, r:r + 3, c:c + 3] = 1
data = torch.from_numpy(imgs)


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super().__init__(*args, **kwargs)
        assert mask_type in ("A", "B")
        self.register_buffer("mask", self.weight.data.clone())
        _, _, kh, kw = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kh // 2, kw // 2 + (mask_type == "B"):] = 0
        self.mask[:, :, kh // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super().forward(x)


class GatedBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv = MaskedConv2d("B", ch, 2 * ch, 3, padding=1)
        self.out = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        return x + self.out(torch.tanh(a) * torch.sigmoid(b))


class PixelCNN(nn.Module):
    def __init__(self, ch=16, blocks=3):
        super().__init__()
        self.inp = MaskedConv2d("A", 1, ch, 5, padding=2)
        self.blocks = nn.Sequential(*[GatedBlock(ch) for _ in range(blocks)])
        self.head = nn.Sequential(nn.ReLU(), nn.Conv2d(ch, 2, 1))

    def forward(self, x):
        return self.head(self.blocks(self.inp(x)))


model = PixelCNN()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan_in = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                / math.sqrt(fan_in))
print("mask A row 2:", model.inp.mask[0, 0, 2].tolist(), "mask B row 1:",
      model.blocks[0].conv.mask[0, 0, 1].tolist())
print("buffers:", [n for n, _ in model.named_buffers()])

# receptive field: d out[.., 4, 4] / d x must vanish at (4, 4) and after it in raster order
x = data[:1].clone().requires_grad_(True)
model(x)[0, 1, 4, 4].backward()
g = x.grad[0, 0].abs()
order = torch.arange(H * W).reshape(H, W)
print("causal:", bool((g[order >= 4 * W + 4] == 0).all()), "sees the past:",
      bool((g[order < 4 * W + 4] > 0).any()))

opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(60):
    idx = torch.from_numpy(rng.integers(0, 96, 16))
    batch = data[idx]
    logits = model(batch)
    loss = F.cross_entropy(logits, batch[:, 0].long())
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")

model.eval()
with torch.no_grad():
    nll = F.cross_entropy(model(data), data[:, 0].long(), reduction="none")
    print("per-pixel nll", tuple(nll.shape), nll.dtype)
    bpp = nll.mean().item() / math.log(2)
    gen = torch.Generator().manual_seed(0)
    sample = torch.zeros(4, 1, H, W)
    for i in range(H):
        for j in range(W):
            probs = F.softmax(model(sample)[:, :, i, j], dim=1)
            sample[:, 0, i, j] = torch.multinomial(probs, 1, generator=gen).squeeze(1).float()
print("sample", tuple(sample.shape), "binary:", bool(((sample == 0) | (sample == 1)).all()),
      "mean in (0, 1):", 0 < sample.mean().item() < 1)
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {bpp:.5f}")
