"""A Wasserstein GAN with gradient penalty on 1-d "images", in the style of the public WGAN-GP
implementations: a convolutional critic (Conv1d, LeakyReLU, LayerNorm instead of BatchNorm), a
generator (Linear, ConvTranspose1d, Tanh), random interpolates between real and fake samples,
the gradient penalty via torch.autograd.grad(outputs=critic(interpolates),
inputs=interpolates, grad_outputs=torch.ones(...), create_graph=True, retain_graph=True,
only_inputs=True) and ((grad.norm(2, dim=1) - 1) ** 2).mean(), n_critic critic steps per
generator step, Adam(betas=(0.5, 0.9)), requires_grad toggling on the critic, one(s)/mone
backward seeds as older implementations write them, and a Wasserstein distance estimate. Noise and
interpolation weights come from NumPy: from the same initial weights (``--save-init``/
``--init-from``) the numbers agree with torch's to float32 rounding. Written against `torch`; the
test suite runs it unchanged on torch and, through an import shim, on ember."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
from torch import autograd

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=30)
parser.add_argument("--critic-iters", type=int, default=3)
parser.add_argument("--lambda-gp", type=float, default=10.0)
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(0)
rng = np.random.default_rng(0)
L, Z, BATCH = 16, 8, 32


def real_batch():
    """Sine waves with random phase and amplitude."""
    phase = rng.uniform(0, 2 * np.pi, (BATCH, 1))
    amp = rng.uniform(0.5, 0.9, (BATCH, 1))
    t = np.linspace(0, 2 * np.pi, L)[None]
    return torch.from_numpy((amp * np.sin(t + phase)).astype(np.float32)).unsqueeze(1)


def noise():
    return torch.from_numpy(rng.normal(0, 1, (BATCH, Z)).astype(np.float32))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(Z, 16 * 4), nn.ReLU(True))
        self.deconv = nn.Sequential(
            nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1), nn.ReLU(True),
            nn.ConvTranspose1d(8, 1, 4, stride=2, padding=1), nn.Tanh())

    def forward(self, z):
        return self.deconv(self.fc(z).view(-1, 16, 4))


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv1d(1, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv1d(8, 16, 4, stride=2, padding=1), nn.LayerNorm([16, 4]),
            nn.LeakyReLU(0.2, inplace=True))
        self.out = nn.Linear(16 * 4, 1)

    def forward(self, x):
        return self.out(self.main(x).flatten(1))


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.from_numpy(rng.uniform(0, 1, (BATCH, 1, 1)).astype(np.float32))
    alpha = alpha.expand(real_data.size())
    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates = autograd.Variable(interpolates, requires_grad=True)
    disc_interpolates = netD(interpolates)
    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * args.lambda_gp


netG, netD = Generator(), Critic()
if args.save_init:
    np.savez(args.save_init, **{f"{n}.{k}": v.detach().numpy() for n, m in (("G", netG), ("D", netD))
                                for k, v in m.state_dict().items()})
if args.init_from:
    with np.load(args.init_from) as f:
        for n, m in (("G", netG), ("D", netD)):
            m.load_state_dict({k[2:]: torch.from_numpy(f[k]) for k in f.files if k[0] == n})
print(netD)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
one = torch.tensor(1, dtype=torch.float)
mone = one * -1

# the penalty's gradient reaches the critic's weights through the double backward
x_real, x_fake = real_batch(), netG(noise()).detach()
gp = calc_gradient_penalty(netD, x_real, x_fake)
gp.backward()
print(f"initial gradient penalty {gp.item():.4f}; critic grads from it: "
      f"{all(p.grad is not None and p.grad.abs().sum() > 0 for p in netD.parameters())}")
netD.zero_grad()

w_dists = []
for iteration in range(args.iters):
    for p in netD.parameters():
        p.requires_grad = True
    for _ in range(args.critic_iters):
        real_data = real_batch()
        netD.zero_grad()
        D_real = netD(real_data).mean()
        D_real.backward(mone)
        with torch.no_grad():
            fake = netG(noise())
        D_fake = netD(fake).mean()
        D_fake.backward(one)
        gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
        gradient_penalty.backward()
        D_cost = D_fake - D_real + gradient_penalty
        Wasserstein_D = D_real - D_fake
        optimizerD.step()
    for p in netD.parameters():
        p.requires_grad = False
    netG.zero_grad()
    G = netD(netG(noise())).mean()
    G.backward(mone)
    G_cost = -G
    optimizerG.step()
    w_dists.append(Wasserstein_D.item())
    if iteration % 10 == 0:
        print(f"iter {iteration:3d} | D cost {D_cost.item():.4f} | G cost {G_cost.item():.4f} | "
              f"W dist {Wasserstein_D.item():.4f} | GP {gradient_penalty.item():.4f}")
print(f"critic frozen for the generator step: {all(p.grad is not None for p in netD.parameters())}"
      f" / {not any(p.requires_grad for p in netD.parameters())}")
with torch.no_grad():
    samples = netG(noise())
print(f"samples {tuple(samples.shape)}, range [{samples.min().item():.3f}, "
      f"{samples.max().item():.3f}]")
print(f"RESULT {w_dists[0]:.6f} {np.mean(w_dists[-5:]):.6f} {gradient_penalty.item():.6f}")
