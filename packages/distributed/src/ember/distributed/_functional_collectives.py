"""Functional collectives (torch.distributed._functional_collectives, "funcol"): each returns
a new tensor and leaves its input alone. ember runs them at once, so the results need no
wait (wait_tensor returns its argument). The group may be a ProcessGroup, a 1-D DeviceMesh,
a (DeviceMesh, mesh dim) pair, or the list of every rank (the world).

Example::

    >>> import ember.distributed._functional_collectives as funcol  # doctest: +SKIP
    >>> total = funcol.all_reduce(loss.detach(), "sum", group=mesh)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import ember

from . import distributed_c10d as c10d
from ._comm_count import counted

__all__ = ["all_gather_single", "all_gather_tensor", "all_reduce", "all_to_all_single",
           "broadcast", "permute_tensor", "reduce_scatter_single", "reduce_scatter_tensor",
           "wait_tensor"]

_OPS = {"sum": c10d.ReduceOp.SUM, "avg": c10d.ReduceOp.AVG, "max": c10d.ReduceOp.MAX,
        "min": c10d.ReduceOp.MIN, "product": c10d.ReduceOp.PRODUCT,
        "premul_sum": c10d.ReduceOp.SUM}


def _group(group: Any, what: str) -> Any:
    from .device_mesh import DeviceMesh

    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, DeviceMesh):
        if group.ndim != 1:
            raise ValueError(f"{what}: a {group.ndim}-D DeviceMesh needs a mesh dim: pass "
                             "(mesh, dim)")
        return group.get_group(0)
    if isinstance(group, list):
        if sorted(group) != list(range(c10d.get_world_size())):
            raise NotImplementedError(f"{what}: a list of ranks must be the whole world in "
                                      f"ember, got {group}; pass a ProcessGroup from new_group")
        return None
    if group is None or isinstance(group, c10d.ProcessGroup):
        return group
    raise TypeError(f"{what}: group must be a ProcessGroup, a DeviceMesh, (DeviceMesh, dim) "
                    f"or a list of ranks, got {type(group).__name__}")


def _op(reduce_op: str, what: str) -> Any:
    op = _OPS.get(str(reduce_op).lower())
    if op is None:
        raise ValueError(f"{what}: unknown reduceOp {reduce_op!r} (sum, avg, max, min, "
                         "product)")
    return op


def wait_tensor(tensor: ember.Tensor) -> ember.Tensor:
    """The collective's result (already complete in ember)."""
    return tensor


class AsyncCollectiveTensor(ember.Tensor):
    """torch's not-yet-waited result type; ember's results are plain tensors (never this)."""

    def wait(self) -> ember.Tensor:
        return self


@counted("c10d_functional.all_reduce")
def all_reduce(self: ember.Tensor, reduceOp: str, group: Any, tag: str = "") -> ember.Tensor:  # noqa: N803
    """The reduction over the group's ranks, as a new tensor."""
    out = self.clone()
    c10d.all_reduce(out, op=_op(reduceOp, "all_reduce"), group=_group(group, "all_reduce"))
    return out


@counted("c10d_functional.broadcast")
def broadcast(self: ember.Tensor, src: int, group: Any, tag: str = "") -> ember.Tensor:
    """The tensor of the group's rank src, on every rank."""
    out = self.clone()
    c10d.broadcast(out, group=_group(group, "broadcast"), group_src=src)
    return out


@counted("c10d_functional.all_gather_into_tensor")
def all_gather_single(self: ember.Tensor, gather_dim: int, group: Any,
                      tag: str = "") -> ember.Tensor:
    """Every rank's tensor concatenated along gather_dim, in rank order."""
    pg = _group(group, "all_gather")
    parts = [ember.empty_like(self) for _ in range(c10d.get_world_size(pg))]
    c10d.all_gather(parts, self.contiguous(), group=pg)
    return ember.cat(parts, gather_dim)


all_gather_tensor = all_gather_single


@counted("c10d_functional.reduce_scatter_tensor")
def reduce_scatter_single(self: ember.Tensor, reduceOp: str, scatter_dim: int, group: Any,  # noqa: N803
                          tag: str = "") -> ember.Tensor:
    """This rank's part (along scatter_dim, split evenly) of the reduction over the ranks."""
    pg = _group(group, "reduce_scatter")
    n = c10d.get_world_size(pg)
    if self.shape[scatter_dim] % n:
        raise ValueError(f"reduce_scatter: dim {scatter_dim} of size {self.shape[scatter_dim]} "
                         f"is not divisible by the group's {n} ranks")
    pieces = [p.contiguous() for p in ember.chunk(self, n, scatter_dim)]
    out = ember.empty_like(pieces[0])
    c10d.reduce_scatter(out, pieces, op=_op(reduceOp, "reduce_scatter"), group=pg)
    return out


reduce_scatter_tensor = reduce_scatter_single


@counted("c10d_functional.all_to_all_single")
def all_to_all_single(self: ember.Tensor, output_split_sizes: list[int] | None,
                      input_split_sizes: list[int] | None, group: Any,
                      tag: str = "") -> ember.Tensor:
    """Rows of self sent to each rank (input_split_sizes; even by default), the rows received
    concatenated (output_split_sizes)."""
    pg = _group(group, "all_to_all_single")
    n = c10d.get_world_size(pg)
    rows = sum(output_split_sizes) if output_split_sizes is not None else self.shape[0]
    if output_split_sizes is None and self.shape[0] % n:
        raise ValueError(f"all_to_all_single: {self.shape[0]} rows do not split evenly over "
                         f"{n} ranks; give the split sizes")
    out = self.new_empty((rows, *self.shape[1:]))
    c10d.all_to_all_single(out, self.contiguous(), output_split_sizes, input_split_sizes,
                           group=pg)
    return out


def permute_tensor(self: ember.Tensor, src_dst: list[int], group: Any,
                   tag: str = "") -> ember.Tensor:
    """Rank m's tensor sent to rank src_dst[m] (group ranks): every rank gets one."""
    pg = _group(group, "permute_tensor")
    me, n = c10d.get_rank(pg), c10d.get_world_size(pg)
    output_sizes, input_sizes = [0] * n, [0] * n
    for src, dst in enumerate(src_dst):
        if src == me:
            input_sizes[dst] = self.numel()
        if dst == me:
            output_sizes[src] = self.numel()
    flat = all_to_all_single(self.reshape(-1), output_sizes, input_sizes, pg)
    return flat.reshape(self.shape)
