"""The named-tuple types that ops with several results return (``values, indices`` of max,
sort, topk, ...), as ``torch.return_types``: tuples with named fields, printed as PyTorch prints
them, and importable from here (so they pickle by name).

>>> import ember
>>> r = ember.tensor([1.0, 3.0]).max(0)
>>> type(r).__module__, r.values.item(), r.indices.item()
('ember.return_types', 3.0, 1)
"""

from __future__ import annotations

from collections import namedtuple
from typing import Sequence


def _repr(self: tuple) -> str:
    body = ",\n".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
    return f"{__name__}.{type(self).__name__}(\n{body})"


def _make(name: str, fields: Sequence[str]) -> type:
    """The return type called ``name`` with these fields (made once, then kept here)."""
    existing = globals().get(name)
    if isinstance(existing, type) and getattr(existing, "_fields", None) == tuple(fields):
        return existing
    cls = namedtuple(name, list(fields))
    cls.__module__ = __name__
    cls.__repr__ = _repr
    cls.__str__ = _repr
    globals()[name] = cls
    return cls
