"""``torch.nn.utils.stateless``: ``functional_call``, a module run with other parameters and
buffers; deprecated (as in PyTorch) in favour of :func:`ember.func.functional_call`, which it
calls.

>>> import warnings, ember
>>> from ember.nn.utils.stateless import functional_call
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     functional_call(ember.nn.Linear(1, 1, bias=False), {"weight": ember.ones(1, 1)},
...                     (ember.tensor([[2.0]]),)).tolist()
[[2.0]]
"""

from __future__ import annotations

import warnings
from typing import Any

from ember.func import functional_call as _functional_call

__all__ = ["functional_call"]


def functional_call(module: Any, parameters_and_buffers: dict, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Deprecated: :func:`ember.func.functional_call` (a drop-in replacement)."""
    warnings.warn("`ember.nn.utils.stateless.functional_call` is deprecated; use "
                  "`ember.func.functional_call` instead, which is a drop-in replacement",
                  FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
