"""PipelineStage: one rank's part of a pipelined model, and the messages between stages (a
small header with each tensor's dtype and shape, then the tensors, so stages need not know
each other's shapes in advance)."""

from __future__ import annotations

import collections
from typing import Any

import ember
from ember import nn

from .. import distributed_c10d as c10d

__all__ = ["PipelineStage"]

_DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
           ember.int32, ember.int16, ember.int8, ember.uint8, ember.bool, ember.complex64,
           ember.complex128]
_HEADER = 64  # int64 slots: count, then per tensor dtype, ndim and sizes
# messages between two stages on the same rank: (group, from stage, to stage) -> queue
_LOCAL: dict[tuple[Any, int, int], collections.deque] = {}


class PipelineStage:
    """stage_index of num_stages, running submodule on device; the stage runs on the group's
    rank stage_index % group size (the default group when None): one stage per rank, or
    several for the multi-stage schedules.

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
        if c10d.get_rank(group) != stage_index % size:
            raise ValueError(f"PipelineStage: stage {stage_index} must run on the group's rank "
                             f"{stage_index % size}, this is rank {c10d.get_rank(group)}")
        self._size = size
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = ember.device(device) if device is not None else ember.device("cpu")
        self.group = group
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self._sends: list[Any] = []

    # ---- messages ------------------------------------------------------------------------
    def _send(self, tensors: tuple, peer: int) -> None:
        if peer % self._size == self.stage_index % self._size:  # a stage on this rank
            key = (id(self.group), self.stage_index, peer)
            _LOCAL.setdefault(key, collections.deque()).append(
                tuple(t.detach().clone() for t in tensors))
            return
        head = [len(tensors)]
        for t in tensors:
            head += [_DTYPES.index(t.dtype), t.ndim, *t.shape]
        if len(head) > _HEADER:
            raise ValueError(f"PipelineStage: too many or too high-dimensional tensors to send "
                             f"({len(tensors)} tensors)")
        header = ember.tensor(head + [0] * (_HEADER - len(head)), dtype=ember.int64)
        rank = peer % self._size  # peer is a stage
        self._sends.append(c10d.isend(header, group=self.group, group_dst=rank))
        for t in tensors:
            t = t.detach().contiguous()
            self._sends.append(c10d.isend(t, group=self.group, group_dst=rank))

    def _recv(self, peer: int) -> tuple:
        if peer % self._size == self.stage_index % self._size:
            queue = _LOCAL.get((id(self.group), peer, self.stage_index))
            if not queue:
                raise RuntimeError(f"pipeline: stage {self.stage_index} expected a message "
                                   f"from stage {peer} on this rank, none was sent")
            return queue.popleft()
        header = ember.empty(_HEADER, dtype=ember.int64)
        peer %= self._size  # the stage's rank
        c10d.recv(header, group=self.group, group_src=peer)
        head = header.tolist()
        out, at = [], 1
        for _ in range(head[0]):
            dtype, ndim = _DTYPES[head[at]], head[at + 1]
            shape = head[at + 2:at + 2 + ndim]
            at += 2 + ndim
            t = ember.empty(shape, dtype=dtype, device=self.device)
            c10d.recv(t, group=self.group, group_src=peer)
            out.append(t)
        return tuple(out)

    def _wait_sends(self) -> None:
        for w in self._sends:
            w.wait()
        self._sends = []
