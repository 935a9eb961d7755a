"""A small 3-D segmentation network for volumes, in the style of the public medical-imaging
(3-D U-Net / V-Net) training scripts: Conv3d with padding_mode="replicate" and "reflect" (checked
against nn.ReplicationPad3d / nn.ReflectionPad3d followed by an unpadded Conv3d), InstanceNorm3d
(affine; track_running_stats=True with its running buffers, frozen by momentum=None), GroupNorm, LeakyReLU(inplace),
MaxPool3d(return_indices=True, ceil_mode=True) paired with MaxUnpool3d(output_size=...) in the
decoder, ConvTranspose3d with output_padding, AvgPool3d with count_include_pad=False and
divisor_override, AdaptiveMaxPool3d / AdaptiveAvgPool3d for a classification side head,
F.interpolate(mode="trilinear", align_corners=False), a soft Dice + cross-entropy loss with
one_hot(...).permute, ZeroPad3d / ConstantPad3d, and per-class Dice scores on the training
volumes. Weights and data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <mean dice>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(31)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape).astype(np.float32))


# ---- padding modes ----
x = arr(1, 2, 5, 6, 4)
w = arr(3, 2, 3, 3, 3, s=0.2)
for mode, pad in [("replicate", nn.ReplicationPad3d(1)), ("reflect", nn.ReflectionPad3d(1)),
                  ("circular", nn.CircularPad3d(1))]:
    conv = nn.Conv3d(2, 3, 3, padding=1, padding_mode=mode, bias=False)
    with torch.no_grad():
        conv.weight.copy_(w)
    ref = F.conv3d(pad(x), w)
    print(f"padding_mode={mode:9s} equals explicit pad: {torch.allclose(conv(x), ref, atol=1e-5)}",
          tuple(pad(x).shape))
print("ZeroPad3d", tuple(nn.ZeroPad3d((1, 0, 2, 0, 0, 1))(x).shape),
      "ConstantPad3d sum", round(nn.ConstantPad3d(1, 0.5)(torch.zeros(1, 1, 2, 2, 2)).sum().item(), 3))

# ---- pooling with indices / ceil_mode, unpooling ----
v = torch.arange(2 * 5 * 5 * 5, dtype=torch.float32).reshape(1, 2, 5, 5, 5).sin()
pooled, idx = nn.MaxPool3d(2, stride=2, return_indices=True, ceil_mode=True)(v)
print("ceil_mode pooled", tuple(pooled.shape), "floor", tuple(F.max_pool3d(v, 2).shape),
      "indices", idx.dtype, idx[0, 0, 0, 0].tolist())
un = nn.MaxUnpool3d(2, stride=2)(pooled, idx, output_size=v.shape[-3:])
print("unpooled", tuple(un.shape), "keeps maxima:", torch.equal(un[un != 0], v[un != 0]),
      "nonzeros", int((un != 0).sum()))
ap = nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False)(v)
ap2 = nn.AvgPool3d(3, stride=2, padding=1, divisor_override=4)(v)
print("avgpool", tuple(ap.shape), round(ap.sum().item(), 4), "divisor_override", round(ap2.sum().item(), 4))
inm = nn.InstanceNorm3d(2, track_running_stats=True, momentum=None)
inm(v)
inm(v * 2)
print("InstanceNorm3d(momentum=None) running stats", inm.running_mean.tolist(), inm.running_var.tolist(),
      "tracked", inm.num_batches_tracked.item())
print("adaptive max", [round(t, 4) for t in nn.AdaptiveMaxPool3d((1, 2, 1))(v).flatten().tolist()],
      "adaptive avg", tuple(nn.AdaptiveAvgPool3d(1)(v).shape))


class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, padding_mode="replicate", bias=False),
                                  nn.InstanceNorm3d(cout, affine=True), nn.LeakyReLU(0.1, inplace=True))
        self.pool = nn.MaxPool3d(2, return_indices=True, ceil_mode=True)

    def forward(self, x):
        f = self.conv(x)
        p, i = self.pool(f)
        return f, p, i


class Net(nn.Module):
    def __init__(self, n_cls=3):
        super().__init__()
        self.d1 = Down(1, 8)
        self.mid = nn.Sequential(nn.Conv3d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.LeakyReLU(0.1))
        self.up = nn.ConvTranspose3d(16, 8, 3, stride=2, padding=1, output_padding=1, bias=False)
        self.unpool = nn.MaxUnpool3d(2)
        self.fuse = nn.Conv3d(24, 8, 1, bias=False)  # a bias before a norm only collects Adam noise
        self.norm = nn.InstanceNorm3d(8, track_running_stats=True)
        self.out = nn.Conv3d(8, n_cls, 1)
        self.side = nn.Sequential(nn.AdaptiveMaxPool3d(1), nn.Flatten(), nn.Linear(16, 2))

    def forward(self, x):
        f1, p1, i1 = self.d1(x)
        m = self.mid(p1)
        up = self.up(m)[..., :f1.shape[-3], :f1.shape[-2], :f1.shape[-1]]
        unp = self.unpool(p1, i1, output_size=f1.shape[-3:])
        h = F.leaky_relu(self.norm(self.fuse(torch.cat([up, unp, f1], 1))), 0.1)
        return self.out(h), self.side(m)


net = Net()
with torch.no_grad():
    for name, p in net.named_parameters():
        if p.ndim > 1 or (name.endswith("bias") and "norm" not in name.split(".")[-2:][0]):
            p.copy_(arr(*p.shape, s=0.3))

# volumes: a sphere (class 1) and a cube (class 2) on background, 9x10x11 (odd sizes: ceil_mode)
D, H, W = 9, 10, 11
zz, yy, xx = torch.meshgrid(torch.arange(D), torch.arange(H), torch.arange(W), indexing="ij")
vols, labs = [], []
for i in range(4):
    c = torch.tensor([3 + i % 3, 4 + i % 2, 5 - i % 2])
    lab = torch.zeros(D, H, W, dtype=torch.long)
    lab[((zz - c[0]) ** 2 + (yy - c[1]) ** 2 + (xx - c[2]) ** 2) <= 5] = 1
    lab[(zz >= 5) & (zz < 8) & (yy >= 6 - i % 2) & (yy < 9) & (xx >= 7) & (xx < 10)] = 2
    vols.append(lab.float() * 0.8 + arr(D, H, W, s=0.3))
    labs.append(lab)
X = torch.stack(vols)[:, None]
Y = torch.stack(labs)
print("volume", tuple(X.shape), "class voxels", torch.bincount(Y.flatten()).tolist())


def dice_loss(logits, target, eps=1.0):
    p = logits.softmax(1)
    oh = F.one_hot(target, p.shape[1]).permute(0, 4, 1, 2, 3).float()
    inter = (p * oh).sum((0, 2, 3, 4))
    denom = p.sum((0, 2, 3, 4)) + oh.sum((0, 2, 3, 4))
    return 1 - ((2 * inter + eps) / (denom + eps)).mean()


opt = torch.optim.Adam(net.parameters(), lr=5e-3)
losses = []
side_y = torch.tensor([0, 1, 0, 1])
for step in range(30):
    seg, side = net(X)
    loss = F.cross_entropy(seg, Y) + dice_loss(seg, Y) + 0.1 * F.cross_entropy(side, side_y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} running_mean[0] {net.norm.running_mean[0].item():.4f}")
print("instance-norm buffers", sorted(k for k in net.state_dict() if k.startswith("norm.")))
net.eval()
with torch.no_grad():
    seg, _ = net(X)
    pred = seg.argmax(1)
    dices = []
    for c in (1, 2):
        inter = ((pred == c) & (Y == c)).sum().item()
        dices.append(2 * inter / ((pred == c).sum().item() + (Y == c).sum().item()))
    up = F.interpolate(seg, scale_factor=2, mode="trilinear", align_corners=False)
print("dice", [round(d, 4) for d in dices], "upsampled", tuple(up.shape))
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {sum(dices) / 2:.4f}")
