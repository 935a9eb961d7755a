"""Per-op cost of the __torch_dispatch__ protocol (ember.utils._python_dispatch): a pass-through
TorchDispatchMode (every op below autograd goes to Python and back). With no mode entered and
no __torch_dispatch__ subclass defined an op pays one branch: see the tiny/ cases of
cases_core.py before and after the hook. (No subclass case here: defining one turns the hook on
for the rest of the process, which would slow the cases that run after it.)

Run with ``python benchmarks/run.py --filter dispatch/``.
"""

from __future__ import annotations

import importlib

from harness import Stmt, case

TINY = 8


def _python_dispatch(fw):
    return importlib.import_module(f"{fw.name}.utils._python_dispatch")


@case("dispatch/mode add", unit="us", check=False,
      doc="a + b (8 float32) inside a pass-through TorchDispatchMode, per op")
def _mode_add(fw):
    class Passthrough(_python_dispatch(fw).TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    mode = Passthrough()

    def run():
        with mode:
            for _ in range(100):
                a + b  # noqa: B018

    a, b = fw.randn(TINY, seed=1), fw.randn(TINY, seed=2)
    return Stmt("run()", run=run)
