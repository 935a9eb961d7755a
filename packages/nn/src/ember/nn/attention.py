"""``torch.nn.attention``: choosing scaled_dot_product_attention's kernels. ember has one CPU
implementation (the math one) and picks its CUDA kernels itself, so ``sdpa_kernel`` records the
request for the block and changes nothing else.

>>> import ember
>>> from ember.nn.attention import SDPBackend, sdpa_kernel
>>> with sdpa_kernel(SDPBackend.MATH):
...     out = ember.nn.functional.scaled_dot_product_attention(
...         ember.ones(1, 2, 4), ember.ones(1, 2, 4), ember.ones(1, 2, 4))
>>> out.shape
ember.Size([1, 2, 4])
"""

from __future__ import annotations

import contextlib
import enum
from typing import Iterable, Iterator, Union

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels PyTorch can choose between."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_current: list = [tuple(b for b in SDPBackend if b != SDPBackend.ERROR)]


@contextlib.contextmanager
def sdpa_kernel(backends: Union[list, SDPBackend, Iterable[SDPBackend]],
                set_priority: bool = False) -> Iterator[None]:
    """A block in which scaled_dot_product_attention may use only ``backends`` (validated;
    ember's kernels do not depend on it)."""
    chosen = (backends,) if isinstance(backends, SDPBackend) else tuple(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError(f"Backend must be an instance of SDPBackend, got {b!r}")
    previous = _current[0]
    _current[0] = chosen
    try:
        yield
    finally:
        _current[0] = previous
