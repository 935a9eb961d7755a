"""Pipeline parallelism (torch.distributed.pipelining): each rank runs one stage of a model
(or several, stage s on rank s % world size, with the multi-stage schedules, or two in a V
with ScheduleZBVZeroBubble / ScheduleDualPipeV);
a schedule splits the batch into micro-batches and moves activations forward and gradients
back between neighbouring stages by point-to-point messages.

Example (2 ranks; rank r holds layers of stage r)::

    from ember.distributed.pipelining import PipelineStage, Schedule1F1B

    stage = PipelineStage(my_layers, rank, 2, device)
    schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)
    if rank == 0:
        schedule.step(x)
    else:
        losses = []
        out = schedule.step(target=y, losses=losses)
"""

from ._stage import PipelineStage
from .schedules import (
    PipelineScheduleMulti,
    PipelineScheduleSingle,
    Schedule1F1B,
    ScheduleDualPipeV,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleLoopedBFS,
    ScheduleZBVZeroBubble,
)

__all__ = ["PipelineScheduleMulti", "PipelineScheduleSingle", "PipelineStage", "Schedule1F1B",
           "ScheduleDualPipeV", "ScheduleGPipe", "ScheduleInterleaved1F1B",
           "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS", "ScheduleZBVZeroBubble"]
