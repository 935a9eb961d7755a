"""The schedules. Each one is a list of actions per rank (``pipeline_order`` for the
multi-stage ones, torch's action strings: ``"2F0"`` forward of micro-batch 0 on stage 2,
``"2B0"`` its full backward, ``"2I0"`` / ``"2W0"`` its input-gradient and weight-gradient
halves, None an idle slot); a rank runs its list in order, receiving a stage's activations or
gradients when the action needs them (sends never block, so a schedule that can complete - each
one is checked when it is built - cannot deadlock).

- GPipe: every micro-batch forward, then every one backward.
- 1F1B: after a warm-up of forwards, one forward and one backward in turn.
- LoopedBFS (several stages per rank): each local stage runs all micro-batches forward in
  turn, then backward.
- Interleaved1F1B: Megatron's interleaved schedule, depth first: warm-up forwards, then one
  forward and one backward in turn over the local stages, then the cool-down backwards; fewer
  activations alive than LoopedBFS.
- InterleavedZeroBubble (ZB1P), ZBVZeroBubble (two stages per rank placed in a V), DualPipeV:
  backward split into the input gradient (sent upstream at once) and the weight gradient (run
  later, filling the bubbles; in ember the input step computes both, see
  PipelineStage.backward_one_chunk).

All give the same gradients: each micro-batch's loss is backpropagated and, with scale_grads,
the gradients are divided by the number of micro-batches at the end."""

from __future__ import annotations

import re
from collections import defaultdict
from enum import Enum
from typing import Any, Callable, NamedTuple

import ember
from ember.utils._pytree import tree_map

from ._stage import PipelineStage, stage_to_rank_mapping
from .microbatch import merge_chunks, split_args_kwargs_into_chunks

__all__ = ["PipelineScheduleMulti", "PipelineScheduleSingle", "Schedule1F1B", "ScheduleDualPipeV",
           "ScheduleGPipe", "ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble",
           "ScheduleLoopedBFS", "ScheduleZBVZeroBubble", "get_schedule_class"]


class _ComputationType(str, Enum):
    """What an action does (the letters of torch's action strings)."""

    FORWARD = "F"
    BACKWARD_INPUT = "I"
    BACKWARD_WEIGHT = "W"
    FULL_BACKWARD = "B"
    OVERLAP_F_B = "OVERLAP_F_B"


F = _ComputationType.FORWARD
I = _ComputationType.BACKWARD_INPUT  # noqa: E741 - torch's letter
W = _ComputationType.BACKWARD_WEIGHT
B = _ComputationType.FULL_BACKWARD
OVERLAP_F_B = _ComputationType.OVERLAP_F_B
_ACTION = re.compile(r"(\d+)(F|I|W|B)(\d*)$")


class _Action(NamedTuple):
    """One step of a rank's schedule: stage, computation, micro-batch (an OVERLAP_F_B action
    runs its sub_actions, a forward and a backward, one after the other)."""

    stage_index: int
    computation_type: _ComputationType
    microbatch_index: int | None = None
    sub_actions: tuple[_Action, ...] | None = None

    def __repr__(self) -> str:
        if self.sub_actions is not None:
            return "(" + ";".join(map(repr, self.sub_actions)) + ")" + \
                self.computation_type.value
        mb = "" if self.microbatch_index is None else str(self.microbatch_index)
        return f"{self.stage_index}{self.computation_type.value}{mb}"

    __str__ = __repr__

    @staticmethod
    def from_str(text: str) -> _Action | None:
        """The action a string like ``"2F0"`` or ``"(0F3;3B1)OVERLAP_F_B"`` names (None for
        an empty string)."""
        text = text.strip()
        if not text:
            return None
        if text.startswith("(") and ")" in text:
            inner, kind = text[1:].split(")", 1)
            subs = tuple(a for a in (_Action.from_str(s) for s in inner.split(";")) if a)
            return _Action(-1, _ComputationType(kind), None, subs or None)
        m = _ACTION.match(text)
        if m is None:
            raise RuntimeError(f"Invalid action string: {text!r}, expected [stage][F|I|W|B]"
                               f"[microbatch], e.g. 2F0")
        return _Action(int(m[1]), _ComputationType(m[2]), int(m[3]) if m[3] else None)


def _check_order(order: dict[int, list[_Action | None]], num_stages: int, n: int,
                 name: str) -> None:
    """Raises ValueError unless every stage runs each micro-batch forward and backward (full,
    or input then weight) exactly once and the ranks' lists can run to the end together."""
    seen: dict[tuple, int] = defaultdict(int)
    for actions in order.values():
        for a in actions:
            for c in (a.sub_actions or (a,)) if a is not None else ():
                seen[(c.stage_index, c.computation_type, c.microbatch_index)] += 1
    for s in range(num_stages):
        for m in range(n):
            full, inp, wgt = seen[(s, B, m)], seen[(s, I, m)], seen[(s, W, m)]
            if seen[(s, F, m)] != 1 or not (full == 1 and inp == wgt == 0
                                             or full == 0 and inp == wgt == 1):
                raise ValueError(f"{name}: the schedule does not run micro-batch {m} of stage "
                                 f"{s} forward and backward exactly once")
    done: set[tuple] = set()

    def ready(c: _Action, extra: set) -> bool:
        s, kind, m = c.stage_index, c.computation_type, c.microbatch_index
        have = done | extra
        if kind is F:
            return s == 0 or (s - 1, F, m) in have
        if kind is W:
            return (s, I, m) in have
        upstream = s == num_stages - 1 or (s + 1, B, m) in have or (s + 1, I, m) in have
        return (s, F, m) in have and upstream

    at = dict.fromkeys(order, 0)
    while True:
        moved = False
        for r, actions in order.items():
            while at[r] < len(actions):
                a = actions[at[r]]
                subs = (a.sub_actions or (a,)) if a is not None else ()
                extra: set[tuple] = set()
                for c in subs:
                    if not ready(c, extra):
                        break
                    extra.add((c.stage_index, c.computation_type, c.microbatch_index))
                else:
                    done.update(extra)
                    at[r] += 1
                    moved = True
                    continue
                break
        if all(at[r] == len(a) for r, a in order.items()):
            return
        if not moved:
            stuck = {r: str(order[r][at[r]]) for r in order if at[r] < len(order[r])}
            raise ValueError(f"{name}: the schedule cannot complete, each rank waits for "
                             f"another (next actions by rank: {stuck})")


class _Schedule:
    """What every schedule shares: micro-batch splitting, running this rank's actions and the
    step's bookkeeping."""

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None, scale_grads: bool, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None) -> None:
        if n_microbatches < 1:
            raise ValueError(f"pipeline: n_microbatches must be positive, got {n_microbatches}")
        self._stages = stages
        self._n = self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._args_chunk_spec = args_chunk_spec
        self._kwargs_chunk_spec = kwargs_chunk_spec
        self._output_merge_spec = output_merge_spec
        self._has_backward = loss_fn is not None
        # the most micro-batches whose activations were alive at once on this rank, last step
        self._peak_live_activations = 0

    def _rank_actions(self) -> list[_Action | None]:
        raise NotImplementedError

    def _run(self, actions: list[_Action | None], mb_args: list, mb_kwargs: list,
             targets: list, return_outputs: bool) -> list:
        by_index = {st.stage_index: st for st in self._stages}
        losses: list = [None] * self._n
        live = peak = 0

        def perform(a: _Action) -> None:
            nonlocal live, peak
            st, m, kind = by_index[a.stage_index], a.microbatch_index, a.computation_type
            if kind is F:
                out = st.forward_one_chunk(m, mb_args[m], mb_kwargs[m],
                                           save_forward_output=return_outputs)
                if st.is_last and self._loss_fn is not None and targets[m] is not None:
                    losses[m] = self._loss_fn(out, targets[m])
                live += self._has_backward
                peak = max(peak, live)
            elif kind in (B, I):
                st.backward_one_chunk(m, loss=losses[m] if st.is_last else None,
                                      full_backward=kind is B)
                live -= 1  # ember frees the activations at I already (see backward_one_chunk)
            elif kind is W:
                st.backward_weight_one_chunk(m)
            else:
                raise ValueError(f"pipeline: cannot run action {a}")

        for a in actions:
            if a is None:
                continue
            if a.stage_index not in by_index and a.sub_actions is None:
                raise RuntimeError(f"pipeline: action {a} is for stage {a.stage_index}, which "
                                   f"is not on this rank")
            for sub in a.sub_actions or (a,):
                perform(sub)
        self._peak_live_activations = peak
        return losses

    def _split(self, args: tuple, kwargs: dict, target: Any) -> tuple[list, list, list]:
        n = self._n
        mb_args, mb_kwargs = split_args_kwargs_into_chunks(
            args, kwargs, n, self._args_chunk_spec, self._kwargs_chunk_spec)
        targets = ([t[0] for t in split_args_kwargs_into_chunks((target,), {}, n)[0]]
                   if target is not None else [None] * n)
        return mb_args, mb_kwargs, targets

    def step(self, *args: Any, target: Any = None, losses: list | None = None,
             return_outputs: bool = True, **kwargs: Any) -> Any:
        """Runs one batch through the pipeline (the first stage passes the inputs, the last
        the target and a list that receives each micro-batch's loss); returns the last
        stage's merged output where it runs, None elsewhere."""
        if self._has_backward and not ember.is_grad_enabled():
            raise RuntimeError("step() requires gradients to be enabled for backward "
                               "computation; it should not be used under no_grad(). Please "
                               "call eval() instead.")
        has_last = any(st.is_last for st in self._stages)
        if self._has_backward and has_last and target is None:
            raise RuntimeError("pipeline: the last stage computes the loss, step() needs its "
                               "target (target=...)")
        mb_args, mb_kwargs, targets = self._split(args, kwargs, target)
        for st in self._stages:
            st.has_backward = self._has_backward
            st.clear_runtime_states()
        actions = self._rank_actions()
        if not self._has_backward:
            # the forwards alone, in the schedule's order (those paired with a backward too)
            actions = [c for a in actions if a is not None for c in (a.sub_actions or (a,))
                       if c.computation_type is F]
        mb_losses = self._run(actions, mb_args, mb_kwargs, targets, return_outputs)
        for st in self._stages:
            st._wait_sends()
        if self._has_backward and self.scale_grads and self._n > 1:
            for st in self._stages:
                st.scale_grads(self._n)
        if has_last and losses is not None:
            losses.extend(loss for loss in mb_losses if loss is not None)
        last = next((st for st in self._stages if st.is_last), None)
        if last is None or not return_outputs:
            return None
        outs = [last.output_chunks[m] for m in range(self._n)]
        if self._has_backward:
            outs = [tree_map(lambda t: t.detach() if isinstance(t, ember.Tensor) else t, o)
                    for o in outs]
        for st in self._stages:
            st.output_chunks = {}
        return merge_chunks(outs, self._output_merge_spec)

    def eval(self, *args: Any, target: Any = None, losses: list | None = None,
             **kwargs: Any) -> Any:
        """step() without backward: the forward passes only (and, with a target, the
        micro-batches' losses on the last stage)."""
        had = self._has_backward
        self._has_backward = False
        try:
            return self.step(*args, target=target, losses=losses, **kwargs)
        finally:
            self._has_backward = had


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

    def _rank_actions(self) -> list[_Action | None]:
        s = self._stage.stage_index
        return ([_Action(s, F, m) for m in range(self._n)]
                + [_Action(s, B, m) for m in range(self._n)])


class Schedule1F1B(PipelineScheduleSingle):
    """One forward, one backward: stage s runs (stages - s - 1) forwards ahead, then
    alternates, so at most that many plus one micro-batches' activations are kept.

    Example::

        >>> schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _rank_actions(self) -> list[_Action | None]:
        st, n = self._stage, self._n
        s = st.stage_index
        warmup = min(st.num_stages - s - 1, n)
        out = [_Action(s, F, m) for m in range(warmup)]
        for m in range(n - warmup):
            out += [_Action(s, F, warmup + m), _Action(s, B, m)]
        return out + [_Action(s, B, m) for m in range(n - warmup, n)]


class PipelineScheduleMulti(_Schedule):
    """A schedule for several stages per rank: stage s runs on the group's rank
    s % group size (stages 0 and 2 on rank 0, 1 and 3 on rank 1 for 4 stages on 2 ranks;
    the V schedules place them in a V: 0 and 3 on rank 0, 1 and 2 on rank 1).
    ``pipeline_order[rank]`` lists each rank's actions."""

    _style = "loop"

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True, backward_requires_autograd: bool = True,
                 defer_pp_recv: bool = False) -> None:
        stages = list(stages)
        name = type(self).__name__
        if not stages:
            raise ValueError(f"{name}: a multi-stage schedule needs this rank's stages")
        if any(st.num_stages != stages[0].num_stages for st in stages):
            raise ValueError(f"{name}: the stages disagree on the number of stages")
        super().__init__(sorted(stages, key=lambda st: st.stage_index), n_microbatches,
                         loss_fn, scale_grads, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec)
        self.pp_group_size = stages[0].group_size
        self.rank = stages[0].group_rank
        self._num_stages = self.num_stages = stages[0].num_stages
        self.n_local_stages = len(stages)
        self.stage_index_to_group_rank = stage_to_rank_mapping(
            self.pp_group_size, self._num_stages, self._style)
        for st in self._stages:
            if self.stage_index_to_group_rank[st.stage_index] != self.rank:
                raise ValueError(f"{name}: stage {st.stage_index} must be on rank "
                                 f"{self.stage_index_to_group_rank[st.stage_index]} in this "
                                 f"schedule's ({self._style}) placement, it is on rank "
                                 f"{self.rank}")
            st.stage_index_to_group_rank = dict(self.stage_index_to_group_rank)
        mine = sorted(s for s, r in self.stage_index_to_group_rank.items() if r == self.rank)
        if [st.stage_index for st in self._stages] != mine:
            raise ValueError(f"{name}: rank {self.rank} must hold stages {mine}, got "
                             f"{[st.stage_index for st in self._stages]}")
        self.pipeline_order: dict[int, list[_Action | None]] = {}
        self._build_order()

    def _build_order(self) -> None:
        self.pipeline_order = {r: self._calculate_single_rank_operations(r)
                               for r in range(self.pp_group_size)}
        _check_order(self.pipeline_order, self._num_stages, self._n, type(self).__name__)

    def _calculate_single_rank_operations(self, rank: int) -> list[_Action | None]:
        # the default for several stages per rank: looped, breadth first
        return _looped_bfs(rank, self.pp_group_size, self.n_local_stages, self._n)

    def _rank_actions(self) -> list[_Action | None]:
        return self.pipeline_order[self.rank]

    def _local_stages(self, rank: int) -> list[int]:
        return sorted(s for s, r in self.stage_index_to_group_rank.items() if r == rank)


def _looped_bfs(rank: int, world: int, n_local: int, n: int) -> list[_Action | None]:
    """Forward all micro-batches through each local stage in turn; after the idle slots the
    first gradient needs to come back (two per hop), backward in reverse order."""
    local = [rank + k * world for k in range(n_local)]
    out: list[_Action | None] = [None] * rank
    out += [_Action(s, F, m) for s in local for m in range(n)]
    out += [None] * (2 * (world - 1 - rank))
    out += [_Action(s, B, m) for s in reversed(local) for m in reversed(range(n))]
    return out


def _interleaved(rank: int, world: int, n_local: int, n: int, per_round: int,
                 zero_bubble: bool) -> list[_Action | None]:
    """Megatron's interleaved 1F1B on rank (torch's timeline, None for an idle slot): warm-up
    forwards (a round of micro-batches per later local stage plus two per hop to the last
    rank, one with zero bubble), then one forward and one backward in turn, then the
    remaining backwards. Forwards go through the local stages a round of micro-batches at a
    time in stage order, backwards in reverse stage order. With zero_bubble the backwards
    compute the input gradients only and the weight gradients follow, rank steps late."""
    total = n_local * n
    warmup = min((n_local - 1) * per_round + (1 if zero_bubble else 2) * (world - 1 - rank),
                 total)

    def fwd_stage(step: int) -> int:
        return (step // per_round) % n_local * world + rank

    def bwd_stage(step: int) -> int:
        return (n_local - 1 - (step - warmup) // per_round % n_local) * world + rank

    # idle slots after the warm-up: until the first gradient is back
    idle = (world - rank - 1 if zero_bubble
            else n_local * world + 2 * (world - 1 - rank) - warmup - rank)
    counts: dict[tuple, int] = defaultdict(int)
    out: list[_Action | None] = [None] * rank
    bwd_steps: list[int] = []  # the step of each backward, in order, for the weight steps
    weights_done = 0

    def add(stage: int, kind: _ComputationType) -> None:
        out.append(_Action(stage, kind, counts[(stage, kind)]))
        counts[(stage, kind)] += 1

    def backward(step: int) -> None:
        nonlocal weights_done
        add(bwd_stage(step), I if zero_bubble else B)
        bwd_steps.append(step)
        if zero_bubble and step - warmup >= rank:
            add(bwd_stage(bwd_steps[weights_done]), W)
            weights_done += 1

    for step in range(warmup):
        add(fwd_stage(step), F)
    if warmup:
        out += [None] * idle
    for step in range(warmup, total):
        add(fwd_stage(step), F)
        backward(step)
    for step in range(total, total + warmup):
        if not zero_bubble:
            out.append(None)
        backward(step)
    while zero_bubble and weights_done < len(bwd_steps):
        add(bwd_stage(bwd_steps[weights_done]), W)
        weights_done += 1
    return out


def _rounds(n: int, world: int, name: str) -> int:
    """Micro-batches per round of the interleaved schedules (n must be whole rounds)."""
    rounds = max(1, n // world)
    if n % rounds:
        raise ValueError(f"{name} requires the number of microbatches to be a multiple of the "
                         f"number of rounds ({rounds}), but got {n}.")
    return n // rounds


class ScheduleLoopedBFS(PipelineScheduleMulti):
    """Several stages per rank, breadth first: all micro-batches through each local stage in
    turn, then back (every micro-batch's activations of every local stage alive at once).

    Example::

        >>> schedule = ScheduleLoopedBFS([stage0, stage2], 4, loss_fn=loss_fn)  # doctest: +SKIP
    """


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    """Several stages per rank, Megatron's interleaved 1F1B (depth first): a warm-up of
    forwards, then one forward and one backward in turn, then the remaining backwards; a rank
    keeps at most its warm-up count plus one micro-batches' activations alive
    ((local stages - 1) * micro-batches per round + 2 * (ranks - 1 - rank) + 1). The number of
    micro-batches must be a whole number of rounds (max(1, n // ranks) rounds).

    Example::

        >>> schedule = ScheduleInterleaved1F1B([stage0, stage2], 8, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _build_order(self) -> None:
        self.number_of_rounds = max(1, self._n // self.pp_group_size)
        self.microbatches_per_round = _rounds(self._n, self.pp_group_size,
                                              "Interleaved 1F1B")
        super()._build_order()

    def _calculate_single_rank_operations(self, rank: int) -> list[_Action | None]:
        return _interleaved(rank, self.pp_group_size, self.n_local_stages, self._n,
                            self.microbatches_per_round, False)


class ScheduleInterleavedZeroBubble(PipelineScheduleMulti):
    """Several stages per rank, zero bubble (ZB1P of arXiv 2401.10241): the interleaved order
    with each backward split into its input-gradient step ("I", sent upstream at once) and its
    weight-gradient step ("W", run later in the slots 1F1B leaves idle).

    Example::

        >>> schedule = ScheduleInterleavedZeroBubble([stage0, stage2], 8, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _build_order(self) -> None:
        self.number_of_rounds = max(1, self._n // self.pp_group_size)
        self.microbatches_per_round = _rounds(self._n, self.pp_group_size, "Zero bubble")
        order = {r: _interleaved(r, self.pp_group_size, self.n_local_stages, self._n,
                                 self.microbatches_per_round, True)
                 for r in range(self.pp_group_size)}
        self.pipeline_order = _add_bubbles(order, self._num_stages)
        _check_order(self.pipeline_order, self._num_stages, self._n, type(self).__name__)


def _add_bubbles(order: dict[int, list[_Action | None]],
                 num_stages: int) -> dict[int, list[_Action | None]]:
    """The ranks stepped together one slot at a time: a forward whose input the previous
    stage has not produced in an earlier slot waits (an idle slot before it)."""
    seen: set[tuple] = set()
    out: dict[int, list[_Action | None]] = {r: [] for r in order}
    at = dict.fromkeys(order, 0)
    while any(at[r] < len(order[r]) for r in order):
        now: set[tuple] = set()
        for r, actions in order.items():
            if at[r] >= len(actions):
                continue
            a = actions[at[r]]
            waits = a is not None and (
                a.computation_type is F and a.stage_index > 0
                and (a.stage_index - 1, F, a.microbatch_index) not in seen
                or a.computation_type is B and (
                    (a.stage_index, F, a.microbatch_index) not in seen
                    if a.stage_index == num_stages - 1
                    else (a.stage_index + 1, B, a.microbatch_index) not in seen))
            if waits:
                out[r].append(None)
                continue
            out[r].append(a)
            at[r] += 1
            if a is not None:
                now.add((a.stage_index, a.computation_type, a.microbatch_index))
        seen |= now
    return out


class _VSchedule(PipelineScheduleMulti):
    """Two stages per rank placed in a V: rank r holds stages r and 2 * ranks - 1 - r."""

    _style = "v"

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True, backward_requires_autograd: bool = True,
                 defer_pp_recv: bool = False) -> None:
        if len(stages) != 2:
            raise ValueError(f"ZBV requires exactly 2 stages per rank, but got {len(stages)}.")
        super().__init__(stages, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec, scale_grads, backward_requires_autograd,
                         defer_pp_recv)


class ScheduleZBVZeroBubble(_VSchedule):
    """Zero bubble, V variant (ZB-V of arXiv 2401.10241, section 6): exactly two stages per
    rank in a V (rank r: stages r and 2 * ranks - 1 - r), backward split into input-gradient
    and weight-gradient steps.

    Example::

        >>> schedule = ScheduleZBVZeroBubble([stage0, stage3], 4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def _calculate_single_rank_operations(self, rank: int) -> list[_Action | None]:
        world, n = self.pp_group_size, self._n
        n_run = max(2 * world - 1, n)  # enough micro-batches to fill the V; extras dropped
        down, up = rank, self._num_stages - 1 - rank
        cnt: dict[tuple, int] = defaultdict(int)
        out: list[_Action | None] = [None] * rank

        def add(stage: int, kind: _ComputationType, mb: int | None = None) -> None:
            # F and I take the stage's next micro-batch; W names the one it completes
            if mb is None:
                mb = cnt[(stage, kind)]
                cnt[(stage, kind)] += 1
            out.append(_Action(stage, kind, mb))

        for _ in range(2 * (world - rank) - 1):
            add(down, F)
        for _ in range(rank):
            add(up, F)
            add(down, F)
        for _ in range(world - rank):
            add(up, F)
            add(up, I)
            add(up, W, cnt[(up, I)] - 1)
        while cnt[(up, F)] < cnt[(down, F)] or cnt[(down, F)] < n_run:
            if cnt[(down, F)] < n_run:
                add(down, F)
            add(down, I)
            add(down, W, cnt[(down, I)] - 1)
            add(up, F)
            add(up, I)
            add(up, W, cnt[(up, I)] - 1)
        w_down, w_up = cnt[(down, I)], cnt[(up, I)]  # weights done so far
        for _ in range(rank):
            add(down, I)
            add(up, I)
        for _ in range(world - rank):
            add(down, I)
            add(down, W, w_down)
            w_down += 1
        while w_up < cnt[(up, I)]:
            add(up, W, w_up)
            w_up += 1
        while w_down < cnt[(down, I)]:
            add(down, W, w_down)
            w_down += 1
        return [a if a is not None and a.microbatch_index < n else None for a in out]


class ScheduleDualPipeV(_VSchedule):
    """DualPipeV (the V variant of DeepSeek's DualPipe, arXiv 2412.19437): two stages per rank
    in a V; in the steady state a forward on one stage is paired with a full backward on the
    other (``(0F3;3B1)OVERLAP_F_B``, run one after the other here), and the warm-up and
    cool-down split backwards into input-gradient and weight-gradient steps. Needs at least
    as many micro-batches as stages.

    Example::

        >>> schedule = ScheduleDualPipeV([stage0, stage3], 4, loss_fn=loss_fn)  # doctest: +SKIP
    """

    def __init__(self, stages: list[PipelineStage], n_microbatches: int,
                 loss_fn: Callable | None = None, args_chunk_spec: Any = None,
                 kwargs_chunk_spec: Any = None, output_merge_spec: Any = None,
                 scale_grads: bool = True, backward_requires_autograd: bool = True,
                 defer_pp_recv: bool = False) -> None:
        if stages and n_microbatches < stages[0].num_stages:
            raise ValueError(f"DualPipeV requires at least as many microbatches as stages, but "
                             f"got {n_microbatches} microbatches and {stages[0].num_stages} "
                             f"stages.")
        super().__init__(stages, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec,
                         output_merge_spec, scale_grads, backward_requires_autograd,
                         defer_pp_recv)

    def _calculate_single_rank_operations(self, rank: int) -> list[_Action | None]:
        world, n = self.pp_group_size, self._n
        down, up = self._local_stages(rank)
        fwd: dict[int, int] = defaultdict(int)   # next forward micro-batch per stage
        bwd: dict[int, int] = defaultdict(int)   # next backward micro-batch per stage
        weights: list[tuple[int, int]] = []      # input-gradient steps awaiting their W
        out: list[_Action | None] = []

        def f(stage: int) -> _Action:
            fwd[stage] += 1
            return _Action(stage, F, fwd[stage] - 1)

        def b(stage: int, split: bool = False) -> _Action:
            bwd[stage] += 1
            if split:
                weights.append((stage, bwd[stage] - 1))
            return _Action(stage, I if split else B, bwd[stage] - 1)

        def w() -> None:
            if weights:
                out.append(_Action(weights[0][0], W, weights.pop(0)[1]))

        def overlap(f_stage: int, b_stage: int) -> None:
            first = f(f_stage)
            out.append(_Action(-1, OVERLAP_F_B, None, (first, b(b_stage))))

        out += [f(down) for _ in range(2 * (world - rank - 1))]
        for _ in range(rank + 1):
            out += [f(down), f(up)]
        for _ in range(world - rank - 1):
            out.append(b(up, True))
            w()
            out.append(f(up))
        for i in range(n - 2 * world + rank + 1):
            if i == 0 and rank == world - 1:  # kept apart: a smaller bubble
                out += [f(down), b(up)]
            else:
                overlap(down, up)
            overlap(up, down)
        for _ in range(world - rank - 1):
            out.append(b(up))
            overlap(up, down)
        split = False
        for i in range(rank + 1):
            if i == (rank + 1) // 2 and rank % 2 == 1:
                split = True
            out.append(b(up, split))
            if i == (rank + 1) // 2 and rank % 2 == 0:
                split = True
            out.append(b(down, split))
        for _ in range(world - rank - 1):
            w()
            out.append(b(down, split))
        for _ in range(rank + 1):
            w()
        return out


class _PipelineScheduleRuntime(PipelineScheduleMulti):
    """A multi-stage schedule from a given action list per rank (``_load_actions``, or
    ``_load_csv``: one line per rank, actions like ``0F0`` separated by commas, empty for
    an idle slot); the lists are checked to run every micro-batch once and to complete.

    Example::

        >>> s = _PipelineScheduleRuntime([stage0, stage2], 2, loss_fn=loss_fn)  # doctest: +SKIP
        >>> s._load_actions({0: [...], 1: [...]})  # doctest: +SKIP
    """

    def _load_actions(self, actions: dict[int, list[_Action | None]],
                      format: str = "compute_only") -> None:
        if format != "compute_only":
            raise NotImplementedError(f"format={format!r} is not implemented")
        if sorted(actions) != list(range(self.pp_group_size)):
            raise ValueError(f"_load_actions: expected the actions of ranks 0..."
                             f"{self.pp_group_size - 1}, got ranks {sorted(actions)}")
        for r, acts in actions.items():
            for a in acts:
                for c in (a.sub_actions or (a,)) if a is not None else ():
                    if self.stage_index_to_group_rank.get(c.stage_index) != r:
                        raise ValueError(f"_load_actions: action {c} of rank {r} is for a "
                                         f"stage that rank does not hold")
        order = {r: list(a) for r, a in actions.items()}
        _check_order(order, self._num_stages, self._n, type(self).__name__)
        self.pipeline_order = order

    def _load_csv(self, filename: str, format: str = "compute_only") -> None:
        with open(filename) as fh:
            rows = [line.rstrip("\n").split(",") for line in fh if line.strip()]
        self._load_actions({r: [_Action.from_str(s) for s in row] for r, row in enumerate(rows)},
                           format)

    def _dump_csv(self, filename: str) -> None:
        with open(filename, "w") as fh:
            for r in range(self.pp_group_size):
                fh.write(",".join("" if a is None else str(a)
                                  for a in self.pipeline_order[r]) + "\n")


def get_schedule_class(schedule_name: str) -> type:
    """The schedule class of a name, case insensitive (``"Interleaved1F1B"``,
    ``"zbvzerobubble"``, ...).

    Example::

        >>> get_schedule_class("interleaved1f1b").__name__
        'ScheduleInterleaved1F1B'
    """
    classes = {"1F1B": Schedule1F1B, "Interleaved1F1B": ScheduleInterleaved1F1B,
               "GPipe": ScheduleGPipe, "LoopedBFS": ScheduleLoopedBFS,
               "InterleavedZeroBubble": ScheduleInterleavedZeroBubble,
               "PipelineScheduleSingle": PipelineScheduleSingle,
               "PipelineScheduleMulti": PipelineScheduleMulti,
               "ZBVZeroBubble": ScheduleZBVZeroBubble, "DualPipeV": ScheduleDualPipeV}
    by_lower = {k.lower(): v for k, v in classes.items()}
    if not isinstance(schedule_name, str) or schedule_name.lower() not in by_lower:
        raise ValueError(f"Unknown schedule name {schedule_name!r}. The valid options are "
                         f"{list(classes)}")
    return by_lower[schedule_name.lower()]
