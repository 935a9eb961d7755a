"""StyleGAN2 building blocks in the style of the public rosinality/stylegan2-pytorch code: an
equalized-learning-rate EqualLinear (weights scaled by 1/sqrt(fan_in) * lr_mul at call time,
F.linear then fused leaky-ReLU * sqrt(2)), PixelNorm, a mapping network, a ModulatedConv2d whose
per-sample weights (style-scaled, demodulated by rsqrt of the sum of squares) run as one grouped
convolution by folding the batch into the channels (view(1, b * in, h, w), groups=b) and which
is checked against a per-sample loop, NoiseInjection with a learned scale, a constant input,
bilinear upsampling and ToRGB skips, the truncation trick around the mean latent, style mixing,
and the path-length regularizer (autograd.grad of (img * noise).sum() w.r.t. the latents with
create_graph=True, its running mean by lerp). The generator is fitted by latent regression to a
small set of target images. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first loss> <last loss> <path length>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(144)
torch.set_default_dtype(torch.float64)


def randn(*shape):
    return torch.from_numpy(rng.normal(size=shape))


def fused_leaky_relu(x, bias, negative_slope=0.2, scale=2 ** 0.5):
    shape = [1, -1] + [1] * (x.dim() - 2)
    return F.leaky_relu(x + bias.view(shape), negative_slope) * scale


class PixelNorm(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-8)


class EqualLinear(nn.Module):
    def __init__(self, in_dim, out_dim, bias_init=0.0, lr_mul=1.0, activation=False):
        super().__init__()
        self.weight = nn.Parameter(randn(out_dim, in_dim) / lr_mul)
        self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init))
        self.scale = (1 / math.sqrt(in_dim)) * lr_mul
        self.lr_mul = lr_mul
        self.activation = activation

    def forward(self, x):
        if self.activation:
            return fused_leaky_relu(F.linear(x, self.weight * self.scale), self.bias * self.lr_mul)
        return F.linear(x, self.weight * self.scale, bias=self.bias * self.lr_mul)

    def extra_repr(self):
        return f"{self.weight.shape[1]}, {self.weight.shape[0]}"


class ModulatedConv2d(nn.Module):
    def __init__(self, in_ch, out_ch, k, style_dim, demodulate=True, upsample=False):
        super().__init__()
        self.eps, self.k, self.in_ch, self.out_ch = 1e-8, k, in_ch, out_ch
        self.scale = 1 / math.sqrt(in_ch * k * k)
        self.padding = k // 2
        self.weight = nn.Parameter(randn(1, out_ch, in_ch, k, k))
        self.modulation = EqualLinear(style_dim, in_ch, bias_init=1.0)
        self.demodulate, self.upsample = demodulate, upsample

    def weights(self, style):
        b = style.shape[0]
        style = self.modulation(style).view(b, 1, self.in_ch, 1, 1)
        weight = self.scale * self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(b, self.out_ch, 1, 1, 1)
        return weight

    def forward(self, x, style):
        b, c, h, w = x.shape
        if self.upsample:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            h, w = 2 * h, 2 * w
        weight = self.weights(style).view(b * self.out_ch, c, self.k, self.k)
        out = F.conv2d(x.view(1, b * c, h, w), weight, padding=self.padding, groups=b)
        return out.view(b, self.out_ch, h, w)


class NoiseInjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, image, noise):
        return image + self.weight * noise


class StyledConv(nn.Module):
    def __init__(self, in_ch, out_ch, style_dim, upsample=False):
        super().__init__()
        self.conv = ModulatedConv2d(in_ch, out_ch, 3, style_dim, upsample=upsample)
        self.noise = NoiseInjection()
        self.bias = nn.Parameter(torch.zeros(out_ch))

    def forward(self, x, style, noise):
        return fused_leaky_relu(self.noise(self.conv(x, style), noise), self.bias)


class ToRGB(nn.Module):
    def __init__(self, in_ch, style_dim):
        super().__init__()
        self.conv = ModulatedConv2d(in_ch, 3, 1, style_dim, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x, style, skip=None):
        out = self.conv(x, style) + self.bias
        if skip is not None:
            out = out + F.interpolate(skip, scale_factor=2, mode="bilinear", align_corners=False)
        return out


class Generator(nn.Module):
    def __init__(self, style_dim=16, ch=8, n_mlp=3):
        super().__init__()
        self.style = nn.Sequential(PixelNorm(), *[EqualLinear(style_dim, style_dim, lr_mul=0.01, activation=True)
                                                  for _ in range(n_mlp)])
        self.input = nn.Parameter(randn(1, ch, 4, 4))
        self.conv1 = StyledConv(ch, ch, style_dim)
        self.to_rgb1 = ToRGB(ch, style_dim)
        self.convs = nn.ModuleList([StyledConv(ch, ch, style_dim, upsample=True), StyledConv(ch, ch, style_dim)])
        self.to_rgb = ToRGB(ch, style_dim)
        self.n_latent = 4

    def mean_latent(self, n):
        return self.style(randn(n, 16)).mean(0, keepdim=True)

    def forward(self, styles, noise, truncation=1.0, truncation_latent=None, input_is_latent=False, mix_at=None):
        if not input_is_latent:
            styles = [self.style(s) for s in styles]
        if truncation < 1:
            styles = [truncation_latent + truncation * (s - truncation_latent) for s in styles]
        if len(styles) == 1:
            latent = styles[0].unsqueeze(1).repeat(1, self.n_latent, 1)
        else:
            latent = torch.cat([styles[0].unsqueeze(1).repeat(1, mix_at, 1),
                                styles[1].unsqueeze(1).repeat(1, self.n_latent - mix_at, 1)], 1)
        out = self.input.repeat(latent.shape[0], 1, 1, 1)
        out = self.conv1(out, latent[:, 0], noise[0])
        skip = self.to_rgb1(out, latent[:, 1])
        out = self.convs[0](out, latent[:, 1], noise[1])
        out = self.convs[1](out, latent[:, 2], noise[2])
        image = self.to_rgb(out, latent[:, 3], skip)
        return image, latent


g = Generator()
print(g.style)
n_params = sum(p.numel() for p in g.parameters())
print(f"generator parameters {n_params}")

# the grouped convolution equals a per-sample loop
conv = g.convs[1].conv
x, s = randn(3, 8, 8, 8), randn(3, 16)
w = conv.weights(s)
loop = torch.cat([F.conv2d(x[i:i + 1], w[i], padding=1) for i in range(3)])
print(f"grouped == per-sample loop: {torch.allclose(conv(x, s), loop)} "
      f"demodulated unit norms: {torch.allclose(w.pow(2).sum([2, 3, 4]), torch.ones(3, 8))}")

B = 6
z_fixed = randn(B, 16)
noise_fixed = [randn(B, 1, 4, 4), randn(B, 1, 8, 8), randn(B, 1, 8, 8)]
yy, xx = torch.meshgrid(torch.linspace(-1, 1, 8), torch.linspace(-1, 1, 8), indexing="ij")
targets = torch.stack([torch.stack([torch.sin(3 * xx + i), torch.cos(2 * yy - i), xx * yy * (i % 3)]) for i in range(B)])

opt = torch.optim.Adam(g.parameters(), lr=5e-3, betas=(0.0, 0.99))
losses = []
mean_path_length = torch.tensor(0.0)
for step in range(40):
    img, _ = g([z_fixed], noise_fixed)
    loss = F.mse_loss(img, targets)
    if step % 4 == 0:  # lazy path-length regularization
        img_pl, latents = g([z_fixed[:3]], [n[:3] for n in noise_fixed])
        pl_noise = randn(*img_pl.shape) / math.sqrt(img_pl.shape[2] * img_pl.shape[3])
        (grad,) = torch.autograd.grad((img_pl * pl_noise).sum(), latents, create_graph=True)
        path_lengths = torch.sqrt(grad.pow(2).sum(2).mean(1))
        mean_path_length = mean_path_length.lerp(path_lengths.mean().detach(), 0.01)
        loss = loss + 0.5 * (path_lengths - mean_path_length).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(F.mse_loss(img.detach(), targets).item())
    if step % 10 == 0:
        print(f"step {step:2d} mse {losses[-1]:.5f} mean path length {mean_path_length.item():.6f}")

with torch.no_grad():
    mean_w = g.mean_latent(256)
    trunc, _ = g([z_fixed], noise_fixed, truncation=0.5, truncation_latent=mean_w)
    full, _ = g([z_fixed], noise_fixed)
    ws = g.style(z_fixed)
    latent_in, _ = g([ws], noise_fixed, input_is_latent=True)
    mixed, lat = g([z_fixed, z_fixed.flip(0)], noise_fixed, mix_at=2)
print(f"truncation shrinks spread: {trunc.std().item() < full.std().item()} "
      f"latent input == z input: {torch.allclose(latent_in, full)}")
print(f"mixed latents: first half from z {torch.allclose(lat[:, 0], ws)} second from flipped "
      f"{torch.allclose(lat[:, 3], ws.flip(0))}")
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {mean_path_length.item():.6f}")
