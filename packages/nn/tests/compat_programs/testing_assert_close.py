"""torch.testing as test suites of public projects use it: assert_close with the default
per-dtype tolerances (float16 / bfloat16 / float32 / float64, integers exact), explicit rtol /
atol, equal_nan, check_dtype / check_device / check_stride / check_layout, Python scalars,
sequences and mappings of tensors (with the failing index or key in the message), msg as a
string or a callable, the full AssertionError messages (mismatched elements, greatest absolute
and relative differences and their indices, shape / dtype mismatches), and
torch.testing.make_tensor for random test inputs (ranges, dtypes, low / high, exclude_zero,
noncontiguous). A layer's gradients are checked against finite differences with assert_close,
as in an op test. Written against `torch`; the test suite runs it unchanged on torch and,
through an import shim, on ember. Prints RESULT <checks passed> <errors caught> <grad error>."""

import math

import torch
from torch.testing import assert_close, make_tensor

passed, caught = 0, 0


def expect_pass(label, *args, **kwargs):
    global passed
    assert_close(*args, **kwargs)
    passed += 1
    print("pass:", label)


def expect_fail(label, *args, **kwargs):
    global caught
    try:
        assert_close(*args, **kwargs)
    except (AssertionError, TypeError, ValueError) as e:
        caught += 1
        lines = [ln.rstrip() for ln in str(e).splitlines() if ln.strip()]
        print(f"fail: {label}: {type(e).__name__}")
        for ln in lines:
            print("   |", ln)
    else:
        print("UNEXPECTED pass:", label)


a = torch.tensor([1.0, 2.0, 3.0])
expect_pass("identical", a, a.clone())
expect_pass("float32 within default tol", a, a + 1e-6)
expect_fail("float32 beyond default tol", a, a + torch.tensor([0.0, 1e-3, 0.0]))
expect_fail("two mismatches", a, torch.tensor([1.5, 2.0, 2.0]))
expect_pass("rtol/atol loosened", a, a + 0.01, rtol=0, atol=0.02)
expect_fail("only rtol given", a, a, rtol=1e-3)
expect_pass("float64 tight", torch.tensor([1.0], dtype=torch.float64),
            torch.tensor([1.0 + 1e-8], dtype=torch.float64))
expect_fail("float64 beyond", torch.tensor([1.0, 5.0], dtype=torch.float64),
            torch.tensor([1.0, 5.001], dtype=torch.float64))
expect_pass("float16 loose", torch.tensor([1.0], dtype=torch.float16),
            torch.tensor([1.0005], dtype=torch.float16))
expect_pass("bfloat16 looser", torch.tensor([1.0], dtype=torch.bfloat16),
            torch.tensor([1.007], dtype=torch.bfloat16))
expect_fail("int exact", torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))
expect_fail("bool", torch.tensor([True, False]), torch.tensor([True, True]))
expect_fail("nan by default", torch.tensor([1.0, math.nan]), torch.tensor([1.0, math.nan]))
expect_pass("equal_nan", torch.tensor([1.0, math.nan]), torch.tensor([1.0, math.nan]),
            equal_nan=True)
expect_fail("inf vs large", torch.tensor([math.inf]), torch.tensor([1e38]))
expect_fail("shape", torch.zeros(2, 3), torch.zeros(3, 2))
expect_fail("dtype", torch.zeros(2), torch.zeros(2, dtype=torch.float64))
expect_pass("dtype unchecked", torch.zeros(2), torch.zeros(2, dtype=torch.float64),
            check_dtype=False)
expect_fail("stride", torch.zeros(2, 3), torch.zeros(3, 2).t(), check_stride=True)
expect_pass("stride unchecked", torch.zeros(2, 3), torch.zeros(3, 2).t())
expect_fail("2-d mismatch", torch.arange(12.0).view(3, 4),
            torch.arange(12.0).view(3, 4) + torch.eye(3, 4) * 0.5)
expect_pass("python scalars", 1.0, 1.0 + 1e-9)
expect_fail("python scalars far", 1.0, 1.1)
expect_fail("int scalars", 3, 4)
expect_fail("tensor vs scalar", torch.tensor(1.0), 1.0)
expect_pass("sequence", [a, torch.tensor(2)], [a.clone(), torch.tensor(2)])
expect_fail("sequence item", [a, a], [a, a * 2])
expect_fail("sequence length", [a, a], [a])
expect_fail("mapping", {"w": a, "b": torch.zeros(1)}, {"w": a, "b": torch.ones(1)})
expect_fail("mapping keys", {"w": a}, {"v": a})
expect_fail("msg string", a, a + 1, msg="weights drifted")
expect_fail("msg callable", a, a + 1, msg=lambda m: f"layer 3: {m.splitlines()[0]}")
expect_fail("type mismatch", a, a.numpy())
expect_pass("complex", torch.tensor([1 + 1j]), torch.tensor([1 + 1j + 1e-7]))
expect_fail("complex far", torch.tensor([1 + 1j, 2j]), torch.tensor([1 + 1.5j, 2j]))

# ---- make_tensor ----
g = make_tensor((3, 4), dtype=torch.float32, device="cpu", low=-2, high=2)
print("make_tensor float", tuple(g.shape), g.dtype, bool((g >= -2).all() and (g <= 2).all()))
i = make_tensor((50,), dtype=torch.int64, device="cpu", low=0, high=5)
print("make_tensor int", i.dtype, bool((i >= 0).all() and (i < 5).all()))
nz = make_tensor((100,), dtype=torch.float32, device="cpu", exclude_zero=True)
print("exclude_zero", bool((nz != 0).all()))
nc = make_tensor((4, 5), dtype=torch.float64, device="cpu", noncontiguous=True)
print("noncontiguous", nc.is_contiguous(), tuple(nc.shape), nc.dtype)
b = make_tensor((6,), dtype=torch.bool, device="cpu")
print("bool", b.dtype, "requires_grad", make_tensor((2,), dtype=torch.float32, device="cpu",
                                                    requires_grad=True).requires_grad)
c = make_tensor((3,), dtype=torch.complex64, device="cpu", low=-1, high=1)
print("complex", c.dtype, bool((c.real.abs() <= 1).all() and (c.imag.abs() <= 1).all()))

# ---- an op test: a layer's gradients against central differences ----
layer = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Softplus())
layer = layer.double()
with torch.no_grad():
    for k, p in enumerate(layer.parameters()):
        p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float64) + k).view_as(p))
x = torch.linspace(-1, 1, 8, dtype=torch.float64).view(2, 4)
layer(x).pow(2).sum().backward()
numeric = torch.zeros_like(layer[0].weight)
eps = 1e-6
with torch.no_grad():
    w = layer[0].weight
    for r in range(w.shape[0]):
        for col in range(w.shape[1]):
            w[r, col] += eps
            up = layer(x).pow(2).sum()
            w[r, col] -= 2 * eps
            down = layer(x).pow(2).sum()
            w[r, col] += eps
            numeric[r, col] = (up - down) / (2 * eps)
err = (numeric - layer[0].weight.grad).abs().max().item()
assert_close(layer[0].weight.grad, numeric, rtol=1e-5, atol=1e-7)
print("finite differences agree:", err < 1e-6)
print(f"RESULT {passed} {caught} {err:.1e}")
