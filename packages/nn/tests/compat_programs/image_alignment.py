"""Classical image alignment and restoration written with PyTorch tensors, as kornia-style and
research code does: a homography from four correspondences by the direct linear transform
(torch.linalg.svd, the last right singular vector), checked against torch.linalg.solve on the
8x8 system; warping by a homography with a normalized pixel grid, homogeneous coordinates and
F.grid_sample; SSIM with a separable Gaussian window applied by grouped conv2d, PSNR; direct
photometric alignment that recovers an unknown homography by gradient descent on its eight
parameters (Adam, a coarse-to-fine pyramid by F.avg_pool2d / interpolate(antialias=False));
total-variation denoising of the aligned image with Adam against a Charbonnier data term; and
a phase-correlation translation estimate by torch.fft.fft2. Images are synthetic blobs from
NumPy. Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <initial photometric loss> <final photometric loss>
<denoised psnr>."""

import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(1610)
H = W = 48


def dlt(src, dst):
    rows = []
    for (x, y), (u, v) in zip(src.tolist(), dst.tolist()):
        rows.append([-x, -y, -1, 0, 0, 0, u * x, u * y, u])
        rows.append([0, 0, 0, -x, -y, -1, v * x, v * y, v])
    A = torch.tensor(rows, dtype=torch.float64)
    _, _, Vh = torch.linalg.svd(A)
    Hm = Vh[-1].view(3, 3)
    return Hm / Hm[2, 2]


def solve_h(src, dst):
    A, b = [], []
    for (x, y), (u, v) in zip(src.tolist(), dst.tolist()):
        A.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        A.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        b += [u, v]
    h = torch.linalg.solve(torch.tensor(A, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    return torch.cat([h, torch.ones(1, dtype=torch.float64)]).view(3, 3)


src = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
dst = torch.tensor([[0.1, 0.05], [0.95, -0.02], [1.1, 1.05], [-0.05, 0.9]], dtype=torch.float64)
H1, H2 = dlt(src, dst), solve_h(src, dst)
hom = torch.cat([src, torch.ones(4, 1, dtype=torch.float64)], 1) @ H1.T
print(f"dlt == linear solve: {torch.allclose(H1, H2, atol=1e-10)} maps corners: {torch.allclose(hom[:, :2] / hom[:, 2:], dst, atol=1e-10)}")
print(f"homography {[round(v, 5) for v in H1.flatten().tolist()]}")


def warp(img, Hm):
    """Samples img at Hm^-1 applied to every output pixel (coordinates in [-1, 1])."""
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, img.shape[-2]), torch.linspace(-1, 1, img.shape[-1]), indexing="ij")
    pts = torch.stack([xs, ys, torch.ones_like(xs)], -1).view(-1, 3)
    src_pts = pts @ torch.linalg.inv(Hm).T
    grid = (src_pts[:, :2] / src_pts[:, 2:]).view(1, img.shape[-2], img.shape[-1], 2)
    return F.grid_sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


def gaussian_window(size=7, sigma=1.5):
    g = torch.exp(-((torch.arange(size) - size // 2) ** 2) / (2 * sigma ** 2))
    g = g / g.sum()
    return g


def ssim(a, b, c1=0.01 ** 2, c2=0.03 ** 2):
    g = gaussian_window()
    kx = g.view(1, 1, 1, -1).repeat(a.shape[1], 1, 1, 1)
    ky = g.view(1, 1, -1, 1).repeat(a.shape[1], 1, 1, 1)

    def blur(z):
        return F.conv2d(F.conv2d(z, kx, groups=z.shape[1]), ky, groups=z.shape[1])

    mu_a, mu_b = blur(a), blur(b)
    saa, sbb, sab = blur(a * a) - mu_a ** 2, blur(b * b) - mu_b ** 2, blur(a * b) - mu_a * mu_b
    s = ((2 * mu_a * mu_b + c1) * (2 * sab + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (saa + sbb + c2))
    return s.mean()


def psnr(a, b):
    return (10 * torch.log10(1.0 / F.mse_loss(a, b))).item()


def blobs():
    yy, xx = np.mgrid[0:H, 0:W] / (H - 1)
    img = np.zeros((H, W))
    for _ in range(8):
        cy, cx, s, a = rng.uniform(0.15, 0.85), rng.uniform(0.15, 0.85), rng.uniform(0.05, 0.15), rng.uniform(0.3, 1.0)
        img += a * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    return torch.from_numpy((img / img.max()).astype(np.float32)).view(1, 1, H, W)


img = blobs()
print(f"ssim(x, x) {ssim(img, img).item():.6f} ssim(x, 0.5x) {ssim(img, 0.5 * img).item():.4f} psnr(x, x+0.01) {psnr(img, img + 0.01):.4f}")
ident = warp(img, torch.eye(3))
print(f"identity warp: {torch.allclose(ident, img, atol=1e-5)}")
true_params = torch.tensor([0.06, -0.04, 0.05, 0.03, 0.08, -0.06, 0.02, -0.03])


def params_to_h(p):
    return torch.eye(3) + torch.cat([p, torch.zeros(1)]).view(3, 3)


target = warp(img, params_to_h(true_params))
p = torch.zeros(8, requires_grad=True)
opt = torch.optim.Adam([p], lr=0.01)
history = []
for level, steps in ((4, 60), (2, 60), (1, 80)):
    tgt = F.avg_pool2d(target, level) if level > 1 else target
    for _ in range(steps):
        moved = warp(img, params_to_h(p))
        moved = F.avg_pool2d(moved, level) if level > 1 else moved
        loss = F.mse_loss(moved, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(loss.item())
    print(f"pyramid level 1/{level}: loss {loss.item():.6f} parameter error {(p.detach() - true_params).abs().max().item():.4f}")
aligned = warp(img, params_to_h(p.detach()))
print(f"alignment ssim {ssim(aligned, target).item():.4f} before {ssim(img, target).item():.4f}")

# total-variation denoising
noisy = target + 0.1 * torch.from_numpy(rng.normal(size=(1, 1, H, W)).astype(np.float32))
u = noisy.clone().requires_grad_(True)
opt = torch.optim.Adam([u], lr=0.02)
for it in range(80):
    tv = (u[..., 1:, :] - u[..., :-1, :]).abs().mean() + (u[..., :, 1:] - u[..., :, :-1]).abs().mean()
    data = torch.sqrt((u - noisy) ** 2 + 1e-6).mean()
    loss = data + 0.4 * tv
    opt.zero_grad()
    loss.backward()
    opt.step()
den = u.detach().clamp(0, 1)
print(f"tv denoising psnr noisy {psnr(noisy.clamp(0, 1), target):.3f} denoised {psnr(den, target):.3f} ssim {ssim(den, target).item():.4f}")

# phase correlation recovers an integer translation
shifted = torch.roll(img, shifts=(5, -7), dims=(2, 3))
Fa, Fb = torch.fft.fft2(img), torch.fft.fft2(shifted)
R = Fb * Fa.conj()
R = R / R.abs().clamp(min=1e-8)
corr = torch.fft.ifft2(R).real[0, 0]
peak = int(torch.argmax(corr))
dy, dx = peak // W, peak % W
print(f"phase correlation shift ({dy if dy <= H // 2 else dy - H}, {dx if dx <= W // 2 else dx - W}) peak {corr.max().item():.4f}")
print(f"RESULT {history[0]:.6f} {history[-1]:.6f} {psnr(den, target):.4f}")
