"""Splitting a batch into micro-batches and merging the outputs back
(torch.distributed.pipelining.microbatch): TensorChunkSpec(d) splits a tensor along dim d
(torch.tensor_split's pieces), _Replicate passes a value whole to every micro-batch. By
default tensors are split along dim 0 and anything else is replicated.

Example::

    >>> args, kwargs = split_args_kwargs_into_chunks((x,), {"mask": m}, 4,  # doctest: +SKIP
    ...     kwargs_chunk_spec={"mask": TensorChunkSpec(1)})
"""

from __future__ import annotations

from typing import Any, Sequence

import ember
from ember.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["TensorChunkSpec", "merge_chunks", "split_args_kwargs_into_chunks"]

DEFAULT_CHUNK_DIM = 0


class TensorChunkSpec:
    """Split a tensor along split_dim."""

    def __init__(self, split_dim: int) -> None:
        self.split_dim = split_dim

    def __repr__(self) -> str:
        return f"{type(self).__module__}.{type(self).__name__}({self.split_dim})"

    def __str__(self) -> str:
        return f"TensorChunkSpec({self.split_dim})"

    @staticmethod
    def from_tuple(chunk_dims: tuple[int, ...]) -> tuple:
        """One spec per positional argument: TensorChunkSpec.from_tuple((0, 0, 1))."""
        return tuple(TensorChunkSpec(d) for d in chunk_dims)

    @staticmethod
    def from_dict(chunk_dims: dict[str, int]) -> dict:
        """One spec per keyword argument: TensorChunkSpec.from_dict({"mask": 1})."""
        return {k: TensorChunkSpec(d) for k, d in chunk_dims.items()}


class _Replicate:
    """Every micro-batch gets the whole value."""


def _default_spec(value: Any) -> Any:
    return TensorChunkSpec(DEFAULT_CHUNK_DIM) if isinstance(value, ember.Tensor) else _Replicate


def _split_value(value: Any, spec: Any, chunks: int, where: str) -> list:
    """value's piece for each micro-batch: each tensor leaf split as spec says (one spec for
    every leaf, or a structure of specs matching value's)."""
    leaves, tree = tree_flatten(value)
    single = spec is _Replicate or isinstance(spec, (TensorChunkSpec, _Replicate))
    specs = [spec] * len(leaves) if single else tree_flatten(spec)[0]
    if len(specs) != len(leaves):
        raise ValueError(f"pipeline: the chunk spec of {where} ({spec}) does not match its "
                         f"structure ({len(leaves)} values)")
    pieces: list[list] = [[] for _ in range(chunks)]
    for leaf, s in zip(leaves, specs):
        if isinstance(s, TensorChunkSpec) and isinstance(leaf, ember.Tensor):
            if leaf.shape[s.split_dim] < chunks:
                raise ValueError(f"pipeline: {where} has {leaf.shape[s.split_dim]} rows along "
                                 f"dim {s.split_dim}, too few for {chunks} micro-batches")
            for i, part in enumerate(ember.tensor_split(leaf, chunks, s.split_dim)):
                pieces[i].append(part)
        else:
            for p in pieces:
                p.append(leaf)
    return [tree_unflatten(p, tree) for p in pieces]


def split_args_kwargs_into_chunks(args: tuple, kwargs: dict | None, chunks: int,
                                  args_chunk_spec: Sequence[Any] | None = None,
                                  kwargs_chunk_spec: dict[str, Any] | None = None
                                  ) -> tuple[list[tuple], list[dict]]:
    """(each micro-batch's positional arguments, each one's keyword arguments)."""
    kwargs = kwargs or {}
    if args_chunk_spec is not None and len(args_chunk_spec) != len(args):
        raise ValueError(f"pipeline: args_chunk_spec has {len(args_chunk_spec)} entries for "
                         f"{len(args)} positional arguments")
    arg_specs = args_chunk_spec or [_default_spec(a) for a in args]
    split_args = [_split_value(a, s, chunks, f"argument {i}")
                  for i, (a, s) in enumerate(zip(args, arg_specs))]
    kw_specs = {k: (kwargs_chunk_spec or {}).get(k, _default_spec(v)) for k, v in kwargs.items()}
    split_kwargs = {k: _split_value(v, kw_specs[k], chunks, f"keyword argument {k!r}")
                    for k, v in kwargs.items()}
    return ([tuple(a[i] for a in split_args) for i in range(chunks)],
            [{k: v[i] for k, v in split_kwargs.items()} for i in range(chunks)])


def merge_chunks(chunks: list[Any], chunk_spec: Any) -> Any:
    """The micro-batches' outputs merged: tensors concatenated along their spec's dim (dim 0
    by default), _Replicate leaves taken from the first."""
    first, tree = tree_flatten(chunks[0])
    specs = ([TensorChunkSpec(DEFAULT_CHUNK_DIM)] * len(first) if chunk_spec is None
             else tree_flatten(chunk_spec)[0])
    flat = [tree_flatten(c)[0] for c in chunks]
    if any(len(f) != len(specs) for f in flat):
        raise ValueError(f"pipeline: an output does not match the merge spec {chunk_spec}")
    merged = []
    for i, s in enumerate(specs):
        values = [f[i] for f in flat]
        if isinstance(s, TensorChunkSpec) and isinstance(values[0], ember.Tensor):
            merged.append(ember.cat(values, s.split_dim))
        else:
            merged.append(values[0])
    return tree_unflatten(merged, tree)
