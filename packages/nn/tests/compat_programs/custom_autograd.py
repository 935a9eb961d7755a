"""Custom autograd Functions, in the style of the public PyTorch tutorials ("Defining new
autograd functions", "Extending PyTorch", "Double backward with custom functions"): a Legendre
polynomial fit with a hand-written backward, a LinearFunction module with ctx.needs_input_grad,
a function with a non-tensor argument, mark_non_differentiable outputs, ctx.mark_dirty in-place,
once_differentiable, the separate setup_context style, double backward through a custom
backward, gradcheck / gradgradcheck in float64, and autograd.grad with create_graph.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <a> <b> <c> <d>."""

import math

import torch
from torch.autograd import Function, gradcheck, gradgradcheck
from torch.autograd.function import once_differentiable


class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = (5x^3 - 3x) / 2."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


dtype = torch.float
device = torch.device("cpu")
# y = sin(x) fit by y = a + b * P3(c + d * x)
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)
a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

learning_rate = 5e-6
losses = []
for t in range(600):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    losses.append(loss.item())
    if t % 100 == 99:
        print(t, loss.item())
    loss.backward()
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None
print(f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class Linear(torch.nn.Module):
    def __init__(self, input_features, output_features, bias=True):
        super().__init__()
        self.input_features = input_features
        self.output_features = output_features
        self.weight = torch.nn.Parameter(torch.empty(output_features, input_features))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(output_features))
        else:
            self.register_parameter("bias", None)
        self.weight.data.uniform_(-0.1, 0.1)
        if self.bias is not None:
            self.bias.data.uniform_(-0.1, 0.1)

    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias)

    def extra_repr(self):
        return "input_features={}, output_features={}, bias={}".format(
            self.input_features, self.output_features, self.bias is not None)


class MulConstant(Function):
    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None  # no gradient for the constant


class SortWithIndices(Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx

    @staticmethod
    def backward(ctx, g, g_idx):
        idx, = ctx.saved_tensors
        grad = torch.zeros_like(g)
        grad.scatter_(0, idx, g)
        return grad


class ExpInplace(Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class Cube(Function):
    """x^3 in the setup_context style, with a backward that is itself differentiable."""

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return grad_out * 3 * x ** 2


torch.manual_seed(0)
lin = Linear(5, 3)
print(lin)
inp = (torch.randn(4, 5, dtype=torch.double, requires_grad=True),
       torch.randn(3, 5, dtype=torch.double, requires_grad=True),
       torch.randn(3, dtype=torch.double, requires_grad=True))
print("gradcheck LinearFunction:", gradcheck(LinearFunction.apply, inp, eps=1e-6, atol=1e-4))
print("gradcheck LinearFunction without bias:",
      gradcheck(LinearFunction.apply, inp[:2], eps=1e-6, atol=1e-4))
out = lin(torch.randn(2, 5))
out.sum().backward()
assert lin.weight.grad.shape == (3, 5) and lin.bias.grad.shape == (3,)
# only the weight needs a gradient: needs_input_grad says so
xin = torch.randn(2, 5)
w = torch.randn(3, 5, requires_grad=True)
LinearFunction.apply(xin, w).pow(2).sum().backward()
assert torch.allclose(w.grad, 2 * (xin @ w.t()).t() @ xin)

v = torch.tensor([1.0, 2.0], requires_grad=True)
MulConstant.apply(v, 3.0).sum().backward()
print("MulConstant grad:", v.grad.tolist())

s = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
vals, idx = SortWithIndices.apply(s)
assert not idx.requires_grad and vals.requires_grad
(vals * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
print("sorted", vals.tolist(), idx.tolist(), "grad", s.grad.tolist())

e = torch.zeros(3, requires_grad=True)
h = e * 1.0
r = ExpInplace.apply(h)
assert r is h
r.sum().backward()
print("exp_ grad:", e.grad.tolist())
try:
    g1, = torch.autograd.grad(ExpInplace.apply(e * 1.0).sum(), e, create_graph=True)
    g1.sum().backward()
    print("double backward through once_differentiable: no error")
except RuntimeError as err:
    print("double backward through once_differentiable refused:", "once_differentiable" in str(err))

xc = torch.tensor([0.5, -1.0, 2.0], dtype=torch.double, requires_grad=True)
gx, = torch.autograd.grad(Cube.apply(xc).sum(), xc, create_graph=True)
ggx, = torch.autograd.grad(gx.sum(), xc)
print("cube grad", gx.tolist(), "second", ggx.tolist())
print("gradcheck Cube:", gradcheck(Cube.apply, (xc,)), "gradgradcheck Cube:",
      gradgradcheck(Cube.apply, (xc,)))
print("gradcheck P3:", gradcheck(LegendrePolynomial3.apply, (xc,)))
jac = torch.autograd.functional.jacobian(lambda t: Cube.apply(t), xc.detach())
assert torch.allclose(jac, torch.diag(3 * xc.detach() ** 2))
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {a.item():.6f} {b.item():.6f} {c.item():.6f} "
      f"{d.item():.6f}")
