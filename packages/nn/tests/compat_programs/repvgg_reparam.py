"""Structural re-parameterization for deployment in the style of the public RepVGG and
MobileOne code: a training-time block with a 3x3 conv + BN branch, a 1x1 conv + BN branch and a
BN identity branch, trained, then fused into a single 3x3 convolution (BN folded into the conv
weights by running_var.add(eps).sqrt(), the 1x1 kernel zero-padded by F.pad to 3x3, the identity
written as a Dirac kernel by nn.init.dirac_), with the deploy block's state swapped in by
__delattr__ of the branches. Also torch.nn.utils.fusion.fuse_conv_bn_eval / fuse_linear_bn_eval
(and fuse_conv_bn_weights on raw tensors) on a conventional network, grouped convolutions in the
fused block, and a parameter count before / after. Written against `torch`; the test suite runs
it unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last
loss> <deploy accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval

rng = np.random.default_rng(153)


def conv_bn(cin, cout, k, stride, padding, groups=1):
    seq = nn.Sequential()
    seq.add_module("conv", nn.Conv2d(cin, cout, k, stride, padding, groups=groups, bias=False))
    seq.add_module("bn", nn.BatchNorm2d(cout))
    return seq


class RepVGGBlock(nn.Module):
    def __init__(self, cin, cout, stride=1, groups=1, deploy=False):
        super().__init__()
        self.deploy, self.groups, self.cin = deploy, groups, cin
        self.nonlinearity = nn.ReLU()
        if deploy:
            self.rbr_reparam = nn.Conv2d(cin, cout, 3, stride, 1, groups=groups, bias=True)
        else:
            self.rbr_identity = nn.BatchNorm2d(cin) if cout == cin and stride == 1 else None
            self.rbr_dense = conv_bn(cin, cout, 3, stride, 1, groups=groups)
            self.rbr_1x1 = conv_bn(cin, cout, 1, stride, 0, groups=groups)

    def forward(self, x):
        if hasattr(self, "rbr_reparam"):
            return self.nonlinearity(self.rbr_reparam(x))
        id_out = 0 if self.rbr_identity is None else self.rbr_identity(x)
        return self.nonlinearity(self.rbr_dense(x) + self.rbr_1x1(x) + id_out)

    def _fuse_bn_tensor(self, branch):
        if branch is None:
            return 0, 0
        if isinstance(branch, nn.Sequential):
            kernel = branch.conv.weight
            bn = branch.bn
        else:
            input_dim = self.cin // self.groups
            kernel = torch.zeros(self.cin, input_dim, 3, 3)
            if self.groups > 1:
                nn.init.dirac_(kernel, groups=self.groups)
            else:
                for i in range(self.cin):
                    kernel[i, i % input_dim, 1, 1] = 1
            bn = branch
        std = (bn.running_var + bn.eps).sqrt()
        t = (bn.weight / std).reshape(-1, 1, 1, 1)
        return kernel * t, bn.bias - bn.running_mean * bn.weight / std

    def get_equivalent_kernel_bias(self):
        k3, b3 = self._fuse_bn_tensor(self.rbr_dense)
        k1, b1 = self._fuse_bn_tensor(self.rbr_1x1)
        kid, bid = self._fuse_bn_tensor(self.rbr_identity)
        return k3 + F.pad(k1, [1, 1, 1, 1]) + kid, b3 + b1 + bid

    def switch_to_deploy(self):
        if hasattr(self, "rbr_reparam"):
            return
        kernel, bias = self.get_equivalent_kernel_bias()
        conv = self.rbr_dense.conv
        self.rbr_reparam = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                                     conv.padding, groups=conv.groups, bias=True)
        self.rbr_reparam.weight.data = kernel.detach()
        self.rbr_reparam.bias.data = bias.detach()
        for para in self.parameters():
            para.detach_()
        self.__delattr__("rbr_dense")
        self.__delattr__("rbr_1x1")
        if hasattr(self, "rbr_identity"):
            self.__delattr__("rbr_identity")
        self.deploy = True


class RepVGG(nn.Module):
    def __init__(self, deploy=False):
        super().__init__()
        self.stage0 = RepVGGBlock(3, 8, stride=2, deploy=deploy)
        self.stage1 = nn.Sequential(RepVGGBlock(8, 16, stride=2, deploy=deploy), RepVGGBlock(16, 16, deploy=deploy),
                                    RepVGGBlock(16, 16, groups=2, deploy=deploy))
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.linear = nn.Linear(16, 4)

    def forward(self, x):
        return self.linear(self.gap(self.stage1(self.stage0(x))).flatten(1))


def init(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(rng.normal(0, np.sqrt(2 / p[0].numel()), p.shape).astype(np.float32)))
            elif name.endswith("bias"):
                p.zero_()
    return model


def data(n):
    y = rng.integers(0, 4, n)
    x = rng.normal(size=(n, 3, 16, 16))
    x[np.arange(n), y % 3] += 0.8 * np.sign(np.arange(16) - 7.5)[None, :, None] * (1 - 2 * (y >= 3))[:, None, None]
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


model = init(RepVGG())
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
losses = []
for step in range(40):
    x, y = data(32)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.4f}")

model.eval()
xt, yt = data(64)
with torch.no_grad():
    ref = model(xt)
n_train = sum(p.numel() for p in model.parameters())
deploy = copy.deepcopy(model)
for m in deploy.modules():
    if hasattr(m, "switch_to_deploy"):
        m.switch_to_deploy()
with torch.no_grad():
    out = deploy(xt)
dev = (out - ref).abs().max().item()
print(f"train-time params {n_train} deploy params {sum(p.numel() for p in deploy.parameters())}")
print(f"deploy == train-time: {torch.allclose(out, ref, atol=1e-4)} same predictions {torch.equal(out.argmax(1), ref.argmax(1))}")
print(f"deploy modules {[type(m).__name__ for m in deploy.stage1[1].children()]}")
fresh = RepVGG(deploy=True)
print(f"state_dict loads into a deploy-built model: {fresh.load_state_dict(deploy.state_dict())}")
with torch.no_grad():
    acc = (fresh(xt).argmax(1) == yt).float().mean().item()

# the library fusions on a conventional conv / bn / linear / bn1d network
conv, bn = nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6)
lin, bn1 = nn.Linear(6, 5), nn.BatchNorm1d(5)
init(conv), init(lin)
with torch.no_grad():
    for b in (bn, bn1):
        b.running_mean.copy_(torch.from_numpy(rng.normal(size=b.num_features).astype(np.float32)))
        b.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 2, b.num_features).astype(np.float32)))
        b.weight.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, b.num_features).astype(np.float32)))
        b.bias.copy_(torch.from_numpy(rng.normal(size=b.num_features).astype(np.float32)))
for m in (conv, bn, lin, bn1):
    m.eval()
fc = fuse_conv_bn_eval(conv, bn)
fl = fuse_linear_bn_eval(lin, bn1)
xi = xt[:4, :, :8, :8]
with torch.no_grad():
    seq = bn1(lin(bn(conv(xi)).mean((2, 3))))
    fused = fl(fc(xi).mean((2, 3)))
w, b = fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
print(f"fuse_conv_bn_eval / fuse_linear_bn_eval agree: {torch.allclose(seq, fused, atol=1e-5)} "
      f"weights are parameters: {isinstance(w, nn.Parameter)} equal {torch.allclose(w, fc.weight)}")
print(f"fused conv has bias {fc.bias is not None} requires_grad {fc.weight.requires_grad}")
print(f"deploy accuracy {acc:.4f} max deviation below 1e-4: {dev < 1e-4}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-3:]):.4f} {acc:.4f}")
