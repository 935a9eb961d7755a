"""ember.Size: the type of ``Tensor.shape``, a tuple of ints."""

from __future__ import annotations


class Size(tuple):
    """A tensor's shape; a tuple of ints.

    >>> import ember
    >>> ember.zeros(2, 3).shape
    ember.Size([2, 3])
    """

    __slots__ = ()

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
