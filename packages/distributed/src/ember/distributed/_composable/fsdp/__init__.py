"""The older import path of FSDP2 (torch.distributed._composable.fsdp, torch 2.4-2.5), kept
as an alias of ember.distributed.fsdp."""

from ...fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
    register_fsdp_forward_method,
)

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "fully_shard", "register_fsdp_forward_method"]
