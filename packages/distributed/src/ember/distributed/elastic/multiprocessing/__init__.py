"""torch.distributed.elastic.multiprocessing: the error reporting of launched workers."""

from . import errors as errors
