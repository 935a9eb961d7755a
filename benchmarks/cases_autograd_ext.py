"""Autograd extension points: a custom Function's forward+backward and Python hooks in backward.

Both run Python inside the C++ engine (which takes the GIL only for it); the cost measured is
that hand-off on tiny tensors. No targets: the ratios are for information.
"""

from __future__ import annotations

from harness import Stmt, case

TINY = 8


def _cube(fw):
    class Cube(fw.mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    return Cube


@case("autograd/custom_function", unit="us", check=False,
      doc="Cube.apply(x).sum().backward(): a custom Function, 8 float32")  # fmt: skip
def _custom_function(fw):
    x = fw.randn(TINY).requires_grad_()
    return Stmt("Cube.apply(x).sum().backward()", Cube=_cube(fw), x=x)


@case("autograd/tensor_hooks", unit="us", check=False,
      doc="(x * y) with a Python hook on it and on the leaf x, .sum().backward(), 8 float32")  # fmt: skip
def _tensor_hooks(fw):
    x = fw.randn(TINY, seed=1).requires_grad_()
    x.register_hook(lambda g: None)
    y = fw.randn(TINY, seed=2)

    def step():
        h = x * y
        h.register_hook(lambda g: g * 2)
        h.sum().backward()

    return Stmt("step()", step=step)
