"""How a DTensor lies on one mesh dimension: Shard(dim) (split along dim over the ranks, in
torch.chunk's sizes), Replicate() (whole on every rank) or Partial(op) (every rank holds a
part; the value is their reduction, done when needed)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Partial", "Placement", "Replicate", "Shard"]  # and _StridedShard


class Placement:
    """Base of the placement types."""

    def is_shard(self, dim: int | None = None) -> bool:
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        return isinstance(self, Replicate)

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return isinstance(self, Partial) and (reduce_op is None or self.reduce_op == reduce_op)


@dataclass(frozen=True)
class Shard(Placement):
    dim: int

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:  # torch's short form (S(0), R, P(sum)); repr is the long one
        return f"S({self.dim})"


@dataclass(frozen=True)
class _StridedShard(Shard):
    """Shard(dim) that cuts after the later mesh dimensions sharding the same dim (torch's
    name and printing): fully_shard over tensor-parallel pieces splits each rank's TP piece
    again, which in mesh order ("dp", "tp") is not a plain (Shard(0), Shard(0)). As the only
    cut of its dim it is torch's strided split: the dim seen as (split_factor, rest), rest
    split over the ranks - Shard(1) of (B, S, H) flattened to (B * S, H) is
    _StridedShard(0, sf=B) with no data moved."""

    split_factor: int = 1

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


@dataclass(frozen=True)
class Replicate(Placement):
    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial(Placement):
    reduce_op: str = "sum"

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
