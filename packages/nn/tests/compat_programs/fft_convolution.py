"""Convolution through torch.fft, in the style of the public FFTConv / Hyena / "long
convolution" code and signal-processing notebooks: a causal long convolution of length-N
filters by rfft(n=2N) * rfft(n=2N) then irfft(n=2N)[..., :N], checked against F.conv1d with a
flipped kernel and left padding; a 2-d circular convolution by fft2 / ifft2 checked against
F.conv2d with padding_mode="circular" (nn.Conv2d); fftn over chosen dims with s= and
norm="ortho" (Parseval's identity), fftshift / ifftshift, fftfreq / rfftfreq with d=, hfft /
ihfft round trips, torch.view_as_real of spectra, gradients through rfft / irfft checked
against the direct convolution, and a Hyena-style layer (implicit filter from an MLP on
positional features, exponentially decaying window, FFT convolution, gated by a linear branch)
trained to reproduce a delayed, smoothed copy of its input. Weights and data from NumPy: the run
is the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <max fft error>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(2)
torch.set_default_dtype(torch.float64)


def arr(*shape, s=1.0):
    return torch.from_numpy(rng.normal(0, s, shape))


def fft_conv(u, k):
    """Causal convolution of u (B, C, N) with per-channel filters k (C, N)."""
    n = u.shape[-1]
    u_f = torch.fft.rfft(u, n=2 * n)
    k_f = torch.fft.rfft(k, n=2 * n)
    return torch.fft.irfft(u_f * k_f, n=2 * n)[..., :n]


B, C, N = 2, 3, 32
u, k = arr(B, C, N), arr(C, N, s=0.3)
y_fft = fft_conv(u, k)
y_direct = F.conv1d(F.pad(u, (N - 1, 0)), k.flip(-1)[:, None, :], groups=C)
err1 = (y_fft - y_direct).abs().max().item()
print("fft conv == conv1d:", err1 < 1e-10, "rfft length", torch.fft.rfft(u, n=2 * N).shape[-1])

# 2-d circular convolution
img = arr(1, 1, 8, 8)
ker = arr(1, 1, 3, 3)
conv = nn.Conv2d(1, 1, 3, padding=1, padding_mode="circular", bias=False)
with torch.no_grad():
    conv.weight.copy_(ker)
# cross-correlation = convolution with the flipped kernel, embedded centred at (0, 0)
kpad = torch.zeros(8, 8)
kf = ker[0, 0].flip(0, 1)
for i in range(3):
    for j in range(3):
        kpad[(i - 1) % 8, (j - 1) % 8] = kf[i, j]
circ = torch.fft.ifft2(torch.fft.fft2(img[0, 0]) * torch.fft.fft2(kpad)).real
err2 = (circ - conv(img)[0, 0]).abs().max().item()
print("fft2 circular == Conv2d(circular):", err2 < 1e-10, "imag part tiny:",
      torch.fft.ifft2(torch.fft.fft2(img[0, 0]) * torch.fft.fft2(kpad)).imag.abs().max().item() < 1e-12)

# fftn with s= and norm="ortho"; Parseval
x = arr(4, 6, 5)
X = torch.fft.fftn(x, s=(8, 6), dim=(0, 1), norm="ortho")
print("fftn shape", tuple(X.shape), X.dtype)
X2 = torch.fft.fftn(x, norm="ortho")
print("Parseval:", round(x.pow(2).sum().item(), 6), round(X2.abs().pow(2).sum().item(), 6))
print("fftfreq", torch.fft.fftfreq(6, d=0.5).tolist(), "rfftfreq", torch.fft.rfftfreq(6).tolist())
f = torch.arange(6.0)
print("fftshift", torch.fft.fftshift(f).tolist(), "ifftshift(fftshift)",
      torch.fft.ifftshift(torch.fft.fftshift(f)).tolist())
sig = arr(10)
print("ihfft/hfft round trip:", torch.allclose(torch.fft.hfft(torch.fft.ihfft(sig), n=10), sig))
spec = torch.fft.rfft(torch.cos(2 * torch.pi * 3 * torch.arange(16) / 16))
vr = torch.view_as_real(spec)
print("view_as_real", tuple(vr.shape), "peak bin", spec.abs().argmax().item(),
      "value", [round(v, 6) for v in vr[3].tolist()])
print("irfftn default s", tuple(torch.fft.irfftn(torch.fft.rfftn(x)).shape),
      "norm forward scale", round(torch.fft.fft(torch.ones(4), norm="forward")[0].real.item(), 4))

# gradients through the FFT path
ug = u.clone().requires_grad_(True)
kg = k.clone().requires_grad_(True)
w = arr(B, C, N)
g1 = torch.autograd.grad((fft_conv(ug, kg) * w).sum(), (ug, kg))
g2 = torch.autograd.grad((F.conv1d(F.pad(ug, (N - 1, 0)), kg.flip(-1)[:, None, :], groups=C) * w).sum(),
                         (ug, kg))
gerr = max((a - b).abs().max().item() for a, b in zip(g1, g2))
print("fft grads == conv grads:", gerr < 1e-10)


class HyenaFilter(nn.Module):
    def __init__(self, channels, n, emb=5, hidden=16):
        super().__init__()
        t = torch.linspace(0, 1, n)[:, None]
        bands = torch.arange(1, (emb - 1) // 2 + 1, dtype=torch.get_default_dtype())
        z = torch.cat([t, torch.cos(2 * torch.pi * t * bands), torch.sin(2 * torch.pi * t * bands)], -1)
        self.register_buffer("z", z)
        self.register_buffer("t", t.T)
        self.mlp = nn.Sequential(nn.Linear(emb, hidden), nn.SiLU(), nn.Linear(hidden, channels))
        self.decay = nn.Parameter(torch.full((channels, 1), 3.0))

    def forward(self):
        return self.mlp(self.z).T * torch.exp(-self.decay.abs() * self.t)  # (C, N)


class HyenaLayer(nn.Module):
    def __init__(self, channels, n):
        super().__init__()
        self.in_proj = nn.Linear(channels, 2 * channels)
        self.filter = HyenaFilter(channels, n)
        self.bias = nn.Parameter(torch.zeros(channels))
        self.out_proj = nn.Linear(channels, channels)

    def forward(self, x):  # (B, N, C)
        v, gate = self.in_proj(x).chunk(2, dim=-1)
        v = v.transpose(1, 2)
        y = fft_conv(v, self.filter()) + v * self.bias[:, None]
        return self.out_proj(y.transpose(1, 2) * torch.sigmoid(gate))


layer = HyenaLayer(C, N)
with torch.no_grad():
    for name, p in layer.named_parameters():
        if name != "filter.decay":
            p.copy_(arr(*p.shape, s=0.4))
xin = arr(8, N, C)
target = F.avg_pool1d(F.pad(xin.transpose(1, 2), (4, 0)), 3, stride=1)[..., :N].transpose(1, 2)
opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
losses = []
for step in range(80):
    loss = F.mse_loss(layer(xin), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {max(err1, err2, gerr):.1e}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
