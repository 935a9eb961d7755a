"""Lagrangian neural networks (Cranmer et al.) in the style of the public JAX-to-PyTorch ports,
on a double pendulum: a scalar Lagrangian MLP L(q, q_dot) with softplus activations, the
Euler-Lagrange accelerations q_ddot = pinv(d2L/dq_dot2) (dL/dq - d2L/dq_dot dq q_dot) with the
Hessian blocks from torch.func.hessian and the gradient from torch.func.grad, everything mapped
over the batch by torch.func.vmap, an analytic double-pendulum Lagrangian checked against the
closed-form accelerations, an RK4 rollout in float64, directional derivatives by torch.func.jvp
and by forward-mode dual numbers (torch.autograd.forward_ad), and a jacrev / jacfwd agreement
check. The network is trained on accelerations by backpropagating through the vmapped Hessians.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <rollout energy drift>."""

import math

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vmap

rng = np.random.default_rng(152)
torch.set_default_dtype(torch.float64)
G, M1, M2, L1, L2 = 9.8, 1.0, 1.0, 1.0, 1.0


def analytic_lagrangian(state):
    t1, t2, w1, w2 = state.unbind(-1)
    T = 0.5 * (M1 + M2) * L1 ** 2 * w1 ** 2 + 0.5 * M2 * L2 ** 2 * w2 ** 2 + M2 * L1 * L2 * w1 * w2 * torch.cos(t1 - t2)
    V = -(M1 + M2) * G * L1 * torch.cos(t1) - M2 * G * L2 * torch.cos(t2)
    return T - V


def energy(state):
    t1, t2, w1, w2 = state.unbind(-1)
    T = 0.5 * (M1 + M2) * L1 ** 2 * w1 ** 2 + 0.5 * M2 * L2 ** 2 * w2 ** 2 + M2 * L1 * L2 * w1 * w2 * torch.cos(t1 - t2)
    V = -(M1 + M2) * G * L1 * torch.cos(t1) - M2 * G * L2 * torch.cos(t2)
    return T + V


def closed_form_accel(state):
    t1, t2, w1, w2 = state.unbind(-1)
    a1 = (L2 / L1) * (M2 / (M1 + M2)) * torch.cos(t1 - t2)
    a2 = (L1 / L2) * torch.cos(t1 - t2)
    f1 = -(L2 / L1) * (M2 / (M1 + M2)) * (w2 ** 2) * torch.sin(t1 - t2) - (G / L1) * torch.sin(t1)
    f2 = (L1 / L2) * (w1 ** 2) * torch.sin(t1 - t2) - (G / L2) * torch.sin(t2)
    g1 = (f1 - a1 * f2) / (1 - a1 * a2)
    g2 = (f2 - a2 * f1) / (1 - a1 * a2)
    return torch.stack([g1, g2], -1)


def euler_lagrange(lagrangian, state):
    """state (4,) = (q, q_dot); returns q_ddot (2,)."""
    qd = state[2:]
    H = hessian(lagrangian)(state)
    dL = grad(lagrangian)(state)
    return torch.linalg.pinv(H[2:, 2:]) @ (dL[:2] - H[2:, :2] @ qd)


states = torch.from_numpy(np.concatenate([rng.uniform(-np.pi / 2, np.pi / 2, (16, 2)), rng.normal(0, 1, (16, 2))], 1))
acc_el = vmap(lambda s: euler_lagrange(analytic_lagrangian, s))(states)
print(f"euler-lagrange of the analytic lagrangian == closed form: {torch.allclose(acc_el, closed_form_accel(states), atol=1e-9)}")


class LNN(nn.Module):
    def __init__(self, h=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, h), nn.Softplus(), nn.Linear(h, h), nn.Softplus(), nn.Linear(h, 1))

    def forward(self, state):
        return self.net(state).squeeze(-1)


model = LNN()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 1 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.0, p.shape)))
params = dict(model.named_parameters())


def lnn_accel(params, s):
    return euler_lagrange(lambda z: functional_call(model, params, (z,)), s)


batched = vmap(lnn_accel, in_dims=(None, 0))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(40):
    s = torch.from_numpy(np.concatenate([rng.uniform(-np.pi / 2, np.pi / 2, (16, 2)), rng.normal(0, 1, (16, 2))], 1))
    target = closed_form_accel(s)
    pred = batched(params, s)
    loss = (pred - target).abs().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if step % 20 == 0:
        print(f"step {step:2d} l1 {loss.item():.4f}")


def rk4(f, y, dt, n):
    out = [y]
    for _ in range(n):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(y)
    return torch.stack(out)


def true_dynamics(y):
    return torch.cat([y[..., 2:], closed_form_accel(y)], -1)


y0 = torch.tensor([[1.0, 0.5, 0.0, 0.0]])
traj = rk4(true_dynamics, y0, 0.01, 100)
e = energy(traj)
drift = (e - e[0]).abs().max().item()
print(f"true rollout energy drift {drift:.3e} final angle {traj[-1, 0, 0].item():.6f}")
with torch.no_grad():
    learned = rk4(lambda y: torch.cat([y[..., 2:], batched(params, y)], -1), y0, 0.01, 20)
print(f"learned rollout deviation after 20 steps {(learned - traj[:21]).abs().max().item():.4f}")

# directional derivatives three ways, and reverse vs forward Jacobians
v = torch.tensor([0.3, -0.2, 0.1, 0.5])
s0 = states[0]
_, dir_jvp = jvp(analytic_lagrangian, (s0,), (v,))
with fwAD.dual_level():
    dual = fwAD.make_dual(s0, v)
    dir_fw = fwAD.unpack_dual(analytic_lagrangian(dual)).tangent
dir_rev = grad(analytic_lagrangian)(s0) @ v
f_acc = lambda s: euler_lagrange(analytic_lagrangian, s)  # noqa: E731
print(f"jvp == forward-mode dual == grad . v: {torch.allclose(dir_jvp, dir_fw) and torch.allclose(dir_jvp, dir_rev)} "
      f"jacrev == jacfwd: {torch.allclose(jacrev(f_acc)(s0), jacfwd(f_acc)(s0))}")
print(f"RESULT {np.mean(losses[:3]):.4f} {np.mean(losses[-5:]):.4f} {drift:.3e}")
