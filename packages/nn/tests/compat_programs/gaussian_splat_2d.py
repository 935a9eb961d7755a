"""Differentiable 2-D Gaussian splatting, in the style of the public "gsplat in 100 lines" /
2D-GS tutorial notebooks: per-Gaussian means (tanh-squashed), log-scales, rotation angles,
colours (sigmoid) and opacities (sigmoid), covariances built as R S S^T R^T through
torch.stack'ed rotation matrices, the inverse 2x2 covariance written out by its adjugate and
determinant, a Mahalanobis falloff evaluated on a pixel grid by einsum, front-to-back alpha
compositing with depth order by argsort and the exclusive transmittance cumprod (torch.cat of
ones and cumprod of 1 - alpha, clamped), per-parameter-group learning rates in Adam, a PSNR
metric, a D-SSIM-style structural term by avg_pool2d local statistics, and a densify step that
clones the Gaussians with the largest positional gradients (torch.topk of grad norms,
index_select, nn.Parameter re-creation and a new optimizer). Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <first
loss> <last loss> <psnr>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(161)
torch.set_default_dtype(torch.float64)
H = W = 24

yy, xx = torch.meshgrid(torch.linspace(-1, 1, H), torch.linspace(-1, 1, W), indexing="ij")
pix = torch.stack([xx, yy], -1)  # (H, W, 2)
target = torch.stack([
    ((xx ** 2 + yy ** 2) < 0.4).double(),
    (torch.sin(3 * xx) * 0.5 + 0.5) * (yy > 0),
    torch.exp(-((xx - 0.4) ** 2 + (yy + 0.4) ** 2) / 0.05),
])  # (3, H, W)


class Splats(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.means = nn.Parameter(torch.from_numpy(rng.normal(0, 0.8, (n, 2))))
        self.log_scales = nn.Parameter(torch.from_numpy(rng.uniform(-2.5, -1.5, (n, 2))))
        self.angles = nn.Parameter(torch.from_numpy(rng.uniform(0, math.pi, n)))
        self.colors = nn.Parameter(torch.from_numpy(rng.normal(0, 1, (n, 3))))
        self.opacity = nn.Parameter(torch.from_numpy(rng.normal(0, 0.5, n)))
        self.register_buffer("depth", torch.from_numpy(rng.random(n)))

    def covariances(self):
        c, s = torch.cos(self.angles), torch.sin(self.angles)
        R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        S = torch.diag_embed(torch.exp(self.log_scales))
        RS = R @ S
        return RS @ RS.transpose(-1, -2)

    def forward(self):
        cov = self.covariances()
        a, b, d = cov[:, 0, 0], cov[:, 0, 1], cov[:, 1, 1]
        det = (a * d - b * b).clamp(min=1e-12)
        inv = torch.stack([torch.stack([d, -b], -1), torch.stack([-b, a], -1)], -2) / det[:, None, None]
        delta = pix[None] - torch.tanh(self.means)[:, None, None, :]  # (N, H, W, 2)
        maha = torch.einsum("nhwi,nij,nhwj->nhw", delta, inv, delta)
        alpha = (torch.sigmoid(self.opacity)[:, None, None] * torch.exp(-0.5 * maha)).clamp(max=0.99)
        order = torch.argsort(self.depth)
        alpha = alpha[order]
        colors = torch.sigmoid(self.colors)[order]
        trans = torch.cat([torch.ones_like(alpha[:1]), torch.cumprod(1 - alpha[:-1], 0)], 0)
        weights = alpha * trans
        return torch.einsum("nhw,nc->chw", weights, colors), weights.sum(0)


def psnr(img, ref):
    return (10 * torch.log10(1.0 / F.mse_loss(img, ref))).item()


def dssim(x, y, k=5):
    mu_x, mu_y = F.avg_pool2d(x[None], k, 1, k // 2), F.avg_pool2d(y[None], k, 1, k // 2)
    sxx = F.avg_pool2d(x[None] ** 2, k, 1, k // 2) - mu_x ** 2
    syy = F.avg_pool2d(y[None] ** 2, k, 1, k // 2) - mu_y ** 2
    sxy = F.avg_pool2d(x[None] * y[None], k, 1, k // 2) - mu_x * mu_y
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    ssim = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) / ((mu_x ** 2 + mu_y ** 2 + c1) * (sxx + syy + c2))
    return (1 - ssim.mean()) / 2


def make_optimizer(model):
    return torch.optim.Adam([
        {"params": [model.means], "lr": 0.05}, {"params": [model.log_scales], "lr": 0.05},
        {"params": [model.angles], "lr": 0.02}, {"params": [model.colors, model.opacity], "lr": 0.1}])


model = Splats(48)
cov = model.covariances()
print(f"covariances symmetric {torch.allclose(cov, cov.transpose(1, 2))} positive definite "
      f"{bool((torch.linalg.eigvalsh(cov) > 0).all())}")
img, acc = model()
print(f"render {tuple(img.shape)} accumulated alpha in [0, 1]: {bool(acc.min() >= 0) and bool(acc.max() <= 1)}")

opt = make_optimizer(model)
losses = []
for step in range(80):
    img, _ = model()
    loss = 0.8 * F.l1_loss(img, target) + 0.2 * dssim(img, target)
    opt.zero_grad()
    loss.backward()
    if step == 40:  # densify: clone the splats whose means move the most
        grad_norm = model.means.grad.norm(dim=1)
        idx = torch.topk(grad_norm, 8).indices
        with torch.no_grad():
            new = {}
            for name in ("means", "log_scales", "angles", "colors", "opacity"):
                p = getattr(model, name)
                extra = p.index_select(0, idx)
                if name == "means":
                    extra = extra + 0.02
                new[name] = nn.Parameter(torch.cat([p, extra]))
            for name, p in new.items():
                setattr(model, name, p)
            model.depth = torch.cat([model.depth, model.depth[idx] + 1e-3])
        opt = make_optimizer(model)
        print(f"densified to {model.means.shape[0]} splats, cloned {sorted(idx.tolist())}")
        continue
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} psnr {psnr(img.detach(), target):.3f}")

with torch.no_grad():
    img, _ = model()
final_psnr = psnr(img, target)
print(f"final psnr {final_psnr:.3f} parameters {sum(p.numel() for p in model.parameters())}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {final_psnr:.3f}")
