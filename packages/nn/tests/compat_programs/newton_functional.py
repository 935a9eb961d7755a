"""Second-order optimization with torch.autograd.functional and torch.func, in the style of the
Newton / Gauss-Newton / curvature snippets of optimization notebooks: logistic regression fitted
by Newton's method with autograd.functional.hessian and jacobian (vectorize=True), a damped
Gauss-Newton (Levenberg-Marquardt) curve fit from jacobian(..., strategy="forward-mode",
vectorize=True), conjugate gradient on Hessian-vector products (autograd.functional.hvp) for a
truncated-Newton step, vjp / jvp / vhp checked against the explicit Jacobian and Hessian,
create_graph=True for a gradient-norm penalty, strict=True on an output independent of the
input; then the same with torch.func: jacrev / jacfwd / hessian of a functional_call of an
nn.Module, grad_and_value with has_aux, vmap over a batch of Jacobians, jvp / vjp / linearize,
and a Newton step on a small MLP's last layer. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <first loss> <last
loss> <LM residual>."""

import torch
import torch.nn as nn
from torch.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp
from torch.func import functional_call, grad_and_value, jacfwd, jacrev, linearize, vmap
from torch.func import hessian as func_hessian

torch.set_default_dtype(torch.float64)

# ---- logistic regression by Newton's method ----
n = 64
t = torch.linspace(-3, 3, n)
X = torch.stack([torch.ones(n), t, torch.sin(2 * t)], dim=1)
y = ((0.5 + 1.5 * t - torch.sin(3 * t)) > 0).double()


def nll(w):
    logits = X @ w
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y) + 1e-3 * (w * w).sum()


w = torch.zeros(3)
losses = []
for it in range(8):
    loss = nll(w)
    losses.append(loss.item())
    g = jacobian(nll, w, vectorize=True)
    H = hessian(nll, w, vectorize=True)
    w = w - torch.linalg.solve(H, g)
print("newton losses", [f"{v:.6f}" for v in losses[:5]], "w", [round(v, 4) for v in w.tolist()])
print("hessian symmetric:", torch.allclose(H, H.T), "positive definite:",
      bool((torch.linalg.eigvalsh(H) > 0).all()), "shape", tuple(H.shape))
H_loop = hessian(nll, w)
print("vectorize == loop:", torch.allclose(H_loop, hessian(nll, w, vectorize=True)),
      "outer-engine:", torch.allclose(H_loop, hessian(nll, w, outer_jacobian_strategy=
                                                      "forward-mode", vectorize=True)))

# ---- Levenberg-Marquardt with a forward-mode Jacobian ----
xs = torch.linspace(0, 4, 40)
ys = 2.5 * torch.exp(-1.3 * xs) + 0.4 * torch.cos(3.0 * xs)


def residual(p):
    return p[0] * torch.exp(-p[1] * xs) + p[2] * torch.cos(p[3] * xs) - ys


p = torch.tensor([1.0, 1.0, 0.1, 2.8])
lam = 1e-2
for it in range(30):
    r = residual(p)
    J = jacobian(residual, p, strategy="forward-mode", vectorize=True)
    step = torch.linalg.solve(J.T @ J + lam * torch.eye(4), J.T @ r)
    p_new = p - step
    if (residual(p_new) ** 2).sum() < (r ** 2).sum():
        p, lam = p_new, lam * 0.5
    else:
        lam *= 4.0
lm_res = (residual(p) ** 2).sum().item()
print("LM fit", [round(v, 4) for v in p.tolist()], f"residual {lm_res:.3e}")
J_rev = jacobian(residual, p)
print("forward-mode == reverse-mode jacobian:", torch.allclose(J, jacobian(
    residual, p, strategy="forward-mode", vectorize=True)), torch.allclose(
    jacobian(residual, p, strategy="forward-mode", vectorize=True), J_rev), tuple(J_rev.shape))


# ---- truncated Newton: conjugate gradient on Hessian-vector products ----
def rosen(z):
    return ((1 - z[:-1]) ** 2).sum() + 10.0 * ((z[1:] - z[:-1] ** 2) ** 2).sum()


z = torch.tensor([-1.2, 1.0, -0.5, 0.8, 1.1])
for outer in range(12):
    g = torch.autograd.grad(rosen(z.requires_grad_()), z)[0]
    z = z.detach()
    d, r = torch.zeros_like(z), -g.clone()
    pdir = r.clone()
    for _ in range(10):
        _, Hp = hvp(rosen, z, pdir)
        curv = pdir @ Hp
        if curv <= 0:
            break
        alpha = (r @ r) / curv
        d = d + alpha * pdir
        r_new = r - alpha * Hp
        if r_new.norm() < 1e-10:
            break
        pdir = r_new + (r_new @ r_new) / (r @ r) * pdir
        r = r_new
    step = 1.0
    while rosen(z + step * d) > rosen(z) and step > 1e-4:
        step *= 0.5
    z = z + step * d
print(f"truncated newton: f {rosen(z).item():.3e} at", [round(v, 4) for v in z.tolist()])

# ---- vjp / jvp / vhp against explicit derivatives ----
def f(a, b):
    return torch.stack([a.sin().sum() * b[0], (a * b).sum(), a.prod() + b.pow(3).sum()])
a0, b0 = torch.tensor([0.3, -0.7, 1.1]), torch.tensor([0.5, 2.0, -1.0])
Ja, Jb = jacobian(f, (a0, b0))
v = torch.tensor([1.0, -2.0, 0.5])
out, (va, vb) = vjp(f, (a0, b0), v)
print("vjp == v @ J:", torch.allclose(va, v @ Ja), torch.allclose(vb, v @ Jb),
      "value", [round(x, 5) for x in out.tolist()])
u = (torch.tensor([0.1, 0.2, 0.3]), torch.tensor([1.0, 0.0, -1.0]))
_, jv = jvp(f, (a0, b0), u)
print("jvp == J @ u:", torch.allclose(jv, Ja @ u[0] + Jb @ u[1]))
def h(a):
    return (a.sin() * a.exp()).sum()
H3 = hessian(h, a0)
_, vh = vhp(h, a0, v)
_, hv = hvp(h, a0, v)
print("vhp == v @ H:", torch.allclose(vh, v @ H3), "hvp == H @ v:", torch.allclose(hv, H3 @ v))

# create_graph: a gradient penalty differentiated again
wgt = torch.tensor([0.5, -1.5, 2.0], requires_grad=True)
def pen(xx):
    return ((xx * wgt).tanh().sum()) ** 2
gx = jacobian(pen, a0, create_graph=True)
gnorm = gx.pow(2).sum()
gnorm.backward()
print("gradient penalty", f"{gnorm.item():.6f}", "d/dw",
      [round(x, 5) for x in wgt.grad.tolist()])
try:
    jacobian(lambda q: torch.ones(2), a0, strict=True)
except RuntimeError:
    print("strict=True on an independent output: RuntimeError")
print("non-strict gives zeros:", jacobian(lambda q: torch.ones(2) + 0 * q.sum(), a0).abs().sum()
      .item())

# ---- torch.func on a module ----
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
with torch.no_grad():
    for i, prm in enumerate(model.parameters()):
        prm.copy_(0.4 * torch.sin(torch.arange(prm.numel()) * 0.9 + i).view_as(prm))
params = {k: v.detach() for k, v in model.named_parameters()}


def loss_fn(params, xb, yb):
    pred = functional_call(model, params, (xb,))
    loss = ((pred.squeeze(-1) - yb) ** 2).mean()
    return loss, pred.detach()


xb = torch.stack([t[:16], t[16:32] ** 2 / 9, torch.cos(t[32:48])], dim=1)
yb = xb[:, 0] * xb[:, 1] - xb[:, 2]
grads, (loss0, pred) = grad_and_value(loss_fn, has_aux=True)(params, xb, yb)
print("grad_and_value", f"{loss0.item():.6f}", sorted(grads), tuple(pred.shape))
last_w = params["2.weight"]


def last_layer_loss(w2):
    return loss_fn({**params, "2.weight": w2}, xb, yb)[0]


H_rev = func_hessian(last_layer_loss)(last_w)
H_mixed = jacfwd(jacrev(last_layer_loss))(last_w)
print("func.hessian", tuple(H_rev.shape), "== jacfwd(jacrev):", torch.allclose(H_rev, H_mixed),
      "== autograd.functional:", torch.allclose(H_rev, hessian(last_layer_loss, last_w)))
g2 = jacrev(last_layer_loss)(last_w).reshape(-1)
Hm = H_rev.reshape(8, 8)
new_w = last_w - torch.linalg.solve(Hm + 1e-6 * torch.eye(8), g2).view_as(last_w)
print(f"newton step on the last layer: {last_layer_loss(last_w).item():.6f} -> "
      f"{last_layer_loss(new_w).item():.6f}")

# per-sample input Jacobians with vmap
def net(row):
    return functional_call(model, params, (row,))
Jb_ = vmap(jacrev(net))(xb[:4])
print("per-sample jacobians", tuple(Jb_.shape), "match a loop:",
      torch.allclose(Jb_[2], jacobian(net, xb[2])))
out_p, jvp_fn = linearize(torch.sin, torch.tensor([0.0, 1.0, 2.0]))
print("linearize", [round(x, 5) for x in jvp_fn(torch.ones(3)).tolist()])
primal, tangent = torch.func.jvp(lambda q: q ** 3, (torch.tensor([2.0]),), (torch.tensor([1.0]),))
val, vjp_fn = torch.func.vjp(lambda q: q.exp().sum(), torch.tensor([0.0, 1.0]))
print("func.jvp", primal.item(), tangent.item(), "func.vjp",
      [round(x, 5) for x in vjp_fn(torch.tensor(1.0))[0].tolist()])
print("default dtype", torch.get_default_dtype())
torch.set_default_dtype(torch.float32)
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {lm_res:.3e}")
