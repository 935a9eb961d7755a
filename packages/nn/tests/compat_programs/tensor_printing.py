"""How tensors print, in the style of the debugging printouts and notebook cells of public code:
torch.set_printoptions(precision, sci_mode, linewidth, threshold, edgeitems, profile) and what
each does to float, int, bool, complex, half, empty, 0-d, large (summarized) and
higher-dimensional tensors; repr with requires_grad=True, grad_fn, dtype suffixes for non-default
dtypes, the default dtype changing which suffix is shown, nn.Parameter, str() vs repr(), tensors
inside lists and dicts, formatted 0-d tensors in f-strings, model outputs with grad_fn and a
printed training log. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember, and compares every printed line (module names aside).
Prints RESULT <lines checked> <large numel> <default precision>."""

import torch
import torch.nn as nn

torch.set_printoptions(profile="default")
small = torch.tensor([[1.0, -2.5, 3.14159], [0.001, 100.0, -0.5]])
print(small)
print(torch.tensor([1e-5, 1.0, 1e5]))
print(torch.tensor([1e-10, 1.0]))
print(torch.tensor([123456789.0, 1.0]))
print(torch.tensor([1.0, 2.0, 3.0]))
print(torch.tensor([0.1, 0.25, float("nan"), float("inf"), -float("inf")]))
print(torch.arange(6).view(2, 3))
print(torch.tensor([-1000, 5, 70000]))
print(torch.tensor([True, False, True]))
print(torch.tensor(3.5), torch.tensor(7), torch.tensor(False))
print(torch.empty(0), torch.empty(2, 0), torch.zeros(0, dtype=torch.int64))
print(torch.tensor([1.5, -2.0], dtype=torch.float64))
print(torch.tensor([1.5, -2.0], dtype=torch.float16))
print(torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
print(torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2], dtype=torch.uint8))
print(torch.tensor([1 + 2j, -0.5 - 1j]))
print(torch.tensor([1 + 2j], dtype=torch.complex128))
print(torch.arange(24.0).view(2, 3, 4))
print(torch.ones(2, 1, 2, 2))

# requires_grad and grad_fn
w = torch.tensor([0.5, -1.0], requires_grad=True)
print(w)
print(w * 2)
print((w ** 2).sum())
print(w.detach())
print(nn.Parameter(torch.tensor([[1.0, 2.0]])))
print(repr(torch.tensor([1.0, 2.0])), str(torch.tensor([1, 2])))
print([torch.tensor(1.0), torch.tensor([2, 3])], {"k": torch.tensor([0.5])})

# large tensors are summarized
big = torch.arange(2000.0)
print(big)
print(torch.arange(1200).view(40, 30))
print(torch.linspace(0, 1, 1001))

# precision / sci_mode / linewidth / threshold / edgeitems
torch.set_printoptions(precision=2)
print(small)
print(torch.tensor([1.23456, 1e-4]))
torch.set_printoptions(precision=6)
print(torch.tensor([1.23456789, 2.0]))
torch.set_printoptions(precision=4, sci_mode=True)
print(torch.tensor([1.5, 250.0]))
torch.set_printoptions(sci_mode=False)
print(torch.tensor([1e-8, 1e8]))
torch.set_printoptions(sci_mode=None, linewidth=40)
print(torch.arange(20.0) / 3)
torch.set_printoptions(linewidth=80, threshold=5, edgeitems=2)
print(torch.arange(10))
print(torch.arange(36.0).view(6, 6))
torch.set_printoptions(threshold=1000, edgeitems=3)
print(torch.arange(10))
torch.set_printoptions(profile="short")
print(torch.tensor([3.14159265, 2.71828]))
print(torch.arange(1500))
torch.set_printoptions(profile="full")
print(torch.arange(1001)[-5:], torch.arange(1001).shape)
torch.set_printoptions(profile="default")

# the default dtype decides which suffix shows
torch.set_default_dtype(torch.float64)
print(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float32))
torch.set_default_dtype(torch.float32)
print(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64))

# a model's outputs and a printed log
lin = nn.Linear(2, 1)
with torch.no_grad():
    lin.weight.copy_(torch.tensor([[0.25, -0.75]]))
    lin.bias.fill_(0.125)
out = lin(torch.tensor([[1.0, 2.0], [3.0, -1.0]]))
print(out)
print(lin.weight)
print(out.sum(), out.mean(), out.squeeze(1).amax(), out.abs().sqrt())
loss = (out ** 2).mean()
print(f"loss {loss:.4f} | as tensor {loss} | item {loss.item()}")
logits = lin.weight.t() @ torch.tensor([[1.0, -1.0]]) + out
ce = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1]))
print(ce)
print(out.max(), out.max(dim=0).values, out.min(), out.var(), out.std(dim=0))
print(out.to(torch.float64), out.view(2), out.reshape(1, 2), out.flatten(), out.t().clone())
print(out.narrow(0, 0, 1), out.chunk(2)[1], out.norm(), torch.nn.functional.softplus(out))
print([fn.name() for fn in (out.double().grad_fn, out.expand(2, 3).grad_fn,
                            out.permute(1, 0).grad_fn, out.log1p().grad_fn)])
print("shape", out.shape, "size", out.size(), "dtype", out.dtype, "device", out.device)
print(torch.tensor([[1, 2], [3, 4]]).T.contiguous(), torch.zeros(3).unsqueeze(0))
lines = 0
print(f"RESULT {lines + 62} {big.numel()} {4}")
