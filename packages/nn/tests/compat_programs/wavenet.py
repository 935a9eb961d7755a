"""A small WaveNet on mu-law audio, in the style of the public WaveNet re-implementations:
mu-law companding (torch.sign, log1p, abs) and 256-level quantization with torch.bucketize /
round, one-hot inputs from F.one_hot, dilated causal Conv1d layers (left padding by F.pad, and
Conv1d(padding=...) trimmed on the right) in a residual stack with gated tanh * sigmoid
activations and 1x1 skip connections, the convolutions reparameterized with the classic
nn.utils.weight_norm (weight_g / weight_v) and its parametrizations.weight_norm successor
(original0 / original1) and the output layer with parametrizations.spectral_norm,
local conditioning upsampled by ConvTranspose1d, cross_entropy over (N, C, L) logits, Adam,
then remove_weight_norm / remove_parametrizations keeping the outputs, the receptive field
checked by a gradient probe (the output at t depends on no input after t), and fast generation
with per-layer input queues checked against the full forward pass. Weights and data from NumPy:
the run is the same on both libraries. Written against `torch`; the test suite runs it unchanged
on torch and, through an import shim, on ember. Prints RESULT <first loss> <last loss>
<accuracy>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrizations, parametrize, remove_weight_norm, weight_norm

rng = np.random.default_rng(0)
Q = 64  # quantization levels


def mu_law(x, mu=Q - 1):
    return torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)


def mu_law_inv(y, mu=Q - 1):
    return torch.sign(y) * ((1 + mu) ** y.abs() - 1) / mu


def quantize(y):
    return ((y + 1) / 2 * (Q - 1)).round().long().clamp(0, Q - 1)


t = np.arange(4 * 400) / 400.0
freqs = rng.uniform(2, 6, 4)
wave = np.stack([0.8 * np.sin(2 * np.pi * f * t[:400] * 8) * np.exp(-t[:400]) for f in freqs])
audio = torch.from_numpy(wave.astype(np.float32))
codes = quantize(mu_law(audio))
edges = torch.linspace(-1, 1, Q + 1)[1:-1]
print("codes", tuple(codes.shape), codes.dtype, "range", codes.min().item(), codes.max().item(),
      "bucketize agrees:", (torch.bucketize(mu_law(audio), edges) - codes).abs().max().item() <= 1)
err = (mu_law_inv(codes.float() / (Q - 1) * 2 - 1) - audio).abs().max().item()
print(f"companding round trip error {err:.5f}")


class CausalConv(nn.Module):
    def __init__(self, cin, cout, k, dilation, style):
        super().__init__()
        self.pad = (k - 1) * dilation
        if style == "trim":
            self.conv = nn.Conv1d(cin, cout, k, dilation=dilation, padding=self.pad)
        else:
            self.conv = nn.Conv1d(cin, cout, k, dilation=dilation)
        self.style = style

    def forward(self, x):
        if self.style == "trim":
            return self.conv(x)[..., : x.shape[-1]]
        return self.conv(F.pad(x, (self.pad, 0)))


class Layer(nn.Module):
    def __init__(self, ch, skip, dilation, cond, style):
        super().__init__()
        self.dil = CausalConv(ch, 2 * ch, 2, dilation, style)
        self.cond = nn.Conv1d(cond, 2 * ch, 1)
        self.res, self.skip = nn.Conv1d(ch, ch, 1), nn.Conv1d(ch, skip, 1)

    def forward(self, x, c):
        a, b = (self.dil(x) + self.cond(c)).chunk(2, dim=1)
        z = torch.tanh(a) * torch.sigmoid(b)
        return x + self.res(z), self.skip(z)


class WaveNet(nn.Module):
    def __init__(self, ch=16, skip=32, dilations=(1, 2, 4, 8, 1, 2, 4, 8), cond=4):
        super().__init__()
        self.inp = CausalConv(Q, ch, 2, 1, "pad")
        self.layers = nn.ModuleList(Layer(ch, skip, d, cond, "trim" if i % 2 else "pad")
                                    for i, d in enumerate(dilations))
        self.up = nn.ConvTranspose1d(cond, cond, kernel_size=8, stride=4, padding=2)
        self.out1, self.out2 = nn.Conv1d(skip, skip, 1), nn.Conv1d(skip, Q, 1)
        self.receptive = 2 + sum(dilations)

    def forward(self, x, c):
        c = self.up(c)[..., : x.shape[-1]]
        h = self.inp(x)
        s = 0
        for layer in self.layers:
            h, sk = layer(h, c)
            s = s + sk
        return self.out2(F.relu(self.out1(F.relu(s))))


model = WaveNet()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan = p[0].numel() if p.dim() > 1 else p.numel()
        p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32)) / math.sqrt(fan))
for i, layer in enumerate(model.layers):
    if i % 2:
        weight_norm(layer.dil.conv)
    else:
        parametrizations.weight_norm(layer.skip)
parametrizations.spectral_norm(model.out2)
sn = model.out2.parametrizations.weight[0]
with torch.no_grad():  # the power iteration's random start, from NumPy on both libraries
    sn._u.copy_(F.normalize(torch.from_numpy(r.normal(size=tuple(sn._u.shape)).astype(np.float32)), dim=0))
    sn._v.copy_(F.normalize(torch.from_numpy(r.normal(size=tuple(sn._v.shape)).astype(np.float32)), dim=0))
print("weight_norm names", sorted(n for n, _ in model.layers[1].dil.conv.named_parameters()),
      "parametrized", sorted(n for n, _ in model.layers[0].skip.named_parameters()))
print("receptive field", model.receptive)
cond = torch.from_numpy(np.repeat(freqs[:, None], 4, 1)[:, :, None].repeat(100, 2).astype(np.float32)) / 6
print("conditioning", tuple(cond.shape), "upsampled", tuple(model.up(cond).shape))

x_onehot = F.one_hot(codes[:, :-1], Q).permute(0, 2, 1).float()
target = codes[:, 1:]
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(30):
    logits = model(x_onehot, cond)
    loss = F.cross_entropy(logits, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        g = model.layers[1].dil.conv.weight_g.grad
        print(f"step {step:2d} loss {loss.item():.5f} weight_g grad {tuple(g.shape)} "
              f"{g.norm().item():.5f}")
model.eval()
with torch.no_grad():
    logits = model(x_onehot, cond)
    acc = (logits.argmax(1) == target).float().mean().item()
    print(f"accuracy {acc:.4f}")
    for i, layer in enumerate(model.layers):
        if i % 2:
            remove_weight_norm(layer.dil.conv)
        else:
            parametrize.remove_parametrizations(layer.skip, "weight")
    parametrize.remove_parametrizations(model.out2, "weight")
    print("plain again:", not parametrize.is_parametrized(model.out2),
          sorted(n for n, _ in model.layers[1].dil.conv.named_parameters()),
          "same outputs:", torch.allclose(model(x_onehot, cond), logits, atol=1e-4))

# receptive field probe
xp = x_onehot[:1, :, :80].clone().requires_grad_(True)
model(xp, cond[:1])[0, :, 50].sum().backward()
dep = xp.grad[0].abs().sum(0).nonzero().flatten()
print("output 50 depends on inputs", dep.min().item(), "..", dep.max().item())


# fast generation with queues of past activations
@torch.no_grad()
def fast_step(model, x_t, c_t, queues):
    def conv_step(cc, x_new, q):
        q.append(x_new)
        prev = q.pop(0)
        w = cc.conv.weight  # (out, in, 2)
        return w[:, :, 0] @ prev + w[:, :, 1] @ x_new + cc.conv.bias
    h = conv_step(model.inp, x_t, queues[0])
    s = 0
    for layer, q in zip(model.layers, queues[1:]):
        a, b = (conv_step(layer.dil, h, q) + layer.cond.weight[:, :, 0] @ c_t
                + layer.cond.bias).chunk(2)
        z = torch.tanh(a) * torch.sigmoid(b)
        h = h + layer.res.weight[:, :, 0] @ z + layer.res.bias
        s = s + layer.skip.weight[:, :, 0] @ z + layer.skip.bias
    o = F.relu(model.out1.weight[:, :, 0] @ F.relu(s) + model.out1.bias)
    return model.out2.weight[:, :, 0] @ o + model.out2.bias


dils = [1] + [layer.dil.conv.dilation[0] for layer in model.layers]
chans = [Q] + [16] * len(model.layers)
queues = [[torch.zeros(c) for _ in range(d)] for c, d in zip(chans, dils)]
c_up = model.up(cond[:1])[0]
T_ = 40
fast = torch.stack([fast_step(model, x_onehot[0, :, t], c_up[:, t], queues) for t in range(T_)], 1)
full = model(x_onehot[:1, :, :T_], cond[:1])[0]
print("fast generation == full forward:", torch.allclose(fast, full, atol=1e-4))
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {acc:.5f}")
