"""ember.backends.cuda: PyTorch's CUDA switches (``matmul.allow_tf32``, the attention kernels'
``enable_*_sdp``). ``matmul.allow_tf32`` reads and writes ``set_float32_matmul_precision``
("high" allows TF32), as in PyTorch.

>>> import ember
>>> ember.backends.cuda.matmul.allow_tf32
False
>>> ember.backends.cuda.is_built() in (True, False)
True
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

__all__ = ["is_built", "matmul", "enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp",
           "enable_cudnn_sdp", "flash_sdp_enabled", "mem_efficient_sdp_enabled",
           "math_sdp_enabled", "cudnn_sdp_enabled", "sdp_kernel"]


def is_built() -> bool:
    """Whether this ember was built with its CUDA extension."""
    try:
        from ember import _C_cuda  # noqa: F401
    except ImportError:
        return False
    return True


class _MatmulFlags:
    """``ember.backends.cuda.matmul``: TF32 / reduced-precision reduction switches."""

    def __init__(self) -> None:
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        from ember.backends import get_float32_matmul_precision

        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        from ember.backends import set_float32_matmul_precision

        set_float32_matmul_precision("high" if value else "highest")


matmul = _MatmulFlags()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _push_sdp() -> None:
    """Hands the switches to scaled_dot_product_attention's kernel choice (on every device, as
    PyTorch's): the fused kernel stands in for flash, memory-efficient and cuDNN attention, so it
    runs while any of them is enabled; the math path while math is."""
    from ember import _C

    _C._set_sdp_backends(math=_sdp["math"],
                         fused=_sdp["flash"] or _sdp["mem_efficient"] or _sdp["cudnn"])


def _set_sdp(name: str, enabled: bool) -> None:
    _sdp[name] = bool(enabled)
    _push_sdp()


def enable_flash_sdp(enabled: bool) -> None:
    """Allows (or forbids) the flash-attention kernel of scaled_dot_product_attention.

    >>> import ember
    >>> ember.backends.cuda.enable_flash_sdp(False); ember.backends.cuda.flash_sdp_enabled()
    False
    >>> ember.backends.cuda.enable_flash_sdp(True)
    """
    _set_sdp("flash", enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Allows (or forbids) the memory-efficient attention kernel (ember's fused kernel)."""
    _set_sdp("mem_efficient", enabled)


def enable_math_sdp(enabled: bool) -> None:
    """Allows (or forbids) the math (unfused) path of scaled_dot_product_attention."""
    _set_sdp("math", enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    """Allows (or forbids) the cuDNN attention kernel (ember's fused kernel stands in for it)."""
    _set_sdp("cudnn", enabled)


def flash_sdp_enabled() -> bool:
    """Whether the flash-attention kernel is enabled."""
    return _sdp["flash"]


def mem_efficient_sdp_enabled() -> bool:
    """Whether the memory-efficient attention kernel is enabled."""
    return _sdp["mem_efficient"]


def math_sdp_enabled() -> bool:
    """Whether the math path of scaled_dot_product_attention is enabled."""
    return _sdp["math"]


def cudnn_sdp_enabled() -> bool:
    """Whether the cuDNN attention kernel is enabled."""
    return _sdp["cudnn"]


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True) -> Iterator[None]:
    """Deprecated (as in PyTorch; use ``ember.nn.attention.sdpa_kernel``): sets the four
    ``enable_*_sdp`` switches for the block and restores them after.

    >>> import ember, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with ember.backends.cuda.sdp_kernel(enable_flash=False):
    ...         ember.backends.cuda.flash_sdp_enabled()
    False
    >>> ember.backends.cuda.flash_sdp_enabled()
    True
    """
    warnings.warn(
        "ember.backends.cuda.sdp_kernel() is deprecated; use ember.nn.attention.sdpa_kernel(), "
        "which takes the list of backends to enable", FutureWarning, stacklevel=3)
    previous = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    _push_sdp()
    try:
        yield
    finally:
        _sdp.update(previous)
        _push_sdp()
