"""A spiking neural network trained with surrogate gradients, in the style of the public
snnTorch / SpyTorch tutorials written in plain PyTorch: Poisson rate coding of inputs (NumPy
thresholds compared with intensities), leaky integrate-and-fire neurons unrolled over time
with reset by subtraction (the reset detached), a spike function as a torch.autograd.Function
whose forward is torch.heaviside and whose backward is the fast-sigmoid surrogate (decorated
with torch.autograd.function.once_differentiable, ctx.save_for_backward, a non-tensor
argument whose gradient is None), a learnable per-neuron decay through torch.sigmoid, a
recurrent hidden layer, spike-count cross-entropy and a membrane-potential readout, firing
rate regularization, a van Rossum distance between spike trains by F.conv1d with an
exponential kernel, torch.autograd.gradcheck of a smooth helper in float64, and spike
statistics (torch.count_nonzero, torch.diff of spike times from nonzero()). Data and weights
from NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

rng = np.random.default_rng(12)
N, IN, HID, OUT, T = 96, 20, 32, 3, 25
protos = rng.random((OUT, IN))
labels = rng.integers(0, OUT, N)
rates = np.clip(protos[labels] + 0.15 * rng.normal(size=(N, IN)), 0, 1) * 0.6
spikes_in = torch.from_numpy((rng.random((T, N, IN)) < rates[None]).astype(np.float32))
y = torch.from_numpy(labels)
print(f"input spikes {int(spikes_in.sum())} of {spikes_in.numel()} rate {spikes_in.mean().item():.4f}")


class SpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, slope):
        ctx.save_for_backward(v)
        ctx.slope = slope
        return torch.heaviside(v, torch.tensor(0.0))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (ctx.slope * v.abs() + 1.0) ** 2, None


spike = SpikeFn.apply


class SNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HID)
        self.rec = nn.Linear(HID, HID, bias=False)
        self.fc2 = nn.Linear(HID, OUT)
        self.beta_raw = nn.Parameter(torch.full((HID,), 1.5))

    def forward(self, x):
        beta = torch.sigmoid(self.beta_raw)
        v1 = torch.zeros(x.shape[1], HID)
        s1 = torch.zeros(x.shape[1], HID)
        v2 = torch.zeros(x.shape[1], OUT)
        spikes, vout = [], []
        for t in range(x.shape[0]):
            v1 = beta * v1 + self.fc1(x[t]) + self.rec(s1) - s1.detach()
            s1 = spike(v1 - 1.0, 10.0)
            v2 = 0.9 * v2 + self.fc2(s1)
            spikes.append(s1)
            vout.append(v2)
        return torch.stack(spikes), torch.stack(vout)


model = SNN()
with torch.no_grad():
    for name, p in model.named_parameters():
        if name != "beta_raw":
            p.copy_(torch.from_numpy(rng.normal(0, 1.2 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for epoch in range(30):
    s1, vout = model(spikes_in)
    logits = vout.max(0).values
    loss = F.cross_entropy(logits, y) + 0.1 * (s1.mean() - 0.1) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 10 == 0:
        print(f"epoch {epoch:2d} loss {loss.item():.5f} hidden rate {s1.mean().item():.4f} "
              f"beta mean {torch.sigmoid(model.beta_raw).mean().item():.4f} grad beta {model.beta_raw.grad.norm().item():.5f}")

with torch.no_grad():
    s1, vout = model(spikes_in)
    acc = (vout.max(0).values.argmax(1) == y).float().mean().item()
    active = torch.count_nonzero(s1.sum(0), dim=0)
    print(f"accuracy {acc:.4f} active neurons {int((active > 0).sum())} / {HID} silent samples per neuron max {int((s1.sum(0) == 0).sum(0).max())}")
    times = torch.nonzero(s1[:, 0, :].T[0]).squeeze(1)
    print(f"neuron 0 sample 0 spike times {times.tolist()} ISIs {torch.diff(times).tolist()}")
    kernel = torch.exp(-torch.arange(10, dtype=torch.float32) / 3.0).flip(0)[None, None]
    a = F.conv1d(F.pad(s1[:, 0, :5].T[:, None], (9, 0)), kernel)
    b = F.conv1d(F.pad(s1[:, 1, :5].T[:, None], (9, 0)), kernel)
    print(f"van Rossum distance per neuron {[round(v, 4) for v in ((a - b) ** 2).sum((1, 2)).sqrt().tolist()]}")

x = torch.tensor([0.3, -0.2, 1.5], dtype=torch.float64, requires_grad=True)
smooth = lambda v: 1.0 / (10.0 * v.abs() + 1.0)  # noqa: E731
print(f"gradcheck: {torch.autograd.gradcheck(smooth, (x,))}")
v = torch.tensor([-0.5, 0.0, 0.5], requires_grad=True)
out = spike(v, 10.0)
out.sum().backward()
print(f"heaviside at 0 -> {out.tolist()} surrogate grad {[round(g, 5) for g in v.grad.tolist()]}")
try:
    o = spike(v, 10.0)
    g, = torch.autograd.grad(o.sum(), v, create_graph=True)
    g.sum().backward()
    print("double backward: allowed")
except RuntimeError as e:
    print(f"double backward: {type(e).__name__} ({g.requires_grad}, {g.grad_fn})")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {acc:.4f}")
