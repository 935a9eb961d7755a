"""ember.distributed.tensor: DTensor, a tensor split or replicated over the ranks of a device
mesh of any number of dimensions (torch.distributed.tensor's API). Importing it defines a
``__torch_dispatch__`` subclass, which turns ember's dispatch hook on for the process (a small
cost on every op), so ``import ember.distributed`` does not import it.

Example (2 ranks)::

    from ember.distributed.tensor import DTensor, Shard, Replicate, distribute_tensor
    from ember.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2,))
    d = distribute_tensor(ember.randn(8, 4), mesh, [Shard(0)])  # rows 0-3 here, 4-7 there
    (d * 2).sum().full_tensor()                                  # reduced over the ranks
"""

from ..device_mesh import DeviceMesh, init_device_mesh
from ._dtensor import (
    DTensor,
    distribute_module,
    distribute_tensor,
    empty,
    full,
    ones,
    rand,
    randn,
    zeros,
)
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "DeviceMesh", "Partial", "Placement", "Replicate", "Shard",
           "distribute_module", "distribute_tensor", "empty", "full", "init_device_mesh",
           "ones", "rand", "randn", "zeros"]
