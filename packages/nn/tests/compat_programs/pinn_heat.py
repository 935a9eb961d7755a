"""A physics-informed neural network (PINN), in the style of the public PINN tutorials: an MLP
u(x, t) with Tanh activations fitted to the 1-D heat equation u_t = k u_xx on [0, 1] x [0, 0.5]
with u(x, 0) = sin(pi x) and zero boundaries. The PDE residual needs derivatives of the network
with respect to its inputs: torch.autograd.grad(u, xt, grad_outputs=torch.ones_like(u),
create_graph=True) for u_x and u_t, then again for u_xx, so the loss backpropagates through
second derivatives. Collocation points with requires_grad_(True), Adam with a StepLR, then
L-BFGS(line_search_fn="strong_wolfe") with a closure, and the error against the exact solution
exp(-k pi^2 t) sin(pi x) under torch.no_grad. Also torch.func.jacrev/vmap for the same
derivatives checked against autograd. float64 throughout (torch.set_default_dtype); weights from
NumPy: the run is the same on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <loss after Adam> <loss after L-BFGS> <relative L2 error>."""

import argparse
import math
import sys

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--adam-steps", type=int, default=200)
parser.add_argument("--lbfgs-steps", type=int, default=3)
args = parser.parse_args(sys.argv[1:])
torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(0)
K = 0.1


class PINN(nn.Module):
    def __init__(self, width=20, depth=3):
        super().__init__()
        layers, d = [], 2
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        layers.append(nn.Linear(d, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, xt):
        return self.net(xt)


model = PINN()
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, nn.Linear):  # Xavier-normal, drawn by NumPy
            std = math.sqrt(2.0 / (m.in_features + m.out_features))
            m.weight.copy_(torch.from_numpy(rng.normal(0, std, tuple(m.weight.shape))))
            nn.init.zeros_(m.bias)
print(f"default dtype {torch.get_default_dtype()}, parameter dtype {next(model.parameters()).dtype}")

colloc = torch.from_numpy(rng.uniform(size=(256, 2)) * np.array([1.0, 0.5])).requires_grad_(True)
x0 = torch.from_numpy(rng.uniform(size=(64, 1)))
ic = torch.cat([x0, torch.zeros_like(x0)], dim=1)
tb = torch.from_numpy(rng.uniform(size=(32, 1)) * 0.5)
bc = torch.cat([torch.cat([torch.zeros_like(tb), tb], 1), torch.cat([torch.ones_like(tb), tb], 1)])


def residual(xt):
    u = model(xt)
    grads = torch.autograd.grad(u, xt, grad_outputs=torch.ones_like(u), create_graph=True)[0]
    u_x, u_t = grads[:, 0:1], grads[:, 1:2]
    u_xx = torch.autograd.grad(u_x, xt, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
    return u_t - K * u_xx


def loss_fn():
    pde = residual(colloc).pow(2).mean()
    ic_loss = (model(ic) - torch.sin(math.pi * x0)).pow(2).mean()
    bc_loss = model(bc).pow(2).mean()
    return pde + ic_loss + bc_loss, (pde, ic_loss, bc_loss)


opt = torch.optim.Adam(model.parameters(), lr=5e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100, gamma=0.5)
first = None
for step in range(args.adam_steps):
    opt.zero_grad()
    loss, (pde, icl, bcl) = loss_fn()
    loss.backward()
    opt.step()
    sched.step()
    first = loss.item() if first is None else first
    if step % 50 == 0:
        print(f"adam {step:4d} loss {loss.item():.6e} (pde {pde.item():.3e} ic {icl.item():.3e}"
              f" bc {bcl.item():.3e}) lr {sched.get_last_lr()[0]:.2e}")
after_adam = loss_fn()[0].item()

lbfgs = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=20, history_size=10,
                          line_search_fn="strong_wolfe")
evals = [0]


def closure():
    lbfgs.zero_grad()
    loss = loss_fn()[0]
    loss.backward()
    evals[0] += 1
    return loss


for it in range(args.lbfgs_steps):
    loss = lbfgs.step(closure)
    print(f"lbfgs {it} loss {loss.item():.6e}")
after_lbfgs = loss_fn()[0].item()
print(f"lbfgs closure evaluations > steps: {evals[0] > args.lbfgs_steps}")

# torch.func: the same first derivatives per point with vmap(jacrev)
from torch.func import functional_call, jacrev, vmap  # noqa: E402

params = {k: v.detach() for k, v in model.named_parameters()}


def u_single(p):
    return functional_call(model, params, (p.unsqueeze(0),)).squeeze()


pts = colloc[:8].detach()
jac = vmap(jacrev(u_single))(pts)
pts_req = pts.clone().requires_grad_(True)
u = model(pts_req)
auto = torch.autograd.grad(u.sum(), pts_req)[0]
print(f"vmap(jacrev) matches autograd.grad: {torch.allclose(jac, auto, atol=1e-10)}")

with torch.no_grad():
    xs = torch.linspace(0, 1, 21)
    ts = torch.linspace(0, 0.5, 11)
    X, Tm = torch.meshgrid(xs, ts, indexing="ij")
    grid = torch.stack([X.reshape(-1), Tm.reshape(-1)], 1)
    exact = torch.exp(-K * math.pi ** 2 * grid[:, 1]) * torch.sin(math.pi * grid[:, 0])
    pred = model(grid).squeeze(1)
    rel = (torch.linalg.norm(pred - exact) / torch.linalg.norm(exact)).item()
print(f"relative L2 error {rel:.5f}")
print(f"RESULT {first:.6e} {after_adam:.6e} {after_lbfgs:.6e} {rel:.5f}")
torch.set_default_dtype(torch.float32)  # as the process had it
