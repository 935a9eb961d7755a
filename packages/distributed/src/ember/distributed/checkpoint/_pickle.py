"""The ``.metadata`` pickle in torch's names: written with the classes named as
torch.distributed.checkpoint's (so torch reads an ember checkpoint), read with an unpickler
that builds only the metadata classes, Sizes, dtypes, layouts and paths (so a checkpoint, from
either library, runs no code named in it)."""

from __future__ import annotations

import io
import pathlib
import pickle
from typing import Any

import ember
from ember._torch_checkpoint import _TorchName, _TorchPickler

from . import metadata as md
from .filesystem import _StorageInfo

_MD = "torch.distributed.checkpoint.metadata"
_CLASSES = {
    (_MD, "Metadata"): md.Metadata, (_MD, "TensorStorageMetadata"): md.TensorStorageMetadata,
    (_MD, "TensorProperties"): md.TensorProperties,
    (_MD, "ChunkStorageMetadata"): md.ChunkStorageMetadata,
    (_MD, "BytesStorageMetadata"): md.BytesStorageMetadata,
    (_MD, "MetadataIndex"): md.MetadataIndex, (_MD, "StorageMeta"): md.StorageMeta,
    (_MD, "_MEM_FORMAT_ENCODING"): md._MEM_FORMAT_ENCODING,
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): _StorageInfo,
}
_NAMES = {cls: key for key, cls in _CLASSES.items()}


class _MetadataPickler(_TorchPickler):
    def save_global(self, obj: Any, name: Any = None) -> None:
        if isinstance(obj, type) and obj in _NAMES:
            return super().save_global(_TorchName(*_NAMES[obj]))
        return super().save_global(obj, name)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) and obj in _NAMES:
            return NotImplemented  # a class: save_global names it
        if isinstance(obj, ember.layout):
            return (_TorchName("torch.serialization", "_get_layout"),
                    ("torch." + str(obj).split(".")[-1],))
        if type(obj) in _NAMES:
            return NotImplemented  # the dataclasses pickle as usual, under torch's class names
        return super().reducer_override(obj)


def dumps(metadata: md.Metadata) -> bytes:
    buf = io.BytesIO()
    _MetadataPickler(buf, 4).dump(metadata)
    return buf.getvalue()


def _layout(name: str) -> Any:
    layout = getattr(ember, str(name).rsplit(".", 1)[-1], None)
    if not isinstance(layout, ember.layout):
        raise pickle.UnpicklingError(f"checkpoint metadata: unknown layout {name!r}")
    return layout


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _CLASSES:
            return _CLASSES[(module, name)]
        if module == "torch" and name == "Size":
            return ember.Size
        if module == "torch" and isinstance(getattr(ember, name, None), ember.dtype):
            return getattr(ember, name)
        if module == "torch" and name == "device":
            return ember.device
        if module == "torch.serialization" and name == "_get_layout":
            return _layout
        if module == "pathlib" and name in ("PosixPath", "WindowsPath", "PurePosixPath",
                                            "PureWindowsPath", "Path"):
            return getattr(pathlib, name)
        if module == "collections" and name == "OrderedDict":
            import collections

            return collections.OrderedDict
        raise pickle.UnpicklingError(f"checkpoint metadata names {module}.{name}, which a "
                                     "checkpoint's metadata never holds; refusing to load it")


def loads(data: bytes) -> md.Metadata:
    meta = _MetadataUnpickler(io.BytesIO(data)).load()
    if not isinstance(meta, md.Metadata):
        raise ValueError(f"checkpoint metadata holds a {type(meta).__name__}, not Metadata")
    return meta
