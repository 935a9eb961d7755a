"""ember.backends.cudnn: PyTorch's cuDNN switches. ember has no cuDNN: ``is_available()`` is
False and the flags are recorded only (``benchmark``, ``deterministic``, ``enabled``,
``allow_tf32``), so programs that set them run unchanged.

>>> import ember.backends.cudnn as cudnn
>>> cudnn.deterministic = True
>>> with cudnn.flags(enabled=False):
...     cudnn.enabled
False
>>> cudnn.enabled
True
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

benchmark = False
deterministic = False
enabled = True
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """Whether cuDNN can be used (never: ember does not use cuDNN)."""
    return False


def version() -> int | None:
    """The cuDNN version (None: not used)."""
    return None


def is_acceptable(tensor: object) -> bool:
    return False


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10,
          deterministic: bool = False, allow_tf32: bool = True) -> Iterator[None]:
    """Sets the flags inside a ``with`` block and restores them after."""
    mod = sys.modules[__name__]
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    old = {n: getattr(mod, n) for n in names}
    new = dict(zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    for n, v in new.items():
        setattr(mod, n, v)
    try:
        yield
    finally:
        for n, v in old.items():
            setattr(mod, n, v)
