"""ember.distributed.checkpoint: torch.distributed.checkpoint's save / load of (distributed)
state dicts into a directory, in torch's format, so checkpoints move between the two libraries;
``state_dict`` has the get/set helpers that name entries by module path whatever wraps the
model (DDP, FSDP).

Example::

    import ember.distributed.checkpoint as dcp
    from ember.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd, "step": 100}, checkpoint_id="ckpt/100")
    dcp.load(sd := {"model": model_sd, "optim": optim_sd, "step": 0}, checkpoint_id="ckpt/100")
    set_state_dict(model, optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
"""

from .api import CheckpointException
from .default_planner import DefaultLoadPlanner, DefaultSavePlanner
from .filesystem import FileSystemReader, FileSystemWriter
from .metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)
from .state_dict_loader import load, load_state_dict
from .state_dict_saver import async_save, save, save_state_dict

__all__ = [
    "BytesStorageMetadata", "CheckpointException", "ChunkStorageMetadata", "DefaultLoadPlanner",
    "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter", "Metadata", "MetadataIndex",
    "StorageMeta", "TensorProperties", "TensorStorageMetadata", "async_save", "load",
    "load_state_dict", "save", "save_state_dict",
]
