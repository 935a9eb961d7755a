"""torch.distributed.nn: collectives that autograd differentiates through."""

from .functional import all_gather, all_reduce, all_to_all, broadcast, reduce_scatter

__all__ = ["all_gather", "all_reduce", "all_to_all", "broadcast", "reduce_scatter"]
