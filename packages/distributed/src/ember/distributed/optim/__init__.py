"""torch.distributed.optim: ZeroRedundancyOptimizer (needs ember-nn's ember.optim)."""

from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]
