"""ember.backends.opt_einsum: PyTorch's switches for contraction-path optimization of einsum.

``is_available()`` says whether the third-party ``opt_einsum`` package imports, as in PyTorch;
``enabled`` (True when it does) and ``strategy`` ("auto", "greedy" or "optimal"; None without the
package) are recorded and read back, with PyTorch's checks. ember's einsum picks its own
contraction order, whatever is set, so the switches change no result.

>>> import ember
>>> import ember.backends.opt_einsum as opt_einsum
>>> opt_einsum.enabled == opt_einsum.is_available()
True
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

try:
    import opt_einsum as _opt_einsum
except ImportError:
    _opt_einsum = None

__all__ = ["is_available", "get_opt_einsum", "enabled", "strategy", "set_flags", "flags"]

_STRATEGIES = ("auto", "greedy", "optimal")


def is_available() -> bool:
    """Whether the ``opt_einsum`` package is installed and imported."""
    return _opt_einsum is not None


def get_opt_einsum() -> Any:
    """The ``opt_einsum`` package if it is available, else None."""
    return _opt_einsum


enabled: bool = is_available()
strategy: str | None = "auto" if is_available() else None


def _check(new_enabled: bool | None, new_strategy: str | None) -> None:
    if new_enabled and not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `enabled` to {new_enabled} will "
                         "not reap the benefits of calculating an optimal path for einsum. Please "
                         "install opt-einsum.")
    if new_strategy is None:
        return
    if not is_available():
        raise ValueError(f"opt_einsum is not available, so setting `strategy` to {new_strategy} "
                         "will not be meaningful. Please install opt_einsum or unset `strategy`.")
    if not (enabled if new_enabled is None else new_enabled):
        raise ValueError(f"opt_einsum is not enabled, so setting a `strategy` to {new_strategy} "
                         "will not be meaningful. Please set `enabled` to `True` as well or unset "
                         "`strategy`.")
    if new_strategy not in _STRATEGIES:
        raise ValueError("`strategy` must be one of the following: [auto, greedy, optimal] but is "
                         f"{new_strategy}")


def set_flags(_enabled: bool | None = None, _strategy: str | None = None) -> tuple:
    """Sets the switches given (None keeps one); returns the previous (enabled, strategy)."""
    global enabled, strategy
    old = (enabled, strategy if is_available() else None)
    _check(_enabled, _strategy)
    if _enabled is not None:
        enabled = bool(_enabled)
    if _strategy is not None:
        strategy = _strategy
    return old


@contextlib.contextmanager
def flags(enabled: bool | None = None, strategy: str | None = None) -> Iterator[None]:
    """Sets the switches inside a ``with`` block and restores them after."""
    old = set_flags(enabled, strategy)
    try:
        yield
    finally:
        set_flags(*old)
