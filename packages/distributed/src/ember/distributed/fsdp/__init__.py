"""ember.distributed.fsdp: PyTorch's FullyShardedDataParallel (torch.distributed.fsdp) on
ember's process groups; ``ember.distributed.fsdp.wrap`` holds the auto-wrap policies.

Example (every rank, inside an initialized process group)::

    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    model = FSDP(model, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)

``fully_shard`` (torch's per-parameter FSDP2, DTensor parameters) is here too.
"""

from . import wrap as wrap
from ._fully_shard import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    UnshardHandle,
    fully_shard,
    register_fsdp_forward_method,
)
from .api import (
    BackwardPrefetch,
    CPUOffload,
    FullOptimStateDictConfig,
    FullStateDictConfig,
    LocalOptimStateDictConfig,
    LocalStateDictConfig,
    MixedPrecision,
    OptimStateDictConfig,
    OptimStateKeyType,
    ShardedOptimStateDictConfig,
    ShardedStateDictConfig,
    ShardingStrategy,
    StateDictConfig,
    StateDictSettings,
    StateDictType,
)
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = [
    "BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FSDPModule", "FullOptimStateDictConfig",
    "FullStateDictConfig", "MixedPrecisionPolicy", "OffloadPolicy", "UnshardHandle",
    "fully_shard", "register_fsdp_forward_method",
    "FullyShardedDataParallel", "LocalOptimStateDictConfig", "LocalStateDictConfig",
    "MixedPrecision", "OptimStateDictConfig", "OptimStateKeyType", "ShardedOptimStateDictConfig",
    "ShardedStateDictConfig", "ShardingStrategy", "StateDictConfig", "StateDictSettings",
    "StateDictType",
]
