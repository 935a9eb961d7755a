"""Extending torch with __torch_function__, in the style of the "Extending torch with a
Tensor-like type" tutorial and the metadata-carrying subclasses of public libraries: a
ScalarTensor duck type (not a Tensor) with a HANDLED_FUNCTIONS table filled by an @implements
decorator, a torch.Tensor subclass that carries a physical unit through arithmetic and
reductions, a LoggingTensor that records every call it sees and keeps its type through a small
training loop (nn.Linear, F.relu, mse_loss, backward, optimizer step), torch.overrides helpers
(has_torch_function, handle_torch_function in a function that accepts tensor-likes,
is_tensor_like, is_tensor_method_or_property, resolve_name, wrap_torch_function,
get_ignored_functions / get_overridable_functions membership), a TorchFunctionMode that counts
the functions a forward pass calls, torch._C.DisableTorchFunctionSubclass, and as_subclass.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first loss> <last loss> <logged calls>."""

import collections
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import (
    TorchFunctionMode,
    handle_torch_function,
    has_torch_function,
    is_tensor_like,
    is_tensor_method_or_property,
    resolve_name,
    wrap_torch_function,
)

# ---- a duck type: ScalarTensor stands for N * I (the tutorial's example) ----
HANDLED_FUNCTIONS = {}


def implements(torch_function):
    """Registers a __torch_function__ implementation for ScalarTensor."""
    def decorator(func):
        functools.update_wrapper(func, torch_function)
        HANDLED_FUNCTIONS[torch_function] = func
        return func
    return decorator


class ScalarTensor:
    def __init__(self, N, value):
        self._N = N
        self._value = value

    def __repr__(self):
        return f"ScalarTensor(N={self._N}, value={self._value})"

    def tensor(self):
        return self._value * torch.eye(self._N)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func not in HANDLED_FUNCTIONS or not all(
                issubclass(t, (torch.Tensor, ScalarTensor)) for t in types):
            return NotImplemented
        return HANDLED_FUNCTIONS[func](*args, **kwargs)


@implements(torch.mean)
def mean(input):
    return float(input._value) / input._N


@implements(torch.add)
def add(input, other):
    if isinstance(input, ScalarTensor) and isinstance(other, ScalarTensor):
        if input._N != other._N:
            raise ValueError("shape mismatch")
        return ScalarTensor(input._N, input._value + other._value)
    if isinstance(other, ScalarTensor):
        input, other = other, input
    return input.tensor() + other


s = ScalarTensor(5, 2)
print("duck type:", s, "mean", torch.mean(s), "is_tensor_like", is_tensor_like(s))
print("add two:", torch.add(s, ScalarTensor(5, 3)))
print("add a tensor:", torch.add(s, torch.ones(5, 5)).diagonal().tolist())
try:
    torch.sum(s)
except TypeError as e:
    print("unhandled function: TypeError", "torch.sum" in str(e) or "sum" in str(e))
print("has_torch_function", has_torch_function((s,)), has_torch_function((torch.ones(1),)))


# ---- a function that accepts tensor-likes through handle_torch_function ----
def scaled_sum(x, scale=1.0):
    if has_torch_function((x,)):
        return handle_torch_function(scaled_sum, (x,), x, scale=scale)
    return (x * scale).sum()


@implements(scaled_sum)
def _scaled_sum_scalar(x, scale=1.0):
    return x._N * x._value * scale


print("scaled_sum tensor", scaled_sum(torch.arange(4.0), 0.5).item(),
      "scalar tensor", scaled_sum(ScalarTensor(3, 4), 2.0))


@wrap_torch_function(lambda x, y=None: (x, y))
def hypot_sum(x, y=None):
    return torch.sqrt(x * x + y * y).sum()


@implements(hypot_sum)
def _hypot_scalar(x, y=None):
    return "ScalarTensor hypot_sum"


print("wrap_torch_function:", hypot_sum(torch.tensor([3.0]), torch.tensor([4.0])).item(),
      hypot_sum(ScalarTensor(2, 1), torch.ones(1)))


# ---- a subclass carrying a unit ----
class UnitTensor(torch.Tensor):
    """A tensor with a physical unit that survives elementwise ops and reductions."""

    @staticmethod
    def __new__(cls, data, unit=""):
        t = torch.as_tensor(data).as_subclass(cls)
        t.unit = unit
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        units = {a.unit for a in args if isinstance(a, UnitTensor)}
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.sub,
                    torch.Tensor.__sub__) and len(units) > 1:
            raise ValueError(f"unit mismatch {sorted(units)}")
        out = super().__torch_function__(func, types, args, kwargs)
        if isinstance(out, UnitTensor):
            if func in (torch.mul, torch.Tensor.mul, torch.Tensor.__mul__) and len(units) == 1 \
                    and all(isinstance(a, UnitTensor) for a in args[:2]):
                out.unit = f"{units.pop()}^2"
            else:
                out.unit = units.pop() if units else ""
        return out


d = UnitTensor([1.0, 2.0, 4.0], "m")
t = UnitTensor([2.0, 2.0, 2.0], "s")
speed = d / t
print("unit tensor:", type(speed).__name__, speed.tolist(), repr(d.unit))
total = d.sum()
print("sum keeps the subclass:", type(total).__name__, total.unit, total.item())
print("mul by itself:", (d * d).unit, "slice:", type(d[1:]).__name__, d[1:].unit)
try:
    d + t
except ValueError as e:
    print("unit mismatch:", e)
print("plain ops on .as_subclass(Tensor):", type(d.as_subclass(torch.Tensor) * 2).__name__)
print("isinstance", isinstance(d, torch.Tensor), "is_tensor", torch.is_tensor(d),
      "is_tensor_like", is_tensor_like(d))
with torch._C.DisableTorchFunctionSubclass():
    print("DisableTorchFunctionSubclass:", type(d + 1).__name__)

print("torch.cat of subclasses:", type(torch.cat([d, d])).__name__, torch.cat([d, d]).shape)


# ---- a logging subclass through a training loop ----
class LoggingTensor(torch.Tensor):
    log = collections.Counter()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.log[getattr(func, "__name__", str(func))] += 1
        return super().__torch_function__(func, types, args, kwargs or {})


model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
with torch.no_grad():  # a deterministic start (the libraries' random streams differ)
    for i, p in enumerate(model.parameters()):
        p.copy_(0.5 * torch.sin(torch.arange(p.numel(), dtype=torch.float32) * (i + 1.3))
                .view_as(p))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.linspace(-1, 1, 48).view(16, 3)
y = (x ** 2).sum(dim=1, keepdim=True)
xs = x.as_subclass(LoggingTensor)
losses = []
for step in range(60):
    out = model(xs)
    loss = F.mse_loss(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print("output type", type(out).__name__, "loss type", type(loss).__name__)
print(f"losses {losses[0]:.5f} -> {losses[-1]:.5f}")
names = sorted(k for k in LoggingTensor.log if k in ("linear", "mse_loss", "relu", "backward"))
print("logged", names)
print("linear calls", LoggingTensor.log["linear"], "mse calls", LoggingTensor.log["mse_loss"])
print("params stay plain:", all(type(p) is nn.Parameter for p in model.parameters()))


# ---- a TorchFunctionMode counting the ops of a forward pass ----
class CountingMode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.counts[getattr(func, "__name__", "?")] += 1
        return func(*args, **(kwargs or {}))


with CountingMode() as mode:
    h = torch.tanh(torch.ones(2, 3) @ torch.ones(3, 2))
    h = h.sum() + F.softmax(h, dim=-1).max()
print("mode saw", sorted(mode.counts), "value", round(h.item(), 5))
with CountingMode() as mode:
    model(x)
print("model forward under the mode:", mode.counts["linear"], "linear", mode.counts["relu"],
      "relu")

print("is_tensor_method_or_property", is_tensor_method_or_property(torch.Tensor.add),
      is_tensor_method_or_property(torch.add))
print("resolve_name", resolve_name(torch.add), resolve_name(torch.Tensor.add),
      resolve_name(F.relu))
ignored = torch.overrides.get_ignored_functions()
overridable = torch.overrides.get_overridable_functions()
print("ignored: is_tensor", torch.is_tensor in ignored, "add", torch.add in ignored)
print("overridable: add", torch.add in overridable[torch],
      "F.relu", F.relu in overridable[torch.nn.functional])
print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {LoggingTensor.log['linear']}")
