"""PipelineStage: one rank's part of a pipelined model, and the messages between stages (a
small header with each tensor's dtype and shape, then the tensors, so stages need not know
each other's shapes in advance)."""

from __future__ import annotations

from typing import Any

import ember
from ember import nn

from .. import distributed_c10d as c10d

__all__ = ["PipelineStage"]

_DTYPES = [ember.float32, ember.float64, ember.float16, ember.bfloat16, ember.int64,
           ember.int32, ember.int16, ember.int8, ember.uint8, ember.bool, ember.complex64,
           ember.complex128]
_HEADER = 64  # int64 slots: count, then per tensor dtype, ndim and sizes


class PipelineStage:
    """stage_index of num_stages, running submodule on device; the stage's rank in group is
    its index (the default group when None).

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
        if size != num_stages:
            raise ValueError(f"PipelineStage: {num_stages} stages need a group of {num_stages} "
                             f"ranks (one stage per rank), the group has {size}")
        if c10d.get_rank(group) != stage_index:
            raise ValueError(f"PipelineStage: stage {stage_index} must run on the group's rank "
                             f"{stage_index}, this is rank {c10d.get_rank(group)}")
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
        head = [len(tensors)]
        for t in tensors:
            head += [_DTYPES.index(t.dtype), t.ndim, *t.shape]
        if len(head) > _HEADER:
            raise ValueError(f"PipelineStage: too many or too high-dimensional tensors to send "
                             f"({len(tensors)} tensors)")
        header = ember.tensor(head + [0] * (_HEADER - len(head)), dtype=ember.int64)
        self._sends.append(c10d.isend(header, group=self.group, group_dst=peer))
        for t in tensors:
            t = t.detach().contiguous()
            self._sends.append(c10d.isend(t, group=self.group, group_dst=peer))

    def _recv(self, peer: int) -> tuple:
        header = ember.empty(_HEADER, dtype=ember.int64)
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
