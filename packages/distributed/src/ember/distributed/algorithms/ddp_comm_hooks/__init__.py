"""Communication hooks for DistributedDataParallel (``ddp.register_comm_hook(state, hook)``).

>>> from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
>>> sorted(default_hooks.__all__)
['allreduce_hook', 'bf16_compress_hook', 'fp16_compress_hook']
"""

from ember.distributed.algorithms.ddp_comm_hooks import (
    default_hooks,
    post_localSGD_hook,
    powerSGD_hook,
)

__all__ = ["default_hooks", "post_localSGD_hook", "powerSGD_hook"]
