"""Conversions between a distributed checkpoint directory and one ``torch.save`` file, as
torch.distributed.checkpoint.format_utils has them: ``dcp_to_torch_save`` assembles every entry
whole (whatever sharding saved it) into the nested state dict that was saved, and
``torch_save_to_dcp`` writes a saved state dict out as a checkpoint. Both run in one process,
without a process group."""

from __future__ import annotations

import os
from typing import Any

import ember

from .filesystem import FileSystemReader
from .metadata import TensorStorageMetadata
from .state_dict_loader import _fill
from .state_dict_saver import save

__all__ = ["dcp_to_torch_save", "torch_save_to_dcp"]


def _place(root: dict, path: tuple, value: Any) -> None:
    """root[path[0]][path[1]]... = value, making the dicts (a str key next) and lists (an int
    index next) on the way."""
    node: Any = root
    for here, nxt in zip(path[:-1], path[1:]):
        make = list if isinstance(nxt, int) else dict
        if isinstance(node, list):
            node.extend([None] * (here + 1 - len(node)))
            if node[here] is None:
                node[here] = make()
        elif here not in node:
            node[here] = make()
        node = node[here]
    last = path[-1]
    if isinstance(node, list):
        node.extend([None] * (last + 1 - len(node)))
    node[last] = value


def _whole_state_dict(dcp_checkpoint_dir: str | os.PathLike) -> dict:
    reader = FileSystemReader(dcp_checkpoint_dir)
    meta = reader.read_metadata()
    stored = {(i.fqn, None if i.offset is None else tuple(int(o) for o in i.offset)): info
              for i, info in (meta.storage_data or {}).items()}
    paths = meta.planner_data or {}
    out: dict = {}
    for key, entry in meta.state_dict_metadata.items():
        if isinstance(entry, TensorStorageMetadata):
            value = ember.empty(tuple(entry.size), dtype=entry.properties.dtype)
            _fill(value, key, entry, stored, reader)
        else:
            info = stored.get((key, None))
            if info is None:
                raise RuntimeError(f"dcp_to_torch_save: checkpoint metadata lists {key} but "
                                   "no file holds it")
            value = reader.read_item(info)
        path = paths.get(key)
        _place(out, tuple(path) if path else (key,), value)
    return out


def dcp_to_torch_save(dcp_checkpoint_dir: str | os.PathLike,
                      torch_save_path: str | os.PathLike) -> None:
    """Writes the checkpoint in ``dcp_checkpoint_dir`` as one ``torch.save`` file: the state
    dict that was saved, every tensor whole.

    Example::

        >>> dcp_to_torch_save("ckpt/step100", "step100.pt")  # doctest: +SKIP
        >>> sd = ember.load("step100.pt")  # doctest: +SKIP
    """
    ember.save(_whole_state_dict(dcp_checkpoint_dir), os.fspath(torch_save_path),
               format="torch")


def torch_save_to_dcp(torch_save_path: str | os.PathLike,
                      dcp_checkpoint_dir: str | os.PathLike) -> None:
    """Writes the state dict in the ``torch.save`` file ``torch_save_path`` as a distributed
    checkpoint (one process, no process group).

    Example::

        >>> torch_save_to_dcp("model.pt", "ckpt/model")  # doctest: +SKIP
    """
    state_dict = ember.load(os.fspath(torch_save_path), weights_only=False)
    if not isinstance(state_dict, dict):
        raise TypeError(f"torch_save_to_dcp: {torch_save_path} holds a "
                        f"{type(state_dict).__name__}, expected a state dict")
    save(state_dict, checkpoint_id=dcp_checkpoint_dir, no_dist=True)
