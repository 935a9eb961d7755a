"""Accelerated MRI reconstruction in the style of the public fastMRI code: centered orthonormal
2-D FFTs (ifftshift -> fft2(norm="ortho") -> fftshift over dims (-2, -1)), complex images carried
as a trailing real/imag axis (view_as_real / view_as_complex round trips), a Cartesian random
mask with a fully sampled center built with torch.where, zero-filled reconstructions, the
root-sum-of-squares coil combination over simulated sensitivity maps, a conjugate-gradient SENSE
reconstruction of the normal equations (A^H A + lambda I) x = A^H y with complex vdot, and an
unrolled network (a small CNN on real/imag channels alternating with soft data consistency
whose weight is a learned parameter) trained with an L1 loss, reported in PSNR / NMSE. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <network psnr gain over zero filling>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(1508)
N = 24


def fft2c(x):
    x = torch.fft.ifftshift(x, dim=(-2, -1))
    x = torch.fft.fft2(x, norm="ortho")
    return torch.fft.fftshift(x, dim=(-2, -1))


def ifft2c(k):
    k = torch.fft.ifftshift(k, dim=(-2, -1))
    k = torch.fft.ifft2(k, norm="ortho")
    return torch.fft.fftshift(k, dim=(-2, -1))


def phantom(m):
    yy, xx = np.mgrid[-1:1:N * 1j, -1:1:N * 1j]
    out = np.zeros((m, N, N), complex)
    for i in range(m):
        for _ in range(3):
            cx, cy = rng.uniform(-0.5, 0.5, 2)
            a, b = rng.uniform(0.15, 0.5, 2)
            out[i] += rng.uniform(0.3, 1.0) * (((xx - cx) / a) ** 2 + ((yy - cy) / b) ** 2 < 1)
        out[i] *= np.exp(1j * rng.uniform(-0.5, 0.5) * (xx + yy))  # a smooth phase
    return torch.from_numpy(out.astype(np.complex64))


def random_mask(accel=3, center=4):
    cols = torch.from_numpy(rng.uniform(size=N) < 1 / accel)
    idx = torch.arange(N)
    center_band = (idx >= N // 2 - center // 2) & (idx < N // 2 + center // 2)
    return torch.where(center_band, torch.ones_like(cols), cols).view(1, N).expand(N, N)


def psnr(x, ref):
    mse = torch.mean((x - ref) ** 2)
    return (10 * torch.log10(ref.max() ** 2 / mse)).item()


def nmse(x, ref):
    return (torch.linalg.norm(x - ref) ** 2 / torch.linalg.norm(ref) ** 2).item()


img = phantom(1)[0]
k = fft2c(img)
print(f"ortho fft preserves energy: {torch.allclose(torch.linalg.norm(k), torch.linalg.norm(img))} "
      f"round trip {torch.allclose(ifft2c(k), img, atol=1e-5)} dc at center {torch.argmax(k.abs()).item() == (N // 2) * N + N // 2}")
ri = torch.view_as_real(img)
print(f"view_as_real {tuple(ri.shape)} {ri.dtype} shares storage: {torch.view_as_complex(ri).data_ptr() == img.data_ptr()}")
mask = random_mask()
print(f"sampled fraction {mask.float().mean().item():.4f} center sampled {bool(mask[:, N // 2 - 2:N // 2 + 2].all())}")

# multi-coil: sensitivity maps, zero filling + root sum of squares, CG-SENSE
yy, xx = torch.meshgrid(torch.linspace(-1, 1, N), torch.linspace(-1, 1, N), indexing="ij")
centers = [(-1.0, -1.0), (-1.0, 1.0), (1.0, -1.0), (1.0, 1.0)]
sens = torch.stack([torch.exp(-((yy - a) ** 2 + (xx - b) ** 2) / 2.0) * torch.exp(1j * (a * xx + b * yy) * 0.5)
                    for a, b in centers]).to(torch.complex64)
sens = sens / torch.sqrt((sens.abs() ** 2).sum(0, keepdim=True))
print(f"sensitivities normalized: {torch.allclose((sens.abs() ** 2).sum(0), torch.ones(N, N), atol=1e-5)} dtype {sens.dtype}")
y = fft2c(sens * img) * mask
zf = ifft2c(y)
rss = torch.sqrt((zf.abs() ** 2).sum(0))


def A(x):
    return fft2c(sens * x) * mask


def AH(k):
    return (sens.conj() * ifft2c(k * mask)).sum(0)


def cg_sense(y, lam=1e-3, iters=30):
    b = AH(y)
    x = torch.zeros_like(b)
    r = b - (AH(A(x)) + lam * x)
    p = r.clone()
    rs = torch.vdot(r.flatten(), r.flatten()).real
    for _ in range(iters):
        Ap = AH(A(p)) + lam * p
        alpha = rs / torch.vdot(p.flatten(), Ap.flatten()).real
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = torch.vdot(r.flatten(), r.flatten()).real
        if rs_new.sqrt() < 1e-6:
            break
        p = r + (rs_new / rs) * p
        rs = rs_new
    return x


x_cg = cg_sense(y)
ref = img.abs()
print(f"rss zero-filled psnr {psnr(rss, ref):.3f} nmse {nmse(rss, ref):.5f}")
print(f"cg-sense psnr {psnr(x_cg.abs(), ref):.3f} nmse {nmse(x_cg.abs(), ref):.5f}")
lhs = torch.vdot(A(img).flatten(), y.flatten())
rhs = torch.vdot(img.flatten(), AH(y).flatten())
print(f"adjoint test <Ax, y> == <x, A^H y>: {torch.allclose(lhs, rhs, rtol=1e-4)}")


class Cascade(nn.Module):
    def __init__(self, n=3, ch=16):
        super().__init__()
        # bias-free convs: a constant offset is what data consistency undoes, so bias gradients
        # are sums of terms that cancel to rounding noise in float32
        self.cnns = nn.ModuleList([nn.Sequential(nn.Conv2d(2, ch, 3, padding=1, bias=False), nn.LeakyReLU(0.1),
                                                 nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.LeakyReLU(0.1),
                                                 nn.Conv2d(ch, 2, 3, padding=1, bias=False)) for _ in range(n)])
        self.dc_weight = nn.Parameter(torch.ones(n))

    def forward(self, k0, m):
        x = ifft2c(k0)
        for cnn, w in zip(self.cnns, self.dc_weight):
            xr = torch.view_as_real(x).permute(0, 3, 1, 2)
            x = x + torch.view_as_complex(cnn(xr).permute(0, 2, 3, 1).contiguous())
            k = fft2c(x)
            k = k - w * m * (k - k0)  # soft data consistency
            x = ifft2c(k)
        return x


model = Cascade()
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() == 4:
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 / np.sqrt(p[0].numel()), p.shape).astype(np.float32)))
        elif name.endswith("bias"):
            p.zero_()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
losses = []
for step in range(40):
    imgs = phantom(8)
    m = random_mask()
    k0 = fft2c(imgs) * m
    out = model(k0, m)
    loss = F.l1_loss(out.abs(), imgs.abs())
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} l1 {loss.item():.5f} dc weights {[round(v, 4) for v in model.dc_weight.tolist()]}")
imgs = phantom(16)
m = random_mask()
k0 = fft2c(imgs) * m
with torch.no_grad():
    rec = model(k0, m).abs()
zf = ifft2c(k0).abs()
gain = psnr(rec, imgs.abs()) - psnr(zf, imgs.abs())
print(f"test psnr network {psnr(rec, imgs.abs()):.3f} zero-filled {psnr(zf, imgs.abs()):.3f}")
print(f"RESULT {np.mean(losses[:3]):.5f} {np.mean(losses[-3:]):.5f} {gain:.3f}")
