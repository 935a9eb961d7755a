"""ember.Size: the type of ``Tensor.shape``, a tuple of ints."""

from __future__ import annotations

import operator
from typing import Any


class Size(tuple):
    """A tensor's shape; a tuple of ints.

    >>> import ember
    >>> ember.zeros(2, 3).shape
    ember.Size([2, 3])
    """

    __slots__ = ()

    def __new__(cls, sizes: Any = ()) -> Size:
        # Every entry must be an int (PyTorch's rule): Size(["a"]) or Size([1.5]) would only fail
        # later, far from here, in whatever op received the shape.
        items = tuple(sizes)
        for i, s in enumerate(items):
            if type(s) is int:
                continue
            try:
                items = items[:i] + (operator.index(s),) + items[i + 1:]
            except TypeError:
                raise TypeError(f"ember.Size() takes an iterable of 'int' (item {i} is "
                                f"'{type(s).__name__}')") from None
        for s in items:
            if not -(2**63) <= s < 2**63:
                raise ValueError(f"ember.Size(): size {s} does not fit in int64")
        return tuple.__new__(cls, items)

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"ember.Size({list(self)})"

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __reduce__(self):
        return (Size, (tuple(self),))
