"""Anomaly detection for autograd: find the forward op behind a failing or NaN-producing backward.

While it is on, every graph node records the Python stack where its forward op ran. When a
node's backward raises, or (with ``check_nan=True``) returns NaN, a warning shows that stack and
the NaN case raises ``RuntimeError: Function 'XBackward0' returned nan values in its 0th output.``

>>> import ember, warnings
>>> x = ember.tensor([0.0], requires_grad=True)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with ember.autograd.detect_anomaly():
...         y = ember.sqrt(x) * 0.0
...         try:
...             y.sum().backward()
...         except RuntimeError as e:
...             print(e)
Function 'SqrtBackward0' returned nan values in its 0th output.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ember import _C

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


def _check_bool(fn: str, name: str, value: Any) -> None:
    # bool only, as in PyTorch: "set_detect_anomaly('off')" would otherwise switch it on
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' must be bool, not {type(value).__name__}")


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _C.is_anomaly_enabled()


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward results for NaN."""
    return _C.is_anomaly_check_nan_enabled()


class detect_anomaly:
    """Context manager (or decorator) that turns anomaly detection on for its block.

    Anomaly detection slows every op down (it captures a stack per graph node): use it only
    to debug.
    """

    def __init__(self, check_nan: bool = True) -> None:
        _check_bool("detect_anomaly", "check_nan", check_nan)
        self.check_nan = check_nan
        self.prev = _C.is_anomaly_enabled()
        self.prev_check_nan = _C.is_anomaly_check_nan_enabled()
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.prev = _C.is_anomaly_enabled()
        self.prev_check_nan = _C.is_anomaly_check_nan_enabled()
        _C.set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc: Any) -> None:
        _C.set_anomaly_enabled(self.prev, self.prev_check_nan)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Sets anomaly detection on or off, effective immediately; as a context manager it restores
    the previous setting on exit.

    >>> import ember
    >>> with ember.autograd.set_detect_anomaly(False):
    ...     ember.autograd.is_anomaly_enabled()
    False
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        _check_bool("set_detect_anomaly", "mode", mode)
        _check_bool("set_detect_anomaly", "check_nan", check_nan)
        self.prev = _C.is_anomaly_enabled()
        self.prev_check_nan = _C.is_anomaly_check_nan_enabled()
        _C.set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C.set_anomaly_enabled(self.prev, self.prev_check_nan)
