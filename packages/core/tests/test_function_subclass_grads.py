"""A gradient that is a __torch_dispatch__ subclass instance (a DTensor, say) returned by one
custom autograd.Function's backward reaches the next Function's backward as that same object
(its attributes intact), not as a bare tensor of its metadata."""

from __future__ import annotations

import ember
from ember.utils._pytree import tree_map


def _classes() -> tuple:
    """Made inside the test: defining a __torch_dispatch__ subclass turns ember's dispatch hook
    on for the whole process."""
    seen: list = []

    class Boxed(ember.Tensor):
        """A wrapper carrying its data in .inner (as DTensor carries its local piece)."""

        __torch_function__ = ember._C._disabled_torch_function_impl

        @staticmethod
        def __new__(cls, inner: ember.Tensor) -> "Boxed":
            t = ember.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype,
                                                    device=inner.device)
            t.inner = inner
            return t

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            unwrap = lambda a: a.inner if isinstance(a, Boxed) else a  # noqa: E731
            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
            return tree_map(lambda o: Boxed(o) if isinstance(o, ember.Tensor) else o, out)


    class Unbox(ember.autograd.Function):
        @staticmethod
        def forward(ctx, b):
            return b.inner.clone()

        @staticmethod
        def backward(ctx, g):
            return Boxed(g * 10)  # a subclass gradient, which no Python name keeps alive


    class Box(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return Boxed(x.detach().clone())

        @staticmethod
        def backward(ctx, g):
            seen.append((type(g).__name__, hasattr(g, "inner")))
            return g.inner + 1

    return Box, Unbox, seen


def test_subclass_gradient_survives_between_python_backwards():
    Box, Unbox, seen = _classes()  # noqa: N806
    x = ember.ones(3, requires_grad=True)
    Unbox.apply(Box.apply(x)).sum().backward()
    assert seen == [("Boxed", True)]
    assert x.grad.tolist() == [11.0, 11.0, 11.0]


def test_subclass_gradient_survives_a_node_hook_that_returns_it():
    # a node post-hook returning the gradients it got (as nn.Module's full backward hooks do)
    # must hand the next backward the subclass instance, not a bare tensor of its metadata
    Box, Unbox, seen = _classes()  # noqa: N806
    x = ember.ones(3, requires_grad=True)
    boxed = Box.apply(x)
    out = Unbox.apply(boxed)
    out.grad_fn.register_hook(lambda grad_inputs, grad_outputs: tuple(grad_inputs))
    out.sum().backward()
    assert seen == [("Boxed", True)]
    assert x.grad.tolist() == [11.0, 11.0, 11.0]


def test_subclass_gradient_survives_a_tensor_hook_that_returns_it():
    Box, Unbox, seen = _classes()  # noqa: N806
    x = ember.ones(3, requires_grad=True)
    boxed = Box.apply(x)
    boxed.register_hook(lambda g: Boxed_like(g))
    Unbox.apply(boxed).sum().backward()
    assert seen == [("Boxed", True)]
    assert x.grad.tolist() == [21.0, 21.0, 21.0]


def Boxed_like(g):  # noqa: N802
    """A new instance of g's subclass holding twice its data (no Python name keeps it)."""
    return type(g)(g.inner * 2)
