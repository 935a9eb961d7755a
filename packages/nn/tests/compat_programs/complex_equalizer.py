"""A complex-valued neural network for a communications task, in the style of the public
complex-valued deep learning repositories (complex MLPs / CNNs for channel equalization and
MRI): 16-QAM symbols built with torch.complex, sent through a multipath channel (a complex FIR
filter applied with a complex F.conv1d) with a cubic nonlinearity and noise, and equalized by
a network of complex layers: nn.Conv1d and nn.Linear created with dtype=torch.cfloat, modReLU
(relu(|z| + b) * z / |z|) and a split CReLU activation, a complex residual connection, the
loss |y - x|^2 through .abs() and through torch.view_as_real with mse_loss (both agree), Adam on
complex parameters, Wirtinger gradients checked (d|z|^2/dz* = z, i.e. grad = 2z for
(z.conj() * z).real), torch.sgn / angle / polar / conj / conj_physical / resolve_conj, complex matmul and linalg.solve giving the zero-forcing equalizer of the channel
matrix, symbol decisions by nearest constellation point (torch.cdist on view_as_real), and the
symbol error rate before and after equalization. Data and weights from NumPy: the numbers are
the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <symbol error
rate>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(6)
levels = torch.tensor([-3.0, -1.0, 1.0, 3.0]) / np.sqrt(10)
constellation = torch.complex(levels.repeat_interleave(4), levels.repeat(4))
print("constellation", constellation.dtype, constellation.shape[0], "mean power",
      round(constellation.abs().pow(2).mean().item(), 4))


def transmit(n):
    sym = torch.from_numpy(rng.integers(0, 16, size=n))
    x = constellation[sym]
    taps = torch.tensor([1.0 + 0.0j, 0.35 - 0.25j, 0.12 + 0.1j], dtype=torch.cfloat)
    # causal FIR by a complex conv1d (flipped taps: conv1d is a correlation)
    y = F.conv1d(F.pad(x.view(1, 1, -1), (2, 0)), taps.flip(0).view(1, 1, -1)).view(-1)
    y = y - 0.05 * y * y.abs() ** 2
    noise = torch.complex(torch.from_numpy(rng.normal(0, 0.03, n).astype(np.float32)),
                          torch.from_numpy(rng.normal(0, 0.03, n).astype(np.float32)))
    return sym, x, y + noise


class ModReLU(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.b = nn.Parameter(torch.full((features,), -0.05))

    def forward(self, z):
        mag = z.abs()
        return F.relu(mag + self.b.view(1, -1, 1)) * z / (mag + 1e-6)


def crelu(z):
    return torch.complex(F.relu(z.real), F.relu(z.imag))


class Equalizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(1, 8, 5, padding=4, dtype=torch.cfloat)
        self.act = ModReLU(8)
        self.conv2 = nn.Conv1d(8, 8, 3, padding=1, dtype=torch.cfloat)
        self.out = nn.Linear(8, 1, dtype=torch.cfloat)

    def forward(self, y):
        n = y.shape[-1]
        h = self.act(self.conv1(y.view(1, 1, -1))[..., :n])  # causal: drop the lookahead tail
        h = h + crelu(self.conv2(h)) * 0.5
        return self.out(h[0].T).view(-1) + y


net = Equalizer()
with torch.no_grad():
    for name, p in net.named_parameters():
        if p.is_complex():
            re = rng.normal(0, 0.15, p.shape).astype(np.float32)
            im = rng.normal(0, 0.15, p.shape).astype(np.float32)
            p.copy_(torch.complex(torch.from_numpy(re), torch.from_numpy(im)))
print("complex parameters", sum(p.numel() for p in net.parameters() if p.is_complex()),
      "real", sum(p.numel() for p in net.parameters() if not p.is_complex()),
      "dtype", net.conv1.weight.dtype)


def decide(z):
    d = torch.cdist(torch.view_as_real(z), torch.view_as_real(constellation))
    return d.argmin(1)


sym, x, y = transmit(600)
print(f"raw symbol error rate {(decide(y) != sym).float().mean().item():.4f}")
opt = torch.optim.Adam(net.parameters(), lr=0.01)
losses = []
for step in range(60):
    lo = (step % 5) * 100
    z = net(y[lo:lo + 200])
    loss = (z - x[lo:lo + 200]).abs().pow(2).mean()
    alt = F.mse_loss(torch.view_as_real(z), torch.view_as_real(x[lo:lo + 200])) * 2
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step == 0:
        print("abs loss == view_as_real mse:", abs(loss.item() - alt.item()) < 1e-6,
              "grad dtype", net.conv1.weight.grad.dtype)
print("losses", [round(v, 5) for v in losses[::15]])
sym_t, x_t, y_t = transmit(400)
with torch.no_grad():
    eq = net(y_t)
ser = (decide(eq) != sym_t).float().mean().item()
print(f"equalized symbol error rate {ser:.4f} evm {(eq - x_t).abs().pow(2).mean().sqrt().item():.4f}")

# Wirtinger calculus and the complex helpers
z = torch.tensor([1.0 + 2.0j, -0.5 + 0.25j], requires_grad=True)
(z.conj() * z).real.sum().backward()
print("grad of |z|^2", [(round(v.real, 4), round(v.imag, 4)) for v in z.grad.tolist()])
z.grad = None
z.abs().sum().backward()
print("grad of |z| == sgn(z):", torch.allclose(z.grad, torch.sgn(z.detach())))
w = torch.polar(torch.tensor([2.0, 1.0]), torch.tensor([0.5, -1.0]))
print("polar", [(round(v.real, 4), round(v.imag, 4)) for v in w.tolist()], "angle",
      [round(v, 4) for v in w.angle().tolist()])
c = w.conj()
print("conj == conj_physical:", torch.equal(c, w.conj_physical()), "resolved:",
      c.resolve_conj().is_conj(),
      "physical:", w.conj_physical().is_conj(), torch.equal(c.resolve_conj(), w.conj_physical()))

# zero-forcing: invert the (linear part of the) channel as a Toeplitz matrix
n = 8
H = torch.zeros(n, n, dtype=torch.cfloat)
for k, t in enumerate([1.0 + 0.0j, 0.35 - 0.25j, 0.12 + 0.1j]):
    H += torch.diag(torch.full((n - k,), t, dtype=torch.cfloat), -k)
xs = constellation[torch.arange(n)]
rx = H @ xs
zf = torch.linalg.solve(H, rx)
print("zero-forcing recovers the block:", torch.allclose(zf, xs, atol=1e-5),
      f"|det H| {torch.linalg.det(H).abs().item():.4f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {ser:.4f}")
