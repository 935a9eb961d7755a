"""dcp.save / dcp.async_save: every rank passes its state dict; each entry is written once
(entries held by several ranks, as replicated parameters are, by the least loaded of them) and
rank 0 writes the metadata last, so a directory with ``.metadata`` is a whole checkpoint."""

from __future__ import annotations

import concurrent.futures
import os
import uuid
import warnings
from typing import Any

import ember

from . import _pickle
from ._flatten import flatten
from .api import CheckpointException
from .filesystem import FileSystemWriter, _storage
from .metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)

__all__ = ["async_save", "save", "save_state_dict"]


def _dist_info(process_group: Any, no_dist: bool, what: str = "save") -> tuple[Any, int, int]:
    import ember.distributed as dist

    if not no_dist and not dist.is_initialized():
        warnings.warn("torch.distributed is disabled, unavailable or uninitialized, assuming "
                      f"the intent is to {what} in a single process.", UserWarning, stacklevel=3)
    if no_dist or not dist.is_initialized():
        return None, 0, 1
    return dist, dist.get_rank(process_group), dist.get_world_size(process_group)


def _all_gather(dist: Any, value: Any, group: Any) -> list:
    if dist is None:
        return [value]
    out: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, value, group=group)
    return out


def _check_all(dist: Any, group: Any, error: BaseException | None, what: str) -> None:
    """Every rank raises CheckpointException if any rank failed (no rank is left waiting)."""
    errors = _all_gather(dist, error, group)
    failures = {r: e for r, e in enumerate(errors) if e is not None}
    if failures:
        raise CheckpointException(f"{what} failed", failures)


def _piece(value: ember.Tensor) -> tuple[ember.Tensor, tuple[int, ...], tuple[int, ...]]:
    """(this rank's piece, where it starts in the whole tensor, the whole tensor's size); a
    DTensor's shard is its piece (a Partial one is reduced first), a plain tensor is whole."""
    from ._flatten import is_dtensor, local_region

    if is_dtensor(value):
        from ember.distributed.tensor import Partial, Replicate

        if value._spec.has_partial():
            value = value.redistribute(value._spec.mesh, [
                Replicate() if isinstance(p, Partial) else p for p in value.placements])
        offsets, _ = local_region(value)
        return value._local_tensor, offsets, tuple(value.shape)
    return value, (0,) * value.ndim, tuple(value.shape)


def _item_key(fqn: str, offsets: tuple[int, ...] | None) -> str:
    return fqn if offsets is None else f"{fqn}@{','.join(str(o) for o in offsets)}"


def _assign(plans: list[dict[str, int]]) -> dict[str, int]:
    """Which rank writes each key: among the ranks holding it, the one with the fewest bytes
    assigned so far (the same answer on every rank)."""
    load = [0] * len(plans)
    owner: dict[str, int] = {}
    for key in sorted({k for p in plans for k in p}):
        holders = [r for r, p in enumerate(plans) if key in p]
        r = min(holders, key=lambda h: (load[h], h))
        owner[key] = r
        load[r] += max(1, plans[r][key])
    return owner


def save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None,
         storage_writer: Any = None, planner: Any = None, process_group: Any = None,
         no_dist: bool = False, use_collectives: bool = True) -> Metadata:
    """Saves ``state_dict`` (nested dicts and lists of tensors and other values) as a
    distributed checkpoint in the directory ``checkpoint_id``, in torch's format: every rank
    calls it with its state dict; torch.distributed.checkpoint.load reads the result too.

    Example::

        >>> import ember.distributed.checkpoint as dcp
        >>> dcp.save({"model": model.state_dict()}, checkpoint_id="ckpt/step100")  # doctest: +SKIP
    """
    if not isinstance(state_dict, dict):
        raise TypeError(f"dcp.save: state_dict must be a dict, got {type(state_dict).__name__}")
    writer = _storage(FileSystemWriter, storage_writer, checkpoint_id, "save")
    dist, rank, _ = _dist_info(process_group, no_dist)
    flat, paths = flatten(_stateful(state_dict))
    # items: a tensor's piece per chunk (a DTensor shard, or the whole tensor), or one value
    items: dict[str, Any] = {}
    entries: dict[str, Any] = {}
    for k, v in flat.items():
        if isinstance(v, ember.Tensor):
            local, offsets, size = _piece(v.detach())
            items[_item_key(k, offsets)] = local
            entries[k] = (TensorProperties.create_from_tensor(local), size,
                          (offsets, tuple(local.shape)))
        else:
            items[_item_key(k, None)] = v
            entries[k] = None
    mine = {key: (v.numel() * v.element_size() if isinstance(v, ember.Tensor) else 0)
            for key, v in items.items()}
    owner = _assign(_all_gather(dist, mine, process_group))
    error: BaseException | None = None
    where: dict = {}
    try:
        todo = [(key, v.cpu() if isinstance(v, ember.Tensor) else v)
                for key, v in items.items() if owner[key] == rank]
        where = writer.write_items(rank, todo) if todo else {}
    except Exception as e:  # noqa: BLE001  (reported on every rank)
        error = e
    _check_all(dist, process_group, error, "dcp.save: writing the items")
    gathered = _all_gather(dist, (entries, paths, where), process_group)
    meta = Metadata({}, {}, {}, StorageMeta(checkpoint_id=_path(writer.path),
                                            save_id=uuid.uuid4().hex), "1.0.0")
    for sd_entries, sd_paths, _ in gathered:
        for k, e in sd_entries.items():
            meta.planner_data.setdefault(k, sd_paths[k])
            if e is None:
                meta.state_dict_metadata.setdefault(k, BytesStorageMetadata())
                continue
            props, size, (offsets, sizes) = e
            tm = meta.state_dict_metadata.setdefault(
                k, TensorStorageMetadata(props, ember.Size(size), []))
            if all(tuple(c.offsets) != offsets for c in tm.chunks):
                tm.chunks.append(ChunkStorageMetadata(ember.Size(offsets), ember.Size(sizes)))
    for _, _, sd_where in gathered:
        for key, info in sd_where.items():
            fqn, _, at = key.partition("@")
            e = meta.state_dict_metadata[fqn]
            if isinstance(e, TensorStorageMetadata):
                offsets = tuple(int(o) for o in at.split(",")) if at else ()
                index = next(i for i, c in enumerate(e.chunks) if tuple(c.offsets) == offsets)
                meta.storage_data[MetadataIndex(fqn, offsets, index)] = info
            else:
                meta.storage_data[MetadataIndex(fqn)] = info
    error = None
    if rank == 0:
        try:
            writer.write_metadata(_pickle.dumps(meta))
        except Exception as e:  # noqa: BLE001
            error = e
    _check_all(dist, process_group, error, "dcp.save: writing the metadata")
    return meta


def _path(p: str) -> Any:
    import pathlib

    return pathlib.Path(p)


def _stateful(state_dict: dict) -> dict:
    """Values with state_dict() (torch's Stateful: a module, an optimizer) saved as their
    state dicts, as torch does."""
    return {k: v.state_dict() if hasattr(v, "state_dict") and hasattr(v, "load_state_dict")
            and not isinstance(v, ember.Tensor) else v for k, v in state_dict.items()}


def async_save(state_dict: dict[str, Any], *, checkpoint_id: str | os.PathLike | None = None,
               storage_writer: Any = None, planner: Any = None, process_group: Any = None,
               async_checkpointer_type: Any = None, async_stager: Any = None,
               no_dist: bool = False, use_collectives: bool = True) -> concurrent.futures.Future:
    """save, returning a concurrent.futures.Future of its Metadata. ember writes before it
    returns (the collectives of a save must not overlap the caller's), so the future is done;
    training may change the tensors as soon as it returns.

    Example::

        >>> fut = dcp.async_save(state_dict, checkpoint_id="ckpt/step100")  # doctest: +SKIP
        >>> fut.result()  # doctest: +SKIP
    """
    fut: concurrent.futures.Future = concurrent.futures.Future()
    try:
        fut.set_result(save(state_dict, checkpoint_id=checkpoint_id,
                            storage_writer=storage_writer, planner=planner,
                            process_group=process_group, no_dist=no_dist))
    except Exception as e:  # noqa: BLE001  (the caller sees it from result())
        fut.set_exception(e)
    return fut


def save_state_dict(state_dict: dict[str, Any], storage_writer: Any,
                    process_group: Any = None, coordinator_rank: int = 0,
                    no_dist: bool = False, planner: Any = None) -> Metadata:
    """The deprecated spelling of save."""
    warnings.warn("'save_state_dict' is deprecated and will be removed in future versions."
                  "Please use 'save' instead.", FutureWarning, stacklevel=2)
    return save(state_dict, storage_writer=storage_writer, process_group=process_group,
                no_dist=no_dist, planner=planner)
