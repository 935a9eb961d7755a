"""ShardedGradScaler (torch.distributed.fsdp.sharded_grad_scaler): loss scaling for sharded
gradients. Each rank checks only its own shards for inf/NaN, so the flags are all-reduced:
when any rank found one, every rank skips the step and backs the scale off together.

Example (every rank, with an FSDP model and its optimizer)::

    scaler = ShardedGradScaler("cpu")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""

from __future__ import annotations

from typing import Any

import ember
import ember.distributed as dist
from ember.amp import GradScaler

__all__ = ["ShardedGradScaler"]


class ShardedGradScaler(GradScaler):
    """ember.amp.GradScaler whose inf/NaN check covers the shards of every rank of
    ``process_group`` (default: the world)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 backoff_factor: float = 0.5, growth_factor: float = 2.0,
                 growth_interval: int = 2000, enabled: bool = True,
                 process_group: Any = None) -> None:
        super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
        self.process_group = process_group if process_group is not None else dist.group.WORLD

    def _unscale_grads(self, optimizer: Any, inv_scale: ember.Tensor,
                       found_inf: ember.Tensor) -> dict[str, ember.Tensor]:
        flags = super()._unscale_grads(optimizer, inv_scale, found_inf)
        # one all-reduce per step on every rank, whatever devices its gradients are on
        total = found_inf.clone()
        for f in flags.values():
            if f is not found_inf:
                total += f.to(total.device)
        dist.all_reduce(total, op=dist.ReduceOp.MAX, group=self.process_group)
        if not flags:
            return {str(found_inf.device): total}
        return {key: total.to(f.device) for key, f in flags.items()}
