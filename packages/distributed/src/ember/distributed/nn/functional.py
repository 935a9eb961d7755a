"""Collectives with gradients (torch.distributed.nn.functional): each returns new tensors
instead of writing into its arguments, and backward runs the collective that is the
transpose of the forward one, e.g. to gather features from every rank for a contrastive loss
and still send the gradient of each rank's own features back to it.

Example::

    from ember.distributed.nn.functional import all_gather
    feats = ember.cat(all_gather(local_feats))  # local_feats keeps its gradient
"""

from __future__ import annotations

from typing import Any

import ember

from .. import distributed_c10d as c10d
from .._common import ReduceOp

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast", "gather",
           "reduce", "reduce_scatter", "scatter"]


def _world(group: Any) -> int:
    return c10d.get_world_size(group)


class _AllGather(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group: Any, tensor: Any) -> tuple:
        ctx.group = group
        out = [ember.empty_like(tensor) for _ in range(_world(group))]
        c10d.all_gather(out, tensor.contiguous(), group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        # rank r's input gets the sum over ranks of their gradient for slot r
        mine = ember.empty_like(grads[0])
        c10d.reduce_scatter(mine, [g.contiguous() for g in grads], group=ctx.group)
        return None, mine


class _AllReduce(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, op: ReduceOp, group: Any, tensor: Any) -> Any:
        ctx.op, ctx.group = op, group
        out = tensor.clone()
        c10d.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        # torch's rule for every op: the gradients all-reduced with the same op (exact for
        # SUM and AVG; for MAX / MIN / PRODUCT what torch gives, not the true derivative)
        g = grad.clone()
        c10d.all_reduce(g, op=ctx.op, group=ctx.group)
        return None, None, g


class _Broadcast(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, src: int, group: Any, tensor: Any) -> Any:
        ctx.src, ctx.group = src, group
        out = tensor.clone()
        c10d.broadcast(out, src=src, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        # the source gets every rank's gradient summed; the others' inputs did not matter
        g = grad.clone()
        c10d.reduce(g, dst=ctx.src, op=ReduceOp.SUM, group=ctx.group)
        if c10d.get_rank() != ctx.src:
            g.zero_()
        return None, None, g


class _ReduceScatter(ember.autograd.Function):
    _node_name = "_Reduce_ScatterBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, op: ReduceOp, group: Any, output: Any, *inputs: Any) -> Any:
        ctx.group = group
        out = ember.empty_like(output)
        c10d.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        grads = [ember.empty_like(grad) for _ in range(_world(ctx.group))]
        c10d.all_gather(grads, grad.contiguous(), group=ctx.group)
        return (None, None, None, *grads)


class _AllToAll(ember.autograd.Function):
    _node_name = "_AlltoAllBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, group: Any, outputs: list, *inputs: Any) -> tuple:
        ctx.group = group
        ctx.in_shapes = [t.shape for t in inputs]
        out = [ember.empty_like(o) for o in outputs]
        c10d.all_to_all(out, [t.contiguous() for t in inputs], group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        back = [ember.empty(s, dtype=grads[0].dtype, device=grads[0].device)
                for s in ctx.in_shapes]
        c10d.all_to_all(back, [g.contiguous() for g in grads], group=ctx.group)
        return (None, None, *back)


class _Gather(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, dst: int, group: Any, tensor: Any) -> tuple:
        ctx.dst, ctx.group = dst, group
        out = [ember.zeros_like(tensor) for _ in range(_world(group))]
        mine = c10d.get_rank(group) == dst
        c10d.gather(tensor.contiguous(), out if mine else None, dst, group=group)
        return tuple(out)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        # dst holds every slot's gradient: each rank gets its own slot's back
        g = ember.empty_like(grads[0])
        mine = c10d.get_rank(ctx.group) == ctx.dst
        c10d.scatter(g, [t.contiguous() for t in grads] if mine else None, ctx.dst,
                     group=ctx.group)
        return None, None, g


class _Scatter(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, src: int, group: Any, *tensors: Any) -> Any:
        ctx.src, ctx.group = src, group
        out = ember.empty_like(tensors[c10d.get_rank(group)])
        mine = c10d.get_rank(group) == src
        c10d.scatter(out, [t.contiguous() for t in tensors] if mine else None, src, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        grads = [ember.zeros_like(grad) for _ in range(_world(ctx.group))]
        mine = c10d.get_rank(ctx.group) == ctx.src
        c10d.gather(grad.contiguous(), grads if mine else None, ctx.src, group=ctx.group)
        return (None, None, *grads)


class _Reduce(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, dst: int, op: ReduceOp, group: Any, tensor: Any) -> Any:
        ctx.dst, ctx.group = dst, group
        out = tensor.clone()
        c10d.reduce(out, dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        g = grad.clone()
        c10d.broadcast(g, ctx.dst, group=ctx.group)  # every input fed dst's result
        return None, None, None, g


class _AllToAllSingle(ember.autograd.Function):
    _node_name = "_AlltoAllSingleBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, group: Any, output: Any, out_splits: Any, in_splits: Any,
                tensor: Any) -> Any:
        ctx.group, ctx.splits, ctx.in_shape = group, (out_splits, in_splits), tensor.shape
        out = ember.empty_like(output)
        c10d.all_to_all_single(out, tensor.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        out_splits, in_splits = ctx.splits
        back = ember.empty(ctx.in_shape, dtype=grad.dtype, device=grad.device)
        c10d.all_to_all_single(back, grad.contiguous(), in_splits, out_splits, group=ctx.group)
        return None, None, None, None, back


def gather(tensor: Any, dst: int = 0, group: Any = None) -> tuple:
    """Every rank's tensor on dst (zeros elsewhere); each rank's gradient comes back from dst."""
    return _Gather.apply(dst, group, tensor)


def scatter(tensors: list, src: int = 0, group: Any = None) -> Any:
    """src's tensors[i] to rank i (every rank passes tensors of the right shapes); gradients
    are gathered on src."""
    return _Scatter.apply(src, group, *tensors)


def reduce(tensor: Any, dst: int, op: ReduceOp = ReduceOp.SUM, group: Any = None) -> Any:
    """The reduction over ranks on dst, as a new tensor; dst's gradient reaches every input."""
    return _Reduce.apply(dst, op, group, tensor)


def all_to_all_single(output: Any, input: Any, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group: Any = None) -> Any:
    """input split along dim 0 to the ranks, the pieces received concatenated (output gives the
    shape); backward sends each gradient piece back where it came from."""
    return _AllToAllSingle.apply(group, output, output_split_sizes, input_split_sizes, input)


def all_gather(tensor: Any, group: Any = None) -> tuple:
    """Every rank's tensor, in rank order; the gradient of each reaches its rank."""
    return _AllGather.apply(group, tensor)


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None) -> Any:
    """The reduction over ranks, as a new tensor. Its backward all-reduces the gradients with
    the same op, as torch's: the true gradient for SUM and AVG; for MAX / MIN / PRODUCT the
    same numbers torch gives (not the derivative of the reduction)."""
    return _AllReduce.apply(op, group, tensor)


def broadcast(tensor: Any, src: int, group: Any = None) -> Any:
    """src's tensor on every rank, as a new tensor; gradients sum on src."""
    return _Broadcast.apply(src, group, tensor)


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM,
                   group: Any = None) -> Any:
    """This rank's share of the reduction of input_list over ranks (output gives its shape)."""
    return _ReduceScatter.apply(op, group, output, *input_list)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: Any = None) -> tuple:
    """input_tensor_list[i] to rank i; returns what each rank sent here."""
    return _AllToAll.apply(group, output_tensor_list, *input_tensor_list)
