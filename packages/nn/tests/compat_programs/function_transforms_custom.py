"""Custom autograd.Functions that work with torch.func, in the style of the PyTorch "Extending
torch.func with autograd.Function" tutorial and of numerically-careful library code: a
Function in the forward / setup_context style (ctx.save_for_backward, ctx.needs_input_grad,
mark_non_differentiable for an integer output), used under torch.func.grad, jacrev and vmap with
generate_vmap_rule = True; a Function with a hand-written vmap staticmethod (in_dims handling
and out_dims); a jvp staticmethod (save_for_forward) for torch.func.jvp / jacfwd and
forward-mode AD (torch.autograd.forward_ad dual numbers); set_materialize_grads(False) with None
grads; once_differentiable; gradcheck / gradgradcheck in float64; and a
small model using a stable log-sum-exp Function trained with per-sample gradients from
vmap(grad). Weights and data from NumPy: the run is the same on both libraries. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <max jacobian error>."""

import numpy as np
import torch
import torch.autograd.forward_ad as fwAD
from torch.autograd.function import once_differentiable
from torch.func import grad, jacfwd, jacrev, jvp, vmap

rng = np.random.default_rng(53)
torch.set_default_dtype(torch.float64)


class LogSumExp(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        m = x.max(dim=-1, keepdim=True).values
        return (x - m).exp().sum(-1).log() + m.squeeze(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)
        ctx.save_for_forward(x, output)

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return g.unsqueeze(-1) * (x - out.unsqueeze(-1)).exp()

    @staticmethod
    def jvp(ctx, x_t):
        x, out = ctx.saved_tensors
        return ((x - out.unsqueeze(-1)).exp() * x_t).sum(-1)


class ArgmaxWithValue(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        v, i = x.max(dim=-1)
        ctx.mark_non_differentiable(i)
        ctx.save_for_backward(x, i)
        seen_needs.append(ctx.needs_input_grad)
        return v, i

    @staticmethod
    def backward(ctx, gv, gi):
        x, i = ctx.saved_tensors
        return torch.zeros_like(x).scatter(-1, i.unsqueeze(-1), gv.unsqueeze(-1))


class Clip(torch.autograd.Function):
    """Clamp with a straight-through gradient; a hand-written vmap rule."""

    @staticmethod
    def forward(x, lo, hi):
        return x.clamp(lo, hi)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g, None, None

    @staticmethod
    def vmap(info, in_dims, x, lo, hi):
        calls.append((info.batch_size, in_dims))
        x_dim = in_dims[0]
        return Clip.apply(x, lo, hi), x_dim


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * x, y * 2

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        gx = None if g1 is None else 2 * x * g1
        gy = None if g2 is None else 2 * g2
        return gx, gy


calls = []
seen_needs = []
x = torch.from_numpy(rng.normal(0, 1, (4, 5)))
ref = torch.logsumexp(x, -1)
print("forward equals logsumexp:", torch.allclose(LogSumExp.apply(x), ref))
g = grad(lambda t: LogSumExp.apply(t).sum())(x)
print("func.grad == softmax:", torch.allclose(g, x.softmax(-1)))
J = jacrev(LogSumExp.apply)(x[0])
Jf = jacfwd(LogSumExp.apply)(x[0])
jerr = max((J - x[0].softmax(-1)).abs().max().item(), (Jf - J).abs().max().item())
print("jacrev / jacfwd agree:", jerr < 1e-12, tuple(J.shape))
vm = vmap(LogSumExp.apply)(x)
print("vmap with generated rule:", torch.allclose(vm, ref))
per_row = vmap(grad(lambda r: LogSumExp.apply(r)))(x)
print("vmap(grad):", torch.allclose(per_row, x.softmax(-1)))
p, t = jvp(LogSumExp.apply, (x,), (torch.ones_like(x),))
print("func.jvp with ones tangent == 1:", torch.allclose(t, torch.ones(4)))
with fwAD.dual_level():
    dual = fwAD.make_dual(x, torch.eye(5)[0].expand(4, 5))
    out = LogSumExp.apply(dual)
    tangent = fwAD.unpack_dual(out).tangent
print("forward AD tangent == softmax[:, 0]:", torch.allclose(tangent, x.softmax(-1)[:, 0]))

xr = x.clone().requires_grad_(True)
v, i = ArgmaxWithValue.apply(xr)
print("argmax requires_grad:", v.requires_grad, i.requires_grad, i.dtype, "needs_input_grad", seen_needs)
v.sum().backward()
print("grad hits the argmax:", torch.equal(xr.grad.argmax(-1), i), xr.grad.sum().item())

cl = vmap(lambda r: Clip.apply(r, -0.5, 0.5))(x)
print("custom vmap rule:", torch.allclose(cl, x.clamp(-0.5, 0.5)))
xr = x.clone().requires_grad_(True)
Clip.apply(xr, -0.5, 0.5).sum().backward()
print("straight-through grad:", torch.equal(xr.grad, torch.ones_like(x)))

a = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([3.0], requires_grad=True)
sq, tw = Square.apply(a, b)
sq.sum().backward()
print("materialize_grads(False): a.grad", a.grad.tolist(), "b.grad", b.grad)
sq, tw = Square.apply(a, b)
gg = torch.autograd.grad(sq.sum(), a, create_graph=True)[0]
print("once_differentiable: first-order grad", gg.tolist(), "requires_grad", gg.requires_grad)
xs = torch.from_numpy(rng.normal(0, 1, (3, 4))).requires_grad_(True)
print("gradcheck:", torch.autograd.gradcheck(LogSumExp.apply, (xs,)),
      "gradgradcheck:", torch.autograd.gradgradcheck(LogSumExp.apply, (xs,)))

# a softmax-regression model with per-sample gradients through the custom Function
W = torch.from_numpy(rng.normal(0, 0.1, (5, 3)))
data = torch.from_numpy(rng.normal(0, 1, (60, 5)))
labels = (data[:, 0] > 0).long() + (data[:, 1] > 0.5).long()


def loss_one(w, xi, yi):
    logits = xi @ w
    return LogSumExp.apply(logits) - logits.gather(0, yi.unsqueeze(0)).squeeze(0)


losses = []
for step in range(30):
    per_sample = vmap(grad(loss_one), in_dims=(None, 0, 0))(W, data, labels)  # (60, 5, 3)
    norms = per_sample.flatten(1).norm(dim=1)
    clipped = per_sample * (1.0 / norms.clamp(min=1.0))[:, None, None]  # DP-style clipping
    W = W - 0.5 * clipped.mean(0)
    loss = vmap(loss_one, in_dims=(None, 0, 0))(W, data, labels).mean()
    losses.append(loss.item())
    if step % 10 == 0:
        print(f"step {step:2d} loss {loss.item():.6f} max per-sample norm {norms.max().item():.4f}")
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {jerr:.1e}")
torch.set_default_dtype(torch.float32)  # put back for whatever runs next
