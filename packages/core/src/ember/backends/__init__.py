"""ember.backends: the backend switches programs written for PyTorch set.

ember computes on its own CPU kernels and the optional CUDA extension, without MKL-DNN or MPS,
so most switches here are recorded and read back but change nothing (``mps.is_available()`` is
False). ``cudnn``'s switches steer the CUDA convolutions when NVIDIA's cuDNN wheel is installed
(ember.backends.cudnn). ``cuda.matmul.allow_tf32`` follows ``set_float32_matmul_precision`` as in
PyTorch ("highest": no TF32); ``cudnn.allow_tf32`` is separate (True by default, as in PyTorch).

>>> import ember
>>> import ember.backends.cudnn as cudnn
>>> cudnn.benchmark = True
>>> ember.backends.mps.is_available(), ember.backends.cudnn.benchmark
(False, True)
>>> cudnn.benchmark = False
>>> ember.get_float32_matmul_precision()
'highest'
"""

from __future__ import annotations

import threading

__all__ = ["cpu", "cuda", "cudnn", "mha", "mkldnn", "mps", "openmp", "mkl", "opt_einsum",
           "quantized", "set_float32_matmul_precision",
           "get_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
_lock = threading.Lock()
_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Records the internal precision of float32 matrix products: "highest" (full float32),
    "high" or "medium" (TF32 allowed on hardware that has it: the CUDA backend's float32 GEMMs
    then use TF32 tensor cores). ember's CPU kernels always compute in float32, whatever is set.

    >>> import ember
    >>> ember.set_float32_matmul_precision("high")
    >>> ember.get_float32_matmul_precision(), ember.backends.cuda.matmul.allow_tf32
    ('high', True)
    >>> ember.set_float32_matmul_precision("highest")
    """
    global _matmul_precision
    if precision not in _PRECISIONS:
        raise RuntimeError(f"set_float32_matmul_precision: expected one of {', '.join(_PRECISIONS)}"
                           f", got {precision!r}")
    with _lock:
        _matmul_precision = precision
        _push_tf32(precision != "highest")


def _push_tf32(on: bool) -> None:
    """Hands the TF32 switch to the CUDA backend's float32 GEMMs when ember._C_cuda is built;
    without it the value is only recorded here."""
    try:
        from ember import _C_cuda
    except ImportError:
        return
    setter = getattr(_C_cuda, "_set_allow_tf32", None)
    if setter is not None:
        setter(bool(on))


def get_float32_matmul_precision() -> str:
    """The precision set by :func:`set_float32_matmul_precision` ("highest" by default)."""
    return _matmul_precision


from ember.backends import (  # noqa: E402
    cpu,
    cuda,
    cudnn,
    mha,
    mkl,
    mkldnn,
    mps,
    openmp,
    opt_einsum,
    quantized,
)
