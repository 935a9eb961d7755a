"""ember.distributed.pipelining's argument checks (one rank); the 2-stage schedules against
torch's reference run as the pipeline_schedules program of test_compat_dist_programs.py."""

from __future__ import annotations

import ember
import ember.distributed as dist
import pytest
from ember import nn
from ember.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe


def test_needs_a_process_group():
    with pytest.raises(RuntimeError, match="initialized process group"):
        PipelineStage(nn.Linear(2, 2), 0, 1)


def test_stage_and_schedule_checks():
    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(ValueError, match=r"not in \[0, 2\)"):
            PipelineStage(nn.Linear(2, 2), 2, 2)
        with pytest.raises(ValueError, match="2 stages need a group of 2 ranks"):
            PipelineStage(nn.Linear(2, 2), 0, 2)
        stage = PipelineStage(nn.Linear(2, 2), 0, 1)
        with pytest.raises(ValueError, match="n_microbatches must be positive"):
            ScheduleGPipe(stage, 0)
        one = Schedule1F1B(stage, 4, loss_fn=lambda o, t: (o - t).pow(2).mean())
        with pytest.raises(ValueError, match="cannot be split into 4 micro-batches"):
            one.step(ember.ones(3, 2), target=ember.ones(3, 2))
        losses: list = []
        out = one.step(ember.ones(4, 2), target=ember.zeros(4, 2), losses=losses)
        assert out.shape == (4, 2) and len(losses) == 4  # one stage: first and last at once
    finally:
        dist.destroy_process_group()
