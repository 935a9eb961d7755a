"""``torch.nn.attention``: choosing scaled_dot_product_attention's kernels. ember has two on each
device: the fused (flash-attention style) kernel, which stands in for FLASH_ATTENTION,
EFFICIENT_ATTENTION and CUDNN_ATTENTION, and the MATH path. ``sdpa_kernel`` enables only the
listed ones for the block (through ``ember.backends.cuda.enable_*_sdp``, as PyTorch); a call no
enabled kernel can run raises "no available kernel". ``ember.nn.attention.bias`` has the causal
masks (``causal_upper_left``, ``causal_lower_right``) that run the causal kernel;
``ember.nn.attention.flex_attention`` has FlexAttention (``flex_attention``, ``create_block_mask``),
run eagerly on ember's ops.

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

# The order in which they are tried, as PyTorch lists them.
_PRIORITY = ("cudnn", "flash", "mem_efficient", "math")

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels PyTorch can choose between."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_FLAGS = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
          SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends: Union[list, SDPBackend, Iterable[SDPBackend]],
                set_priority: bool = False) -> Iterator[None]:
    """A block in which scaled_dot_product_attention may use only ``backends``; the switches of
    ``ember.backends.cuda`` are restored on exit. ``set_priority`` is accepted (ember has one
    kernel per kind, tried fused first)."""
    from ember.backends import cuda as _cuda

    if isinstance(backends, SDPBackend):
        chosen: tuple = (backends,)
    elif isinstance(backends, (list, tuple, set, frozenset)) or hasattr(backends, "__iter__"):
        chosen = tuple(backends)
    else:
        raise AssertionError(f"Backend must be an instance of SDPBackend, got {backends!r}")
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError(f"Backend must be an instance of SDPBackend, got {b!r}")
    previous = dict(_cuda._sdp)
    for backend, name in _FLAGS.items():
        _cuda._sdp[name] = backend in chosen
    _cuda._push_sdp()
    try:
        yield
    finally:
        _cuda._sdp.update(previous)
        _cuda._push_sdp()


def _cur_sdpa_kernel_backends(with_priority: bool = False) -> list[SDPBackend]:
    """The backends enabled now (``ember.backends.cuda.enable_*_sdp``), in the order tried.

    >>> from ember.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel
    >>> with sdpa_kernel([SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]):
    ...     _cur_sdpa_kernel_backends()
    [<SDPBackend.FLASH_ATTENTION: 1>, <SDPBackend.MATH: 0>]
    """
    from ember.backends import cuda as _cuda

    by_name = {name: backend for backend, name in _FLAGS.items()}
    return [by_name[n] for n in _PRIORITY if _cuda._sdp[n]]
