"""Implicit neural representations with sine activations (SIREN, Sitzmann et al.) in the style
of the public reference code, fitted to the signed distance function of a 2-D shape: SineLayer
with omega_0 = 30 and the paper's uniform initialisation (first layer +-1/in, hidden layers
+-sqrt(6/in)/omega_0), coordinates that require grad so that gradients of the network output
w.r.t. its input come from torch.autograd.grad(create_graph=True, grad_outputs=ones_like), an
eikonal loss |grad f| = 1 off the surface, on-surface f = 0 plus normal alignment by
F.cosine_similarity, an exp(-100 |f|) off-surface penalty, the Laplacian by a divergence loop
of second derivatives, and a Fourier-feature (random Gaussian projection) ReLU baseline.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <sdf mean abs error>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.default_rng(149)


class SineLayer(nn.Module):
    def __init__(self, in_features, out_features, is_first=False, omega_0=30.0):
        super().__init__()
        self.omega_0, self.is_first, self.in_features = omega_0, is_first, in_features
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            bound = 1 / in_features if is_first else math.sqrt(6 / in_features) / omega_0
            self.linear.weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, (out_features, in_features)).astype(np.float32)))
            b = 1 / math.sqrt(in_features)
            self.linear.bias.copy_(torch.from_numpy(rng.uniform(-b, b, out_features).astype(np.float32)))

    def forward(self, x):
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    def __init__(self, hidden=48, layers=2, first_omega_0=30.0, hidden_omega_0=30.0):
        super().__init__()
        net = [SineLayer(2, hidden, is_first=True, omega_0=first_omega_0)]
        net += [SineLayer(hidden, hidden, omega_0=hidden_omega_0) for _ in range(layers)]
        final = nn.Linear(hidden, 1)
        with torch.no_grad():
            bound = math.sqrt(6 / hidden) / hidden_omega_0
            final.weight.copy_(torch.from_numpy(rng.uniform(-bound, bound, (1, hidden)).astype(np.float32)))
            final.bias.zero_()
        self.net = nn.Sequential(*net, final)

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)
        return self.net(coords), coords


def gradient(y, x, grad_outputs=None):
    if grad_outputs is None:
        grad_outputs = torch.ones_like(y)
    return torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]


def laplace(y, x):
    grad = gradient(y, x)
    div = 0.0
    for i in range(grad.shape[-1]):
        div = div + torch.autograd.grad(grad[..., i], x, torch.ones_like(grad[..., i]), create_graph=True)[0][..., i:i + 1]
    return div


def shape_sdf(p):
    """A circle of radius 0.5 (exact distance), the shape to be recovered."""
    return p.norm(dim=-1, keepdim=True) - 0.5


def surface_batch(n):
    th = rng.uniform(0, 2 * np.pi, n)
    pts = 0.5 * np.stack([np.cos(th), np.sin(th)], 1)
    normals = np.stack([np.cos(th), np.sin(th)], 1)
    return torch.from_numpy(pts.astype(np.float32)), torch.from_numpy(normals.astype(np.float32))


# the input-gradient machinery on a known function: f = x^2 y, grad = (2xy, x^2), laplacian = 2y
p = torch.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True)
f = (p[:, :1] ** 2) * p[:, 1:]
print(f"gradient {gradient(f, p).tolist()} laplacian {laplace(f, p).flatten().tolist()}")

model = Siren(first_omega_0=5.0, hidden_omega_0=5.0)  # a smooth target: low frequencies
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
losses = []
for step in range(100):
    on, normals = surface_batch(128)
    off = torch.from_numpy(rng.uniform(-1, 1, (128, 2)).astype(np.float32))
    coords = torch.cat([on, off])
    out, x = model(coords)
    grad = gradient(out, x)
    f_on, f_off = out[:128], out[128:]
    sdf_loss = f_on.abs().mean() * 3e3
    normal_loss = (1 - F.cosine_similarity(grad[:128], normals, dim=-1)).mean() * 1e2
    inter_loss = torch.exp(-1e2 * f_off.abs()).mean() * 1e2
    eikonal = (grad.norm(dim=-1) - 1).abs().mean() * 5e1
    loss = sdf_loss + normal_loss + inter_loss + eikonal
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 25 == 0:
        print(f"step {step:2d} loss {loss.item():.3f} sdf {sdf_loss.item():.3f} normal {normal_loss.item():.3f} "
              f"eikonal {eikonal.item():.3f}")

grid = torch.stack(torch.meshgrid(torch.linspace(-0.9, 0.9, 15), torch.linspace(-0.9, 0.9, 15), indexing="xy"), -1).reshape(-1, 2)
pred, x = model(grid)
g = gradient(pred, x)
lap = laplace(pred, x)
err = (pred - shape_sdf(grid)).abs().mean().item()
sign_acc = ((pred > 0) == (shape_sdf(grid) > 0)).float().mean().item()
print(f"sdf mean abs error {err:.4f} sign accuracy {sign_acc:.4f} |grad| mean {g.norm(dim=-1).mean().item():.4f} "
      f"laplacian shape {tuple(lap.shape)}")

# a Fourier-feature ReLU baseline (random Gaussian projection, sin / cos features)
B = torch.from_numpy(rng.normal(0, 1.0, (2, 32)).astype(np.float32))
relu_net = nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 1))
with torch.no_grad():
    for q in relu_net.parameters():
        q.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(q.shape[-1]) if q.dim() > 1 else 0.0, q.shape).astype(np.float32)))
ff = lambda v: torch.cat([torch.sin(2 * math.pi * v @ B), torch.cos(2 * math.pi * v @ B)], -1)  # noqa: E731
opt = torch.optim.Adam(relu_net.parameters(), lr=3e-3)
for step in range(60):
    pts = torch.from_numpy(rng.uniform(-1, 1, (256, 2)).astype(np.float32))
    lo = F.mse_loss(relu_net(ff(pts)), shape_sdf(pts))
    opt.zero_grad()
    lo.backward()
    opt.step()
with torch.no_grad():
    ff_err = (relu_net(ff(grid)) - shape_sdf(grid)).abs().mean().item()
print(f"fourier-feature baseline (supervised) error {ff_err:.4f}")
print(f"RESULT {losses[0]:.3f} {np.mean(losses[-5:]):.3f} {err:.4f}")
