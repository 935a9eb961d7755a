"""A VAE-GAN on toy 2-D mixtures in the style of the public GAN-stabilisation code: an encoder /
decoder VAE (reparameterised with NumPy noise, KL in closed form) whose decoder doubles as the
generator, a discriminator whose layers are wrapped by
torch.nn.utils.parametrizations.spectral_norm (power-iteration buffers in the state_dict, eval
mode freezing u / v, the estimated sigma checked against torch.linalg.matrix_norm(ord=2)), the
old-API torch.nn.utils.spectral_norm on a second critic for comparison, a WGAN-GP gradient
penalty on interpolates and an R1 penalty on real data (torch.autograd.grad with create_graph=True
and only_inputs), the discriminator's feature-matching loss for the VAE, separate Adam optimizers
with betas=(0.5, 0.9), requires_grad_ toggling to freeze the critic during generator steps, and
a sliced-Wasserstein distance between samples and data for evaluation. Data from NumPy: the run
is the same on both libraries. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first vae loss> <last vae loss> <sliced
wasserstein>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

rng = np.random.default_rng(2718)
centers = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0], [0.0, -2.0]])


def sample_data(n):
    c = centers[rng.integers(0, 4, n)]
    return torch.from_numpy((c + rng.normal(0, 0.25, (n, 2))).astype(np.float32))


def seed_(m, std=0.3):
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.from_numpy(rng.normal(0, std, p.shape).astype(np.float32)))


enc = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 4))
dec = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
seed_(enc)
seed_(dec)
disc_body = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.LeakyReLU(0.2))
disc_head = nn.Linear(32, 1)
seed_(disc_body)
seed_(disc_head)
for i in (0, 2):
    spectral_norm(disc_body[i], n_power_iterations=3)
spectral_norm(disc_head)
print("sn keys", sorted(k for k in disc_body.state_dict() if k.startswith("0.")))
print("parametrized weight is computed", type(disc_body[0]).__name__, disc_body[0].parametrizations.weight.original.shape)

old = nn.Linear(32, 32)
with torch.no_grad():
    old.weight.copy_(disc_body[2].parametrizations.weight.original)
old = torch.nn.utils.spectral_norm(old, n_power_iterations=3)
print("old-API keys", sorted(old.state_dict()))


def critic(x):
    f = disc_body(x)
    return disc_head(f), f


opt_vae = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=2e-3, betas=(0.5, 0.9))
opt_d = torch.optim.Adam([*disc_body.parameters(), *disc_head.parameters()], lr=2e-3, betas=(0.5, 0.9))


def gradient_penalty(real, fake, eps):
    mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out, _ = critic(mix)
    (g,) = torch.autograd.grad(out.sum(), mix, create_graph=True)
    return ((g.norm(2, dim=1) - 1) ** 2).mean()


def r1_penalty(real):
    real = real.detach().requires_grad_(True)
    out, _ = critic(real)
    (g,) = torch.autograd.grad(out.sum(), [real], create_graph=True, only_inputs=True)
    return g.pow(2).sum(1).mean()


vae_losses = []
for step in range(150):
    real = sample_data(64)
    # critic step: the generator's samples detached
    eps_z = torch.from_numpy(rng.normal(size=(64, 2)).astype(np.float32))
    fake = dec(eps_z).detach()
    d_real, _ = critic(real)
    d_fake, _ = critic(fake)
    eps = torch.from_numpy(rng.random((64, 1)).astype(np.float32))
    gp = gradient_penalty(real, fake, eps)
    r1 = r1_penalty(real)
    d_loss = d_fake.mean() - d_real.mean() + 1.0 * gp + 0.1 * r1
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    # VAE / generator step with the critic frozen
    for p in [*disc_body.parameters(), *disc_head.parameters()]:
        p.requires_grad_(False)
    stats = enc(real)
    mu, logvar = stats.chunk(2, dim=1)
    noise = torch.from_numpy(rng.normal(size=(64, 2)).astype(np.float32))
    z = mu + (0.5 * logvar).exp() * noise
    recon = dec(z)
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
    _, f_real = critic(real)
    _, f_recon = critic(recon)
    feat = F.mse_loss(f_recon, f_real)
    g_out, _ = critic(dec(torch.from_numpy(rng.normal(size=(64, 2)).astype(np.float32))))
    vae_loss = F.mse_loss(recon, real) + 0.05 * kl + 0.1 * feat - 0.05 * g_out.mean()
    opt_vae.zero_grad()
    vae_loss.backward()
    opt_vae.step()
    for p in [*disc_body.parameters(), *disc_head.parameters()]:
        p.requires_grad_(True)
    vae_losses.append(vae_loss.item())
    if step % 50 == 0:
        print(f"step {step:3d} d_loss {d_loss.item():.5f} gp {gp.item():.5f} r1 {r1.item():.5f} vae {vae_loss.item():.5f}")

disc_body.eval()
disc_head.eval()
with torch.no_grad():
    W = disc_body[0].weight
    W2 = disc_body[0].weight
    sigma = torch.linalg.matrix_norm(W, ord=2).item()
    print("eval weight stable", torch.equal(W, W2), "sigma near 1", abs(sigma - 1) < 0.05)
    u_before = disc_body[0].parametrizations.weight[0]._u.clone()
    critic(sample_data(8))
    print("eval leaves u unchanged", torch.equal(u_before, disc_body[0].parametrizations.weight[0]._u))
    samples = dec(torch.from_numpy(rng.normal(size=(512, 2)).astype(np.float32)))
    data = sample_data(512)
    dirs = torch.from_numpy(rng.normal(size=(2, 32)).astype(np.float32))
    dirs = dirs / dirs.norm(dim=0, keepdim=True)
    a, _ = torch.sort(samples @ dirs, dim=0)
    b, _ = torch.sort(data @ dirs, dim=0)
    swd = (a - b).abs().mean().item()
with torch.no_grad():
    for _ in range(20):  # training-mode forwards run the power iteration
        old(torch.zeros(1, 32))
old.eval()
with torch.no_grad():
    print("old-API sigma near 1", abs(torch.linalg.matrix_norm(old.weight, ord=2).item() - 1) < 0.02)
print(f"RESULT {vae_losses[0]:.5f} {vae_losses[-1]:.5f} {swd:.5f}")
