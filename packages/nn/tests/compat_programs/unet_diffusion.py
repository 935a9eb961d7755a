"""A DDPM on tiny images with a convolutional U-Net, written the way recent diffusion training
scripts are: a U-Net of residual blocks (GroupNorm, SiLU, Conv2d, the timestep embedding added
per channel), a self-attention block at the lowest resolution (GroupNorm, a 1x1 qkv
convolution, F.scaled_dot_product_attention under torch.nn.attention.sdpa_kernel with the math
backend, reshapes between (B, C, H, W) and (B, heads, HW, d)), down-sampling by strided
convolution and up-sampling by F.interpolate(mode="nearest") with skip connections joined by
torch.cat; the model wrapped with model.compile() after torch.set_float32_matmul_precision
("high") and the backend flags set; the optimizer applied inside backward (one Adafactor per
parameter stepped by Tensor.register_post_accumulate_grad_hook, as the PyTorch tutorial on
optimizer-in-backward does) checked against an ordinary step on a copy; a cosine noise schedule
(torch.cos, clamp, cumprod), the noise-prediction loss, gradient clipping with
torch.nn.utils.get_total_norm / clip_grads_with_norm_, an EMA of the weights with
torch._foreach_lerp_, deterministic DDIM sampling under torch.inference_mode, and the EMA
weights saved and loaded with torch.load(weights_only=True). Weights, timesteps and noise from
NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <sample mean abs error>."""

import argparse
import copy
import io
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
torch.set_float32_matmul_precision("high")
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True
T = 50


def images(n):
    """8x8 images: a bright square at a random place on a dark background, in [-1, 1]."""
    x = -np.ones((n, 1, 8, 8), np.float32)
    for i in range(n):
        r, c = rng.integers(0, 5, 2)
        x[i, 0, r:r + 4, c:c + 4] = 1.0
    return torch.from_numpy(x)


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args_ = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args_), torch.sin(args_)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(4, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(tdim, cout)
        self.norm2, self.conv2 = nn.GroupNorm(4, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class AttnBlock(nn.Module):
    def __init__(self, ch, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(4, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=1)
        q, k, v = (t.reshape(b, self.heads, c // self.heads, h * w).transpose(-1, -2)
                   for t in (q, k, v))
        with sdpa_kernel(SDPBackend.MATH):
            a = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(a.transpose(-1, -2).reshape(b, c, h, w))


class UNet(nn.Module):
    def __init__(self, ch=16, tdim=32):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inp = nn.Conv2d(1, ch, 3, padding=1)
        self.down1 = ResBlock(ch, ch, tdim)
        self.downsample = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.mid = ResBlock(ch, 2 * ch, tdim)
        self.attn = AttnBlock(2 * ch)
        self.up1 = ResBlock(3 * ch, ch, tdim)
        self.out = nn.Sequential(nn.GroupNorm(4, ch), nn.SiLU(), nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x, t):
        temb = self.time_mlp(timestep_embedding(t, self.tdim))
        h1 = self.down1(self.inp(x), temb)
        h = self.attn(self.mid(self.downsample(h1), temb))
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        return self.out(self.up1(torch.cat([h, h1], dim=1), temb))


model = UNet()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(p[0].numel()), tuple(p.shape))
                                     .astype(np.float32)))
        elif "norm" not in name and not name.startswith("out.0"):
            p.zero_()
    model.out[2].weight.mul_(0.1)
ema = copy.deepcopy(model).requires_grad_(False)
reference = copy.deepcopy(model)  # the same steps with an ordinary optimizer
model.compile(mode="reduce-overhead")
print(f"parameters: {sum(p.numel() for p in model.parameters())}, "
      f"matmul precision {torch.get_float32_matmul_precision()}")

s = 0.008
steps = torch.arange(T + 1, dtype=torch.float64) / T
f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
alphas_cumprod = f / f[0]
betas = (1 - alphas_cumprod[1:] / alphas_cumprod[:-1]).clamp(max=0.999).float()
alphas_bar = torch.cumprod(1 - betas, dim=0)
print(f"betas [{betas[0].item():.5f} .. {betas[-1].item():.5f}], "
      f"alpha_bar_T {alphas_bar[-1].item():.6f}")

# the optimizer inside backward: one Adafactor per parameter, stepped as its grad is ready
optimizer_dict = {p: torch.optim.Adafactor([p], lr=2e-2) for p in model.parameters()}


def optimizer_hook(p):
    optimizer_dict[p].step()
    optimizer_dict[p].zero_grad()


for p in model.parameters():
    p.register_post_accumulate_grad_hook(optimizer_hook)
ref_opt = torch.optim.Adafactor(reference.parameters(), lr=2e-2)

data = images(256)
losses = []
for step in range(args.steps):
    x0 = data[(step * 32) % 256:(step * 32) % 256 + 32]
    t = torch.from_numpy(rng.integers(0, T, 32))
    noise = torch.from_numpy(rng.normal(size=x0.shape).astype(np.float32))
    ab = alphas_bar[t].view(-1, 1, 1, 1)
    xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
    loss = F.mse_loss(model(xt, t), noise)
    loss.backward()  # the parameters are updated during this call
    ref_loss = F.mse_loss(reference(xt, t), noise)
    ref_opt.zero_grad()
    ref_loss.backward()
    norm = nn.utils.get_total_norm([p.grad for p in reference.parameters()])
    nn.utils.clip_grads_with_norm_(reference.parameters(), 1e6, norm)  # a no-op clip
    ref_opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 0.1)
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.5f} (reference {ref_loss.item():.5f}) "
              f"grad norm {norm.item():.4f}")
same = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(model.parameters(),
                                                           reference.parameters()))
print(f"optimizer in backward == ordinary step: {same}; grads freed: "
      f"{all(p.grad is None for p in model.parameters())}")

buf = io.BytesIO()
torch.save(ema.state_dict(), buf)
buf.seek(0)
restored = UNet()
missing = restored.load_state_dict(torch.load(buf, weights_only=True))
print(f"ema weights reloaded (weights_only): {missing}")


@torch.inference_mode()
def ddim_sample(net, n, num_steps=10):
    x = torch.from_numpy(rng.normal(size=(n, 1, 8, 8)).astype(np.float32))
    times = torch.linspace(T - 1, 0, num_steps).long()
    for i, t in enumerate(times):
        ab = alphas_bar[t]
        ab_prev = alphas_bar[times[i + 1]] if i + 1 < num_steps else torch.tensor(1.0)
        eps = net(x, t.expand(n))
        x0 = ((x - (1 - ab).sqrt() * eps) / ab.sqrt()).clamp(-1, 1)
        x = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
    return x


samples = ddim_sample(restored.eval(), 16)
# a good sample is a square of ones on -1: distance to the nearest binary image
err = (samples - samples.sign()).abs().mean().item()
bright = (samples > 0).float().mean().item()
print(f"samples {tuple(samples.shape)}, inference tensor {samples.is_inference()}, "
      f"bright fraction {bright:.4f} (data {(data > 0).float().mean().item():.4f})")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {err:.5f}")
