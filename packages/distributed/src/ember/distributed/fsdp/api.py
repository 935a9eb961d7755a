"""The options of FullyShardedDataParallel (torch.distributed.fsdp.api): sharding strategies,
prefetch modes, mixed precision, CPU offload and the state-dict kinds with their configs.

>>> from ember.distributed.fsdp import MixedPrecision, ShardingStrategy
>>> import ember
>>> MixedPrecision(param_dtype=ember.bfloat16).reduce_dtype is None
True
>>> ShardingStrategy.FULL_SHARD.value
1
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

__all__ = [
    "BackwardPrefetch", "CPUOffload", "FullOptimStateDictConfig", "FullStateDictConfig",
    "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision", "OptimStateDictConfig",
    "OptimStateKeyType", "ShardedOptimStateDictConfig", "ShardedStateDictConfig",
    "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType",
]


class ShardingStrategy(Enum):
    """How parameters, gradients and optimizer state are split over the ranks.

    FULL_SHARD: parameters, gradients and optimizer state sharded; parameters gathered for each
    unit's forward, freed after it, gathered again for its backward. SHARD_GRAD_OP: as
    FULL_SHARD, but the gathered parameters stay from forward until backward. NO_SHARD: every
    rank keeps everything and gradients are all-reduced (as DistributedDataParallel).
    HYBRID_SHARD / _HYBRID_SHARD_ZERO2: FULL_SHARD / SHARD_GRAD_OP within a shard group (a
    node), the shards replicated across the groups and their gradients averaged over them.
    """

    FULL_SHARD = auto()
    SHARD_GRAD_OP = auto()
    NO_SHARD = auto()
    HYBRID_SHARD = auto()
    _HYBRID_SHARD_ZERO2 = auto()


class BackwardPrefetch(Enum):
    """When the next unit's parameters are gathered in backward. ember's collectives run
    synchronously when first needed, so both modes (and None) behave the same."""

    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class StateDictType(Enum):
    """What ``module.state_dict()`` of an FSDP module gives (see
    ``FullyShardedDataParallel.state_dict_type``)."""

    FULL_STATE_DICT = auto()
    LOCAL_STATE_DICT = auto()
    SHARDED_STATE_DICT = auto()


class OptimStateKeyType(Enum):
    """Keys of an optimizer state dict: parameter ids (indices) or names."""

    PARAM_NAME = auto()
    PARAM_ID = auto()


@dataclass
class MixedPrecision:
    """Dtypes for computation: ``param_dtype`` (forward and backward run with the gathered
    parameters in it), ``reduce_dtype`` (gradient reduction; default ``param_dtype``),
    ``buffer_dtype`` (buffers are cast to it). The sharded parameters, the gradients the
    optimizer sees and the state dict keep the original dtype (``keep_low_precision_grads=True``:
    the gradients stay in ``reduce_dtype``, for optimizers that run in low precision).
    ``cast_forward_inputs``:
    every FSDP unit casts floating-point inputs to ``param_dtype``; ``cast_root_forward_inputs``:
    the root does (the default)."""

    param_dtype: Any = None
    reduce_dtype: Any = None
    buffer_dtype: Any = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: tuple = ()


@dataclass
class CPUOffload:
    """``offload_params=True``: the sharded parameters and their gradients live in CPU memory
    (the optimizer steps there); they are moved to the compute device only to be gathered."""

    offload_params: bool = False


@dataclass
class StateDictConfig:
    """Base of the state-dict configs; ``offload_to_cpu`` moves the tensors to the CPU."""

    offload_to_cpu: bool = False


@dataclass
class FullStateDictConfig(StateDictConfig):
    """FULL_STATE_DICT: unsharded tensors under the original names; with ``rank0_only`` only
    rank 0 gets them (the others get an empty dict)."""

    rank0_only: bool = False


@dataclass
class LocalStateDictConfig(StateDictConfig):
    """LOCAL_STATE_DICT: each rank's flat shards under the flat parameters' names."""


@dataclass
class ShardedStateDictConfig(StateDictConfig):
    """SHARDED_STATE_DICT (needs sharded tensors, which ember does not have)."""

    _use_dtensor: bool = False


@dataclass
class OptimStateDictConfig:
    """Base of the optimizer state-dict configs."""

    offload_to_cpu: bool = True


@dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    """Full optimizer state under the parameters' original names (``rank0_only``: only rank 0
    gets it)."""

    rank0_only: bool = False


@dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    """The optimizer's own state dict of the flat shards."""

    offload_to_cpu: bool = False


@dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    """Sharded optimizer state (not in ember)."""

    _use_dtensor: bool = False


@dataclass
class StateDictSettings:
    """The state-dict type and configs an FSDP module uses (``set_state_dict_type``)."""

    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig
