"""A small ConvNeXt image classifier, in the style of the public ConvNeXt / timm implementations:
a patchify stem (Conv2d with kernel = stride = 4), a channels-first LayerNorm written as a
module over dim 1 (mean / var over channels, affine through [:, None, None]), blocks of a 7x7
depthwise Conv2d (groups=channels), permute to channels-last, nn.LayerNorm over the last dim,
an inverted-bottleneck MLP (Linear 4x, GELU, Linear), a learned layer-scale gamma and stochastic
depth (DropPath, a per-sample Bernoulli mask from torch.empty(...).bernoulli_, scaled by
1 / keep_prob, off in eval), downsampling layers, global average pooling, a head with
nn.Unflatten / nn.Flatten; inputs in torch.channels_last memory format; AdamW with weight decay
on >= 2-d parameters only; trunc_normal_ initialization checked for its bounds; per-stage
parameter counts and output shapes. Weights and data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = x.new_empty(shape).bernoulli_(keep_prob)
    return x * mask.div_(keep_prob)


class DropPath(nn.Module):
    def __init__(self, drop_prob=0.0):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)

    def extra_repr(self):
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of an NCHW tensor."""

    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.0, layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim,)), requires_grad=True)
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x):
        inp = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        return inp + self.drop_path(x)


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=4, depths=(1, 2), dims=(16, 32), drop_path_rate=0.1):
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        self.downsample_layers.append(nn.Sequential(
            nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4), LayerNorm2d(dims[0])))
        for i in range(len(dims) - 1):
            self.downsample_layers.append(nn.Sequential(
                LayerNorm2d(dims[i]), nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2)))
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        self.stages = nn.ModuleList()
        cur = 0
        for i, d in enumerate(depths):
            self.stages.append(nn.Sequential(*[Block(dims[i], dp_rates[cur + j], 0.5)
                                               for j in range(d)]))
            cur += d
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Sequential(nn.Linear(dims[-1], num_classes * 2), nn.Unflatten(1, (num_classes, 2)),
                                  nn.Flatten(-2), nn.Linear(num_classes * 2, num_classes))

    def forward_features(self, x):
        for down, stage in zip(self.downsample_layers, self.stages):
            x = stage(down(x))
        return self.norm(x.mean([-2, -1]))

    def forward(self, x):
        return self.head(self.forward_features(x))


model = ConvNeXt()
w = torch.empty(2000)
nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
print("trunc_normal_ within bounds:", bool(w.abs().max() <= 0.04), "std below 0.02:",
      bool(w.std() < 0.02))
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.ndim > 1 or (name.endswith("bias") and "norm" not in name):
            p.copy_(torch.from_numpy(rng.normal(0, 0.2, p.shape).astype(np.float32)))
print(model.stages[1][1].drop_path, "|", model.stages[0][0].drop_path)
print("stage params:", [sum(p.numel() for p in s.parameters()) for s in model.stages],
      "total", sum(p.numel() for p in model.parameters()))

# data: 4 classes of oriented stripes plus noise, 32x32
n = 64
yy, xx = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
pats = [np.sin(xx / 2.0), np.sin(yy / 2.0), np.sin((xx + yy) / 3.0), np.sin((xx - yy) / 3.0)]
labels = np.arange(n) % 4
imgs = np.stack([np.stack([pats[c] * (k + 1) / 3 for k in range(3)]) for c in labels])
imgs = imgs + rng.normal(0, 0.3, imgs.shape)
X = torch.from_numpy(imgs.astype(np.float32)).contiguous(memory_format=torch.channels_last)
Y = torch.from_numpy(labels)
print("channels_last:", X.is_contiguous(memory_format=torch.channels_last), X.stride())

decay = [p for p in model.parameters() if p.ndim >= 2]
no_decay = [p for p in model.parameters() if p.ndim < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                         {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
print("groups", [len(g["params"]) for g in opt.param_groups])
model.eval()
feats = model.forward_features(X[:2])
print("features", tuple(feats.shape), "logits", tuple(model(X[:2]).shape))
model.train()
# every drop_path mask is 0 or 1/keep_prob
torch.manual_seed(0)
xs = torch.ones(1000, 1, 1, 1)
m = drop_path(xs, 0.25, True)
print("drop_path values:", sorted(set(round(v, 4) for v in m.flatten().tolist())))
for blk in [b for s in model.stages for b in s]:
    if isinstance(blk.drop_path, DropPath):
        blk.drop_path.drop_prob = 0.0  # deterministic training below
losses = []
for step in range(25):
    logits = model(X)
    loss = F.cross_entropy(logits, Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 6 == 0:
        print(f"step {step:2d} loss {loss.item():.4f} gamma0 {model.stages[0][0].gamma.mean().item():.4f}")
model.eval()
with torch.no_grad():
    acc = (model(X).argmax(1) == Y).float().mean().item()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
