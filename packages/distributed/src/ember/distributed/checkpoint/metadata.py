"""What a distributed checkpoint's ``.metadata`` file describes (torch.distributed.checkpoint
.metadata's classes, field for field, so the file is the same pickle in both libraries): each
state-dict entry (a tensor's dtype, size and the chunks it was saved in, or opaque bytes) and
where each item's bytes lie in the ``.distcp`` files."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

import ember

__all__ = ["BytesStorageMetadata", "ChunkStorageMetadata", "Metadata", "MetadataIndex",
           "StorageMeta", "TensorProperties", "TensorStorageMetadata"]


class _MEM_FORMAT_ENCODING(enum.Enum):  # noqa: N801  (torch's name, in the pickle)
    TORCH_CONTIGUOUS_FORMAT = 0
    TORCH_CHANNELS_LAST = 1
    TORCH_PRESERVE_FORMAT = 2


_FORMATS = {
    _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT: "contiguous_format",
    _MEM_FORMAT_ENCODING.TORCH_CHANNELS_LAST: "channels_last",
    _MEM_FORMAT_ENCODING.TORCH_PRESERVE_FORMAT: "preserve_format",
}


@dataclass
class ChunkStorageMetadata:
    """One saved piece of a tensor: where it starts in the whole tensor and its sizes."""

    offsets: Any
    sizes: Any


@dataclass
class TensorProperties:
    """A saved tensor's dtype, layout and flags."""

    dtype: Any
    layout: Any = field(default_factory=lambda: ember.strided)
    requires_grad: bool = False
    memory_format: Any = field(default_factory=lambda: ember.contiguous_format)
    pin_memory: bool = False

    # torch pickles the memory format as an enum (memory formats do not pickle)
    def __getstate__(self) -> tuple:
        code = next((c for c, n in _FORMATS.items()
                     if getattr(ember, n) == self.memory_format),
                    _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT)
        return (self.dtype, self.layout, self.requires_grad, code, self.pin_memory)

    def __setstate__(self, state: tuple) -> None:
        self.dtype, self.layout, self.requires_grad, code, self.pin_memory = state
        self.memory_format = getattr(ember, _FORMATS[_MEM_FORMAT_ENCODING(code)])

    @staticmethod
    def create_from_tensor(tensor: ember.Tensor) -> TensorProperties:
        return TensorProperties(dtype=tensor.dtype, layout=tensor.layout,
                                requires_grad=tensor.requires_grad,
                                memory_format=ember.contiguous_format,
                                pin_memory=tensor.is_pinned())


@dataclass
class TensorStorageMetadata:
    """A tensor entry: its properties, whole size and the chunks that hold it."""

    properties: TensorProperties
    size: Any
    chunks: list[ChunkStorageMetadata]


@dataclass
class BytesStorageMetadata:
    """A non-tensor entry, saved as one pickled object."""


@dataclass
class StorageMeta:
    checkpoint_id: Any = None
    save_id: str | None = None
    load_id: str | None = None
    modules: list[str] = field(default_factory=list)


@dataclass
class Metadata:
    """Every entry of the saved state dict (by flattened key), how to put nested entries back
    (planner_data: key -> path) and where each item is stored (storage_data)."""

    state_dict_metadata: dict[str, Any]
    planner_data: Any = None
    storage_data: Any = None
    storage_meta: StorageMeta | None = None
    version: str | None = None


@dataclass(frozen=True)
class MetadataIndex:
    """Names one stored item: the entry's key and, for a tensor chunk, its offsets."""

    fqn: str
    offset: Any = None
    index: int | None = field(default=None, compare=False, hash=False)

    def __init__(self, fqn: str, offset: Sequence[int] | None = None,
                 index: int | None = None) -> None:
        object.__setattr__(self, "fqn", fqn)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "offset", None if offset is None else ember.Size(offset))
