"""ember.distributed.pipelining's argument checks (one rank); the 2-stage schedules against
torch's reference run as the pipeline_schedules program of test_compat_dist_programs.py."""

from __future__ import annotations

import ember
import ember.distributed as dist
import numpy as np
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
        stage = PipelineStage(nn.Linear(2, 2), 0, 1)
        with pytest.raises(ValueError, match="n_microbatches must be positive"):
            ScheduleGPipe(stage, 0)
        one = Schedule1F1B(stage, 4, loss_fn=lambda o, t: (o - t).pow(2).mean())
        with pytest.raises(ValueError, match="too few for 4 micro-batches"):
            one.step(ember.ones(3, 2), target=ember.ones(3, 2))
        losses: list = []
        out = one.step(ember.ones(4, 2), target=ember.zeros(4, 2), losses=losses)
        assert out.shape == (4, 2) and len(losses) == 4  # one stage: first and last at once
    finally:
        dist.destroy_process_group()


def test_two_stages_on_one_rank_train_like_the_whole_model():
    """A multi-stage schedule with both stages on one rank (messages stay in the process):
    the same loss and gradients as the unsplit model."""
    from ember.distributed.pipelining import ScheduleInterleaved1F1B, ScheduleLoopedBFS

    dist.init_process_group("shm", store=dist.HashStore(), rank=0, world_size=1)
    try:
        for schedule_cls in (ScheduleLoopedBFS, ScheduleInterleaved1F1B):
            ember.manual_seed(0)
            whole = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
            parts = [nn.Sequential(nn.Linear(3, 4), nn.Tanh()), nn.Linear(4, 2)]
            with ember.no_grad():
                parts[0][0].weight.copy_(whole[0].weight)
                parts[0][0].bias.copy_(whole[0].bias)
                parts[1].weight.copy_(whole[2].weight)
                parts[1].bias.copy_(whole[2].bias)
            x, y = ember.randn(6, 3), ember.randn(6, 2)
            loss_fn = nn.MSELoss()
            loss_fn(whole(x[:3]), y[:3]).div(2).backward()
            loss_fn(whole(x[3:]), y[3:]).div(2).backward()
            stages = [PipelineStage(parts[i], i, 2) for i in range(2)]
            losses: list = []
            out = schedule_cls(stages, 2, loss_fn=loss_fn).step(x, target=y, losses=losses)
            assert out.shape == (6, 2) and len(losses) == 2
            np.testing.assert_allclose(parts[0][0].weight.grad.numpy(),
                                       whole[0].weight.grad.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(parts[1].bias.grad.numpy(), whole[2].bias.grad.numpy(),
                                       rtol=1e-5, atol=1e-7)
    finally:
        dist.destroy_process_group()


def test_microbatch_split_and_merge():
    from ember.distributed.pipelining.microbatch import (
        TensorChunkSpec,
        merge_chunks,
        split_args_kwargs_into_chunks,
    )

    x, mask = ember.arange(12.0).reshape(6, 2), ember.arange(6.0).reshape(1, 6)
    args, kwargs = split_args_kwargs_into_chunks(
        (x, "tag"), {"mask": mask}, 3, kwargs_chunk_spec=TensorChunkSpec.from_dict({"mask": 1}))
    assert [a[0].shape for a in args] == [(2, 2)] * 3 and all(a[1] == "tag" for a in args)
    assert [k["mask"].tolist() for k in kwargs] == [[[0.0, 1.0]], [[2.0, 3.0]], [[4.0, 5.0]]]
    assert str(TensorChunkSpec(1)) == "TensorChunkSpec(1)"
    merged = merge_chunks([(a[0], a[1]) for a in args], (TensorChunkSpec(0), None))
    assert merged[0].tolist() == x.tolist() and merged[1] == "tag"
    with pytest.raises(ValueError, match="args_chunk_spec has 1 entries for 2"):
        split_args_kwargs_into_chunks((x, x), {}, 2, args_chunk_spec=(TensorChunkSpec(0),))
