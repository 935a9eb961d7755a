"""``ember._dynamo``: the ``torch._dynamo`` names training scripts touch around
``torch.compile`` (``reset()``, ``config.suppress_errors = True``, ``mark_dynamic``, ...).
ember runs eagerly (see :func:`ember.compile`): there is no graph capture to reset, mark or
configure, so these calls leave the program's behaviour as it is; ``config`` keeps the values
assigned to it and refuses names that PyTorch's config does not have.

>>> import ember
>>> ember._dynamo.config.cache_size_limit = 64
>>> ember._dynamo.reset()
>>> ember._dynamo.is_compiling()
False
"""

from __future__ import annotations

from typing import Any, Callable

from ember._dynamo import config, eval_frame
from ember.compiler import allow_in_graph, assume_constant_result, disable, is_compiling, reset

__all__ = ["allow_in_graph", "assume_constant_result", "config", "disable", "eval_frame",
           "graph_break", "is_compiling", "mark_dynamic", "mark_static", "maybe_mark_dynamic", "optimize",
           "reset"]


def _check_tensor(op: str, t: Any) -> None:
    from ember import Tensor

    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}")


def mark_dynamic(t: Any, index: int | list[int], min: int | None = None,
                 max: int | None = None) -> None:
    """Marks dims of ``t`` as dynamic for graph capture: nothing to do eagerly (``t`` is
    checked to be a tensor and ``index`` to name its dims)."""
    _check_tensor("mark_dynamic", t)
    for i in index if isinstance(index, (list, tuple)) else [index]:
        if not -t.dim() <= i < t.dim():
            raise IndexError(f"mark_dynamic: dim {i} out of range for a {t.dim()}-d tensor")


def maybe_mark_dynamic(t: Any, index: int | list[int]) -> None:
    """As :func:`mark_dynamic`."""
    mark_dynamic(t, index)


def mark_static(t: Any, index: int | list[int] | None = None) -> None:
    """Marks ``t`` (or a module) static for graph capture: nothing to do eagerly."""


def graph_break() -> None:
    """Forces a graph break under graph capture: eagerly, a no-op."""


def optimize(backend: str | Callable = "inductor", *, nopython: bool = False,
             dynamic: bool | None = None, **kwargs: Any) -> Callable[[Callable], Callable]:
    """The decorator form behind ``torch.compile`` (``@torch._dynamo.optimize("eager")``):
    returns the function unchanged, as :func:`ember.compile` does."""
    from ember._compile import compile as _compile

    return lambda fn: _compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic)
