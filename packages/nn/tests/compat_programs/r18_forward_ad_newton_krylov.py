"""Forward-mode automatic differentiation as the PyTorch forward-AD tutorial and matrix-free
solvers use it: dual tensors made by forward_ad.make_dual inside dual_level (printed, with
their tangents), unpack_dual, tangents through nn.Module forwards via torch.func.functional_call
with dual parameters, a custom autograd.Function with a jvp staticmethod, forward-over-reverse
Hessian-vector products (dual inputs through torch.func.grad) checked against
torch.autograd.functional.hvp and finite differences, a Newton-Krylov solver for a nonlinear
boundary-value problem whose Jacobian-vector products come from dual numbers inside a
hand-written GMRES (Arnoldi with torch.linalg.lstsq on the Hessenberg system), and truncated
Newton (Newton-CG) training of a small regression network with Hessian-vector products from
forward-over-reverse. Data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember.
Prints RESULT <first loss> <last loss> <newton residual>."""

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.func import functional_call, grad

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(7)

with fwAD.dual_level():
    x = fwAD.make_dual(torch.tensor([0.5, 1.0, 2.0]), torch.tensor([1.0, 0.0, 0.0]))
    print("dual:", x)
    y = torch.sin(x) * x.exp()
    print("f(x):", y)
    p, t = fwAD.unpack_dual(y)
    print("primal", [round(v, 6) for v in p.tolist()], "tangent", [round(v, 6) for v in t.tolist()])
    print("scalar:", (x ** 2).sum())
    print("plain tensor has no tangent:", fwAD.unpack_dual(torch.ones(2)).tangent)


class CubeRoot(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.sign(x) * x.abs().pow(1.0 / 3.0)
        ctx.save_for_backward(out)
        ctx.save_for_forward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g / (3 * out * out)

    @staticmethod
    def jvp(ctx, t):
        (out,) = ctx.saved_tensors
        return t / (3 * out * out)


with fwAD.dual_level():
    d = fwAD.make_dual(torch.tensor([8.0, -27.0]), torch.tensor([1.0, 1.0]))
    print("cube root jvp", [round(v, 6) for v in fwAD.unpack_dual(CubeRoot.apply(d)).tangent.tolist()])

# tangents through a module: dual parameters by functional_call
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
with torch.no_grad():
    for prm in net.parameters():
        prm.copy_(torch.from_numpy(rng.normal(0, 0.5, prm.shape)))
params = {k: v.detach() for k, v in net.named_parameters()}
direction = {k: torch.from_numpy(rng.normal(size=v.shape)) for k, v in params.items()}
inp = torch.from_numpy(rng.normal(size=(5, 3)))
with fwAD.dual_level():
    dual_params = {k: fwAD.make_dual(v, direction[k]) for k, v in params.items()}
    out = functional_call(net, dual_params, (inp,))
    jvp_fwd = fwAD.unpack_dual(out).tangent
_, jvp_ref = torch.func.jvp(lambda p: functional_call(net, p, (inp,)), (params,), (direction,))
print("module jvp == func.jvp", torch.allclose(jvp_fwd, jvp_ref, atol=1e-12), tuple(jvp_fwd.shape))


# forward-over-reverse Hessian-vector products
def rosen(z):
    return (100 * (z[1:] - z[:-1] ** 2) ** 2 + (1 - z[:-1]) ** 2).sum()


z0 = torch.tensor([-1.2, 1.0, 0.8, 1.3])
v = torch.tensor([1.0, -0.5, 0.25, 2.0])
with fwAD.dual_level():
    g = grad(rosen)(fwAD.make_dual(z0, v))
    hv = fwAD.unpack_dual(g).tangent
print("grad carries the tangent:", hv is not None)
_, hv_ref = torch.autograd.functional.hvp(rosen, z0, v)
eps = 1e-6
hv_fd = (grad(rosen)(z0 + eps * v) - grad(rosen)(z0 - eps * v)) / (2 * eps)
print("hvp == autograd.functional.hvp", torch.allclose(hv, hv_ref, atol=1e-10), "fd error < 1e-5", (hv - hv_fd).abs().max().item() < 1e-5)
print("hvp", [round(u, 5) for u in hv.tolist()])


# Newton-Krylov on -u'' + u^3 = f, u(0) = u(1) = 0, with matrix-free Jacobian-vector products
n = 30
h = 1.0 / (n + 1)
grid = torch.linspace(h, 1 - h, n)
u_true = torch.sin(torch.pi * grid) * grid
f = -(2 * torch.pi * torch.cos(torch.pi * grid) - torch.pi ** 2 * grid * torch.sin(torch.pi * grid)) + u_true ** 3


def residual(u):
    up = torch.cat([u.new_zeros(1), u, u.new_zeros(1)])
    lap = (up[2:] - 2 * up[1:-1] + up[:-2]) / h ** 2
    return -lap + u ** 3 - f


def jvp_residual(u, w):
    with fwAD.dual_level():
        return fwAD.unpack_dual(residual(fwAD.make_dual(u, w))).tangent


def gmres(matvec, b, m=30):
    beta = b.norm()
    Q = [b / beta]
    H = torch.zeros(m + 1, m)
    for j in range(m):
        w = matvec(Q[j])
        for i in range(j + 1):
            H[i, j] = w @ Q[i]
            w = w - H[i, j] * Q[i]
        H[j + 1, j] = w.norm()
        if H[j + 1, j] < 1e-12:
            m = j + 1
            break
        Q.append(w / H[j + 1, j])
    e1 = torch.zeros(m + 1)
    e1[0] = beta
    y = torch.linalg.lstsq(H[:m + 1, :m], e1[:m + 1, None]).solution[:, 0]
    return torch.stack(Q[:m], 1) @ y


u = torch.zeros(n)
for it in range(6):
    r = residual(u)
    print(f"newton {it} residual {r.norm().item():.3e}" if r.norm().item() > 1e-9 else f"newton {it} residual < 1e-9")
    u = u - gmres(lambda w: jvp_residual(u, w), r)
res = residual(u).norm().item()
print("solution error < 1e-3", (u - u_true).abs().max().item() < 1e-3)

# Newton-CG training with forward-over-reverse Hessian-vector products
X = torch.from_numpy(rng.uniform(-2, 2, (64, 1)))
Y = torch.sin(2 * X) + 0.05 * torch.from_numpy(rng.normal(size=(64, 1)))
model = nn.Sequential(nn.Linear(1, 12), nn.Tanh(), nn.Linear(12, 1))
with torch.no_grad():
    for prm in model.parameters():
        prm.copy_(torch.from_numpy(rng.normal(0, 0.7, prm.shape)))
names = [k for k, _ in model.named_parameters()]
shapes = [p.shape for p in model.parameters()]
sizes = [p.numel() for p in model.parameters()]


def unflat(vec):
    return {k: c.view(s) for k, c, s in zip(names, vec.split(sizes), shapes)}


def loss_of(vec):
    return ((functional_call(model, unflat(vec), (X,)) - Y) ** 2).mean()


theta = torch.cat([p.detach().flatten() for p in model.parameters()])
losses = [loss_of(theta).item()]
for it in range(12):
    g = grad(loss_of)(theta)

    def hvp(w):
        with fwAD.dual_level():
            return fwAD.unpack_dual(grad(loss_of)(fwAD.make_dual(theta, w))).tangent + 1e-3 * w

    # conjugate gradients on H d = -g
    d = torch.zeros_like(theta)
    r = -g.clone()
    pdir = r.clone()
    for _ in range(20):
        Hp = hvp(pdir)
        curv = pdir @ Hp
        if curv <= 0:
            break
        alpha = (r @ r) / curv
        d = d + alpha * pdir
        r_new = r - alpha * Hp
        if r_new.norm() < 1e-8:
            break
        pdir = r_new + (r_new @ r_new) / (r @ r) * pdir
        r = r_new
    step = 1.0
    while loss_of(theta + step * d) > losses[-1] and step > 1e-4:
        step *= 0.5
    theta = theta + step * d
    losses.append(loss_of(theta).item())
    if it in (0, 4):
        print(f"newton-cg {it:2d} loss {losses[-1]:.6f} step {step}")
torch.set_default_dtype(torch.float32)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {res:.3e}")
