"""A checkpoint directory, in torch's layout: ``.metadata`` (the pickled Metadata) and one
``__<rank>_0.distcp`` file per writing rank, in which each item (a tensor, or one non-tensor
value) is a whole ``torch.save`` archive at the offset ``_StorageInfo`` records."""

from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass
from typing import Any

__all__ = ["FileSystemReader", "FileSystemWriter"]


@dataclass
class _StorageInfo:
    """Where one item's bytes are: file (relative to the checkpoint), offset and length."""

    relative_path: str
    offset: int
    length: int
    transform_descriptors: Any = None


def _storage(cls: type, given: Any, checkpoint_id: Any, what: str) -> Any:
    """The writer / reader save and load use: the one given (pointed at checkpoint_id when
    that is given too), else one for checkpoint_id."""
    if given is not None:
        if not isinstance(given, cls):
            raise NotImplementedError(f"dcp.{what}: ember uses {cls.__name__}, not "
                                      f"{type(given).__name__}")
        if checkpoint_id is not None:
            given.path = os.fspath(checkpoint_id)
        return given
    if checkpoint_id is None:
        raise RuntimeError("`checkpoint_id` must be specified if storage_writer/storage_reader "
                           "is None.")
    return cls(checkpoint_id)


class FileSystemWriter:
    """Writes a checkpoint into the directory ``path`` (made when missing).

    Example::

        >>> dcp.save(state_dict, storage_writer=FileSystemWriter("ckpt/step100"))  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, single_file_per_rank: bool = True,
                 sync_files: bool = True, thread_count: int = 1,
                 per_thread_copy_ahead: int = 10_000_000, cache_staged_state_dict: bool = False,
                 overwrite: bool = True, _extensions: Any = None,
                 serialization_format: Any = None) -> None:
        self.path = os.fspath(path)
        self.sync_files = sync_files
        self.overwrite = overwrite

    def write_items(self, rank: int, items: list[tuple[str, Any]]) -> dict[str, _StorageInfo]:
        """Writes each (key, value) as a torch.save archive into this rank's file; returns
        where each went."""
        import ember

        os.makedirs(self.path, exist_ok=True)
        name = f"__{rank}_0.distcp"
        target = os.path.join(self.path, name)
        if not self.overwrite and os.path.exists(target):
            raise RuntimeError(f"FileSystemWriter: {target} exists and overwrite=False")
        where: dict[str, _StorageInfo] = {}
        tmp = target + ".tmp"
        with open(tmp, "wb") as f:
            for key, value in items:
                buf = io.BytesIO()
                ember.save(value, buf, format="torch")
                data = buf.getvalue()
                where[key] = _StorageInfo(name, f.tell(), len(data))
                f.write(data)
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
        return where

    def write_metadata(self, data: bytes) -> None:
        tmp = os.path.join(self.path, ".metadata.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            if self.sync_files:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.path, ".metadata"))  # last: the checkpoint is whole


class FileSystemReader:
    """Reads a checkpoint directory written by ember or by torch.distributed.checkpoint.

    Example::

        >>> dcp.load(state_dict, storage_reader=FileSystemReader("ckpt/step100"))  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike, _extension_registry: Any = None) -> None:
        self.path = os.fspath(path)

    def read_metadata(self) -> Any:
        from ._pickle import loads

        meta = os.path.join(self.path, ".metadata")
        if not os.path.exists(meta):
            raise FileNotFoundError(f"no checkpoint at {self.path}: {meta} is missing (an "
                                    "interrupted save writes it last)")
        with open(meta, "rb") as f:
            data = f.read()
        try:
            return loads(data)
        except (pickle.UnpicklingError, EOFError, ValueError, IndexError, KeyError,
                TypeError, AttributeError) as e:
            # a truncated or overwritten file: name it (the bare pickle error does not)
            raise pickle.UnpicklingError(
                f"{meta}: corrupt checkpoint metadata ({len(data)} bytes; "
                f"{type(e).__name__}: {e})") from e

    def read_item(self, info: _StorageInfo) -> Any:
        import ember

        if info.transform_descriptors:
            raise NotImplementedError(f"checkpoint item in {info.relative_path} was written "
                                      f"with transforms {info.transform_descriptors}, which "
                                      "ember does not read")
        path = os.path.join(self.path, info.relative_path)
        with open(path, "rb") as f:
            f.seek(info.offset)
            data = f.read(info.length)
        if len(data) != info.length:
            raise RuntimeError(f"checkpoint file {path} is truncated: item at {info.offset} "
                               f"needs {info.length} bytes, found {len(data)}")
        return ember.load(io.BytesIO(data), map_location="cpu", weights_only=False)
