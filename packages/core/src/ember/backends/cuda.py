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

__all__ = ["is_built", "matmul", "enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp",
           "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled"]


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


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]
