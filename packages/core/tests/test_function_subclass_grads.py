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
