"""Preparing a trained CNN for inference, as deployment scripts do: a custom convolution layer
whose arguments are normalized with torch.nn.modules.utils._pair, torch._assert checks inside
forward, a checkpoint saved from a DataParallel/DDP-wrapped model whose "module." prefixes are
stripped with consume_prefix_in_state_dict_if_present, a model built without initializing its
weights (torch.nn.utils.skip_init) and then loaded, Conv2d+BatchNorm2d and Linear+BatchNorm1d
pairs folded with torch.nn.utils.fusion.fuse_conv_bn_eval / fuse_linear_bn_eval (outputs
unchanged), channels_last weights via convert_conv2d_weight_memory_format, a forward hook
(its RemovableHandle typed from torch.utils.hooks) collecting activation statistics, half the
channels of the last conv pruned by their BN scale, Tensor.new_empty_strided for an output
buffer, and latency-free checks of agreement under torch.inference_mode. Weights from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <train acc> <fused max abs diff> <pruned acc>."""

import argparse
import collections
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.utils import _pair, consume_prefix_in_state_dict_if_present
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval
from torch.utils.hooks import RemovableHandle

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)


class SameConv(nn.Conv2d):
    """A "same"-padded convolution taking an int or a pair, as custom layers write it."""

    def __init__(self, cin, cout, kernel_size, stride=1, bias=True, device=None, dtype=None):
        k, s = _pair(kernel_size), _pair(stride)
        super().__init__(cin, cout, k, s, padding=(k[0] // 2, k[1] // 2), bias=bias,
                         device=device, dtype=dtype)


class Net(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.conv1 = SameConv(3, 8, 3, bias=False, device=device)
        self.bn1 = nn.BatchNorm2d(8, device=device)
        self.conv2 = SameConv(8, 16, (3, 3), stride=2, bias=True, device=device)
        self.bn2 = nn.BatchNorm2d(16, device=device)
        self.fc = nn.Linear(16, 12, device=device)
        self.bn3 = nn.BatchNorm1d(12, device=device)
        self.head = nn.Linear(12, 4, device=device)

    def forward(self, x):
        torch._assert(x.dim() == 4, "expected NCHW input")
        torch._assert(x.shape[1] == 3, "expected 3 channels")
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(F.relu(self.bn3(self.fc(x))))


def det_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bn" in name:
                continue
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))


# 4 classes: which quadrant of a 10x10 image holds a bright blob (colour varies)
imgs = rng.normal(0, 0.5, (256, 3, 10, 10)).astype(np.float32)
lab = rng.integers(0, 4, 256)
for i, c in enumerate(lab):
    r0, c0 = (c // 2) * 5, (c % 2) * 5
    imgs[i, rng.integers(0, 3), r0 + 1:r0 + 4, c0 + 1:c0 + 4] += 2.0
X, Y = torch.from_numpy(imgs), torch.from_numpy(lab.astype(np.int64))

model = Net()
det_init(model, 1)
wrapped = nn.DataParallel(model)
opt = torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9)
for epoch in range(args.epochs):
    for i in range(0, 256, 32):
        opt.zero_grad()
        loss = F.cross_entropy(wrapped(X[i:i + 32]), Y[i:i + 32])
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.5f}")
wrapped.eval()
with torch.no_grad():
    train_acc = (wrapped(X).argmax(1) == Y).float().mean().item()
print(f"train accuracy {train_acc:.4f}")

# ---- checkpoint with "module." prefixes, loaded into an uninitialized model -------------------
ckpt = wrapped.state_dict()
print(f"checkpoint keys start with module.: {all(k.startswith('module.') for k in ckpt)}")
ckpt = collections.OrderedDict(ckpt)
consume_prefix_in_state_dict_if_present(ckpt, "module.")
print(f"after consume_prefix: {list(ckpt)[:3]}")
fresh = Net()
lin = torch.nn.utils.skip_init(nn.Linear, 16, 12)
print(f"skip_init: {type(lin).__name__} {tuple(lin.weight.shape)} on {lin.weight.device.type}")
fresh.load_state_dict(ckpt)
fresh.eval()
x = X[:16]
with torch.inference_mode():
    ref = fresh(x)
print(f"reloaded model agrees: {torch.equal(ref, wrapped(x))}")

# ---- fold batch norms into the preceding layers ---------------------------------------------------
fused = Net()
fused.load_state_dict(ckpt)
fused.eval()
fused.conv1 = fuse_conv_bn_eval(fused.conv1, fused.bn1)
fused.conv2 = fuse_conv_bn_eval(fused.conv2, fused.bn2)
fused.fc = fuse_linear_bn_eval(fused.fc, fused.bn3)
fused.bn1, fused.bn2, fused.bn3 = nn.Identity(), nn.Identity(), nn.Identity()
print(f"fused conv1 has a bias now: {fused.conv1.bias is not None}, "
      f"parameters {sum(p.numel() for p in fresh.parameters())} -> "
      f"{sum(p.numel() for p in fused.parameters())}")
with torch.inference_mode():
    out = fused(x)
diff = (out - ref).abs().max().item()
print(f"fused agrees: {diff < 1e-4}")

# ---- channels_last weights ----------------------------------------------------------------------
cl = torch.nn.utils.convert_conv2d_weight_memory_format(fused, torch.channels_last)
w = cl.conv2.weight
print(f"channels_last weight: {w.is_contiguous(memory_format=torch.channels_last)}, "
      f"stride {tuple(w.stride())}")
with torch.inference_mode():
    print(f"channels_last agrees: {torch.allclose(cl(x.contiguous(memory_format=torch.channels_last)), out, atol=1e-5)}")

# ---- activation statistics by a forward hook ---------------------------------------------------
stats = {}


def record(name):
    def hook(module, inputs, output):
        stats[name] = (output.mean().item(), (output > 0).float().mean().item())
    return hook


handles: list[RemovableHandle] = [m.register_forward_hook(record(n))
                                  for n, m in fresh.named_children() if n.startswith("bn")]
with torch.no_grad():
    fresh(X)
for h in handles:
    h.remove()
for n in sorted(stats):
    print(f"{n}: mean {stats[n][0]:.4f}, positive {stats[n][1]:.4f}")
print(f"hooks removed: {len(fresh.bn1._forward_hooks) == 0}, isinstance RemovableHandle: "
      f"{isinstance(handles[0], RemovableHandle)}")

# ---- prune conv2's channels with the smallest |gamma| -------------------------------------------
gamma = fresh.bn2.weight.detach().abs()
keep = gamma.argsort(descending=True)[:12].sort().values
pruned = Net()
pruned.load_state_dict(ckpt)
with torch.no_grad():
    conv = SameConv(8, 12, 3, stride=2)
    conv.weight.copy_(fresh.conv2.weight[keep])
    conv.bias.copy_(fresh.conv2.bias[keep])
    bn = nn.BatchNorm2d(12)
    for name in ("weight", "bias", "running_mean", "running_var"):
        getattr(bn, name).copy_(getattr(fresh.bn2, name)[keep])
    fc = nn.Linear(12, 12)
    fc.weight.copy_(fresh.fc.weight[:, keep])
    fc.bias.copy_(fresh.fc.bias)
pruned.conv2, pruned.bn2, pruned.fc = conv, bn, fc
pruned.eval()
with torch.no_grad():
    logits = pruned(X)
    buf = logits.new_empty_strided((4, 256), (1, 4))
    buf.copy_(logits.t())
pruned_acc = (buf.argmax(0) == Y).float().mean().item()
print(f"kept channels {keep.tolist()}, pruned accuracy {pruned_acc:.4f}, buffer stride "
      f"{buf.stride()}")
print(f"RESULT {train_acc:.4f} {diff:.6f} {pruned_acc:.4f}")
