"""Datasets, samplers and the DataLoader, with PyTorch's ``torch.utils.data`` API.

Also reachable as ``ember.utils.data``. Worker processes hand their batches to the main process
through shared memory (see ``ember.multiprocessing_reductions``).
"""

from ember.multiprocessing_reductions import init_reductions as _init_reductions

from ._collate import default_collate, default_convert
from ._memory import CompactList
from ._worker import WorkerInfo, get_worker_info
from .dataloader import DataLoader
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

try:
    from ._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

_init_reductions()

__all__ = [
    "__version__",
    "BatchSampler",
    "ChainDataset",
    "CompactList",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
