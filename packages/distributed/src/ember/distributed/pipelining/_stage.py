"""PipelineStage: one rank's part of a pipelined model, the work it does on one micro-batch
(forward, full backward, or backward split into an input-gradient and a weight-gradient step
for the zero-bubble schedules) and the messages between stages (a small header naming the
message - forward or backward, stages, micro-batch - with each tensor's dtype and shape, then
the tensors, so stages need not know each other's shapes in advance)."""

from __future__ import annotations

from typing import Any

import ember
from ember import nn

from .. import distributed_c10d as c10d

__all__ = ["PipelineStage"]

_DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
           ember.int32, ember.int16, ember.int8, ember.uint8, ember.bool, ember.complex64,
           ember.complex128]
_HEADER = 64  # int64 slots: kind, from stage, to stage, micro-batch, count, then per tensor
_META = 5     # ... dtype, ndim and sizes
_FWD, _BWD = 0, 1
# Messages that arrived before their stage asked for them (a schedule with several stages per
# rank consumes a peer's messages in another order than it sent them), and those between two
# stages of this rank: (group, kind, from stage, to stage, micro-batch) -> tensors.
_INBOX: dict[tuple, tuple] = {}


def _loop_rank(stage: int, size: int) -> int:
    return stage % size


def _v_rank(stage: int, size: int) -> int:
    """Stage's rank in a V placement: down the ranks, back up, down again..."""
    pos = stage % size
    return pos if (stage // size) % 2 == 0 else size - 1 - pos


def stage_to_rank_mapping(size: int, num_stages: int, style: str = "loop") -> dict[int, int]:
    """Stage index -> group rank: ``loop`` (stage s on rank s % size) or ``v`` (stage s on rank
    s for s < size, then back up: 2 * size - 1 - s, ...)."""
    place = _loop_rank if style == "loop" else _v_rank
    return {s: place(s, size) for s in range(num_stages)}


class PipelineStage:
    """stage_index of num_stages, running submodule on device; the stage runs on the group's
    rank stage_index % group size (the default group when None), or in a V placement (rank
    stage_index, then back up: 2 * group size - 1 - stage_index, as ScheduleZBVZeroBubble and
    ScheduleDualPipeV place two stages per rank).

    Example::

        >>> stage = PipelineStage(layers, stage_index=rank, num_stages=2, device="cpu")  # doctest: +SKIP
    """

    def __init__(self, submodule: nn.Module, stage_index: int, num_stages: int,
                 device: Any = None, input_args: Any = None, output_args: Any = None,
                 group: Any = None, dw_builder: Any = None) -> None:
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"PipelineStage: stage_index {stage_index} is not in "
                             f"[0, {num_stages})")
        if not c10d.is_initialized():
            raise RuntimeError("PipelineStage needs an initialized process group")
        size = c10d.get_world_size(group)
        if num_stages % size:
            raise ValueError(f"PipelineStage: {num_stages} stages cannot be spread over a group "
                             f"of {size} ranks (one or several whole rounds of stages per rank)")
        rank = c10d.get_rank(group)
        if rank not in (_loop_rank(stage_index, size), _v_rank(stage_index, size)):
            raise ValueError(f"PipelineStage: stage {stage_index} must run on the group's rank "
                             f"{stage_index % size} (or {_v_rank(stage_index, size)} in a V "
                             f"placement), this is rank {rank}")
        self.group_size = size
        self.group_rank = rank
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = ember.device(device) if device is not None else ember.device("cpu")
        self.group = group
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        style = "loop" if rank == _loop_rank(stage_index, size) else "v"
        self.stage_index_to_group_rank = stage_to_rank_mapping(size, num_stages, style)
        self.has_backward = False
        self._sends: list[Any] = []
        self.clear_runtime_states()

    def clear_runtime_states(self) -> None:
        """Forgets the last step's activations, outputs and pending weight gradients."""
        self.fwd_cache: dict[int, tuple] = {}   # micro-batch -> (inputs, outputs)
        self.output_chunks: dict[int, Any] = {}  # the last stage's outputs by micro-batch
        self._pending_w: set[int] = set()        # micro-batches awaiting their weight step

    # ---- one micro-batch ------------------------------------------------------------------
    def forward_one_chunk(self, fwd_chunk_id: int, args: tuple = (),
                          kwargs: dict | None = None, save_forward_output: bool = True) -> Any:
        """Runs micro-batch fwd_chunk_id forward: the first stage on args / kwargs, the others
        on what the previous stage sent; sends the output on (the last stage keeps it)."""
        if self.is_first:
            inputs = tuple(args)
        else:
            received = self._recv(_FWD, self.stage_index - 1, fwd_chunk_id)
            inputs = tuple(t.requires_grad_(self.has_backward and t.is_floating_point())
                           for t in received)
        with ember.set_grad_enabled(self.has_backward and ember.is_grad_enabled()):
            out = self.submod(*inputs, **((kwargs or {}) if self.is_first else {}))
        outs = out if isinstance(out, tuple) else (out,)
        if self.is_last:
            if save_forward_output:
                self.output_chunks[fwd_chunk_id] = out
        else:
            self._send(_FWD, outs, self.stage_index + 1, fwd_chunk_id)
        if self.has_backward:
            self.fwd_cache[fwd_chunk_id] = (inputs, outs)
        return out

    def _roots(self, bwd_chunk_id: int, loss: Any) -> tuple[list, list]:
        """What backward starts from: the loss on the last stage, else the outputs and the
        gradients the next stage sent for them."""
        if bwd_chunk_id not in self.fwd_cache:
            raise RuntimeError(f"pipeline: stage {self.stage_index} runs backward on micro-batch "
                               f"{bwd_chunk_id} before its forward (or twice)")
        _, outs = self.fwd_cache[bwd_chunk_id]
        if self.is_last:
            return ([loss], [None]) if loss is not None else ([], [])
        grads = self._recv(_BWD, self.stage_index + 1, bwd_chunk_id)
        pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
        return [o for o, _ in pairs], [g for _, g in pairs]

    def _send_input_grads(self, bwd_chunk_id: int, grads: list) -> None:
        if self.is_first:
            return
        inputs, _ = self.fwd_cache[bwd_chunk_id]
        self._send(_BWD, tuple(g if g is not None else ember.zeros_like(t)
                               for t, g in zip(inputs, grads)),
                   self.stage_index - 1, bwd_chunk_id)

    def backward_one_chunk(self, bwd_chunk_id: int, loss: Any = None,
                           full_backward: bool = True, last_backward: bool = False) -> None:
        """Backward of micro-batch bwd_chunk_id from loss (last stage) or from the gradients
        the next stage sent; sends its inputs' gradients back and frees its activations.

        full_backward=False is the zero-bubble schedules' input-gradient step, to be followed
        by backward_weight_one_chunk. ember's autograd computes all of a node's gradients in
        one go (asking for the inputs' alone costs as much as asking for every one), so this
        step accumulates the parameters' gradients as well, at no extra cost, and the weight
        step has nothing left to compute: the same gradients as torch's split, half the
        backward work of running it twice, and no activations kept for the weight step."""
        roots, grads = self._roots(bwd_chunk_id, loss)
        inputs, _ = self.fwd_cache[bwd_chunk_id]
        if roots:
            ember.autograd.backward(roots, grads)
        self._send_input_grads(bwd_chunk_id, [t.grad if isinstance(t, ember.Tensor) else None
                                              for t in inputs])
        del self.fwd_cache[bwd_chunk_id]  # this micro-batch's activations can go
        if not full_backward:
            self._pending_w.add(bwd_chunk_id)

    def backward_weight_one_chunk(self, bwd_chunk_id: int, last_backward: bool = False) -> None:
        """The weight-gradient step of micro-batch bwd_chunk_id, after its input-gradient step
        (backward_one_chunk with full_backward=False), which has already accumulated the
        parameters' gradients in ember (see there)."""
        if bwd_chunk_id not in self._pending_w:
            raise RuntimeError(f"pipeline: stage {self.stage_index} runs the weight step of "
                               f"micro-batch {bwd_chunk_id} before its input-gradient step")
        self._pending_w.discard(bwd_chunk_id)

    def scale_grads(self, grad_scale_factor: int) -> None:
        """Divides the parameters' gradients by grad_scale_factor."""
        if grad_scale_factor != 1:
            with ember.no_grad():
                for p in self.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(grad_scale_factor)

    # ---- messages ------------------------------------------------------------------------
    def _send(self, kind: int, tensors: tuple, peer: int, mb: int) -> None:
        rank = self.stage_index_to_group_rank[peer]
        if rank == self.group_rank:  # a stage on this rank
            _INBOX[(id(self.group), kind, self.stage_index, peer, mb)] = tuple(
                t.detach().clone() for t in tensors)
            return
        head = [kind, self.stage_index, peer, mb, len(tensors)]
        for t in tensors:
            if t.dtype not in _DTYPES:
                raise TypeError(f"PipelineStage: cannot send a {t.dtype} tensor between stages")
            head += [_DTYPES.index(t.dtype), t.ndim, *t.shape]
        if len(head) > _HEADER:
            raise ValueError(f"PipelineStage: too many or too high-dimensional tensors to send "
                             f"({len(tensors)} tensors)")
        header = ember.tensor(head + [0] * (_HEADER - len(head)), dtype=ember.int64)
        self._sends.append(c10d.isend(header, group=self.group, group_dst=rank))
        for t in tensors:
            t = t.detach().contiguous()
            self._sends.append(c10d.isend(t, group=self.group, group_dst=rank))

    def _recv(self, kind: int, peer: int, mb: int) -> tuple:
        key = (id(self.group), kind, peer, self.stage_index, mb)
        rank = self.stage_index_to_group_rank[peer]
        if rank == self.group_rank and key not in _INBOX:
            what = "activations" if kind == _FWD else "gradients"
            raise RuntimeError(f"pipeline: stage {self.stage_index} expected the {what} of "
                               f"micro-batch {mb} from stage {peer} on this rank, none were sent")
        # a peer's messages come in the order it sent them: keep the others for later
        while key not in _INBOX:
            header = ember.empty(_HEADER, dtype=ember.int64)
            c10d.recv(header, group=self.group, group_src=rank)
            head = header.tolist()
            out, at = [], _META
            for _ in range(head[4]):
                dtype, ndim = _DTYPES[head[at]], head[at + 1]
                shape = head[at + 2:at + 2 + ndim]
                at += 2 + ndim
                t = ember.empty(shape, dtype=dtype, device=self.device)
                c10d.recv(t, group=self.group, group_src=rank)
                out.append(t)
            _INBOX[(id(self.group), head[0], head[1], head[2], head[3])] = tuple(out)
        return _INBOX.pop(key)

    def _wait_sends(self) -> None:
        for w in self._sends:
            w.wait()
        self._sends = []
