"""A class-conditional diffusion model with classifier-free guidance, in the style of the public
"classifier-free diffusion guidance" (Ho & Salimans) and improved-DDPM reference code: 2-D
points from three labelled Gaussian blobs (NumPy), a noise-prediction MLP with sinusoidal time
embeddings and a class embedding that holds an extra "null" class, conditioning dropout by
torch.where on a drop mask, the cosine noise schedule (alphas_cumprod from a squared cosine,
betas clipped at 0.999 and rebuilt by cumprod), an exponential moving average of the weights
(torch.lerp_ under no_grad), and a deterministic DDIM sampler (eta = 0) on a strided timestep
grid where each step runs the conditional and unconditional branches in one batch (torch.cat,
then .chunk(2)) and mixes them as eps_u + w (eps_c - eps_u), with the predicted x0 clamped.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <guided class-mean error>."""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(140)
T = 100
K = 3
CENTERS = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]], dtype=np.float32)


def cosine_schedule(T, s=0.008):
    steps = torch.arange(T + 1, dtype=torch.float64)
    f = torch.cos((steps / T + s) / (1 + s) * math.pi / 2) ** 2
    abar = f / f[0]
    betas = (1 - abar[1:] / abar[:-1]).clamp(max=0.999)
    return torch.cumprod(1 - betas, dim=0).float()


abar = cosine_schedule(T)
print(f"schedule: abar[0] {abar[0].item():.5f} abar[T/2] {abar[T // 2].item():.5f} "
      f"abar[-1] {abar[-1].item():.6f} monotone {bool((abar[1:] < abar[:-1]).all())}")


def timestep_embedding(t, dim=16, max_period=100.0):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class EpsModel(nn.Module):
    def __init__(self, h=64):
        super().__init__()
        self.label_emb = nn.Embedding(K + 1, 16)  # index K is the null class
        self.time_mlp = nn.Sequential(nn.Linear(16, h), nn.SiLU(), nn.Linear(h, h))
        self.inp = nn.Linear(2, h)
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(h), nn.Linear(h + 16, h), nn.SiLU(),
                                                   nn.Linear(h, h)) for _ in range(2)])
        self.out = nn.Linear(h, 2)

    def forward(self, x, t, y):
        c = self.label_emb(y)
        h = self.inp(x) + self.time_mlp(timestep_embedding(t))
        for blk in self.blocks:
            h = h + blk[3](blk[2](blk[1](torch.cat([blk[0](h), c], -1))))
        return self.out(h)


model = EpsModel()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.5 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0,
                                            p.shape).astype(np.float32)))
ema = copy.deepcopy(model).requires_grad_(False)
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)

losses = []
for step in range(300):
    y_np = rng.integers(0, K, 128)
    x0 = torch.from_numpy(CENTERS[y_np] + 0.3 * rng.normal(size=(128, 2)).astype(np.float32))
    y = torch.from_numpy(y_np)
    t = torch.from_numpy(rng.integers(0, T, 128))
    noise = torch.from_numpy(rng.normal(size=(128, 2)).astype(np.float32))
    drop = torch.from_numpy(rng.random(128) < 0.15)
    y_in = torch.where(drop, torch.full_like(y, K), y)
    a = abar[t].unsqueeze(-1)
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    loss = F.mse_loss(model(xt, t, y_in), noise)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm, 0.05)
    losses.append(loss.item())
    if step % 100 == 0:
        print(f"step {step:3d} loss {loss.item():.4f}")
print(f"final loss (avg of last 50) {np.mean(losses[-50:]):.4f}")


@torch.no_grad()
def ddim_sample(net, y, w, n_steps=20, x=None):
    ts = torch.linspace(T - 1, 0, n_steps).round().long()
    null = torch.full_like(y, K)
    for i, t in enumerate(ts.tolist()):
        tt = torch.full((x.shape[0],), t, dtype=torch.long)
        eps_c, eps_u = net(torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([y, null])).chunk(2)
        eps = eps_u + w * (eps_c - eps_u)
        a_t = abar[t]
        x0 = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-4, 4)
        a_prev = abar[ts[i + 1]] if i + 1 < n_steps else torch.tensor(1.0)
        eps = (x - a_t.sqrt() * x0) / (1 - a_t).sqrt()
        x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps
    return x


y_eval = torch.arange(K).repeat_interleave(200)
x_T = torch.from_numpy(rng.normal(size=(600, 2)).astype(np.float32))
errs = {}
for w in (0.0, 1.0, 3.0):
    xs = ddim_sample(ema, y_eval, w, x=x_T.clone())
    means = torch.stack([xs[y_eval == k].mean(0) for k in range(K)])
    spread = torch.stack([xs[y_eval == k].std(0).mean() for k in range(K)]).mean()
    errs[w] = (means - torch.from_numpy(CENTERS)).norm(dim=1).mean().item()
    acc = (torch.cdist(xs, torch.from_numpy(CENTERS)).argmin(1) == y_eval).float().mean()
    print(f"guidance {w:.1f}: class-mean error {errs[w]:.4f} spread {spread.item():.4f} "
          f"nearest-center accuracy {acc.item():.4f}")
again = ddim_sample(ema, y_eval, 3.0, x=x_T.clone())
print(f"ddim deterministic: {torch.equal(again, ddim_sample(ema, y_eval, 3.0, x=x_T.clone()))}")
print(f"RESULT {np.mean(losses[:10]):.4f} {np.mean(losses[-50:]):.4f} {errs[1.0]:.4f}")
