"""A denoising-diffusion training step and sampler in the style of the public minimal DDPM /
DDIM code: a two-level U-Net (Conv2d, GroupNorm, SiLU, a sinusoidal time embedding through an
MLP, skip connections by torch.cat, ConvTranspose2d upsampling), the cosine noise schedule from
alphas_cumprod with clamp, epsilon prediction trained with activation checkpointing
(torch.utils.checkpoint with use_reentrant=False around each residual block and
checkpoint_sequential over the bottleneck, whose gradients must equal the plain run's), an EMA
of the weights kept by torch._foreach_mul_ / torch._foreach_add_ (and checked against
torch.lerp), a deterministic DDIM sampler (eta = 0) from NumPy noise with x0 clipping, and
classifier-free guidance with a null class embedding. Data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first loss> <last loss> <sample mean abs>."""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

rng = np.random.default_rng(99)
T = 100


def cosine_alphas_cumprod(steps, s=0.008):
    t = torch.linspace(0, steps, steps + 1, dtype=torch.float64) / steps
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
    betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    return torch.cumprod(1 - betas, 0).float()


abar = cosine_alphas_cumprod(T)
print("alphas_cumprod", [round(v, 6) for v in abar[[0, 49, 99]].tolist()])


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], -1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1 = nn.GroupNorm(4, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2 = nn.GroupNorm(4, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(temb)[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    def __init__(self, ckpt=False):
        super().__init__()
        self.ckpt = ckpt
        self.temb = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 32))
        self.cemb = nn.Embedding(3, 32)  # 2 classes + the null class
        self.inp = nn.Conv2d(1, 8, 3, padding=1)
        self.down = ResBlock(8, 16, 32)
        self.pool = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.mid = nn.Sequential(nn.GroupNorm(4, 16), nn.SiLU(), nn.Conv2d(16, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.up = nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1)
        self.dec = ResBlock(32, 8, 32)
        self.out = nn.Conv2d(8, 1, 3, padding=1)

    def block(self, mod, *args):
        if self.ckpt and self.training:
            return checkpoint(mod, *args, use_reentrant=False)
        return mod(*args)

    def forward(self, x, t, c):
        e = self.temb(timestep_embedding(t, 16)) + self.cemb(c)
        h0 = self.inp(x)
        h1 = self.block(self.down, h0, e)
        m = self.pool(h1)
        m = checkpoint_sequential(self.mid, 2, m, use_reentrant=False) if (self.ckpt and self.training) else self.mid(m)
        u = self.up(m)
        return self.out(self.block(self.dec, torch.cat([u, h1], 1), e))


def make_data(n):
    c = rng.integers(0, 2, n)
    x = np.full((n, 1, 8, 8), -1.0, dtype=np.float32)
    for i in range(n):
        r = rng.integers(1, 4)
        if c[i] == 0:
            x[i, 0, r:r + 4, 2:6] = 1.0
        else:
            x[i, 0, 2:6, r:r + 4] = 1.0
            x[i, 0, 3:5, r + 1:r + 3] = -1.0
    return torch.from_numpy(x), torch.from_numpy(c)


model = UNet(ckpt=True)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape).astype(np.float32)))
plain = copy.deepcopy(model)
plain.ckpt = False

X, Cl = make_data(256)


def diffusion_loss(net, x0, c, t, noise, drop):
    a = abar[t][:, None, None, None]
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    c = torch.where(drop, torch.full_like(c, 2), c)
    return F.mse_loss(net(xt, t, c), noise)


# checkpointed gradients equal the plain ones
idx = torch.from_numpy(rng.choice(256, 16, replace=False))
t0 = torch.from_numpy(rng.integers(0, T, 16))
n0 = torch.from_numpy(rng.normal(size=(16, 1, 8, 8)).astype(np.float32))
d0 = torch.from_numpy(rng.random(16) < 0.1)
l1 = diffusion_loss(model, X[idx], Cl[idx], t0, n0, d0)
l1.backward()
l2 = diffusion_loss(plain, X[idx], Cl[idx], t0, n0, d0)
l2.backward()
same = all(torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in zip(model.parameters(), plain.parameters()))
print(f"checkpoint loss {l1.item():.6f} plain {l2.item():.6f} grads equal {same}")
model.zero_grad(set_to_none=True)

ema_params = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
DECAY = 0.95
for step in range(150):
    idx = torch.from_numpy(rng.choice(256, 32, replace=False))
    t = torch.from_numpy(rng.integers(0, T, 32))
    noise = torch.from_numpy(rng.normal(size=(32, 1, 8, 8)).astype(np.float32))
    drop = torch.from_numpy(rng.random(32) < 0.15)
    loss = diffusion_loss(model, X[idx], Cl[idx], t, noise, drop)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        cur = [p.detach() for p in model.parameters()]
        if step == 0:
            ref = [torch.lerp(e, c, 1 - DECAY) for e, c in zip(ema_params, cur)]
        torch._foreach_mul_(ema_params, DECAY)
        torch._foreach_add_(ema_params, cur, alpha=1 - DECAY)
        if step == 0:
            print("foreach EMA == lerp", all(torch.allclose(a, b, atol=1e-7) for a, b in zip(ema_params, ref)))
    losses.append(loss.item())
    if step % 50 == 0:
        print(f"step {step:3d} loss {loss.item():.5f}")

ema_model = UNet()
with torch.no_grad():
    for p, e in zip(ema_model.parameters(), ema_params):
        p.copy_(e)
ema_model.eval()


@torch.no_grad()
def ddim_sample(net, c, steps=10, guidance=2.0):
    x = torch.from_numpy(rng.normal(size=(len(c), 1, 8, 8)).astype(np.float32))
    ts = torch.linspace(T - 1, 0, steps).round().long()
    for i, t in enumerate(ts):
        tt = t.repeat(len(c))
        eps_c = net(x, tt, c)
        eps_u = net(x, tt, torch.full_like(c, 2))
        eps = eps_u + guidance * (eps_c - eps_u)
        a = abar[t]
        x0 = ((x - (1 - a).sqrt() * eps) / a.sqrt()).clamp(-1, 1)
        a_prev = abar[ts[i + 1]] if i + 1 < len(ts) else torch.tensor(1.0)
        x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
    return x


samples = ddim_sample(ema_model, torch.tensor([0, 0, 1, 1]))
print("sample range", round(samples.min().item(), 4), round(samples.max().item(), 4))
print("class 0 rows vs columns", [round(v, 4) for v in samples[:2].mean(dim=(0, 1)).mean(1)[2:6].tolist()])
print(f"RESULT {losses[0]:.5f} {losses[-1]:.5f} {samples.abs().mean().item():.5f}")
