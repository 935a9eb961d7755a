"""ember.distributed: torch.distributed's API (process groups, collectives, stores).

Backends: ``shm`` (CPU tensors on one machine through shared memory; the default), ``mpi``
(mpi4py), ``gloo`` as a porting alias (shm on one machine, mpi across machines), and ``nccl``
(CUDA tensors through NVIDIA's NCCL, from the nvidia-nccl-cu13 wheel or EMBER_NCCL_LIBRARY;
"cpu:gloo,cuda:nccl" gives a group both).

Environment: ``EMBER_DISTRIBUTED_DEBUG=DETAIL`` checks before each collective that every rank
calls the same one with the same shapes and dtypes; ``EMBER_SHM_SLOT_BYTES`` (per-rank chunk of
the shm backend, default 16 MiB / world size within [1, 8] MiB), ``EMBER_SHM_MAILBOX_BYTES``
(send/recv chunk, 256 KiB), ``EMBER_SHM_SPIN_US`` / ``EMBER_SHM_YIELD_US`` (how long a wait
spins, then yields, before it sleeps on a futex; 50 and 1000); ``EMBER_NCCL_LIBRARY`` (the
libnccl.so.2 to load), ``EMBER_NCCL_BLOCKING_WAIT=1`` (nccl Work.wait() blocks the host).

Example::

    import ember
    import ember.distributed as dist

    dist.init_process_group("shm")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    t = ember.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    dist.destroy_process_group()
"""

try:
    from ._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

from . import algorithms as algorithms  # Join, DDP communication hooks
from ._common import DistBackendError, DistError, DistNetworkError, ReduceOp
from ._store import (
    DistStoreError,
    FileStore,
    HashStore,
    PrefixStore,
    QueueEmptyError,
    Store,
    TCPStore,
)
from ._work import Future, Work
from .algorithms import GradBucket
from .device_mesh import DeviceMesh, init_device_mesh
from .distributed_c10d import *  # noqa: F403
from .distributed_c10d import __all__ as _c10d_all
from .distributed_c10d import default_pg_timeout

__all__ = [
    "DeviceMesh", "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "FileStore", "Future",
    "GradBucket", "init_device_mesh",
    "HashStore", "PrefixStore", "QueueEmptyError", "ReduceOp", "Store", "TCPStore", "Work",
    "__version__", "default_pg_timeout",
    *_c10d_all,
]
