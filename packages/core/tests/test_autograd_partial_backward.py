"""autograd.grad(inputs=) and backward(inputs=) compute only the gradients that lead to the
inputs asked for (as PyTorch's engine): a layer's weight gradient is not computed when only the
input's is wanted, and the other way round. Counted with a dispatch mode over the ops the
backward runs; the values are checked against full backward passes."""

from __future__ import annotations

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:
    torch = None


def _backward_ops(M, fn):
    from importlib import import_module

    mode_mod = import_module(f"{M.__name__}.utils._python_dispatch")

    class Count(mode_mod.TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    with Count() as c:
        out = fn()
    return sorted(n for n in c.names if n in ("mm", "addmm", "bmm", "convolution_backward",
                                               "sum", "t")), out


def _linear_case(M, wrt):
    rng = np.random.default_rng(0)
    x = M.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    w = M.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    b = M.tensor(rng.standard_normal(3), requires_grad=True)
    y = (M.nn.functional.linear(x, w, b) ** 2).sum()
    inputs = {"x": [x], "w": [w], "b": [b], "xw": [x, w]}[wrt]
    return _backward_ops(M, lambda: M.autograd.grad(y, inputs))


@pytest.mark.parametrize("wrt", ["x", "w", "b", "xw"])
def test_linear_computes_only_what_is_asked(wrt):
    ops, grads = _linear_case(ember, wrt)
    mms = [n for n in ops if n in ("mm", "addmm")]
    assert len(mms) == {"x": 1, "w": 1, "b": 0, "xw": 2}[wrt], ops
    if torch is not None:
        tops, tgrads = _linear_case(torch, wrt)
        assert len(mms) == len([n for n in tops if n in ("mm", "addmm")])
        for g, t in zip(grads, tgrads):
            np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12)


def test_values_equal_full_backward():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((2, 3, 8, 8)), requires_grad=True)
    conv = ember.nn.Conv2d(3, 4, 3).double()
    lin = ember.nn.Linear(4 * 6 * 6, 2).double()
    y = lin(ember.tanh(conv(x)).flatten(1)).pow(2).sum()
    full = ember.autograd.grad(y, [x, conv.weight, lin.weight], retain_graph=True)
    for i, t in enumerate([x, conv.weight, lin.weight]):
        (g,) = ember.autograd.grad(y, [t], retain_graph=True)
        np.testing.assert_allclose(g.numpy(), full[i].numpy(), rtol=1e-12)
    # backward(inputs=) accumulates only into the tensors named
    y.backward(inputs=[conv.weight], retain_graph=True)
    assert x.grad is None and lin.weight.grad is None and conv.bias.grad is None
    np.testing.assert_allclose(conv.weight.grad.numpy(), full[1].numpy(), rtol=1e-12)


def test_non_leaf_input_and_nested_grad():
    # a non-leaf input (its grad_fn's incoming gradient) and a custom Function whose backward
    # runs autograd.grad itself: the outer run's mask must not leak into the inner one
    class Square(ember.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            with ember.enable_grad():
                a2 = a.detach().requires_grad_()
                w2 = ember.tensor([3.0], dtype=a.dtype, requires_grad=True)
                inner = ember.autograd.grad((a2 * w2).sum(), [a2, w2])
            assert inner[1].item() == a.sum().item()
            return g * 2 * a * inner[0] / 3.0

    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    w = ember.tensor([0.5, -1.0], dtype=ember.float64, requires_grad=True)
    h = x * w
    y = Square.apply(h).sum()
    (gh,) = ember.autograd.grad(y, [h], retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), 2 * (x * w).detach().numpy())
    (gw,) = ember.autograd.grad(y, [w])
    np.testing.assert_allclose(gw.numpy(), (2 * x * x * w).detach().numpy())
