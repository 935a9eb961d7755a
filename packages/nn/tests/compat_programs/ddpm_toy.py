"""A denoising diffusion model (DDPM) on a 2-D toy distribution, in the style of the many public
minimal-diffusion implementations: a linear beta schedule, alphas_cumprod by torch.cumprod, the
schedule's values picked per example with gather and reshaped to broadcast, a sinusoidal
timestep embedding (torch.exp of a scaled arange, sin/cos concatenated), an MLP denoiser with
SiLU, the epsilon-prediction MSE loss, AdamW with gradient clipping and an EMA copy of the
weights (torch.lerp_ / torch._foreach_lerp_ style), then ancestral DDPM sampling and a
deterministic DDIM sampler under torch.inference_mode. Weights are initialized from NumPy and
every "random" number is drawn by NumPy, so the run is the same on both libraries. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember. Prints RESULT <first loss> <last loss> <DDIM sample mean radius>."""

import argparse
import copy
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--T", type=int, default=50)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)


def det_init(model: nn.Module, seed: int) -> None:
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            p.copy_(torch.from_numpy(r.uniform(-1, 1, tuple(p.shape)).astype(np.float32))
                    / math.sqrt(fan_in))


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args_ = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args_), torch.cos(args_)], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, hidden: int = 64, tdim: int = 16):
        super().__init__()
        self.tdim = tdim
        self.t_mlp = nn.Sequential(nn.Linear(tdim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.inp = nn.Linear(2, hidden)
        self.body = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                  nn.Linear(hidden, 2))

    def forward(self, x, t):
        return self.body(self.inp(x) + self.t_mlp(timestep_embedding(t, self.tdim)))


def extract(a: torch.Tensor, t: torch.Tensor, shape) -> torch.Tensor:
    out = a.gather(-1, t)
    return out.reshape(t.shape[0], *((1,) * (len(shape) - 1)))


T = args.T
betas = torch.linspace(1e-4, 0.2, T)
alphas = 1.0 - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
sqrt_ac, sqrt_1m_ac = alphas_cumprod.sqrt(), (1 - alphas_cumprod).sqrt()
posterior_var = betas * (1 - alphas_cumprod_prev) / (1 - alphas_cumprod)
print(f"schedule: alpha_bar[-1] {alphas_cumprod[-1].item():.5f}, posterior var[1] "
      f"{posterior_var[1].item():.6f}")

# data: a ring of 8 Gaussians
angles = rng.integers(0, 8, 2048) * (2 * np.pi / 8)
data = np.stack([np.cos(angles), np.sin(angles)], 1) * 2 + rng.normal(0, 0.1, (2048, 2))
data = torch.from_numpy(data.astype(np.float32))

model = Denoiser()
det_init(model, 1)
ema = copy.deepcopy(model).requires_grad_(False)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
losses = []
for step in range(args.steps):
    idx = torch.from_numpy(rng.integers(0, 2048, 128))
    x0 = data[idx]
    t = torch.from_numpy(rng.integers(0, T, 128))
    noise = torch.from_numpy(rng.normal(size=(128, 2)).astype(np.float32))
    xt = extract(sqrt_ac, t, x0.shape) * x0 + extract(sqrt_1m_ac, t, x0.shape) * noise
    loss = F.mse_loss(model(xt, t), noise)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 0.05)
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"step {step:4d} loss {loss.item():.5f} grad norm {norm.item():.4f}")


@torch.inference_mode()
def ddpm_sample(net, n, seed):
    r = np.random.default_rng(seed)
    x = torch.from_numpy(r.normal(size=(n, 2)).astype(np.float32))
    for i in reversed(range(T)):
        t = torch.full((n,), i, dtype=torch.long)
        eps = net(x, t)
        mean = (x - extract(betas, t, x.shape) / extract(sqrt_1m_ac, t, x.shape) * eps) \
            / extract(alphas, t, x.shape).sqrt()
        if i > 0:
            z = torch.from_numpy(r.normal(size=(n, 2)).astype(np.float32))
            x = mean + extract(posterior_var, t, x.shape).sqrt() * z
        else:
            x = mean
    return x


@torch.inference_mode()
def ddim_sample(net, n, seed, steps=10):
    r = np.random.default_rng(seed)
    x = torch.from_numpy(r.normal(size=(n, 2)).astype(np.float32))
    ts = torch.linspace(T - 1, 0, steps).round().long()
    for k in range(steps):
        t = ts[k].expand(n)
        a_t = alphas_cumprod[ts[k]]
        a_prev = alphas_cumprod[ts[k + 1]] if k + 1 < steps else torch.tensor(1.0)
        eps = net(x, t)
        x0 = (x - (1 - a_t).sqrt() * eps) / a_t.sqrt()
        x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
    return x


s1 = ddpm_sample(ema, 256, 7)
s2 = ddim_sample(model, 256, 8)
r1, r2 = s1.norm(dim=1), s2.norm(dim=1)
print(f"DDPM (EMA) samples: mean radius {r1.mean().item():.4f}, std {r1.std().item():.4f}")
print(f"DDIM samples: mean radius {r2.mean().item():.4f}, std {r2.std().item():.4f}")
print(f"inference tensors: {s1.is_inference()}, requires_grad {s1.requires_grad}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-20:]):.5f} {r2.mean().item():.4f}")
