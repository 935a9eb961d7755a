"""Python custom operators with torch.library, in the style of the "Python Custom Operators"
tutorial and of libraries that wrap NumPy or hand-written kernels as ops: a numpy_sin op
(@torch.library.custom_op with mutates_args=(), a NumPy body) given a fake (meta) kernel with
register_fake and a gradient with register_autograd (setup_context saving inputs), called through
the decorated function and through torch.ops.<lib>.<name>; a mutating op (mutates_args={"out"})
that writes into a preallocated tensor; a fused bias + GELU op with a per-device kernel added by
register_kernel and its backward formula; the lower-level Library("...", "DEF") API: define a
schema string, impl kernels for "CPU" and "Meta", and a CompositeImplicitAutograd op that
autograd differentiates through; infer_schema of an annotated function; all of them inside a small
regression model trained with SGD whose loss must match the same model built from plain ops.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <max |custom - plain| grad>."""

import math

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor


# ---- a NumPy op with a fake kernel and a gradient ----
@torch.library.custom_op("c9lib::numpy_sin", mutates_args=())
def numpy_sin(x: Tensor) -> Tensor:
    x_np = x.detach().cpu().numpy()
    return torch.from_numpy(np.sin(x_np)).to(x.device)


@numpy_sin.register_fake
def _(x):
    return torch.empty_like(x)


def _sin_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos()


numpy_sin.register_autograd(_sin_backward, setup_context=_sin_setup)

x = torch.linspace(-2.0, 2.0, 9, requires_grad=True)
y = numpy_sin(x)
y.sum().backward()
print("numpy_sin", [round(v, 5) for v in y.tolist()[:4]],
      "grad == cos:", torch.allclose(x.grad, x.detach().cos()))
print("through torch.ops:", torch.equal(torch.ops.c9lib.numpy_sin(x.detach()), y.detach()),
      "default overload:", torch.equal(torch.ops.c9lib.numpy_sin.default(x.detach()),
                                       y.detach()))
meta = numpy_sin(torch.empty(3, 5, device="meta"))
print("on meta:", meta.device.type, tuple(meta.shape), meta.dtype)
print("gradcheck:", torch.autograd.gradcheck(numpy_sin, (torch.rand(5, dtype=torch.float64,
                                                                      requires_grad=True),)))


# ---- a mutating op ----
@torch.library.custom_op("c9lib::numpy_sin_out", mutates_args={"out"})
def numpy_sin_out(x: Tensor, out: Tensor) -> None:
    out.copy_(torch.from_numpy(np.sin(x.numpy())))


buf = torch.zeros(4)
ret = numpy_sin_out(torch.tensor([0.0, 0.5, 1.0, 1.5]), buf)
print("mutated in place:", ret is None, [round(v, 5) for v in buf.tolist()])


# ---- a fused op with a per-device kernel ----
@torch.library.custom_op("c9lib::bias_gelu", mutates_args=())
def bias_gelu(x: Tensor, bias: Tensor) -> Tensor:
    raise NotImplementedError("no kernel for this device")


calls = {"cpu": 0}


@bias_gelu.register_kernel("cpu")
def _(x, bias):
    calls["cpu"] += 1
    h = x + bias
    return 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))


@bias_gelu.register_fake
def _(x, bias):
    torch._check(x.shape[-1] == bias.shape[0], lambda: "bias size mismatch")
    return torch.empty_like(x)


def _bg_setup(ctx, inputs, output):
    x, bias = inputs
    ctx.save_for_backward(x, bias)


def _bg_backward(ctx, grad):
    x, bias = ctx.saved_tensors
    h = x + bias
    cdf = 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)
    g = grad * (cdf + h * pdf)
    return g, g.sum(dim=tuple(range(g.dim() - 1)))


bias_gelu.register_autograd(_bg_backward, setup_context=_bg_setup)

# ---- the Library API ----
lib = torch.library.Library("c9lib", "DEF")
lib.define("scaled_tanh(Tensor x, float scale) -> Tensor")
lib.define("softclip(Tensor x, float limit) -> Tensor")


def scaled_tanh_cpu(x, scale):
    return torch.tanh(x) * scale


def scaled_tanh_meta(x, scale):
    return torch.empty_like(x)


lib.impl("scaled_tanh", scaled_tanh_cpu, "CPU")
lib.impl("scaled_tanh", scaled_tanh_meta, "Meta")


def softclip(x, limit):  # made of differentiable ops: autograd goes through it
    return limit * torch.tanh(x / limit)


lib.impl("softclip", softclip, "CompositeImplicitAutograd")
print("scaled_tanh", [round(v, 5) for v in torch.ops.c9lib.scaled_tanh(
    torch.tensor([-1.0, 0.0, 2.0]), 3.0).tolist()],
      "meta", tuple(torch.ops.c9lib.scaled_tanh(torch.empty(2, 7, device="meta"), 1.0).shape))
z = torch.tensor([0.5, 3.0, -6.0], requires_grad=True)
torch.ops.c9lib.softclip(z, 2.0).sum().backward()
print("softclip grad", [round(v, 5) for v in z.grad.tolist()])
try:
    bias_gelu(torch.ones(2, 3), torch.ones(4))
except RuntimeError:
    print("shape check: RuntimeError")


def _annotated(x: Tensor, n: int, alpha: float = 1.0) -> Tensor:
    return x


print("schema", torch.library.infer_schema(_annotated, mutates_args=()))


# ---- training with the custom ops against the same model from plain ops ----
class CustomMLP(nn.Module):
    def __init__(self, plain):
        super().__init__()
        self.fc1 = nn.Linear(2, 16, bias=False)
        self.bias = nn.Parameter(torch.zeros(16))
        self.fc2 = nn.Linear(16, 1)
        self.plain = plain

    def forward(self, x):
        h = self.fc1(x)
        if self.plain:
            h = torch.nn.functional.gelu(h + self.bias)
            return self.fc2(torch.sin(h))
        h = bias_gelu(h, self.bias)
        return self.fc2(numpy_sin(h))


def make(plain):
    m = CustomMLP(plain)
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(0.6 * torch.cos(torch.arange(p.numel(), dtype=torch.float32) * (0.7 + i))
                    .view_as(p))
    return m


inputs = torch.stack([torch.linspace(-1, 1, 32), torch.linspace(1, -1, 32) ** 2], dim=1)
target = (inputs[:, :1] * 2).sin() + inputs[:, 1:]
custom, plain = make(False), make(True)
opt_c = torch.optim.SGD(custom.parameters(), lr=0.2, momentum=0.9)
opt_p = torch.optim.SGD(plain.parameters(), lr=0.2, momentum=0.9)
losses, worst = [], 0.0
for step in range(40):
    for model, opt in ((custom, opt_c), (plain, opt_p)):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        if model is custom:
            losses.append(loss.item())
    worst = max(worst, max((a.grad - b.grad).abs().max().item()
                           for a, b in zip(custom.parameters(), plain.parameters())))
    opt_c.step()
    opt_p.step()
print(f"loss {losses[0]:.5f} -> {losses[-1]:.5f}, custom == plain grads: {worst < 1e-4}")
print("cpu kernel calls", calls["cpu"])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {worst:.2e}")
