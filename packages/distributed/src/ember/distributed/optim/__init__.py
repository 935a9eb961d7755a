"""torch.distributed.optim: ZeroRedundancyOptimizer (needs ember-nn's ember.optim) and
PostLocalSGDOptimizer."""

from .post_localSGD_optimizer import PostLocalSGDOptimizer
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer

__all__ = ["PostLocalSGDOptimizer", "ZeroRedundancyOptimizer"]
