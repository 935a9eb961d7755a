"""``ember.cuda.amp``: PyTorch's older CUDA spellings of ``autocast`` and ``GradScaler``
(``ember.amp`` with device "cuda"). As in PyTorch, each is deprecated (a FutureWarning names
its ``ember.amp`` spelling), and without CUDA autocast and GradScaler warn and disable
themselves, so a script written for a GPU still runs on the CPU in float32.

>>> import warnings, ember
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     ember.cuda.amp.GradScaler().is_enabled() == ember.cuda.is_available()
True
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

from ember.amp import autocast_mode as _mode
from ember.amp import grad_scaler as _scaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _deprecated(old: str, new: str) -> None:
    # stacklevel 3: the caller of the deprecated name, as PyTorch's warning points there
    warnings.warn(f"`ember.cuda.amp.{old}(args...)` is deprecated. Please use `ember.amp.{new}` "
                  "instead.", FutureWarning, stacklevel=3)


class autocast(_mode.autocast):  # noqa: N801
    """``ember.amp.autocast("cuda", ...)``."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        _deprecated("autocast", "autocast('cuda', args...)")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_scaler.GradScaler):
    """``ember.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        _deprecated("GradScaler", "GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs: Any = None) -> Callable:
    _deprecated("custom_fwd", "custom_fwd(args..., device_type='cuda')")
    return _mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable | None = None) -> Callable:
    _deprecated("custom_bwd", "custom_bwd(args..., device_type='cuda')")
    return _mode.custom_bwd(bwd, device_type="cuda")
