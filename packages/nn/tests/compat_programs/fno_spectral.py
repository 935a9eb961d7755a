"""A Fourier neural operator (FNO) on a 2-D periodic Poisson problem, in the style of the public
neural-operator re-implementations: the spectral convolution keeps the lowest Fourier modes of
torch.fft.rfft2, multiplies them by complex weights held as nn.Parameter(torch.cfloat) through a
complex torch.einsum, and goes back with torch.fft.irfft2(s=...); a 1x1 Conv2d bypass, GELU,
a lifting and a projection layer; Adam on the complex weights; the reference solution by a
spectral solver (fftfreq / fftshift / fftn / ifftn, a complex division by -|k|^2); the relative
L2 error, the evaluation at a finer resolution (the operator is resolution-independent), a
Parseval check, and gradients of complex parameters compared with a real-parameterized twin
(torch.view_as_real / view_as_complex). Weights and data from NumPy: the run is the same on both
libraries. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. Prints RESULT <first loss> <last loss> <relative error at 2x res>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(0)
torch.manual_seed(0)


def poisson_solve(f):
    """-laplace(u) = f on the unit torus, mean-free u, by the spectral method."""
    n = f.shape[-1]
    k = torch.fft.fftfreq(n, d=1.0 / n) * 2 * math.pi
    kx, ky = torch.meshgrid(k, k, indexing="ij")
    k2 = kx ** 2 + ky ** 2
    k2[0, 0] = 1.0
    fh = torch.fft.fftn(f, dim=(-2, -1))
    uh = fh / k2.to(fh.dtype)
    uh[..., 0, 0] = 0
    return torch.fft.ifftn(uh, dim=(-2, -1)).real


def random_fields(m, n, modes=4):
    coef = rng.normal(size=(m, 2 * modes, 2 * modes)) + 1j * rng.normal(size=(m, 2 * modes, 2 * modes))
    full = np.zeros((m, n, n), np.complex128)
    full[:, :modes, :modes] = coef[:, :modes, :modes]
    full[:, -modes:, :modes] = coef[:, modes:, :modes]
    full[:, :modes, -modes:] = coef[:, :modes, modes:]
    full[:, -modes:, -modes:] = coef[:, modes:, modes:]
    f = np.fft.ifft2(full).real * n
    return torch.from_numpy(f.astype(np.float32))


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, modes):
        super().__init__()
        self.modes = modes
        scale = 1.0 / (cin * cout)
        w = scale * (rng.uniform(size=(2, cin, cout, modes, modes))
                     + 1j * rng.uniform(size=(2, cin, cout, modes, modes)))
        self.w1 = nn.Parameter(torch.from_numpy(w[0].astype(np.complex64)))
        self.w2 = nn.Parameter(torch.from_numpy(w[1].astype(np.complex64)))

    def forward(self, x):
        b, _, h, w = x.shape
        xh = torch.fft.rfft2(x)
        out = torch.zeros(b, self.w1.shape[1], h, w // 2 + 1, dtype=torch.cfloat)
        m = self.modes
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xh[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xh[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class FNO(nn.Module):
    def __init__(self, width=8, modes=4, layers=2):
        super().__init__()
        self.lift = nn.Linear(3, width)
        self.spectral = nn.ModuleList(SpectralConv2d(width, width, modes) for _ in range(layers))
        self.bypass = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(layers))
        self.proj = nn.Sequential(nn.Linear(width, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, f):
        n = f.shape[-1]
        g = torch.linspace(0, 1, n + 1)[:-1]
        gx, gy = torch.meshgrid(g, g, indexing="ij")
        x = torch.stack([f, gx.expand_as(f), gy.expand_as(f)], dim=-1)
        x = self.lift(x).permute(0, 3, 1, 2)
        for i, (s, c) in enumerate(zip(self.spectral, self.bypass)):
            x = s(x) + c(x)
            if i < len(self.spectral) - 1:
                x = F.gelu(x)
        return self.proj(x.permute(0, 2, 3, 1)).squeeze(-1)


model = FNO()
with torch.no_grad():
    for name, p in model.named_parameters():
        if not p.is_complex():
            p.copy_(torch.from_numpy(rng.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(max(1, p[0].numel() if p.dim() > 1 else p.numel())))
n_complex = sum(p.numel() for p in model.parameters() if p.is_complex())
print("parameters", sum(p.numel() for p in model.parameters()), "complex", n_complex,
      "dtype", model.spectral[0].w1.dtype)

f_train = random_fields(64, 16)
u_train = poisson_solve(f_train)
scale = u_train.std()
print(f"solution std {scale.item():.5f}, residual check "
      f"{(poisson_solve(f_train[:2]) - u_train[:2]).abs().max().item():.2e}")
x = f_train[0]
xh = torch.fft.fft2(x)
print(f"Parseval: {(x ** 2).sum().item():.4f} == {(xh.abs() ** 2).sum().item() / x.numel():.4f}")
print("rfft2 shape", tuple(torch.fft.rfft2(x).shape), "fftshift zero at",
      torch.fft.fftshift(torch.fft.fftfreq(6)).tolist().index(0.0))


def rel_l2(pred, true):
    return (torch.linalg.vector_norm(pred - true, dim=(-2, -1))
            / torch.linalg.vector_norm(true, dim=(-2, -1))).mean()


opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(20):
    idx = torch.from_numpy(rng.permutation(64)[:8])
    pred = model(f_train[idx])
    loss = rel_l2(pred, u_train[idx] / scale)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 5 == 0:
        g = model.spectral[0].w1.grad
        print(f"step {step:2d} rel l2 {loss.item():.5f} complex grad {g.dtype} "
              f"|g| {g.abs().sum().item():.5f}")

# the gradient of a complex weight equals the gradient of its real view, re-viewed as complex
layer = model.spectral[1]
xin = torch.from_numpy(rng.normal(size=(2, 8, 16, 16)).astype(np.float32))
w_real = torch.view_as_real(layer.w1.detach()).clone().requires_grad_(True)
out = torch.fft.irfft2(torch.einsum("bixy,ioxy->boxy", torch.fft.rfft2(xin)[:, :, :4, :4],
                                    torch.view_as_complex(w_real)), s=(16, 16))
out.pow(2).sum().backward()
w_c = layer.w1.detach().clone().requires_grad_(True)
torch.fft.irfft2(torch.einsum("bixy,ioxy->boxy", torch.fft.rfft2(xin)[:, :, :4, :4], w_c),
                 s=(16, 16)).pow(2).sum().backward()
print("complex grad == real-view grad:",
      torch.allclose(torch.view_as_real(w_c.grad), w_real.grad, rtol=1e-4, atol=1e-5))

with torch.no_grad():
    f_test = random_fields(4, 32)
    u_test = poisson_solve(f_test)
    err_hi = rel_l2(model(f_test) * scale, u_test).item()
    err_lo = rel_l2(model(f_test[:, ::2, ::2]) * scale, u_test[:, ::2, ::2]).item()
print(f"test rel l2 at 16x16 {err_lo:.5f} at 32x32 {err_hi:.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {err_hi:.5f}")
