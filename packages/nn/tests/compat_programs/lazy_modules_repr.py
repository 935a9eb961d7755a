"""Model definitions as architecture-search and "model zoo" scripts write them, and what they
print: lazy modules (LazyConv2d, LazyBatchNorm2d, LazyLinear, LazyConv1d) whose shapes come from
a dry run (has_uninitialized_params, the class swapped to the eager one afterwards), a lazy
model filled from a state_dict, print(model) of a network using many layer types
(InstanceNorm2d with running stats, LocalResponseNorm, ChannelShuffle, nn.Bilinear, Fold /
Unfold, Upsample, PReLU, Softplus(beta), Hardswish, Mish, GELU(approximate="tanh"),
Threshold, Embedding(padding_idx, max_norm), GRU, TransformerEncoderLayer, MultiheadAttention,
ModuleDict, ParameterList) and a custom extra_repr, a per-layer parameter table from
named_modules, shared modules counted once (named_modules(remove_duplicate=False)), and
one short training run of the lazy CNN (running statistics reset after the dry run). Weights from NumPy after the dry run: the numbers are
the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <parameters>."""

import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(5)


class Scale(nn.Module):
    def __init__(self, channels, init=1.0):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((channels,), init))
        self.channels = channels

    def forward(self, x):
        return x * self.gamma.view(1, -1, 1, 1)

    def extra_repr(self):
        return f"channels={self.channels}, init={self.gamma[0].item():.1f}"


class LazyNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.LazyConv2d(8, 3, padding=1, bias=False),
            nn.InstanceNorm2d(8, affine=True, track_running_stats=True), nn.ReLU(),
            nn.ChannelShuffle(2), nn.LocalResponseNorm(3), nn.MaxPool2d(2),
            nn.LazyConv2d(8, 3, padding=1, bias=False), nn.LazyBatchNorm2d(), nn.ReLU(),
            Scale(8, 0.5))
        self.head = nn.Sequential(nn.Flatten(), nn.LazyLinear(16), nn.Hardswish(),
                                  nn.LazyLinear(classes))

    def forward(self, x):
        return self.head(self.features(x))


def fill(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(rng.normal(0, 1 / np.sqrt(fan_in), p.shape)
                                         .astype(np.float32)))
            elif name.endswith("bias"):
                p.zero_()
    for m in model.modules():  # the dry run's batch statistics came from the random init
        if hasattr(m, "reset_running_stats"):
            m.reset_running_stats()


net = LazyNet()
print("uninitialized:", net.features[0].has_uninitialized_params(),
      type(net.features[0]).__name__, type(net.head[1]).__name__)
print(net.head)
x = torch.from_numpy(rng.normal(size=(24, 2, 8, 8)).astype(np.float32))
labels = torch.from_numpy((x[:, 0, :4].mean((1, 2)) > x[:, 1, 4:].mean((1, 2))).numpy()
                          .astype(np.int64) + (x[:, 0].mean((1, 2)) > 0.1).numpy())
net(x[:2])
print("after dry run:", type(net.features[0]).__name__, type(net.features[7]).__name__,
      type(net.head[1]).__name__, tuple(net.head[1].weight.shape),
      net.features[0].has_uninitialized_params() if hasattr(net.features[0],
                                                             "has_uninitialized_params") else "-")
fill(net)
print(net)
n_params = sum(p.numel() for p in net.parameters())
print("parameters", n_params, "buffers", [n for n, _ in net.named_buffers()][:4])
for name, mod in net.named_modules():
    own = sum(p.numel() for p in mod.parameters(recurse=False))
    if own:
        print(f"  {name:14s} {type(mod).__name__:16s} {own}")

opt = torch.optim.Adam(net.parameters(), lr=0.01)
losses = []
for step in range(15):
    loss = F.cross_entropy(net(x), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("losses", [round(v, 4) for v in losses[::5]])
net.eval()
print("instance norm running_mean", [round(v, 4) for v in net.features[1].running_mean[:3]
                                     .tolist()])

# a lazy model filled from a checkpoint: load_state_dict materializes the lazy parameters
buf = io.BytesIO()
torch.save(net.state_dict(), buf)
buf.seek(0)
fresh = LazyNet()
fresh.load_state_dict(torch.load(buf))
print("loaded lazy:", type(fresh.head[3]).__name__, tuple(fresh.head[3].weight.shape))
fresh.eval()
print("loaded == trained:", torch.allclose(fresh(x), net(x), atol=1e-5))

# a zoo of layer reprs
zoo = nn.ModuleDict({
    "bilinear": nn.Bilinear(4, 5, 3),
    "fold": nn.Fold(output_size=(4, 6), kernel_size=2, stride=2),
    "unfold": nn.Unfold(kernel_size=(2, 3), dilation=1, padding=1),
    "up": nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
    "prelu": nn.PReLU(num_parameters=4, init=0.1),
    "softplus": nn.Softplus(beta=2.0, threshold=10.0),
    "mish": nn.Mish(),
    "gelu": nn.GELU(approximate="tanh"),
    "threshold": nn.Threshold(0.1, -1.0),
    "emb": nn.Embedding(10, 4, padding_idx=0, max_norm=1.0),
    "gru": nn.GRU(4, 6, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True),
    "enc": nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True),
    "mha": nn.MultiheadAttention(8, 2, kdim=6, vdim=5),
    "plist": nn.ParameterList([nn.Parameter(torch.zeros(2, 3)), nn.Parameter(torch.ones(4))]),
    "conv1": nn.LazyConv1d(4, 3, stride=2, bias=False),
})
print(zoo)
u = zoo["unfold"](torch.arange(2 * 4 * 5, dtype=torch.float32).view(1, 2, 4, 5))
print("unfold", tuple(u.shape), "fold", tuple(zoo["fold"](torch.ones(1, 8, 6)).shape),
      "bilinear", tuple(zoo["bilinear"](torch.ones(2, 4), torch.ones(2, 5)).shape))

shared = nn.Linear(3, 3)
tied = nn.Sequential(shared, nn.ReLU(), shared)
print("modules", len(list(tied.modules())), "with duplicates",
      len(list(tied.named_modules(remove_duplicate=False))),
      "params", len(list(tied.parameters())))
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {n_params}")
