"""The schedules: GPipe (every micro-batch forward, then every one backward) and 1F1B (after
a warm-up of forwards, one forward and one backward in turn, so fewer micro-batches' activations
are alive at once). Both give the same gradients: each micro-batch's loss is backpropagated
and, with scale_grads, the gradients are divided by the number of micro-batches at the end."""

from __future__ import annotations

from typing import Any, Callable

import ember

from ._stage import PipelineStage

__all__ = ["PipelineScheduleSingle", "Schedule1F1B", "ScheduleGPipe"]


def _split(value: Any, n: int) -> list:
    if isinstance(value, ember.Tensor):
        if value.shape[0] < n:
            raise ValueError(f"pipeline: a batch of {value.shape[0]} rows cannot be split into "
                             f"{n} micro-batches")
        return list(ember.tensor_split(value, n, 0))
    return [value] * n


class PipelineScheduleSingle:
    """A schedule for one stage per rank."""

    _order = "gpipe"

    def __init__(self, stage: PipelineStage, n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True) -> None:
        if n_microbatches < 1:
            raise ValueError(f"pipeline: n_microbatches must be positive, got {n_microbatches}")
        self._stage = stage
        self._n = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads

    def step(self, *args: Any, target: Any = None, losses: list | None = None,
             **kwargs: Any) -> Any:
        """Runs one batch through the pipeline (the first stage passes the inputs, the last
        the target and a list that receives each micro-batch's loss); returns the last
        stage's merged output, None elsewhere."""
        st, n = self._stage, self._n
        mb_args = list(zip(*[_split(a, n) for a in args])) if args else [()] * n
        mb_kwargs = [{k: _split(v, n)[i] for k, v in kwargs.items()} for i in range(n)]
        targets = _split(target, n) if target is not None else [None] * n
        backward = self._loss_fn is not None and (not st.is_last or target is not None)
        saved: list[Any] = [None] * n
        outputs: list[Any] = [None] * n
        mb_losses: list[Any] = [None] * n

        def forward(i: int) -> None:
            if st.is_first:
                inputs = tuple(mb_args[i])
            else:
                inputs = tuple(t.requires_grad_(backward and t.is_floating_point())
                               for t in st._recv(st.stage_index - 1))
            with ember.set_grad_enabled(backward and ember.is_grad_enabled()):
                out = st.submod(*inputs, **(mb_kwargs[i] if st.is_first else {}))
                outs = out if isinstance(out, tuple) else (out,)
                if st.is_last:
                    outputs[i] = out
                    if self._loss_fn is not None and targets[i] is not None:
                        mb_losses[i] = self._loss_fn(out, targets[i])
                else:
                    st._send(outs, st.stage_index + 1)
            saved[i] = (inputs, outs)

        def backward_mb(i: int) -> None:
            inputs, outs = saved[i]
            if st.is_last:
                if mb_losses[i] is not None:
                    mb_losses[i].backward()
            else:
                grads = st._recv(st.stage_index + 1)
                pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
                if pairs:
                    ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            if not st.is_first:
                st._send(tuple(t.grad if t.grad is not None else ember.zeros_like(t)
                               for t in inputs), st.stage_index - 1)
            saved[i] = None  # this micro-batch's activations can go

        if not backward:
            for i in range(n):
                forward(i)
        elif self._order == "gpipe":
            for i in range(n):
                forward(i)
            for i in range(n):
                backward_mb(i)
        else:  # 1F1B
            warmup = min(st.num_stages - st.stage_index - 1, n)
            for i in range(warmup):
                forward(i)
            for i in range(n - warmup):
                forward(warmup + i)
                backward_mb(i)
            for i in range(n - warmup, n):
                backward_mb(i)
        st._wait_sends()
        if backward and self.scale_grads and n > 1:
            with ember.no_grad():
                for p in st.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(n)
        if st.is_last and losses is not None:
            losses.extend(loss for loss in mb_losses if loss is not None)
        if not st.is_last:
            return None
        if isinstance(outputs[0], ember.Tensor):
            return ember.cat([o.detach() if backward else o for o in outputs], 0)
        return outputs


class ScheduleGPipe(PipelineScheduleSingle):
    """Every micro-batch forward, then every one backward.

    Example::

        >>> schedule = ScheduleGPipe(stage, n_microbatches=4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    _order = "gpipe"


class Schedule1F1B(PipelineScheduleSingle):
    """One forward, one backward: stage s runs (stages - s - 1) forwards ahead, then
    alternates, so at most that many micro-batches' activations are kept.

    Example::

        >>> schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    _order = "1f1b"
