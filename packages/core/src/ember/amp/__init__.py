"""ember.amp: automatic mixed precision (``autocast``) and loss scaling (``GradScaler``).

>>> import ember
>>> with ember.amp.autocast("cpu", dtype=ember.bfloat16):
...     y = ember.nn.functional.linear(ember.randn(2, 3), ember.randn(4, 3))
>>> y.dtype
ember.bfloat16
"""

from ember.amp.autocast_mode import (
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from ember.amp.grad_scaler import GradScaler

__all__ = [
    "autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available",
    "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype",
    "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
    "autocast_increment_nesting", "autocast_decrement_nesting",
]
