"""Energy-based models and score matching on 2-D data, in the style of the public JEM / IGEBM
"train an EBM with SGLD" code and the sliced / denoising score-matching tutorials: an MLP
energy E(x) (nn.SiLU, nn.Softplus(beta=2)), stochastic-gradient Langevin dynamics driven by
torch.autograd.grad of the energy with respect to samples (requires_grad_ on a detached
buffer, noise from NumPy, clamp_ to the box), a replay buffer re-seeded with a 5% chance,
the contrastive-divergence loss with an L2 energy penalty, the exact score-matching objective
with the Jacobian trace from torch.func.vmap(torch.func.jacrev(score)) and torch.vmap of
torch.trace, the sliced objective by a Hutchinson estimate built with create_graph=True
double backward (Rademacher projections from NumPy), denoising score matching at one noise
level, and the learned score compared with the exact score of a Gaussian mixture written as
MixtureSameFamily(Categorical, Independent(Normal)) through autograd of its log_prob.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first sm loss> <last sm loss> <score cosine>."""

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal
from torch.func import jacrev, vmap

rng = np.random.default_rng(5)
means = torch.tensor([[-1.5, 0.0], [1.5, 0.0], [0.0, 1.5]])
mix = MixtureSameFamily(Categorical(logits=torch.zeros(3)), Independent(Normal(means, 0.4 * torch.ones(3, 2)), 1))
comp = rng.integers(0, 3, 512)
data = means[torch.from_numpy(comp)] + 0.4 * torch.from_numpy(rng.normal(size=(512, 2)).astype(np.float32))
print(f"data mean {[round(v, 4) for v in data.mean(0).tolist()]} mixture log-lik {mix.log_prob(data).mean().item():.4f}")


def make_energy():
    net = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.Softplus(beta=2), nn.Linear(64, 1))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.5 / np.sqrt(p.shape[-1]), p.shape).astype(np.float32)))
    return net


def score(net, x):  # s(x) = -dE/dx
    x = x if x.requires_grad else x.requires_grad_()
    return -torch.autograd.grad(net(x).sum(), x, create_graph=True)[0]


def sgld(net, x, steps=20, step_size=0.01):
    x = x.detach().clone()
    for _ in range(steps):
        x.requires_grad_(True)
        g = torch.autograd.grad(net(x).sum(), x)[0]
        noise = torch.from_numpy(rng.normal(size=x.shape).astype(np.float32))
        x = (x - 0.5 * step_size * g + np.sqrt(step_size) * noise).detach().clamp_(-3, 3)
    return x


# (1) contrastive divergence with a replay buffer
ebm = make_energy()
opt = torch.optim.Adam(ebm.parameters(), lr=2e-3, betas=(0.0, 0.999))
buffer = torch.from_numpy(rng.uniform(-3, 3, (256, 2)).astype(np.float32))
for it in range(30):
    idx = torch.from_numpy(rng.integers(0, 256, 64))
    reinit = torch.from_numpy(rng.random(64) < 0.05)
    start = torch.where(reinit[:, None], torch.from_numpy(rng.uniform(-3, 3, (64, 2)).astype(np.float32)), buffer[idx])
    neg = sgld(ebm, start)
    buffer[idx] = neg
    pos = data[torch.from_numpy(rng.integers(0, 512, 64))]
    e_pos, e_neg = ebm(pos), ebm(neg)
    loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos ** 2 + e_neg ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if it % 10 == 0:
        print(f"cd it {it:2d} loss {loss.item():+.5f} E+ {e_pos.mean().item():+.4f} E- {e_neg.mean().item():+.4f}")
print(f"buffer inside box: {bool((buffer.abs() <= 3).all())} params {nn.utils.parameters_to_vector(ebm.parameters()).numel()}")

# (2) exact / sliced / denoising score matching
net = make_energy()
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
x = data[:128]
s_fn = lambda xi: -torch.func.grad(lambda v: net(v[None]).sum())(xi)  # noqa: E731
J = vmap(jacrev(s_fn))(x)
exact = (vmap(torch.trace)(J) + 0.5 * (score(net, x.clone()) ** 2).sum(1)).mean()
v = torch.from_numpy(rng.choice([-1.0, 1.0], size=(128, 2)).astype(np.float32))
xr = x.clone().requires_grad_()
s = score(net, xr)
vJv = (torch.autograd.grad((s * v).sum(), xr, create_graph=True)[0] * v).sum(1)
sliced = (vJv + 0.5 * (s ** 2).sum(1)).mean()
print(f"jacobian {tuple(J.shape)} exact sm {exact.item():.5f} sliced sm {sliced.item():.5f}")
losses = []
for it in range(80):
    xr = data[torch.from_numpy(rng.integers(0, 512, 128))].clone().requires_grad_()
    v = torch.from_numpy(rng.choice([-1.0, 1.0], size=(128, 2)).astype(np.float32))
    s = score(net, xr)
    vJv = (torch.autograd.grad((s * v).sum(), xr, create_graph=True)[0] * v).sum(1)
    ssm = (vJv + 0.5 * (s ** 2).sum(1)).mean()
    sigma = 0.1
    eps = torch.from_numpy(rng.normal(size=(128, 2)).astype(np.float32))
    dsm = ((score(net, xr.detach() + sigma * eps) + eps / sigma) ** 2).sum(1).mean() * sigma ** 2
    loss = ssm + 0.5 * dsm
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(ssm.item())
    if it % 20 == 0:
        print(f"sm it {it:2d} sliced {ssm.item():+.5f} dsm {dsm.item():.5f}")
grid = torch.stack(torch.meshgrid(torch.linspace(-2, 2, 9), torch.linspace(-1, 2, 7), indexing="xy"), -1).reshape(-1, 2)
gt = grid.clone().requires_grad_()
true_score = torch.autograd.grad(mix.log_prob(gt).sum(), gt)[0]
learned = score(net, grid.clone()).detach()
cos = torch.nn.functional.cosine_similarity(learned, true_score, dim=1).mean().item()
print(f"score field cosine {cos:.4f} on {grid.shape[0]} grid points")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-10:]):.5f} {cos:.4f}")
