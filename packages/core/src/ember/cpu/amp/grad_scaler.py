"""``ember.cpu.amp.GradScaler``: ``ember.amp.GradScaler("cpu", ...)`` under its deprecated
name."""

from __future__ import annotations

import warnings

from ember.amp import grad_scaler as _scaler

__all__ = ["GradScaler"]


class GradScaler(_scaler.GradScaler):
    """Deprecated: ``ember.amp.GradScaler("cpu", ...)`` (a FutureWarning says so).

    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FutureWarning)
    ...     scaler = ember.cpu.amp.GradScaler(init_scale=8.0)
    >>> scaler.get_scale()
    8.0
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn(
            "`ember.cpu.amp.GradScaler(args...)` is deprecated. Please use "
            "`ember.amp.GradScaler('cpu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
