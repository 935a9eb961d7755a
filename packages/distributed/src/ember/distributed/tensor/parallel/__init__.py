"""Tensor parallelism on DTensor (torch.distributed.tensor.parallel): parallelize_module with
ColwiseParallel / RowwiseParallel plans for nn.Linear and nn.Embedding, SequenceParallel for
norms and dropout on sequence-split activations, PrepareModuleInput / Output to lay out a
module's inputs and outputs, and loss_parallel for cross entropy on class-split logits.

Example (2 ranks, the same input on both)::

    from ember.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, parallelize_module)

    parallelize_module(mlp, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    out = mlp(x)  # fc1's output columns and fc2's input rows split over the ranks
"""

from .api import parallelize_module
from .loss import loss_parallel
from .style import (
                    ColwiseParallel,
                    ParallelStyle,
                    PrepareModuleInput,
                    PrepareModuleInputOutput,
                    PrepareModuleOutput,
                    RowwiseParallel,
                    SequenceParallel,
)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel", "loss_parallel",
           "parallelize_module"]
