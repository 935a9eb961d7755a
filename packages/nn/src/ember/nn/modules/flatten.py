"""Flatten and Unflatten.

>>> import ember
>>> ember.nn.Flatten()(ember.zeros(2, 3, 4)).shape
ember.Size([2, 12])
>>> ember.nn.Unflatten(1, (3, 4))(ember.zeros(2, 12)).shape
ember.Size([2, 3, 4])
"""

from __future__ import annotations

from typing import Sequence

from ember import Tensor
from ember.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flattens dims ``start_dim`` .. ``end_dim`` into one (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: invalid type of dim: {type(dim).__name__} (expected int)")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in unflattened_size
        ):
            raise TypeError(
                "Unflatten: unflattened_size must be a tuple or list of ints, got "
                f"{unflattened_size!r}"
            )
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        shape = tuple(input.shape)
        n = len(shape)
        if not -n <= self.dim < n:
            raise IndexError(
                f"unflatten: dim {self.dim} is out of range for an input of shape {shape}"
            )
        d = self.dim % n
        sizes = tuple(self.unflattened_size)
        known = 1
        for s in sizes:
            if s != -1:
                known *= s
        ok = (known == shape[d]) if -1 not in sizes else (known != 0 and shape[d] % known == 0)
        if sizes.count(-1) > 1 or not ok:
            raise RuntimeError(
                f"unflatten: sizes {list(sizes)} don't multiply up to the size of dim {self.dim} "
                f"({shape[d]}) of the input of shape {shape}"
            )
        return input.reshape(*shape[:d], *sizes, *shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
