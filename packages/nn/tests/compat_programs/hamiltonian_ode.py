"""Learning dynamics with neural differential equations, in the style of the public Hamiltonian
neural network (Greydanus et al., 2019) and neural-ODE tutorials, without an ODE library: a
Hamiltonian network H(q, p) whose vector field (dH/dp, -dH/dq) comes from
torch.autograd.grad(H.sum(), x, create_graph=True) (so training differentiates through a
gradient), trained on a pendulum's measured derivatives; the same vector field computed with
torch.func (vmap over grad of a functional_call) and agreeing; a hand-written fixed-step RK4
integrator rolled out with both the HNN and a plain "neural ODE" MLP trained by
backpropagating through the solver steps (torch.stack of the trajectory); energy drift along
the rollouts; the divergence of the learned field (the trace of its Jacobian by
torch.autograd.functional.jacobian, by vmap(jacrev) and by a Hutchinson estimate with a fixed
probe), which is zero for a Hamiltonian field; and a Hessian of H by torch.func.hessian. Float64
throughout (torch.set_default_dtype, put back at the end). Weights and data from NumPy: the run
is the same on both libraries. Written against `torch`; the test suite runs it unchanged on
torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <hnn energy drift> <mlp energy drift>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, grad, hessian, jacrev, vmap

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
args = parser.parse_args(sys.argv[1:])
rng = np.random.default_rng(0)
old_dtype = torch.get_default_dtype()
torch.set_default_dtype(torch.float64)


def pendulum_field(x):
    q, p = x[..., 0], x[..., 1]
    return torch.stack([p, -3.0 * torch.sin(q)], dim=-1)


def energy(x):
    return 0.5 * x[..., 1] ** 2 + 3.0 * (1 - torch.cos(x[..., 0]))


def rk4(f, x0, dt, n):
    xs = [x0]
    x = x0
    for _ in range(n):
        k1 = f(x)
        k2 = f(x + 0.5 * dt * k1)
        k3 = f(x + 0.5 * dt * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        xs.append(x)
    return torch.stack(xs)


class MLP(nn.Module):
    def __init__(self, out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                                 nn.Linear(32, out))

    def forward(self, x):
        return self.net(x)


class HNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.H = MLP(1)

    def forward(self, x):
        with torch.enable_grad():
            if not x.requires_grad:
                x = x.requires_grad_(True)
            h = self.H(x).sum()
            dh = torch.autograd.grad(h, x, create_graph=True)[0]
        return torch.stack([dh[..., 1], -dh[..., 0]], dim=-1)


def init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(p.shape[1]), tuple(p.shape))))
            else:
                p.zero_()


# measured states and derivatives (with noise)
X = torch.from_numpy(rng.uniform(-2, 2, (256, 2)))
dX = pendulum_field(X) + torch.from_numpy(rng.normal(0, 0.05, (256, 2)))

hnn = HNN()
init(hnn, 1)
opt = torch.optim.Adam(hnn.parameters(), lr=1e-2)
losses = []
for step in range(args.steps):
    x = X.clone().requires_grad_(True)
    loss = (hnn(x) - dX).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 30 == 0:
        print(f"hnn step {step:3d} loss {loss.item():.6f}")

# the field by torch.func: vmap over per-sample gradients of a functional H
params = {k: v.detach() for k, v in hnn.H.named_parameters()}


def h_single(p, x):
    return functional_call(hnn.H, p, (x.unsqueeze(0),)).squeeze()


dh = vmap(grad(h_single, argnums=1), in_dims=(None, 0))(params, X[:8])
field_func = torch.stack([dh[:, 1], -dh[:, 0]], dim=-1)
print(f"torch.func field == autograd field: "
      f"{torch.allclose(field_func, hnn(X[:8].clone()).detach(), atol=1e-10)}")
Hxx = hessian(h_single, argnums=1)(params, X[0])
print(f"hessian of H at x0: {[[round(v, 6) for v in row] for row in Hxx.tolist()]}, "
      f"symmetric {torch.allclose(Hxx, Hxx.T)}")

# divergence of the learned field: exact traces and a Hutchinson estimate
x0 = X[3].clone()
J = torch.autograd.functional.jacobian(lambda x: hnn(x), x0)
Jv = vmap(jacrev(lambda x: hnn(x)))(X[:4].clone())
probe = torch.from_numpy(rng.choice([-1.0, 1.0], (64, 2)))
xs = x0.expand(64, 2).clone().requires_grad_(True)
f = hnn(xs)
vjp = torch.autograd.grad(f, xs, grad_outputs=probe)[0]
hutch = (vjp * probe).sum(-1).mean()
traces = torch.diagonal(Jv, dim1=-2, dim2=-1).sum(-1)
print(f"divergence free: jacobian trace {abs(torch.trace(J).item()) < 1e-10}, vmap(jacrev) "
      f"traces {bool(traces.abs().max() < 1e-10)}; hutchinson estimate {abs(hutch.item()):.4f}")

# a neural ODE trained through an RK4 solver on trajectory data
true = rk4(pendulum_field, torch.tensor([[1.0, 0.0], [0.5, 1.0], [-1.5, 0.3]]), 0.1, 20)
node = MLP(2)
init(node, 2)
opt = torch.optim.Adam(node.parameters(), lr=1e-2)
for step in range(60):
    traj = rk4(node, true[0], 0.1, 20)
    loss = (traj - true).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(f"neural ode step {step:2d} trajectory loss {loss.item():.6f}")
print(f"neural ode final trajectory loss {loss.item():.6f}, trajectory {tuple(traj.shape)}")

with torch.no_grad():
    start = torch.tensor([[1.2, 0.0]])
    e0 = energy(start)
    mlp_roll = rk4(node, start, 0.1, 60)
mlp_drift = (energy(mlp_roll) - e0).abs().max().item()
hnn_roll = rk4(lambda x: hnn(x).detach(), start, 0.1, 60)
hnn_drift = (energy(hnn_roll) - e0).abs().max().item()
print(f"energy drift over 60 steps: hnn {hnn_drift:.5f}, neural ode {mlp_drift:.5f}")
print(f"default dtype {torch.get_default_dtype()}")
torch.set_default_dtype(old_dtype)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {hnn_drift:.6f} {mlp_drift:.6f}")
