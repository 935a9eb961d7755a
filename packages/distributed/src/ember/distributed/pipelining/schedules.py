"""torch.distributed.pipelining.schedules: the schedule classes, the action IR (``_Action``,
``_ComputationType``), ``_PipelineScheduleRuntime`` and ``get_schedule_class``.

Example::

    >>> from ember.distributed.pipelining.schedules import get_schedule_class
    >>> get_schedule_class("GPipe").__name__
    'ScheduleGPipe'
"""

from ._schedule import (  # noqa: F401  (torch's private names too)
    PipelineScheduleMulti,
    PipelineScheduleSingle,
    Schedule1F1B,
    ScheduleDualPipeV,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleLoopedBFS,
    ScheduleZBVZeroBubble,
    _Action,
    _ComputationType,
    _PipelineScheduleRuntime,
    get_schedule_class,
)

__all__ = ["PipelineScheduleMulti", "PipelineScheduleSingle", "Schedule1F1B", "ScheduleDualPipeV",
           "ScheduleGPipe", "ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble",
           "ScheduleLoopedBFS", "ScheduleZBVZeroBubble", "get_schedule_class"]
