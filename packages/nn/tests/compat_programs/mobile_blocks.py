"""Mobile-network building blocks, in the style of the public ShuffleNetV2 / MobileNetV3 /
AlexNet implementations (torchvision-like, written anew): a ShuffleNetV2 unit (x.chunk(2, dim=1),
a depthwise 3x3 Conv2d branch, torch.cat then channel shuffle written by hand with view /
transpose and checked against nn.ChannelShuffle and F.channel_shuffle), a stride-2 unit with two
branches, a MobileNetV3 inverted residual with a squeeze-and-excitation block (AdaptiveAvgPool2d,
1x1 convs, nn.Hardsigmoid(inplace=True)), nn.Hardswish and nn.ReLU6, _make_divisible channel
rounding, an AlexNet-style stem with nn.LocalResponseNorm (checked against
F.local_response_norm and a hand-written sum over a padded square), nn.Softmax2d, a MAC/FLOP
count by forward hooks on Conv2d / Linear, BatchNorm in train and eval mode, SGD with nesterov.
Weights from NumPy and fixed batches: torch and ember print the same numbers. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <train accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1)


def _make_divisible(v, divisor=8, min_value=None):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, inp, oup, stride):
        super().__init__()
        self.stride = stride
        bf = oup // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        cin = inp if stride > 1 else bf
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True),
            nn.Conv2d(bf, bf, 3, stride, 1, groups=bf, bias=False), nn.BatchNorm2d(bf),
            nn.Conv2d(bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class SqueezeExcitation(nn.Module):
    def __init__(self, c):
        super().__init__()
        sq = _make_divisible(c // 4, 8)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(c, sq, 1), nn.Conv2d(sq, c, 1)
        self.scale_activation = nn.Hardsigmoid(inplace=True)

    def forward(self, x):
        s = self.fc2(F.relu(self.fc1(self.avgpool(x))))
        return x * self.scale_activation(s)


class InvertedResidual(nn.Module):
    def __init__(self, c, expand):
        super().__init__()
        hid = _make_divisible(c * expand)
        self.block = nn.Sequential(
            nn.Conv2d(c, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.Hardswish(),
            nn.Conv2d(hid, hid, 3, 1, 1, groups=hid, bias=False), nn.BatchNorm2d(hid),
            nn.ReLU6(inplace=True), SqueezeExcitation(hid),
            nn.Conv2d(hid, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.block(x)


net = nn.Sequential(
    nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(inplace=True),
    nn.LocalResponseNorm(size=5, alpha=1e-4, beta=0.75, k=2.0),
    ShuffleUnit(16, 32, 2), ShuffleUnit(32, 32, 1), InvertedResidual(32, 3.5),
    nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(32, 4))
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape).astype(np.float32)))
print("divisible:", [_make_divisible(v) for v in (3.5 * 32, 10, 30, 4, 130)])
print("modules:", sum(1 for _ in net.modules()), "depthwise convs:",
      sum(isinstance(m, nn.Conv2d) and m.groups > 1 for m in net.modules()))

x = torch.from_numpy(rng.normal(0, 1, (2, 8, 3, 3)).astype(np.float32))
ref = channel_shuffle(x, 4)
print("shuffle agrees:", torch.equal(ref, nn.ChannelShuffle(4)(x)),
      torch.equal(ref, F.channel_shuffle(x, 4)), nn.ChannelShuffle(4))
lrn = nn.LocalResponseNorm(3, alpha=0.5, beta=0.75, k=1.0)
sq = F.pad((x * x).unsqueeze(1), (0, 0, 0, 0, 1, 1)).squeeze(1)
div = (1.0 + 0.5 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75
print("lrn by hand:", torch.allclose(lrn(x), x / div, atol=1e-6), lrn,
      torch.allclose(F.local_response_norm(x, 3, 0.5, 0.75, 1.0), lrn(x)))
s2d = nn.Softmax2d()(x)
print("softmax2d sums to one over channels:", torch.allclose(s2d.sum(1), torch.ones(2, 3, 3)))
print("hardswish / hardsigmoid / relu6", F.hardswish(torch.tensor([-4.0, -1.0, 1.0, 4.0])).tolist(),
      F.hardsigmoid(torch.tensor([-4.0, 0.0, 1.5])).tolist(), F.relu6(torch.tensor([-1.0, 7.0])).tolist())

macs = []


def count(mod, inp, out):
    if isinstance(mod, nn.Conv2d):
        k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
        macs.append(out.numel() * k)
    else:
        macs.append(mod.in_features * mod.out_features * out.shape[0])


handles = [m.register_forward_hook(count) for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
imgs = rng.normal(0, 0.5, (16, 3, 12, 12)).astype(np.float32)
labels = np.arange(16) % 4
imgs[np.arange(16), labels % 3] += 1.5 * (labels[:, None, None] < 3)
imgs[labels == 3] *= -1
x, y = torch.from_numpy(imgs), torch.from_numpy(labels)
net.eval()
with torch.no_grad():
    net(x[:1])
print("MACs per image:", sum(macs), "layers hooked:", len(macs))
for h in handles:
    h.remove()

net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=4e-5)
losses = []
for step in range(25):
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
bn = net[3].branch1[1]
print("bn batches tracked", bn.num_batches_tracked.item(), "running_var mean",
      round(bn.running_var.mean().item(), 4))
net.eval()
with torch.no_grad():
    acc = (net(x).argmax(1) == y).float().mean().item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
