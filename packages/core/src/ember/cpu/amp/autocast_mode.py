"""``ember.cpu.amp.autocast``: ``ember.amp.autocast("cpu", ...)`` under its deprecated name."""

from __future__ import annotations

import warnings
from typing import Any

from ember.amp import autocast_mode as _mode

__all__ = ["autocast"]


class autocast(_mode.autocast):  # noqa: N801  (PyTorch's name)
    """Deprecated: ``ember.amp.autocast("cpu", dtype=..., enabled=..., cache_enabled=...)``
    (a FutureWarning says so). ``dtype`` defaults to bfloat16.

    >>> import warnings, ember
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     ctx = ember.cpu.amp.autocast()
    >>> caught[0].category.__name__, ctx.device
    ('FutureWarning', 'cpu')
    """

    def __init__(self, enabled: bool = True, dtype: Any = None,
                 cache_enabled: bool = True) -> None:
        import ember

        warnings.warn(
            "`ember.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`ember.amp.autocast('cpu', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cpu", dtype=ember.bfloat16 if dtype is None else dtype,
                         enabled=enabled, cache_enabled=cache_enabled)
