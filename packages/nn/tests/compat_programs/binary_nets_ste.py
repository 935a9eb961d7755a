"""Binary neural networks in the style of the public BinaryConnect / XNOR-Net / Bi-Real-Net
PyTorch code: a straight-through sign estimator as an autograd.Function in the forward /
setup_context style (the clipped identity gradient 1_{|x| <= 1}, a jvp staticmethod for forward
mode, generate_vmap_rule for torch.func), an XNOR-style BinaryConv2d / BinaryLinear whose
weights are sign(W) scaled by the per-output-channel mean |W| (detached, as the reference), binary
activations with Bi-Real shortcuts, latent real-valued weights clamped to [-1, 1] after each
step, BatchNorm before every binarization, and PyTorch's gradcheck on the smooth pieces with
check_forward_ad=True and check_batched_grad=True (gradgradcheck with check_fwd_over_rev for
the scaling). Compared with a full-precision twin on the same data, and the packed model size.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <binary accuracy>."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import grad, vmap

rng = np.random.default_rng(162)


class SignSTE(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return x_t * (x.abs() <= 1).to(x_t.dtype)


def binarize(x):
    return SignSTE.apply(x)


def xnor_weight(w):
    alpha = w.abs().mean(dim=tuple(range(1, w.dim())), keepdim=True).detach()
    return alpha * binarize(w)


class BinaryConv2d(nn.Conv2d):
    def forward(self, x):
        return F.conv2d(binarize(x), xnor_weight(self.weight), self.bias, self.stride, self.padding)


class BinaryLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, xnor_weight(self.weight), self.bias)


class BiRealBlock(nn.Module):
    def __init__(self, c, conv=BinaryConv2d):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.conv = conv(c, c, 3, padding=1, bias=False)

    def forward(self, x):
        return x + self.conv(self.bn(x))  # the real-valued shortcut around every binary conv


def make_net(conv=BinaryConv2d, linear=BinaryLinear):
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),  # first layer real-valued
                         BiRealBlock(8, conv), nn.MaxPool2d(2), BiRealBlock(8, conv), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.BatchNorm1d(32), linear(32, 4))


def shapes(n):
    """Bars, crosses, boxes, diagonals on 12x12 noise."""
    y = rng.integers(0, 4, n)
    x = 0.3 * rng.normal(size=(n, 1, 12, 12))
    for i in range(n):
        r, c = rng.integers(2, 6, 2)
        if y[i] == 0:
            x[i, 0, r:r + 5, c + 2] += 1.5
        elif y[i] == 1:
            x[i, 0, r + 2, c:c + 5] += 1.5
            x[i, 0, r:r + 5, c + 2] += 1.5
        elif y[i] == 2:
            x[i, 0, r:r + 5, c:c + 5] += 1.5
            x[i, 0, r + 1:r + 4, c + 1:c + 4] -= 1.5
        else:
            idx = np.arange(5)
            x[i, 0, r + idx, c + idx] += 1.5
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y)


# the estimator and its derivatives
x = torch.tensor([-2.0, -0.5, 0.0, 0.7, 1.5], requires_grad=True)
s = binarize(x)
s.backward(torch.ones(5))
print(f"sign {s.tolist()} ste grad {x.grad.tolist()}")
print(f"grad of sum under torch.func: {grad(lambda t: binarize(t).sum())(x.detach()).tolist()} "
      f"vmap rows {vmap(binarize)(x.detach().view(5, 1)).flatten().tolist()}")
x64 = torch.tensor([[-0.8, 0.3, 0.6], [0.2, -0.4, 0.9]], dtype=torch.float64, requires_grad=True)
print(f"gradcheck xnor scaling (forward + batched): "
      f"{torch.autograd.gradcheck(lambda w: w.abs().mean(1, keepdim=True) * w, (x64,), check_forward_ad=True, check_batched_grad=True)} "
      f"ste is no true derivative: {not torch.autograd.gradcheck(lambda w: binarize(w) * w.pow(2), (x64,), raise_exception=False)} "
      f"gradgradcheck fwd-over-rev: {torch.autograd.gradgradcheck(lambda w: (w.abs().mean() * w).sin(), (x64,), check_fwd_over_rev=True)}")

binary = make_net()
with torch.no_grad():
    for name, p in binary.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(rng.uniform(-1, 1, p.shape).astype(np.float32)) / (1 if "conv" in name or name.startswith("8") else 3))
        elif name.endswith("bias"):
            p.zero_()
full = make_net(nn.Conv2d, nn.Linear)
full.load_state_dict(binary.state_dict())
print(f"state dicts interchange: {sorted(full.state_dict()) == sorted(binary.state_dict())}")


def train(model, steps=60, clamp=True):
    # SGD rather than Adam: the biases feeding a BatchNorm get gradients that are pure rounding
    # noise, which Adam would scale up to full-size steps
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    binary_params = [p for m in model.modules() if isinstance(m, (BinaryConv2d, BinaryLinear)) for p in [m.weight]]
    losses = []
    for step in range(steps):
        xb, yb = shapes(32)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if clamp:
            with torch.no_grad():
                for p in binary_params:
                    p.clamp_(-1, 1)
        losses.append(loss.item())
    return losses


data_state = rng.bit_generator.state
bin_losses = train(binary)
rng.bit_generator.state = data_state  # the same batches for the full-precision twin
full_losses = train(full, clamp=False)
print(f"binary: first {np.mean(bin_losses[:5]):.4f} last {np.mean(bin_losses[-5:]):.4f}; "
      f"full precision: last {np.mean(full_losses[-5:]):.4f}")

xt, yt = shapes(256)
binary.eval()
full.eval()
with torch.no_grad():
    acc_b = (binary(xt).argmax(1) == yt).float().mean().item()
    acc_f = (full(xt).argmax(1) == yt).float().mean().item()
    w = binary[2].conv.weight
    wb = xnor_weight(w)
    levels = torch.unique(wb[0]).numel()
latent = [m.weight for m in binary.modules() if isinstance(m, (BinaryConv2d, BinaryLinear))]
n_bin = sum(p.numel() for p in latent)
n_real = sum(p.numel() for p in binary.parameters()) - n_bin
print(f"accuracy binary {acc_b:.4f} full {acc_f:.4f}; levels per output channel {levels}; "
      f"latent weights in [-1, 1]: {all(bool(p.abs().max() <= 1) for p in latent)}")
print(f"packed size {(n_bin / 8 + 4 * n_real) / 1024:.3f} KiB vs {4 * (n_bin + n_real) / 1024:.3f} KiB")
deploy = copy.deepcopy(binary)
with torch.no_grad():
    for m in deploy.modules():
        if isinstance(m, (BinaryConv2d, BinaryLinear)):
            m.weight.copy_(xnor_weight(m.weight))
    same = torch.equal(deploy(xt).argmax(1), binary(xt).argmax(1))
print(f"pre-binarized deploy copy predicts the same: {same}")
print(f"RESULT {np.mean(bin_losses[:5]):.4f} {np.mean(bin_losses[-5:]):.4f} {acc_b:.4f}")
