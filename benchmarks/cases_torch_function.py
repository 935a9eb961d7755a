"""Per-call overhead of the __torch_function__ protocol (ember.overrides): what plain tensors pay
for the check on every function, method, property and nn.functional call (the rows without a
subclass), and what a Tensor subclass or a mode costs when it takes the call.

Run with ``python benchmarks/run.py --filter overhead``.
"""

from __future__ import annotations

from harness import Stmt, case

TINY = 8


@case("overhead/x.add(y)", unit="us", doc="Tensor method call, 8 float32")
def _method(fw):
    return Stmt("x.add(y)", x=fw.randn(TINY, seed=1), y=fw.randn(TINY, seed=2))


@case("overhead/x.shape", unit="us", check=False, doc="property read")
def _property(fw):
    return Stmt("x.shape", x=fw.randn(TINY))


@case("overhead/F.relu", unit="us", doc="nn.functional.relu(x), 8 float32")
def _f_relu(fw):
    return Stmt("F.relu(x)", F=fw.nn.functional, x=fw.randn(TINY))


@case("overhead/F.linear(Parameter)", unit="us", rtol=1e-4,
      doc="nn.functional.linear with nn.Parameter weight and bias, (4, 8) x (8, 8)")
def _f_linear(fw):
    w = fw.nn.Parameter(fw.randn(TINY, TINY, seed=1))
    b = fw.nn.Parameter(fw.randn(TINY, seed=2))
    return Stmt("F.linear(x, w, b)", F=fw.nn.functional, x=fw.randn(4, TINY, seed=3), w=w, b=b)


def _subclass(fw):
    class Sub(fw.Tensor):
        pass

    return Sub


@case("overhead/subclass add", unit="us", check=False,
      doc="a + b on a Tensor subclass with the default __torch_function__ (result wrapped)")
def _sub_add(fw):
    cls = _subclass(fw)
    return Stmt("a + b", a=fw.randn(TINY, seed=1).as_subclass(cls), b=fw.randn(TINY, seed=2))


@case("overhead/mode add", unit="us", check=False,
      doc="a + b inside a pass-through TorchFunctionMode")
def _mode_add(fw):
    class Passthrough(fw.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    mode = Passthrough()

    def run():
        with mode:
            for _ in range(100):
                a + b  # noqa: B018

    a, b = fw.randn(TINY, seed=1), fw.randn(TINY, seed=2)
    return Stmt("run()", run=run)
