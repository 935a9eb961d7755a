"""The process-wide defaults, in the style of scientific code that switches to double precision
and of model-building code that allocates on the meta device first: torch.set_default_dtype /
get_default_dtype and what follows them (factories, torch.tensor of Python floats and complex
numbers, arange / linspace / full inference, nn layers' parameters, torch.get_default_dtype()
inside functions, type promotion of Python scalars with tensors, complex default), the
set_default_tensor_type spelling of old code, torch.set_default_device / get_default_device and
the torch.device context manager (factories and nn layers built on "meta", explicit device=
arguments winning, to_empty to materialize, then a real initialization), torch.device objects
(str, type, index, equality, as a context). Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <float64 fit error>
<meta params> <materialized params>."""

import math

import torch
import torch.nn as nn

print("start", torch.get_default_dtype(), torch.get_default_device())


def describe(label):
    t = torch.tensor([1.0, 2.0])
    print(label, "tensor", t.dtype, "zeros", torch.zeros(2).dtype, "arange(3.)",
          torch.arange(3.0).dtype, "arange(3)", torch.arange(3).dtype, "linspace",
          torch.linspace(0, 1, 3).dtype, "full(2, 1.5)", torch.full((2,), 1.5).dtype,
          "full(2, 7)", torch.full((2,), 7).dtype, "complex", torch.tensor([1j]).dtype,
          "randn", torch.randn(2).dtype, "int*float", (torch.ones(2, dtype=torch.int64) * 0.5)
          .dtype, "empty_like", torch.empty_like(torch.zeros(1, dtype=torch.float16)).dtype,
          "from int list", torch.tensor([1, 2]).dtype, "bool", torch.tensor([True]).dtype)


describe("float32:")
torch.set_default_dtype(torch.float64)
describe("float64:")
lin = nn.Linear(3, 2)
conv = nn.Conv1d(2, 2, 3)
bn = nn.BatchNorm1d(2)
emb = nn.Embedding(4, 3)
print("layers", lin.weight.dtype, conv.bias.dtype, bn.running_mean.dtype,
      bn.num_batches_tracked.dtype, emb.weight.dtype)
print("finfo default eps", torch.finfo().eps, "float32 eps", torch.finfo(torch.float32).eps)
print("python float promotion", (torch.arange(3) + 0.5).dtype,
      (torch.ones(2, dtype=torch.float32) + 0.5).dtype, torch.tensor(3.0).dtype)

# a float64 least-squares fit that float32 could not resolve
x = torch.linspace(0, 1, 50)
A = torch.stack([x ** k for k in range(8)], dim=1)
coef = torch.arange(1.0, 9.0)
y = A @ coef
sol = torch.linalg.lstsq(A, y.unsqueeze(1)).solution.squeeze(1)
fit_err = (sol - coef).abs().max().item()
print(f"float64 polynomial fit error < 1e-6: {fit_err < 1e-6}")
try:
    torch.set_default_dtype(torch.int64)
except TypeError:
    print("set_default_dtype(int64): TypeError")
torch.set_default_dtype(torch.float16)
print("half default:", torch.tensor([1.0]).dtype, torch.zeros(1).dtype,
      torch.arange(2.0).dtype, (torch.ones(1, dtype=torch.int32) / 2).dtype)
torch.set_default_dtype(torch.float32)
describe("back:")

# set_default_tensor_type, as old scripts write it
import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.set_default_tensor_type(torch.DoubleTensor)
    print("set_default_tensor_type(DoubleTensor):", torch.get_default_dtype(),
          torch.zeros(1).dtype)
    torch.set_default_tensor_type(torch.FloatTensor)
print("and back:", torch.get_default_dtype())

# ---- default devices ----
d = torch.device("cpu")
print("device", d, repr(d), d.type, d.index, d == torch.device("cpu"), torch.device("cpu", 0),
      torch.device("meta").type, str(torch.device("cuda:1")), torch.device("cuda", 1).index)
torch.set_default_device("meta")
print("default device meta:", torch.get_default_device(), torch.zeros(3).device.type,
      torch.tensor([1.0]).device.type, torch.arange(4).device.type,
      torch.zeros(3, device="cpu").device.type)
big = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
n_meta = sum(p.numel() for p in big.parameters())
print("model on meta:", {p.device.type for p in big.parameters()}, "params", n_meta,
      "is_meta", big[0].weight.is_meta)
torch.set_default_device(None)
print("reset:", torch.get_default_device(), torch.zeros(1).device.type)

with torch.device("meta"):
    layer = nn.Linear(8, 4)
    inside = torch.empty(2).device.type
print("torch.device context:", layer.weight.device.type, inside, "after",
      torch.empty(2).device.type)
out_meta = layer(torch.empty(5, 8, device="meta"))
print("meta forward shape", tuple(out_meta.shape), out_meta.device.type)

# materialize on the CPU and initialize for real
big.to_empty(device="cpu")
print("to_empty:", {p.device.type for p in big.parameters()}, big[0].weight.shape)
with torch.no_grad():
    for m in big.modules():
        if isinstance(m, nn.Linear):
            fan_in = m.weight.shape[1]
            m.weight.copy_(torch.cos(torch.arange(m.weight.numel(), dtype=torch.float32))
                           .view_as(m.weight) / math.sqrt(fan_in))
            m.bias.zero_()
n_cpu = sum(p.numel() for p in big.parameters())
res = big(torch.ones(2, 512))
print("materialized forward", tuple(res.shape), f"{res.sum().item():.5f}", res.dtype)
layer.to_empty(device="cpu")
layer.reset_parameters()
print("reset_parameters after to_empty:", layer.weight.device.type, layer.weight.is_meta,
      bool(torch.isfinite(layer.weight).all()))

with torch.device("cpu"):
    print("cpu context:", torch.zeros(1).device)
torch.set_default_device("cpu")
print("set_default_device('cpu'):", torch.get_default_device(), torch.ones(1).device)
torch.set_default_device(None)
print(f"RESULT {fit_err:.3e} {n_meta} {n_cpu}")
