"""Data-parallel training across processes: ``DistributedDataParallel`` (torch.nn.parallel's API).

>>> from ember.nn.parallel import DistributedDataParallel
>>> DistributedDataParallel.__name__
'DistributedDataParallel'
"""

from ember.nn.parallel.data_parallel import DataParallel, data_parallel
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
