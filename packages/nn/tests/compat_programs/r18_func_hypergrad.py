"""Hyperparameter optimisation by implicit differentiation, in the style of the
torch.func-based meta-learning code: an inner ridge-regularised logistic model solved by
Newton's method with torch.func.hessian / torch.func.grad, the implicit-function-theorem
hypergradient of the validation loss with respect to per-feature log-penalties (a linear solve
with the inner Hessian, vector-Jacobian products from torch.func.vjp, mixed second derivatives
by torch.func.jacrev over torch.func.grad), checked against unrolled differentiation through the
Newton steps and a finite difference; forward-mode directional derivatives of the same
hypergradient by torch.autograd.forward_ad dual tensors and torch.func.jvp; a custom
autograd.Function with setup_context, a jvp rule and generate_vmap_rule=True used under vmap and
jacfwd; and per-example influence scores by vmap(grad). Data from NumPy: the run is the same on
both libraries. Written against `torch`; the test suite runs it unchanged on torch and, through
an import shim, on ember. Prints RESULT <first val loss> <last val loss> <hypergrad rel error>."""

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import grad, hessian, jacrev, jvp, vjp, vmap

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(4242)
D = 6
w_true = np.array([2.0, -1.5, 0.0, 0.0, 1.0, 0.0])
Xtr = torch.from_numpy(rng.normal(size=(40, D)))
ytr = torch.from_numpy((rng.random(40) < 1 / (1 + np.exp(-(Xtr.numpy() @ w_true + rng.normal(0, 1.5, 40))))).astype(np.float64))
Xva = torch.from_numpy(rng.normal(size=(80, D)))
yva = torch.from_numpy((rng.random(80) < 1 / (1 + np.exp(-(Xva.numpy() @ w_true)))).astype(np.float64))


def inner_loss(w, log_lam):
    logits = Xtr @ w
    data = torch.nn.functional.binary_cross_entropy_with_logits(logits, ytr)
    return data + 0.5 * (log_lam.exp() * w * w).sum()


def val_loss(w):
    return torch.nn.functional.binary_cross_entropy_with_logits(Xva @ w, yva)


def solve_inner(log_lam, steps=8, differentiable=False):
    w = torch.zeros(D)
    for _ in range(steps):
        g = grad(inner_loss)(w, log_lam)
        H = hessian(inner_loss)(w, log_lam)
        w = w - torch.linalg.solve(H, g)
        if not differentiable:
            w = w.detach()
    return w


def newton_explicit(log_lam, steps=8):
    """The same Newton iteration from closed-form derivatives: no autograd inside, so forward-mode
    dual tensors flow through it."""
    w = torch.zeros(D)
    lam = log_lam.exp()
    for _ in range(steps):
        p = torch.sigmoid(Xtr @ w)
        g = Xtr.T @ (p - ytr) / len(ytr) + lam * w
        H = (Xtr.T * (p * (1 - p))) @ Xtr / len(ytr) + torch.diag_embed(lam)
        w = w - torch.linalg.solve(H, g)
    return w


def hypergrad(log_lam):
    w = solve_inner(log_lam)
    gv = grad(val_loss)(w)
    H = hessian(inner_loss)(w, log_lam)
    v = torch.linalg.solve(H, gv)  # H^-1 dL_val/dw
    # d/dlam of dL_in/dw, contracted with v: a vjp through the mixed derivative
    _, pull = vjp(lambda ll: grad(inner_loss)(w, ll), log_lam)
    (mixed,) = pull(v)
    mixed_full = jacrev(grad(inner_loss), argnums=1)(w, log_lam)
    return -mixed, -(v @ mixed_full), w


log_lam = torch.full((D,), 0.0)
hg, hg_full, w = hypergrad(log_lam)
print("inner grad norm at solution", f"{grad(inner_loss)(w, log_lam).norm().item():.2e}" if grad(inner_loss)(w, log_lam).norm().item() > 1e-10 else "< 1e-10")
print("vjp == jacrev contraction", torch.allclose(hg, hg_full, atol=1e-12))

# unrolled differentiation through the Newton steps
ll = log_lam.clone().requires_grad_(True)
val_loss(solve_inner(ll, differentiable=True)).backward()
unrolled = ll.grad
rel = ((hg - unrolled).norm() / unrolled.norm()).item()
print("implicit vs unrolled rel error < 1e-8", rel < 1e-8)
print("closed-form Newton == autograd Newton", torch.allclose(newton_explicit(log_lam), w, atol=1e-12))
eps = 1e-5
e2 = torch.zeros(D)
e2[2] = eps
fd = (val_loss(solve_inner(log_lam + e2)) - val_loss(solve_inner(log_lam - e2))) / (2 * eps)
print(f"finite difference {fd.item():.8f} implicit {hg[2].item():.8f}")

# forward mode: the directional derivative of the validation loss along a direction in log_lam
direction = torch.linspace(-1, 1, D)
with fwAD.dual_level():
    dual = fwAD.make_dual(log_lam, direction)
    out = val_loss(newton_explicit(dual))
    primal, tangent = fwAD.unpack_dual(out)
print(f"forward-mode directional {tangent.item():.8f} == hypergrad . d {(hg @ direction).item():.8f}")
_, t2 = jvp(lambda ll: val_loss(newton_explicit(ll)), (log_lam,), (direction,))
print("func.jvp agrees", abs(t2.item() - tangent.item()) < 1e-10)


class SoftThreshold(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, lam):
        return torch.sign(x) * torch.clamp(x.abs() - lam, min=0.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, lam = inputs
        mask = x.abs() > lam
        ctx.save_for_backward(mask, torch.sign(x))
        ctx.save_for_forward(mask, torch.sign(x))

    @staticmethod
    def backward(ctx, g):
        mask, sgn = ctx.saved_tensors
        return g * mask, -(g * mask * sgn).sum()

    @staticmethod
    def jvp(ctx, tx, tlam):
        mask, sgn = ctx.saved_tensors
        return tx * mask - tlam * mask * sgn


xs = torch.tensor([[-2.0, 0.3, 1.5], [0.05, -0.7, 3.0]])
st = vmap(SoftThreshold.apply, in_dims=(0, None))(xs, torch.tensor(0.5))
J = torch.func.jacfwd(SoftThreshold.apply)(xs[0], torch.tensor(0.5))
Jr = jacrev(SoftThreshold.apply)(xs[0], torch.tensor(0.5))
print("soft threshold", st.tolist(), "jacfwd diag", J.diagonal().tolist(), "== jacrev", torch.equal(J, Jr))
lam_t = torch.tensor(0.5, requires_grad=True)
SoftThreshold.apply(xs, lam_t).sum().backward()
print("d/dlam", lam_t.grad.item(), "gradcheck", torch.autograd.gradcheck(SoftThreshold.apply, (torch.tensor([-2.0, 1.5], requires_grad=True), torch.tensor(0.5, requires_grad=True))))

# hyper-descent on the log penalties
first = val_loss(solve_inner(log_lam)).item()
hist = []
for it in range(25):
    hg, _, _ = hypergrad(log_lam)
    log_lam = (log_lam - 3.0 * hg).clamp(-6.0, 6.0)
    hist.append(val_loss(solve_inner(log_lam)).item())
    if it % 8 == 0:
        print(f"iter {it:2d} val {hist[-1]:.6f} log_lam {[round(v, 3) for v in log_lam.tolist()]}")
w = solve_inner(log_lam)


# per-example influence on the validation loss: -g_val^T H^-1 g_i
def example_loss(w, x, y):
    return torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y)


G = vmap(grad(example_loss), in_dims=(None, 0, 0))(w, Xtr, ytr)
H = hessian(inner_loss)(w, log_lam)
infl = -G @ torch.linalg.solve(H, grad(val_loss)(w))
top = torch.topk(infl.abs(), 3)
print("influence shape", tuple(infl.shape), "top indices", top.indices.tolist(), "values", [round(v, 6) for v in infl[top.indices].tolist()])
torch.set_default_dtype(torch.float32)
print(f"RESULT {first:.6f} {hist[-1]:.6f} {rel:.3e}")
