"""dcp.load: fills a state dict in place from a checkpoint directory (ember's or torch's): each
tensor entry is copied into the tensor already there, assembled from the chunks it was saved
in (so a checkpoint sharded by torch's FSDP loads into whole tensors); other entries are
replaced. Values with load_state_dict (a module, an optimizer) get theirs called."""

from __future__ import annotations

import os
import warnings
from typing import Any

import ember

from ._flatten import flatten, is_dtensor, local_region, set_at
from .api import CheckpointException
from .filesystem import FileSystemReader, _storage
from .metadata import TensorStorageMetadata
from .state_dict_saver import _dist_info

__all__ = ["load", "load_state_dict"]


def _fill(dest: ember.Tensor, key: str, entry: TensorStorageMetadata, stored: dict,
          reader: FileSystemReader) -> None:
    """Copies into dest's piece (a DTensor's shard, or the whole tensor) every saved chunk's
    overlap with it: chunks and pieces need not line up (any sharding loads into any other)."""
    if tuple(dest.shape) != tuple(entry.size):
        raise RuntimeError(f"Size mismatch between saved {ember.Size(entry.size)} and current: "
                           f"{dest.shape} for {key}")
    local = getattr(dest, "_local_tensor", dest)
    if is_dtensor(dest):
        from ember.distributed.tensor import Partial

        if any(isinstance(p, Partial) for p in dest.placements):
            raise NotImplementedError(f"dcp.load: {key} is a Partial DTensor; load into a "
                                      "Shard or Replicate one")
    lo, size = local_region(dest)
    with ember.no_grad():
        for chunk in entry.chunks:
            offsets = tuple(int(o) for o in chunk.offsets)
            sizes = tuple(int(n) for n in chunk.sizes)
            start = [max(a, b) for a, b in zip(lo, offsets)]
            end = [min(a + n, b + m) for a, n, b, m in zip(lo, size, offsets, sizes)]
            if any(e <= s for s, e in zip(start, end)) and local.ndim:
                continue  # this chunk holds none of this rank's piece
            info = stored.get((key, offsets))
            if info is None:
                raise RuntimeError(f"checkpoint metadata lists a chunk of {key} at {offsets} "
                                   "but no file holds it")
            piece = reader.read_item(info).reshape(sizes)
            src = piece[tuple(slice(s - o, e - o) for s, e, o in zip(start, end, offsets))]
            dst = local[tuple(slice(s - o, e - o) for s, e, o in zip(start, end, lo))]
            dst.copy_(src)


def load(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None,
         storage_reader: Any = None, planner: Any = None, process_group: Any = None,
         no_dist: bool = False) -> None:
    """Loads the checkpoint in the directory ``checkpoint_id`` into ``state_dict`` in place
    (its tensors keep their identity, dtype and device; keys the checkpoint lacks raise).

    Example::

        >>> sd = {"model": model.state_dict()}  # doctest: +SKIP
        >>> dcp.load(sd, checkpoint_id="ckpt/step100")  # doctest: +SKIP
        >>> model.load_state_dict(sd["model"])  # doctest: +SKIP
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"dcp.load: state_dict must be a dict, got {type(state_dict).__name__}")
    reader = _storage(FileSystemReader, storage_reader, checkpoint_id, "load")
    _dist_info(process_group, no_dist, "load")
    meta = reader.read_metadata()
    stateful = {k: v for k, v in state_dict.items() if hasattr(v, "load_state_dict")
                and hasattr(v, "state_dict") and not isinstance(v, ember.Tensor)}
    inner = {k: (v.state_dict() if k in stateful else v) for k, v in state_dict.items()}
    flat, paths = flatten(inner)
    stored = {(i.fqn, None if i.offset is None else tuple(int(o) for o in i.offset)): info
              for i, info in (meta.storage_data or {}).items()}
    try:
        for key, value in flat.items():
            entry = meta.state_dict_metadata.get(key)
            if entry is None:
                raise RuntimeError(f"Missing key in checkpoint state_dict: {key}.")
            if isinstance(entry, TensorStorageMetadata):
                if not isinstance(value, ember.Tensor):
                    raise RuntimeError(f"checkpoint entry {key} is a tensor but the state dict "
                                       f"holds a {type(value).__name__}")
                _fill(value, key, entry, stored, reader)
            else:
                info = stored.get((key, None))
                if info is None:
                    raise RuntimeError(f"checkpoint metadata lists {key} but no file holds it")
                set_at(inner, paths[key], reader.read_item(info))
    except (RuntimeError, OSError) as e:
        rank = 0
        if not no_dist:
            import ember.distributed as dist

            rank = dist.get_rank(process_group) if dist.is_initialized() else 0
        raise CheckpointException(str(e), {rank: e}) from e
    for k, obj in stateful.items():
        obj.load_state_dict(inner[k])
    for k, v in inner.items():
        if k not in stateful:
            state_dict[k] = v


def load_state_dict(state_dict: dict[str, Any], storage_reader: Any, process_group: Any = None,
                    coordinator_rank: int = 0, no_dist: bool = False,
                    planner: Any = None) -> None:
    """The deprecated spelling of load."""
    warnings.warn("'load_state_dict' is deprecated and will be removed in future versions. "
                  "Please use 'load' instead.", FutureWarning, stacklevel=2)
    load(state_dict, storage_reader=storage_reader, process_group=process_group,
         no_dist=no_dist, planner=planner)
