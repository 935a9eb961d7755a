"""Video classification in the style of the public R(2+1)D / TSM / SlowFast-lite PyTorch code:
clips as (B, C, T, H, W), a (2+1)-D block factorizing a 3x3x3 Conv3d into a spatial (1, 3, 3)
and a temporal (3, 1, 1) convolution with the intermediate width chosen to match the parameter
count, the temporal shift module (a fraction of channels shifted one frame forward / backward by
slicing into zeros), BatchNorm3d, MaxPool3d with ceil_mode and AdaptiveAvgPool3d, trilinear
F.interpolate for the temporal resampling of a slow pathway, a two-stream fusion, and a model
trained on synthetic clips of a bar moving left, right, up or down (so only motion tells the
classes apart), with temporal flip augmentation swapping labels. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT
<first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1518)
T, S = 8, 12


def clips(m):
    y = rng.integers(0, 4, m)
    x = 0.2 * rng.normal(size=(m, 1, T, S, S))
    for i in range(m):
        start = rng.integers(2, 5)
        for t in range(T):
            pos = start + t if y[i] in (0, 2) else start + T - 1 - t
            pos = min(pos, S - 1)
            if y[i] < 2:
                x[i, 0, t, :, pos] += 1.0
            else:
                x[i, 0, t, pos, :] += 1.0
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


class Conv2Plus1D(nn.Sequential):
    def __init__(self, cin, cout):
        mid = (cin * cout * 27) // (cin * 9 + 3 * cout)
        super().__init__(nn.Conv3d(cin, mid, (1, 3, 3), padding=(0, 1, 1), bias=False), nn.BatchNorm3d(mid), nn.ReLU(inplace=True),
                         nn.Conv3d(mid, cout, (3, 1, 1), padding=(1, 0, 0), bias=False))


def temporal_shift(x, fold_div=4):
    b, c, t, h, w = x.shape
    fold = c // fold_div
    out = torch.zeros_like(x)
    out[:, :fold, :-1] = x[:, :fold, 1:]  # shift left (future -> now)
    out[:, fold:2 * fold, 1:] = x[:, fold:2 * fold, :-1]  # shift right
    out[:, 2 * fold:] = x[:, 2 * fold:]
    return out


class TSMBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv3d(c, c, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.bn = nn.BatchNorm3d(c)

    def forward(self, x):
        return F.relu(x + self.bn(self.conv(temporal_shift(x))))


class TwoStream(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.fast = nn.Sequential(Conv2Plus1D(1, 8), nn.BatchNorm3d(8), nn.ReLU(inplace=True),
                                  nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), ceil_mode=True), TSMBlock(8))
        self.slow = nn.Sequential(nn.Conv3d(1, 8, (1, 3, 3), padding=(0, 1, 1)), nn.ReLU(), nn.AdaptiveAvgPool3d((None, 6, 6)))
        self.pool = nn.AdaptiveAvgPool3d(1)
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        fast = self.fast(x)
        slow_in = F.interpolate(x, size=(T // 2, S, S), mode="trilinear", align_corners=False)
        slow = self.slow(slow_in)
        slow = F.interpolate(slow, size=fast.shape[2:], mode="trilinear", align_corners=True)
        return self.head(torch.cat([self.pool(fast), self.pool(slow)], 1).flatten(1))


c = Conv2Plus1D(4, 8)
full = nn.Conv3d(4, 8, 3, padding=1, bias=False)
print(f"(2+1)D params {sum(p.numel() for n, p in c.named_parameters() if 'weight' in n and p.dim() == 5)} vs full 3D {full.weight.numel()}")
z = torch.arange(2 * 8 * 3, dtype=torch.float32).view(1, 8, 3, 1, 2)
zs = temporal_shift(z)
print(f"shift: first fold frame 0 <- frame 1 {torch.equal(zs[0, 0, 0], z[0, 0, 1])} last frame zero {zs[0, :2, -1].abs().sum().item()} "
      f"second fold frame 1 <- frame 0 {torch.equal(zs[0, 2, 1], z[0, 2, 0])} untouched {torch.equal(zs[0, 4:], z[0, 4:])}")
mp = nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2), ceil_mode=True)
print(f"maxpool3d ceil_mode {tuple(mp(torch.zeros(1, 1, 2, 12, 12)).shape)} floor {tuple(nn.MaxPool3d((1, 3, 3), stride=(1, 2, 2))(torch.zeros(1, 1, 2, 12, 12)).shape)}")
tri = F.interpolate(torch.arange(8.0).view(1, 1, 8, 1, 1), size=(4, 1, 1), mode="trilinear", align_corners=False)
tri_ac = F.interpolate(torch.arange(4.0).view(1, 1, 4, 1, 1), size=(7, 1, 1), mode="trilinear", align_corners=True)
print(f"trilinear down {tri.flatten().tolist()} up align_corners {[round(v, 5) for v in tri_ac.flatten().tolist()]}")

model = TwoStream()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2.0 / p[0].numel()), p.shape).astype(np.float32)))
        elif name.endswith("bias"):
            p.zero_()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=20, T_mult=2)
losses = []
flip_label = torch.tensor([1, 0, 3, 2])
for step in range(60):
    x, y = clips(16)
    if step % 2 == 1:  # temporal flip reverses the motion
        x, y = x.flip(2), flip_label[y]
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step(step + 1)
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} lr {sched.get_last_lr()[0]:.5f}")
model.eval()
x, y = clips(128)
with torch.no_grad():
    acc = (model(x).argmax(1) == y).float().mean().item()
    frozen = (model(x[:, :, :1].expand(-1, -1, T, -1, -1)).argmax(1) == y).float().mean().item()
print(f"accuracy {acc:.4f} on frozen clips {frozen:.4f}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {acc:.4f}")
