"""``ember._dynamo.eval_frame``: where PyTorch keeps ``OptimizedModule``, the class of what
``ember.compile(module)`` returns (defined with ember.nn, which it needs; read from there).

>>> import ember
>>> ember._dynamo.eval_frame.OptimizedModule.__name__
'OptimizedModule'
"""

from __future__ import annotations

from typing import Any

__all__ = ["OptimizedModule"]  # noqa: F822 (read through __getattr__ below)


def __getattr__(name: str) -> Any:
    if name == "OptimizedModule":
        from ember.nn.modules._optimized import OptimizedModule

        return OptimizedModule
    raise AttributeError(f"module 'ember._dynamo.eval_frame' has no attribute '{name}'")
