"""loss_parallel: cross entropy of logits split over the class dimension, without gathering
them (torch.distributed.tensor.parallel.loss_parallel).

Inside the context, the ops cross entropy is made of work on the pieces: log_softmax takes the
maximum and the sum of exponentials over the ranks (two all-reduces of one number per row),
nll_loss picks each row's target logit on the rank that holds that class (an all-reduce of one
number per row), and their backward passes stay on the pieces too. The loss is a Replicate
DTensor. The logits must be Shard on the class dimension (dim 1, or 0 for 1-D logits) and
Replicate on any other mesh dimension; the target and weight Replicate DTensors or plain
tensors. Other layouts go the usual way (through whole tensors).
"""

from __future__ import annotations

import ast
import contextlib
from typing import Any, Iterator

import ember

from ... import distributed_c10d as c10d
from ..._comm_count import counted_as
from .._dtensor import _SPECIAL, DTensor, _Call, _local_region, _move, _Spec
from ..placement_types import Replicate, Shard

__all__ = ["loss_parallel"]


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction(value: Any) -> int:
    """torch's reduction code (0 none, 1 mean, 2 sum) from a code or a name."""
    return _REDUCTIONS[value] if isinstance(value, str) else int(value)


def _args(c: _Call, schema: str) -> list[Any]:
    """The call's arguments in schema order ("name=default ..."), by position, keyword or
    default: dispatched calls leave trailing defaults out."""
    out = []
    for i, item in enumerate(schema.split()):
        name, _, default = item.partition("=")
        if i < len(c.args):
            out.append(c.args[i])
        else:
            out.append(c.kwargs.get(name, ast.literal_eval(default) if default else None))
    return out


def _shard_mesh_dims(d: DTensor, dim: int) -> list[int] | None:
    """The mesh dims splitting d's dim when every other one is Replicate; else None."""
    dims = [m for m, p in enumerate(d.placements) if p == Shard(dim)]
    others_replicated = all(isinstance(p, Replicate) or p == Shard(dim) for p in d.placements)
    return dims if dims and others_replicated else None


def _all_reduce(t: ember.Tensor, d: DTensor, mesh_dims: list[int], op: Any) -> ember.Tensor:
    for m in mesh_dims:
        with counted_as("c10d_functional.all_reduce"):  # torch's is a functional all-reduce
            c10d.all_reduce(t, op=op, group=d.device_mesh.get_group(m))
    return t


def _whole(t: Any) -> Any:
    """A Replicate DTensor's value, or a plain tensor / None as it is."""
    if isinstance(t, DTensor):
        if not all(isinstance(p, Replicate) for p in t.placements):
            return _move(t._local_tensor, t._spec, [Replicate()] * t.device_mesh.ndim)
        return t._local_tensor
    return t


def _log_softmax(c: _Call) -> Any:
    x, dim = _args(c, "self dim half_to_float=False")[:2]
    dim = int(dim)
    if not isinstance(x, DTensor):
        return None
    dim %= x.ndim
    mesh_dims = _shard_mesh_dims(x, dim)
    if mesh_dims is None:
        return None
    local = x._local_tensor
    if local.shape[dim]:
        top = local.amax(dim, keepdim=True)
    else:
        shape = list(local.shape)
        shape[dim] = 1
        top = ember.full(shape, float("-inf"), dtype=local.dtype, device=local.device)
    _all_reduce(top, x, mesh_dims, c10d.ReduceOp.MAX)
    shifted = local - top
    total = _all_reduce(shifted.exp().sum(dim, keepdim=True), x, mesh_dims, c10d.ReduceOp.SUM)
    return DTensor(shifted - total.log(), x._spec)


def _log_softmax_backward(c: _Call) -> Any:
    grad, out, dim = c.args[0], c.args[1], int(c.args[2])
    if not isinstance(out, DTensor):
        return None
    dim %= out.ndim
    mesh_dims = _shard_mesh_dims(out, dim)
    if mesh_dims is None:
        return None
    g = _move(grad._local_tensor, grad._spec, out.placements) if isinstance(grad, DTensor) \
        else grad
    total = _all_reduce(g.sum(dim, keepdim=True), out, mesh_dims, c10d.ReduceOp.SUM)
    return DTensor(g - out._local_tensor.exp() * total, out._spec)


def _picked(c: _Call, x: DTensor, target: ember.Tensor, ignore_index: int
            ) -> tuple[ember.Tensor, ember.Tensor, ember.Tensor, int]:
    """(in-range mask, local class index, valid mask, class dim) of each target."""
    cdim = 1 if x.ndim >= 2 else 0
    lo, size = (v[cdim] for v in _local_region(x.shape, x.device_mesh, x.placements))
    valid = target != ignore_index
    here = valid & (target >= lo) & (target < lo + size)
    index = ember.where(here, target - lo, ember.zeros_like(target))
    return here, index, valid, cdim


def _weights(weight: Any, target: ember.Tensor, valid: ember.Tensor,
             dtype: ember.dtype) -> ember.Tensor:
    if weight is None:
        return valid.to(dtype)
    return weight[ember.where(valid, target, ember.zeros_like(target))] * valid.to(dtype)


def _nll_loss(c: _Call) -> Any:
    x, target, weight, reduction, ignore_index = _args(
        c, "self target weight=None reduction=1 ignore_index=-100")
    target, weight, reduction, ignore_index = _whole(target), _whole(weight), \
        _reduction(reduction), int(ignore_index)
    if not isinstance(x, DTensor) or not isinstance(target, ember.Tensor):
        return None
    mesh_dims = _shard_mesh_dims(x, 1 if x.ndim >= 2 else 0)
    if mesh_dims is None:
        return None
    here, index, valid, cdim = _picked(c, x, target, ignore_index)
    local = x._local_tensor
    picked = local.gather(cdim, index.unsqueeze(cdim)).squeeze(cdim) * here.to(local.dtype)
    _all_reduce(picked, x, mesh_dims, c10d.ReduceOp.SUM)
    w = _weights(weight, target, valid, local.dtype)
    losses = -picked * w
    total_weight = w.sum()
    if reduction == 0:
        out = losses
    elif reduction == 1:
        out = losses.sum() / total_weight
    else:
        out = losses.sum()
    rep = tuple(Replicate() for _ in x.placements)
    mesh = x.device_mesh
    loss = DTensor(out, _Spec(mesh, rep, tuple(out.shape)))
    if c.name == "nll_loss":  # ember's own op: the loss alone
        return loss
    return loss, DTensor(total_weight, _Spec(mesh, rep, ()))


def _nll_loss_backward(c: _Call) -> Any:
    grad_out, x, target, weight, reduction, ignore_index, total_weight = _args(
        c, "grad_output self target weight reduction ignore_index total_weight")
    grad_out, target, weight, total_weight = (_whole(grad_out), _whole(target), _whole(weight),
                                              _whole(total_weight))
    reduction, ignore_index = _reduction(reduction), int(ignore_index)
    if not isinstance(x, DTensor) or _shard_mesh_dims(x, 1 if x.ndim >= 2 else 0) is None:
        return None
    here, index, valid, cdim = _picked(c, x, target, ignore_index)
    local = x._local_tensor
    w = _weights(weight, target, valid, local.dtype)
    if total_weight is None:  # ember's nll_loss_backward works it out again
        total_weight = w.sum()
    g = grad_out / total_weight if reduction == 1 else grad_out
    values = (-w * g * here.to(local.dtype)).unsqueeze(cdim)
    grad = ember.zeros_like(local).scatter_(cdim, index.unsqueeze(cdim), values)
    return DTensor(grad, x._spec)


def _lse(x: DTensor, cdim: int, mesh_dims: list[int]) -> ember.Tensor:
    """log-sum-exp over the class dim of the whole logits (float32 for 16-bit ones)."""
    local = x._local_tensor
    if local.dtype in (ember.float16, ember.bfloat16):
        local = local.float()
    if local.shape[cdim]:
        top = local.amax(cdim)
    else:
        shape = [s for i, s in enumerate(local.shape) if i != cdim]
        top = ember.full(shape, float("-inf"), dtype=local.dtype, device=local.device)
    _all_reduce(top, x, mesh_dims, c10d.ReduceOp.MAX)
    top = ember.where(ember.isinf(top), ember.zeros_like(top), top)
    total = (local - top.unsqueeze(cdim)).exp().sum(cdim)
    _all_reduce(total, x, mesh_dims, c10d.ReduceOp.SUM)
    return top + total.log()




def _cross_entropy(c: _Call) -> Any:
    """The fused cross entropy over class indices: (loss, per-sample lse)."""
    x, target, weight, reduction, ignore_index, smoothing = _args(
        c, "self target weight=None reduction='mean' ignore_index=-100 label_smoothing=0.0")
    target, weight = _whole(target), _whole(weight)
    reduction, ignore_index, smoothing = _reduction(reduction), int(ignore_index), float(smoothing)
    cdim = 1 if isinstance(x, DTensor) and x.ndim >= 2 else 0
    mesh_dims = _shard_mesh_dims(x, cdim) if isinstance(x, DTensor) else None
    if mesh_dims is None or smoothing != 0.0 or not isinstance(target, ember.Tensor):
        return None  # label smoothing: through whole tensors
    here, index, valid, _ = _picked(c, x, target, ignore_index)
    local = x._local_tensor
    lse = _lse(x, cdim, mesh_dims)
    picked = local.gather(cdim, index.unsqueeze(cdim)).squeeze(cdim).to(lse.dtype) \
        * here.to(lse.dtype)
    _all_reduce(picked, x, mesh_dims, c10d.ReduceOp.SUM)
    w = _weights(weight, target, valid, lse.dtype)
    losses = (lse - picked) * w
    lse = lse * valid.to(lse.dtype)
    if reduction == 0:
        out = losses
    elif reduction == 1:
        out = losses.sum() / w.sum()
    else:
        out = losses.sum()
    rep = tuple(Replicate() for _ in x.placements)
    mesh = x.device_mesh
    return (DTensor(out.to(local.dtype), _Spec(mesh, rep, tuple(out.shape))),
            DTensor(lse, _Spec(mesh, rep, tuple(lse.shape))))


def _cross_entropy_backward(c: _Call) -> Any:
    grad_out, x, target, weight, lse, reduction, ignore_index, smoothing = _args(
        c, "grad_output self target weight lse reduction ignore_index label_smoothing")
    grad_out, target, weight, lse = _whole(grad_out), _whole(target), _whole(weight), _whole(lse)
    reduction, ignore_index, smoothing = _reduction(reduction), int(ignore_index), float(smoothing)
    cdim = 1 if isinstance(x, DTensor) and x.ndim >= 2 else 0
    if not isinstance(x, DTensor) or _shard_mesh_dims(x, cdim) is None or smoothing != 0.0:
        return None
    here, index, valid, _ = _picked(c, x, target, ignore_index)
    local = x._local_tensor
    w = _weights(weight, target, valid, lse.dtype)
    g = grad_out.to(lse.dtype)
    if reduction == 1:
        g = g / w.sum()
    scale = g * w  # per sample
    probs = (local.to(lse.dtype) - lse.unsqueeze(cdim)).exp()
    grad = probs * scale.unsqueeze(cdim)
    grad = grad.scatter_add(cdim, index.unsqueeze(cdim),
                            (-scale * here.to(lse.dtype)).unsqueeze(cdim))
    return DTensor(grad.to(local.dtype), x._spec)


_HANDLERS = {"_cross_entropy_loss": _cross_entropy,
             "_cross_entropy_loss_backward": _cross_entropy_backward,
             "_log_softmax": _log_softmax, "_log_softmax_backward_data": _log_softmax_backward,
             "nll_loss_forward": _nll_loss, "nll_loss": _nll_loss,
             "nll_loss_backward": _nll_loss_backward}


@contextlib.contextmanager
def loss_parallel() -> Iterator[None]:
    """Cross entropy on class-sharded DTensor logits, computed on the pieces (run backward
    inside the context too).

    Example (2 ranks)::

        >>> with loss_parallel():  # doctest: +SKIP
        ...     loss = F.cross_entropy(logits, labels)  # logits: Shard(1) DTensor
        ...     loss.backward()
    """
    saved = {k: _SPECIAL.get(k) for k in _HANDLERS}
    _SPECIAL.update(_HANDLERS)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                _SPECIAL.pop(k, None)
            else:
                _SPECIAL[k] = v
