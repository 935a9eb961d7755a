"""torch.func beyond per-sample gradients, in the style of the public neural-tangent-kernel and
ensembling tutorials: the empirical NTK of an MLP computed three ways (jacrev of
functional_call over the parameter dict contracted with einsum, vmap over samples of jacrev,
and NTK-vector products with vjp/jvp), per-sample Hessians of the loss with respect to the
input by vmap(hessian(...)) and by jacfwd(jacrev(...)), an ensemble trained with vmap over
stacked parameters (stack_module_state, in_dims=(0, 0, None) and a different minibatch per
member), vmap's out_dims / chunk_size / nested vmap, torch.func.linearize, and the older
torch.autograd.functional API (jacobian with vectorize=True, hessian, hvp, vhp, jvp) and
forward-mode AD with torch.autograd.forward_ad dual numbers, all checked against each other.
Everything is deterministic (weights from NumPy): the test compares ember's output to torch's.
Written against `torch`; the test suite runs it unchanged on torch and, through an import
shim, on ember. Prints RESULT <first ensemble loss> <last ensemble loss> <ntk trace>."""

import copy

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.functional import hessian as ag_hessian
from torch.autograd.functional import hvp, jacobian, jvp, vhp
from torch.func import (
    functional_call,
    hessian,
    jacfwd,
    jacrev,
    linearize,
    stack_module_state,
    vjp,
    vmap,
)
from torch.func import jvp as fjvp

rng = np.random.default_rng(0)


def arr(*shape):
    return torch.from_numpy(rng.normal(size=shape).astype(np.float32))


class MLP(nn.Module):
    def __init__(self, din=3, hidden=16, dout=2):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(din, hidden), nn.Linear(hidden, dout)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(arr(*p.shape) * 0.5)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


net = MLP()
params = {k: v.detach() for k, v in net.named_parameters()}
x1, x2 = arr(5, 3), arr(4, 3)


def f(p, x):
    return functional_call(net, p, (x.unsqueeze(0),)).squeeze(0)


# NTK 1: per-sample Jacobians (vmap over jacrev), contracted over every parameter
def jac_all(x):
    j = vmap(jacrev(f), (None, 0))(params, x)
    return [v.flatten(2) for v in j.values()]


ntk = sum(torch.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(jac_all(x1), jac_all(x2)))
print("ntk", tuple(ntk.shape))
# NTK 2: jacrev of the batched model directly
jb1 = jacrev(lambda p: functional_call(net, p, (x1,)))(params)
jb2 = jacrev(lambda p: functional_call(net, p, (x2,)))(params)
ntk2 = sum(torch.einsum("Naf,Mbf->NMab", jb1[k].flatten(2), jb2[k].flatten(2)) for k in params)
print("batched jacrev agrees:", torch.allclose(ntk, ntk2, atol=1e-5))


# NTK 3: NTK-vector products (vjp then jvp), one column at a time
def ntk_vp(v):
    _, vjp_fn = vjp(lambda p: functional_call(net, p, (x2,)), params)
    (ct,) = vjp_fn(v)
    return fjvp(lambda p: functional_call(net, p, (x1,)), (params,), (ct,))[1]


cols = torch.stack([ntk_vp(torch.eye(8)[j].reshape(4, 2)) for j in range(8)], -1)
print("ntk-vector products agree:",
      torch.allclose(cols.reshape(5, 2, 4, 2), ntk.permute(0, 2, 1, 3), atol=1e-5))
trace = torch.einsum("NNaa->", sum(torch.einsum("Naf,Mbf->NMab", a, a)
                                    for a in jac_all(x1))).item()
print(f"ntk[0, 0] {[round(v, 5) for v in ntk[0, 0].flatten().tolist()]} trace {trace:.5f}")

# per-sample input Hessians of a scalar loss
y = arr(5, 2)


def loss_x(x, t):
    return F.mse_loss(net(x), t)


H = vmap(hessian(loss_x))(x1, y)
H2 = vmap(jacfwd(jacrev(loss_x)))(x1, y)
print("per-sample hessians", tuple(H.shape), "symmetric:",
      torch.allclose(H, H.transpose(1, 2), atol=1e-6), "fwd-over-rev agrees:",
      torch.allclose(H, H2, atol=1e-6))
print(f"H[0] diag {[round(v, 5) for v in H[0].diagonal().tolist()]}")

# vmap details: out_dims, chunk_size, nested vmap, in_dims None, kwargs
a, b = vmap(lambda u: (u.sum(), u * 2), out_dims=(0, 1))(x1)
print("out_dims", tuple(a.shape), tuple(b.shape))
print("chunk_size agrees:", torch.equal(vmap(torch.outer, chunk_size=2)(x1, x1),
                                        vmap(torch.outer)(x1, x1)))
pair = vmap(vmap(lambda u, v: (u - v).norm(), (None, 0)), (0, None))(x1, x2)
print("nested vmap == cdist:", torch.allclose(pair, torch.cdist(x1, x2), atol=1e-5))
out, jvp_fn = linearize(lambda x: net(x).sin(), x1)
t = torch.ones_like(x1)
print("linearize agrees with jvp:",
      torch.allclose(jvp_fn(t), fjvp(lambda x: net(x).sin(), (x1,), (t,))[1], atol=1e-6))

# the older torch.autograd.functional API and forward-mode dual numbers
x0 = x1[0]
J = jacobian(net, x0, vectorize=True)
print("autograd.functional.jacobian", tuple(J.shape), "== func.jacrev:",
      torch.allclose(J, jacrev(net)(x0), atol=1e-6))
Hf = ag_hessian(lambda x: loss_x(x, y[0]), x0)
v = torch.tensor([1.0, -1.0, 0.5])
_, hv = hvp(lambda x: loss_x(x, y[0]), x0, v)
_, vh = vhp(lambda x: loss_x(x, y[0]), x0, v)
print("hessian / hvp / vhp agree:", torch.allclose(Hf, H[0], atol=1e-6),
      torch.allclose(hv, Hf @ v, atol=1e-6), torch.allclose(vh, v @ Hf, atol=1e-6))
_, jv = jvp(net, x0, v)
with fwAD.dual_level():
    dual = fwAD.make_dual(x0, v)
    primal, tangent = fwAD.unpack_dual(net(dual))
print("forward_ad tangent == J v:", torch.allclose(tangent, J @ v, atol=1e-6),
      torch.allclose(jv, tangent, atol=1e-6), "primal ok:", torch.allclose(primal, net(x0)))

# an ensemble of 4 members trained together through vmap
members = [MLP() for _ in range(4)]
base = copy.deepcopy(members[0]).to("meta")
ens_params, ens_buffers = stack_module_state(members)
print("stacked", {k: tuple(v.shape) for k, v in ens_params.items()})
X = arr(64, 3)
Y = torch.stack([X[:, 0] * X[:, 1], X[:, 2].sin()], 1)


def member_loss(p, b, xb, yb):
    return F.mse_loss(functional_call(base, (p, b), (xb,)), yb)


opt = torch.optim.SGD(list(ens_params.values()), lr=0.1, momentum=0.9)
losses = []
for step in range(40):
    idx = torch.from_numpy(rng.integers(0, 64, (4, 16)))
    per_member = vmap(member_loss)(ens_params, ens_buffers, X[idx], Y[idx])
    opt.zero_grad()
    per_member.sum().backward()
    opt.step()
    losses.append(per_member.mean().item())
    if step % 10 == 0:
        print(f"step {step} member losses {[round(v, 5) for v in per_member.tolist()]}")
with torch.no_grad():
    preds = vmap(functional_call, in_dims=(None, 0, None))(base, (ens_params, ens_buffers), (X,))
print("ensemble predictions", tuple(preds.shape),
      f"spread {preds.std(0).mean().item():.5f}")
print(f"RESULT {losses[0]:.5f} {np.mean(losses[-5:]):.5f} {trace:.5f}")
