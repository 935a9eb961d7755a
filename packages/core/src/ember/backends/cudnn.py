"""ember.backends.cudnn: PyTorch's cuDNN switches, which steer ember's CUDA convolutions.

With the CUDA extension built and NVIDIA's cuDNN 9 wheel installed (``pip install
nvidia-cudnn-cu13``), convolutions on CUDA tensors run through cuDNN, loaded at run time from the
wheel's folder (or from the file or folder ``EMBER_CUDNN_LIBRARY`` names, which then is the only
place looked at); without it they run on ember's own GEMM-based kernels. The switches, with
PyTorch's defaults:

- ``enabled`` (True): use cuDNN when it is available.
- ``benchmark`` (False): time every cuDNN algorithm once per convolution shape and keep the
  fastest; otherwise cuDNN's heuristics choose. Either choice is cached per shape.
- ``deterministic`` (False): only algorithms whose results are reproducible.
- ``allow_tf32`` (True): float32 convolutions may use TF32 tensor cores.

>>> import ember.backends.cudnn as cudnn
>>> cudnn.deterministic = True
>>> with cudnn.flags(enabled=False):
...     cudnn.enabled
False
>>> cudnn.enabled, cudnn.is_available() in (True, False)
(True, True)
>>> cudnn.deterministic = False
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any, Iterator

# The switches (enabled, benchmark, deterministic, allow_tf32, benchmark_limit) are attributes of
# the module served by _CudnnModule.
__all__ = ["is_available", "version", "is_acceptable", "flags"]

# The switches; module attributes read and write this (see _CudnnModule), and the CUDA extension
# reads them when it loads (_attach) and whenever one changes (_push).
_state: dict[str, Any] = {"enabled": True, "benchmark": False, "deterministic": False,
                          "allow_tf32": True, "benchmark_limit": 10}
_BOOL_FLAGS = ("enabled", "benchmark", "deterministic", "allow_tf32")


def _library_dirs() -> list[str]:
    """The folders of NVIDIA's wheels that may hold libcudnn.so.9 (nvidia-cudnn-cu13 installs it
    in ``nvidia/cudnn/lib``; some wheel sets use ``nvidia/cu13/lib``), in each entry of the
    ``nvidia`` namespace package's path. Found without importing anything of theirs."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    out = []
    for root in spec.submodule_search_locations:
        for sub in ("cudnn", "cu13"):
            d = os.path.join(root, sub, "lib")
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


_attached = False


def _extension() -> Any:
    """ember._C_cuda when built (importing it), else None."""
    try:
        from ember import _C_cuda
    except ImportError:
        return None
    if not hasattr(_C_cuda, "_cudnn_is_available"):
        return None
    if not _attached:  # its import could not reach this module: hand the settings over now
        _attach(_C_cuda)
    return _C_cuda


def _attach(ext: Any) -> None:
    """Called by ember._C_cuda while it loads: hands it the wheel folders and the switches."""
    global _attached
    ext._cudnn_set_search_dirs(_library_dirs())
    ext._cudnn_set_flags(*(bool(_state[n]) for n in _BOOL_FLAGS))
    _attached = True


def _push() -> None:
    """Hands the switches to ember._C_cuda if it is loaded (it reads them itself when it loads)."""
    ext = sys.modules.get("ember._C_cuda")
    if ext is not None and hasattr(ext, "_cudnn_set_flags"):
        ext._cudnn_set_flags(*(bool(_state[n]) for n in _BOOL_FLAGS))


def is_available() -> bool:
    """Whether ember can use cuDNN: the CUDA extension is built and libcudnn.so.9 (cuDNN 9) loads
    (the first call loads it). :func:`_load_error` says why not.

    >>> import ember
    >>> ember.backends.cudnn.is_available() in (True, False)
    True
    """
    ext = _extension()
    return bool(ext is not None and ext._cudnn_is_available())


def version() -> int | None:
    """cuDNN's version as major * 10000 + minor * 100 + patch (91002 is 9.10.2), or None when
    cuDNN is not available.

    >>> import ember
    >>> v = ember.backends.cudnn.version()
    >>> v is None or v >= 90000
    True
    """
    ext = _extension()
    return None if ext is None else ext._cudnn_version()


def _load_error() -> str:
    """Why cuDNN is not available ("" when it is), naming each library path tried."""
    ext = _extension()
    if ext is None:
        return "cuDNN is not available: ember was built without its CUDA extension (ember._C_cuda)"
    return "" if ext._cudnn_is_available() else str(ext._cudnn_load_error())


def is_acceptable(tensor: Any) -> bool:
    """Whether a convolution of ``tensor`` may run on cuDNN: enabled, available, a CUDA tensor of
    float32, float64, float16 or bfloat16.

    >>> import ember
    >>> ember.backends.cudnn.is_acceptable(ember.zeros(2))
    False
    """
    import ember

    if not _state["enabled"] or getattr(getattr(tensor, "device", None), "type", None) != "cuda":
        return False
    if tensor.dtype not in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        return False
    return is_available()


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, benchmark_limit: int = 10,
          deterministic: bool = False, allow_tf32: bool = True) -> Iterator[None]:
    """Sets the switches inside a ``with`` block and restores them after.

    >>> import ember.backends.cudnn as cudnn
    >>> with cudnn.flags(enabled=True, benchmark=True):
    ...     cudnn.benchmark
    True
    >>> cudnn.benchmark
    False
    """
    new = {"enabled": enabled, "benchmark": benchmark, "benchmark_limit": benchmark_limit,
           "deterministic": deterministic, "allow_tf32": allow_tf32}
    old = dict(_state)
    _set(new)
    try:
        yield
    finally:
        _set(old)


def _set(values: dict[str, Any]) -> None:
    for name, value in values.items():
        if name == "benchmark_limit":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"cudnn.benchmark_limit: expected an int >= 0, got {value!r}")
            _state[name] = value
        else:
            _state[name] = bool(value)
    _push()


class _CudnnModule(types.ModuleType):
    """The module's class: assigning a switch (``cudnn.benchmark = True``) reaches the CUDA
    extension, as in PyTorch."""

    def __getattr__(self, name: str) -> Any:
        if name in _state:
            return _state[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _state:
            _set({name: value})
        else:
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CudnnModule
