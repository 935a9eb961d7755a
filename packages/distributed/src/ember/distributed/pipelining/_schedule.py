"""The schedules: GPipe (every micro-batch forward, then every one backward), 1F1B (after
a warm-up of forwards, one forward and one backward in turn, so fewer micro-batches' activations
are alive at once), and for several stages per rank LoopedBFS / Interleaved1F1B (run looped,
breadth first). All give the same gradients: each micro-batch's loss is backpropagated
and, with scale_grads, the gradients are divided by the number of micro-batches at the end."""

from __future__ import annotations

from typing import Any, Callable

import ember
from ember.utils._pytree import tree_map

from ._stage import PipelineStage
from .microbatch import merge_chunks, split_args_kwargs_into_chunks

__all__ = ["PipelineScheduleMulti", "PipelineScheduleSingle", "Schedule1F1B", "ScheduleGPipe",
           "ScheduleInterleaved1F1B", "ScheduleLoopedBFS"]


class _StageRun:
    """One stage's part of one step: its micro-batches' forward and backward passes, the
    activations kept between them, its outputs and losses."""

    def __init__(self, stage: PipelineStage, n: int, loss_fn: Callable | None,
                 mb_args: list, mb_kwargs: list, targets: list) -> None:
        self.st, self.n, self.loss_fn = stage, n, loss_fn
        self.mb_args, self.mb_kwargs, self.targets = mb_args, mb_kwargs, targets
        self.backward = loss_fn is not None and (not stage.is_last or targets[0] is not None)
        self.saved: list[Any] = [None] * n
        self.outputs: list[Any] = [None] * n
        self.losses: list[Any] = [None] * n

    def forward(self, i: int) -> None:
        st = self.st
        if st.is_first:
            inputs = tuple(self.mb_args[i])
        else:
            inputs = tuple(t.requires_grad_(self.backward and t.is_floating_point())
                           for t in st._recv(st.stage_index - 1))
        with ember.set_grad_enabled(self.backward and ember.is_grad_enabled()):
            out = st.submod(*inputs, **(self.mb_kwargs[i] if st.is_first else {}))
            outs = out if isinstance(out, tuple) else (out,)
            if st.is_last:
                self.outputs[i] = out
                if self.loss_fn is not None and self.targets[i] is not None:
                    self.losses[i] = self.loss_fn(out, self.targets[i])
            else:
                st._send(outs, st.stage_index + 1)
        self.saved[i] = (inputs, outs)

    def backward_mb(self, i: int) -> None:
        st = self.st
        inputs, outs = self.saved[i]
        if st.is_last:
            if self.losses[i] is not None:
                self.losses[i].backward()
        else:
            grads = st._recv(st.stage_index + 1)
            pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
            if pairs:
                ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        if not st.is_first:
            st._send(tuple(t.grad if t.grad is not None else ember.zeros_like(t)
                           for t in inputs), st.stage_index - 1)
        self.saved[i] = None  # this micro-batch's activations can go

    def finish(self, scale_grads: bool, losses: list | None, merge_spec: Any = None) -> Any:
        """Waits for the sends, scales the gradients; the last stage's merged output."""
        st, n = self.st, self.n
        st._wait_sends()
        if self.backward and scale_grads and n > 1:
            with ember.no_grad():
                for p in st.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(n)
        if st.is_last and losses is not None:
            losses.extend(loss for loss in self.losses if loss is not None)
        if not st.is_last:
            return None
        outs = self.outputs
        if self.backward:
            outs = [tree_map(lambda t: t.detach() if isinstance(t, ember.Tensor) else t, o)
                    for o in outs]
        return merge_chunks(outs, merge_spec)


class _Schedule:
    """What every schedule shares: micro-batch splitting and the step's bookkeeping."""

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None, scale_grads: bool, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None) -> None:
        if n_microbatches < 1:
            raise ValueError(f"pipeline: n_microbatches must be positive, got {n_microbatches}")
        self._stages = stages
        self._n = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._args_chunk_spec = args_chunk_spec
        self._kwargs_chunk_spec = kwargs_chunk_spec
        self._output_merge_spec = output_merge_spec

    def _runs(self, args: tuple, kwargs: dict, target: Any) -> list[_StageRun]:
        n = self._n
        mb_args, mb_kwargs = split_args_kwargs_into_chunks(
            args, kwargs, n, self._args_chunk_spec, self._kwargs_chunk_spec)
        targets = ([t[0] for t in split_args_kwargs_into_chunks((target,), {}, n)[0]]
                   if target is not None else [None] * n)
        return [_StageRun(st, n, self._loss_fn, mb_args, mb_kwargs, targets)
                for st in self._stages]

    def _order(self, runs: list[_StageRun]) -> None:
        raise NotImplementedError

    def step(self, *args: Any, target: Any = None, losses: list | None = None,
             **kwargs: Any) -> Any:
        """Runs one batch through the pipeline (the first stage passes the inputs, the last
        the target and a list that receives each micro-batch's loss); returns the last
        stage's merged output where it runs, None elsewhere."""
        runs = self._runs(args, kwargs, target)
        if not any(r.backward for r in runs):
            for r in runs:
                for i in range(self._n):
                    r.forward(i)
        else:
            self._order(runs)
        results = [r.finish(self.scale_grads, losses, self._output_merge_spec) for r in runs]
        return next((res for r, res in zip(runs, results) if r.st.is_last), None)


class PipelineScheduleSingle(_Schedule):
    """A schedule for one stage per rank."""

    def __init__(self, stage: PipelineStage, n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True) -> None:
        super().__init__([stage], n_microbatches, loss_fn, scale_grads, args_chunk_spec,
                         kwargs_chunk_spec, output_merge_spec)
        self._stage = stage


class ScheduleGPipe(PipelineScheduleSingle):
    """Every micro-batch forward, then every one backward.

    Example::

        >>> schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _order(self, runs: list[_StageRun]) -> None:
        (r,) = runs
        for i in range(self._n):
            r.forward(i)
        for i in range(self._n):
            r.backward_mb(i)


class Schedule1F1B(PipelineScheduleSingle):
    """One forward, one backward: stage s runs (stages - s - 1) forwards ahead, then
    alternates, so at most that many micro-batches' activations are kept.

    Example::

        >>> schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _order(self, runs: list[_StageRun]) -> None:
        (r,) = runs
        n = self._n
        warmup = min(r.st.num_stages - r.st.stage_index - 1, n)
        for i in range(warmup):
            r.forward(i)
        for i in range(n - warmup):
            r.forward(warmup + i)
            r.backward_mb(i)
        for i in range(n - warmup, n):
            r.backward_mb(i)


class PipelineScheduleMulti(_Schedule):
    """A schedule for several stages per rank: stage s runs on the group's rank
    s % group size (stages 0 and 2 on rank 0, 1 and 3 on rank 1 for 4 stages on 2 ranks)."""

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True, backward_requires_autograd: bool = True,
                 defer_pp_recv: bool = False) -> None:
        stages = list(stages)
        if not stages:
            raise ValueError("pipeline: a multi-stage schedule needs this rank's stages")
        if any(st.num_stages != stages[0].num_stages for st in stages):
            raise ValueError("pipeline: the stages disagree on the number of stages")
        super().__init__(sorted(stages, key=lambda st: st.stage_index), n_microbatches,
                         loss_fn, scale_grads, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec)

    def _order(self, runs: list[_StageRun]) -> None:
        # looped, breadth first: each local stage runs every micro-batch forward in stage
        # order, then backward in reverse stage order. Every rank goes through the stages in
        # the pipeline's order and sends never block, so no rank waits on one that waits on it.
        for r in runs:
            for i in range(self._n):
                r.forward(i)
        for r in reversed(runs):
            for i in range(self._n):
                r.backward_mb(i)


class ScheduleLoopedBFS(PipelineScheduleMulti):
    """Several stages per rank, breadth first: all micro-batches through each local stage in
    turn, then back.

    Example::

        >>> schedule = ScheduleLoopedBFS([stage0, stage2], 4, loss_fn=loss_fn)  # doctest: +SKIP
    """


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    """Several stages per rank (torch's interleaved 1F1B). ember runs the stages in the looped
    breadth-first order: the same losses and gradients, more activations alive at once than
    torch's interleaving keeps.

    Example::

        >>> schedule = ScheduleInterleaved1F1B([stage0, stage2], 4, loss_fn=loss_fn)  # doctest: +SKIP
    """
