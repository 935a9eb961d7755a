"""torch.func in the style of its public tutorials: per-sample gradients with
vmap(grad(compute_loss), in_dims=(None, None, 0, 0)) over functional_call, checked against a
loop of backward passes; per-sample gradient norms clipped and noised as in DP-SGD; model
ensembling with stack_module_state and vmap over the stacked weights; Jacobians with jacrev and
jacfwd (and argnums), a Hessian, jvp and vjp, grad_and_value with has_aux, and a batched Newton
step on a least-squares problem. Everything is deterministic: the test compares ember's output to
torch's line by line. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember."""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stack_module_state,
    vjp,
    vmap,
)

torch.manual_seed(0)
rng = np.random.default_rng(0)


def arr(*shape, scale=1.0):
    return torch.from_numpy((rng.normal(0, 1, shape) * scale).astype(np.float32))


class SimpleMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


model = SimpleMLP()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(arr(*p.shape, scale=0.4))
data, targets = arr(8, 6), torch.from_numpy(rng.integers(0, 3, 8))
params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}


def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    return F.cross_entropy(predictions, target.unsqueeze(0))


ft_compute_sample_grad = vmap(grad(compute_loss), in_dims=(None, None, 0, 0))
ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
loop = []
for i in range(len(data)):
    model.zero_grad()
    F.cross_entropy(model(data[i:i + 1]), targets[i:i + 1]).backward()
    loop.append({k: p.grad.clone() for k, p in model.named_parameters()})
for k in params:
    want = torch.stack([g[k] for g in loop])
    assert torch.allclose(ft_per_sample_grads[k], want, atol=1e-6, rtol=1e-5), k
print("per-sample grads:", {k: tuple(v.shape) for k, v in ft_per_sample_grads.items()})

# DP-SGD style: clip each sample's gradient to norm 1, then average
flat = torch.cat([g.flatten(1) for g in ft_per_sample_grads.values()], dim=1)
norms = flat.norm(dim=1)
factor = (1.0 / (norms + 1e-6)).clamp(max=1.0)
clipped = {k: (g * factor.view(-1, *([1] * (g.dim() - 1)))).mean(0)
           for k, g in ft_per_sample_grads.items()}
print("per-sample norms", [f"{v:.4f}" for v in norms.tolist()])
print(f"clipped mean grad norm {torch.cat([g.flatten() for g in clipped.values()]).norm():.4f}")

# ensembling: three models' weights stacked, one vmap over them
models = [copy.deepcopy(model) for _ in range(3)]
with torch.no_grad():
    for i, m in enumerate(models):
        for p in m.parameters():
            p.add_(0.1 * i)
ens_params, ens_buffers = stack_module_state(models)
base = copy.deepcopy(models[0]).to("meta")


def fmodel(params, buffers, x):
    return functional_call(base, (params, buffers), (x,))


ens_out = vmap(fmodel, in_dims=(0, 0, None))(ens_params, ens_buffers, data[:4])
print(f"ensemble out {tuple(ens_out.shape)}; matches loop: "
      f"{all(torch.allclose(ens_out[i], models[i](data[:4]), atol=1e-5) for i in range(3))}")


# jacobians and friends
def f(x, w):
    return torch.tanh(w @ x) * x.sum()


x0, w0 = arr(4), arr(3, 4, scale=0.5)
jr = jacrev(f)(x0, w0)
jf = jacfwd(f)(x0, w0)
print(f"jacrev {tuple(jr.shape)} == jacfwd: {torch.allclose(jr, jf, atol=1e-5)}")
jw = jacrev(f, argnums=1)(x0, w0)
print(f"jacobian wrt w {tuple(jw.shape)}, both {[tuple(j.shape) for j in jacrev(f, argnums=(0, 1))(x0, w0)]}")


def energy(x):
    return (x ** 3).sum() + (x[0] * x[1]) ** 2


h = hessian(energy)(torch.tensor([1.0, 2.0, 3.0]))
print("hessian", h)
out, tangent = jvp(energy, (torch.tensor([1.0, 2.0, 3.0]),), (torch.tensor([1.0, 0.0, 0.0]),))
print(f"jvp {out.item():.4f} {tangent.item():.4f}")
out, vjp_fn = vjp(lambda x: x.sin() * 2, torch.tensor([0.0, 1.0]))
print("vjp", vjp_fn(torch.ones(2))[0])


def loss_with_aux(w, x, y):
    pred = x @ w
    loss = ((pred - y) ** 2).mean()
    return loss, {"pred_mean": pred.mean()}


X, true_w = arr(32, 3), torch.tensor([1.0, -2.0, 0.5])
Y = X @ true_w
w = torch.zeros(3)
g, (value, aux) = grad_and_value(loss_with_aux, has_aux=True)(w, X, Y)
print(f"grad_and_value: loss {value.item():.4f}, aux {aux['pred_mean'].item():.4f}, grad {g}")
# a Newton step: exact for least squares
H = hessian(lambda w: loss_with_aux(w, X, Y)[0])(w)
w_new = w - torch.cholesky_solve(g.unsqueeze(1), torch.linalg.cholesky(H)).squeeze(1)
print(f"Newton step recovers w: {torch.allclose(w_new, true_w, atol=1e-4)}")
batched_grads = vmap(grad(lambda w, x, y: ((x @ w - y) ** 2)), in_dims=(None, 0, 0))(w, X, Y)
print(f"vmap(grad) per-sample {tuple(batched_grads.shape)}, mean equals full grad: "
      f"{torch.allclose(batched_grads.mean(0), g, atol=1e-5)}")
print(f"RESULT {norms.sum().item():.6f} {value.item():.6f}")
