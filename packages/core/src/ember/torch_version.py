"""``ember.torch_version``: the version string type of ``torch.__version__``.

``TorchVersion`` is a ``str`` that compares as a version, not as text, against strings and
tuples: programs gate features on ``torch.__version__ >= "1.10"`` or ``>= (2, 0)``, and
plain string comparison gets the first wrong ("1.9" > "1.10") and refuses the second.
``ember.__version__`` and ``ember.version.__version__`` are of this type.

>>> from ember.torch_version import TorchVersion
>>> v = TorchVersion("1.10.2")
>>> v > "1.9", v >= (1, 10), v < (1, 10, 3), v == "1.10.2", isinstance(v, str)
(True, True, True, True, True)
"""

from __future__ import annotations

import re
from typing import Any, Iterable

__all__ = ["TorchVersion"]

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # packaging is optional: compare the release numbers alone
    Version = None  # type: ignore[assignment,misc]
    InvalidVersion = ValueError  # type: ignore[assignment,misc]


def _release(text: str) -> tuple[int, ...]:
    """The leading dotted integers of a version string ("2.1.0a0+git" -> (2, 1, 0))."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    if m is None:
        raise ValueError(f"{text!r} is not a version")
    return tuple(int(p) for p in m.group(1).split("."))


def _convert(value: Any) -> Any:
    """A comparable version from a version string, a Version or an iterable of numbers."""
    if Version is not None and isinstance(value, Version):
        return value
    if isinstance(value, str):
        return Version(value) if Version is not None else _padded(_release(value))
    if isinstance(value, Iterable):
        text = ".".join(str(p) for p in value)
        return Version(text) if Version is not None else _padded(_release(text))
    raise InvalidVersion(f"{value!r} can't be compared with a version")


def _padded(release: tuple[int, ...]) -> tuple[int, ...]:
    return release + (0,) * (8 - len(release))


class TorchVersion(str):
    """A version string that compares as a version with strings, tuples and Versions (``<``,
    ``<=``, ``>``, ``>=``, ``==``; ``!=`` stays the string's, as in PyTorch). A string that is
    not a version ("parrot") compares as text."""

    __slots__ = ()

    def _cmp(self, other: Any, method: str) -> bool:
        try:
            return getattr(_convert(str(self)), method)(_convert(other))
        except (InvalidVersion, ValueError):
            return getattr(str, method)(self, other)

    def __lt__(self, other: Any) -> bool:
        return self._cmp(other, "__lt__")

    def __le__(self, other: Any) -> bool:
        return self._cmp(other, "__le__")

    def __gt__(self, other: Any) -> bool:
        return self._cmp(other, "__gt__")

    def __ge__(self, other: Any) -> bool:
        return self._cmp(other, "__ge__")

    def __eq__(self, other: Any) -> bool:
        return self._cmp(other, "__eq__")

    __hash__ = str.__hash__
