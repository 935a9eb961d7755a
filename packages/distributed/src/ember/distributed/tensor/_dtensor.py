"""DTensor: a tensor laid out over the ranks of a 1-D DeviceMesh (torch.distributed.tensor).

A DTensor is a storage-less wrapper (``Tensor._make_wrapper_subclass``) with the global shape,
holding this rank's piece (``_local_tensor``) and its layout (``_spec``: mesh, placements,
global shape). Every op on it reaches ``__torch_dispatch__`` below autograd, so gradients flow
through DTensors like through any tensor. The dispatcher applies the first rule that fits:

- *_like / clone / detach / copy_ / fill_: the same layout, computed on the pieces;
- elementwise ops: the pieces, when the DTensor operands share a Shard or Replicate layout
  (a Replicate operand next to a Shard one is cut to this rank's rows first; 0-d Replicate
  DTensors and Python numbers mix with anything); Partial operands are reduced first, except in
  sums of Partials;
- reductions (sum, mean, amax/amin, max/min, vector norms) of a Shard DTensor over its shard
  dimension: the pieces reduced locally, giving a Partial result (reduced over the ranks when
  needed); over other dimensions: still Shard;
- matrix products: row-parallel (Shard(0) @ Replicate), column-parallel (Replicate @ Shard(1))
  and Shard(1) @ Shard(0) -> Partial(sum); transposes move the shard dimension;
- anything else: every DTensor operand gathered whole (Replicate), the op run on whole tensors
  and a Replicate result (in-place ops write this rank's piece back). Always right, only slower.

Only 1-D meshes are supported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import ember
from ember.utils._pytree import tree_map

from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh, init_device_mesh
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "distribute_tensor", "empty", "full", "ones", "zeros"]


class _NormPartial(Partial):
    """Local p-norms whose combination is the norm of the whole: (sum n^p)^(1/p), max for
    p = inf, min for p = -inf."""

    def __init__(self, norm_type: float) -> None:
        object.__setattr__(self, "reduce_op", "sum")
        object.__setattr__(self, "norm_type", float(norm_type))

    def __repr__(self) -> str:
        return f"_NormPartial(reduce_op='sum', norm_type={self.norm_type:g})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NormPartial) and other.norm_type == self.norm_type

    def __hash__(self) -> int:
        return hash(("norm", self.norm_type))


@dataclass(frozen=True)
class _Spec:
    mesh: DeviceMesh
    placements: tuple[Placement, ...]
    shape: tuple[int, ...]

    @property
    def placement(self) -> Placement:
        return self.placements[0]

    def with_(self, placement: Placement | None = None, shape: Any = None) -> _Spec:
        return _Spec(self.mesh, (placement or self.placement,),
                     tuple(self.shape if shape is None else (int(s) for s in shape)))


# ---- moving pieces between layouts ----------------------------------------------------------
def _chunk_sizes(length: int, n: int) -> list[int]:
    """torch.chunk's piece sizes of length split n ways (trailing pieces may be empty)."""
    step = -(-length // n) if length else 0
    sizes, left = [], length
    for _ in range(n):
        sizes.append(max(0, min(step, left)))
        left -= sizes[-1]
    return sizes


def _me(mesh: DeviceMesh) -> int:
    return mesh.get_local_rank(0)


def _my_chunk(full: ember.Tensor, dim: int, mesh: DeviceMesh) -> ember.Tensor:
    sizes = _chunk_sizes(full.shape[dim], mesh.size(0))
    me = _me(mesh)
    return full.narrow(dim, sum(sizes[:me]), sizes[me]).contiguous()


def _all_gather(local: ember.Tensor, dim: int, spec: _Spec) -> ember.Tensor:
    sizes = _chunk_sizes(spec.shape[dim], spec.mesh.size(0))
    top = max(sizes)
    pad = list(local.shape)
    pad[dim] = top - local.shape[dim]
    padded = ember.cat([local, local.new_zeros(pad)], dim) if pad[dim] else local
    parts = [ember.empty_like(padded) for _ in sizes]
    c10d.all_gather(parts, padded.contiguous(), group=spec.mesh.get_group(0))
    return ember.cat([p.narrow(dim, 0, s) for p, s in zip(parts, sizes)], dim)


def _all_reduce(local: ember.Tensor, placement: Partial, mesh: DeviceMesh) -> ember.Tensor:
    group = mesh.get_group(0)
    out = local.clone()
    if isinstance(placement, _NormPartial):
        p = placement.norm_type
        if math.isinf(p):
            c10d.all_reduce(out, op=c10d.ReduceOp.MAX if p > 0 else c10d.ReduceOp.MIN,
                            group=group)
            return out
        if p == 0:
            c10d.all_reduce(out, group=group)
            return out
        powered = out.pow(p)
        c10d.all_reduce(powered, group=group)
        return powered.pow(1.0 / p)
    op = {"sum": c10d.ReduceOp.SUM, "avg": c10d.ReduceOp.AVG, "max": c10d.ReduceOp.MAX,
          "min": c10d.ReduceOp.MIN, "product": c10d.ReduceOp.PRODUCT}[placement.reduce_op]
    c10d.all_reduce(out, op=op, group=group)
    return out


def _whole(local: ember.Tensor, spec: _Spec) -> ember.Tensor:
    """The full value, on every rank."""
    p = spec.placement
    if isinstance(p, Shard):
        return _all_gather(local, p.dim, spec)
    if isinstance(p, Partial):
        return _all_reduce(local, p, spec.mesh)
    return local


def _move(local: ember.Tensor, spec: _Spec, target: Placement) -> ember.Tensor:
    """This rank's piece of the value laid out as target."""
    src = spec.placement
    if src == target:
        return local
    if isinstance(target, Replicate):
        return _whole(local, spec)
    if isinstance(target, Shard):
        return _my_chunk(_whole(local, spec), target.dim, spec.mesh)
    if isinstance(target, Partial):  # rank 0 holds the value, the others the op's identity
        whole = _whole(local, spec)
        if target.reduce_op in ("max", "min", "avg") or _me(spec.mesh) == 0:
            return whole
        return ember.zeros_like(whole)
    raise ValueError(f"DTensor: unknown placement {target!r}")


# ---- the tensor --------------------------------------------------------------------------------
class DTensor(ember.Tensor):
    """A tensor split or replicated over a device mesh (torch.distributed.tensor.DTensor).

    Example (2 ranks)::

        >>> mesh = init_device_mesh("cpu", (2,))  # doctest: +SKIP
        >>> d = distribute_tensor(ember.ones(4, 3), mesh, [Shard(0)])  # doctest: +SKIP
        >>> d.shape, d.to_local().shape  # doctest: +SKIP
        (ember.Size([4, 3]), ember.Size([2, 3]))
    """

    __torch_function__ = ember._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, local_tensor: ember.Tensor, spec: _Spec, *,
                requires_grad: bool = False) -> DTensor:
        r = ember.Tensor._make_wrapper_subclass(
            cls, spec.shape, dtype=local_tensor.dtype, device=local_tensor.device,
            requires_grad=requires_grad)
        r._local_tensor = local_tensor
        r._spec = spec
        return r

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return (f"DTensor(local_tensor={self._local_tensor}, device_mesh={self._spec.mesh}, "
                f"placements={self._spec.placements})")

    __str__ = __repr__

    def tolist(self) -> Any:
        raise RuntimeError(".tolist() is not supported for tensor subclasses, got DTensor "
                           "(use .full_tensor().tolist() or .to_local().tolist())")

    def numpy(self, *, force: bool = False) -> Any:
        raise RuntimeError(".numpy() is not supported for tensor subclasses (use "
                           ".full_tensor().numpy() or .to_local().numpy())")

    def __deepcopy__(self, memo: dict) -> DTensor:
        import copy

        out = DTensor(copy.deepcopy(self._local_tensor, memo), self._spec,
                      requires_grad=self.requires_grad)
        memo[id(self)] = out
        return out

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self._spec.placements

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._spec.mesh

    def to_local(self, *, grad_placements: Sequence[Placement] | None = None) -> ember.Tensor:
        """This rank's piece (a view of it; differentiable)."""
        return _ToLocal.apply(self)

    def full_tensor(self, *, grad_placements: Sequence[Placement] | None = None) -> ember.Tensor:
        """The whole value as a plain tensor, on every rank (differentiable)."""
        return self.redistribute(self._spec.mesh, [Replicate()]).to_local()

    def redistribute(self, device_mesh: DeviceMesh | None = None,
                     placements: Sequence[Placement] | None = None, *,
                     async_op: bool = False) -> DTensor:
        """The same value laid out as placements (differentiable)."""
        if device_mesh is not None and device_mesh != self._spec.mesh:
            raise NotImplementedError("DTensor.redistribute: moving to another mesh is not "
                                      "supported")
        target = _check_placements(placements or self.placements, self._spec.mesh,
                                   len(self._spec.shape))
        if target == self.placements:
            return self
        return _Redistribute.apply(self, target[0])

    @staticmethod
    def from_local(local_tensor: ember.Tensor, device_mesh: DeviceMesh | None = None,
                   placements: Sequence[Placement] | None = None, *, run_check: bool = False,
                   shape: Sequence[int] | None = None,
                   stride: Sequence[int] | None = None) -> DTensor:
        """A DTensor whose piece on this rank is local_tensor (differentiable). The global
        shape is the local one times the mesh size along a Shard dimension, unless shape says."""
        mesh = device_mesh or _default_mesh(local_tensor)
        target = _check_placements(placements or [Replicate()], mesh, local_tensor.ndim)
        if shape is None:
            shape = list(local_tensor.shape)
            if isinstance(target[0], Shard):
                shape[target[0].dim] *= mesh.size(0)
        spec = _Spec(mesh, target, tuple(int(s) for s in shape))
        if run_check and isinstance(target[0], Replicate):
            src = c10d.get_global_rank(mesh.get_group(0), 0)
            local_tensor = local_tensor.clone()
            c10d.broadcast(local_tensor, src, group=mesh.get_group(0))
        return _FromLocal.apply(local_tensor, spec)

    # every op on a DTensor comes here (below autograd)
    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        return _dispatch(func, args, kwargs or {})


def _check_placements(placements: Sequence[Placement], mesh: DeviceMesh,
                      ndim: int) -> tuple[Placement, ...]:
    placements = tuple(placements)
    if mesh.ndim != 1 or len(placements) != 1:
        raise NotImplementedError(f"DTensor in ember takes a 1-D device mesh and one placement; "
                                  f"got a {mesh.ndim}-D mesh and {placements}")
    p = placements[0]
    if not isinstance(p, Placement):
        raise TypeError(f"DTensor: a placement must be Shard, Replicate or Partial, got {p!r}")
    if isinstance(p, Shard):
        if not -ndim <= p.dim < max(ndim, 1):
            raise IndexError(f"DTensor: Shard(dim={p.dim}) is out of range for a {ndim}-D "
                             "tensor")
        if p.dim < 0:
            p = Shard(p.dim % ndim)
    return (p,)


def _default_mesh(t: ember.Tensor) -> DeviceMesh:
    return init_device_mesh(t.device.type, (c10d.get_world_size(),))


# ---- differentiable layout changes ----------------------------------------------------------
def _grad_to(grad: Any, spec: _Spec) -> ember.Tensor:
    """grad (a DTensor or a plain piece) as this rank's piece of spec's layout."""
    if not isinstance(grad, DTensor):
        return grad
    target = spec.placement
    if isinstance(target, Partial):  # the gradient of a partial value is the whole gradient
        target = Replicate()
    return _move(grad._local_tensor, grad._spec, target)


class _ToLocal(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, d: DTensor) -> ember.Tensor:
        ctx.spec = d._spec
        return d._local_tensor.view_as(d._local_tensor)

    @staticmethod
    def backward(ctx: Any, grad: ember.Tensor) -> DTensor:
        spec = ctx.spec
        if isinstance(spec.placement, Partial):
            spec = spec.with_(Replicate())
        return DTensor(grad.contiguous(), spec)


class _FromLocal(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, local: ember.Tensor, spec: _Spec) -> DTensor:
        ctx.spec = spec
        return DTensor(local.view_as(local), spec)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        return _grad_to(grad, ctx.spec), None


class _Redistribute(ember.autograd.Function):
    @staticmethod
    def forward(ctx: Any, d: DTensor, target: Placement) -> DTensor:
        ctx.spec = d._spec
        return DTensor(_move(d._local_tensor, d._spec, target), d._spec.with_(target))

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        spec = ctx.spec
        back = spec.placement if not isinstance(spec.placement, Partial) else Replicate()
        return DTensor(_grad_to(grad, spec), spec.with_(back)), None


# ---- sharding rules -----------------------------------------------------------------------
_POINTWISE = frozenset("""
abs acos acosh add addcdiv addcmul asin asinh atan atan2 atanh bitwise_and bitwise_not
bitwise_or bitwise_xor ceil clamp clamp_max clamp_min clip copysign cos cosh div elu eq erf
erfc erfinv exp exp2 expm1 fill float_power floor floor_divide fmod frac ge gelu gt hardsigmoid
hardswish hardtanh isfinite isinf isnan le leaky_relu lerp log log10 log1p log2 logical_and
logical_not logical_or logical_xor logit lt maximum minimum mish mul nan_to_num ne neg pow
reciprocal relu remainder round rsqrt rsub sgn sigmoid sign signbit silu sin sinh softplus sqrt
square sub tan tanh threshold true_divide trunc where xlogy zero _to_copy to copy
""".split())
_LIKE = frozenset("""clone detach alias empty_like zeros_like ones_like full_like rand_like
randn_like randint_like""".split())
_REDUCE = {"sum": "sum", "mean": "sum", "amax": "max", "amin": "min", "max": "max",
           "min": "min", "linalg_vector_norm": "norm", "norm": "norm"}
_LINEAR_PARTIAL = frozenset({"add", "sub", "neg", "clone", "detach", "alias", "zeros_like",
                             "empty_like"})


def _packet(func: Any) -> str:
    name = func.overloadpacket.__name__
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _locals(args: Any, kwargs: dict) -> tuple[tuple, dict]:
    """The operands with each DTensor replaced by its piece."""
    return tree_map(lambda a: a._local_tensor if isinstance(a, DTensor) else a, (args, kwargs))


def _dtensors(args: Any, kwargs: dict) -> list[DTensor]:
    found: list[DTensor] = []
    tree_map(lambda a: found.append(a) if isinstance(a, DTensor) else a, (args, kwargs))
    return found


def _wrap(out: Any, spec_of: Any) -> Any:
    return tree_map(lambda o: DTensor(o, spec_of(o)) if isinstance(o, ember.Tensor) else o, out)


def _replicated(func: Any, args: tuple, kwargs: dict, mesh: DeviceMesh) -> Any:
    """The fallback: every operand whole, a Replicate result."""
    whole = tree_map(lambda a: _whole(a._local_tensor, a._spec) if isinstance(a, DTensor)
                     else a, (args, kwargs))
    out = func(*whole[0], **whole[1])
    first = args[0] if args else None
    if isinstance(first, DTensor) and func.overloadpacket.__name__.endswith("_") \
            and not func.overloadpacket.__name__.startswith("_"):
        # in place: write this rank's piece of the new value back
        first._local_tensor.copy_(_move(whole[0][0], first._spec.with_(Replicate()),
                                        first._spec.placement)
                                  if not isinstance(first._spec.placement, Partial)
                                  else whole[0][0])
        if isinstance(first._spec.placement, Partial):
            first._spec = first._spec.with_(Replicate())
        return first
    return _wrap(out, lambda o: _Spec(mesh, (Replicate(),), tuple(o.shape)))


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(ember.broadcast_shapes(*shapes))


def _pointwise(func: Any, args: tuple, kwargs: dict, ds: list[DTensor]) -> Any:
    mesh = ds[0]._spec.mesh
    name = _packet(func)
    partials = [d for d in ds if isinstance(d._spec.placement, Partial)]
    if partials:
        if name in ("add", "sub") and len(partials) == len(ds) == 2 and \
                ds[0]._spec == ds[1]._spec and type(ds[0]._spec.placement) is Partial \
                and ds[0]._spec.placement.reduce_op == "sum" and "alpha" not in kwargs:
            local_args, local_kwargs = _locals(args, kwargs)
            return _wrap(func(*local_args, **local_kwargs), lambda o: ds[0]._spec)
        return None  # the fallback reduces them
    big = [d for d in ds if d.ndim > 0 or isinstance(d._spec.placement, Shard)]
    shards = {d._spec.placement for d in big if isinstance(d._spec.placement, Shard)}
    if len(shards) > 1:
        return None
    shape = _broadcast_shape([tuple(d.shape) for d in ds] + [
        tuple(a.shape) for a in tree_leaves(args, kwargs)
        if isinstance(a, ember.Tensor) and not isinstance(a, DTensor)])
    if any(isinstance(a, ember.Tensor) and not isinstance(a, DTensor) and a.ndim > 0
           for a in tree_leaves(args, kwargs)):
        raise RuntimeError(f"{func}: got mixed ember.Tensor and DTensor operands; wrap the "
                           "plain tensor with DTensor.from_local or distribute_tensor first")
    if not shards:
        local_args, local_kwargs = _locals(args, kwargs)
        out = func(*local_args, **local_kwargs)
        first = args[0] if args else None
        if isinstance(first, DTensor) and out is first._local_tensor:
            return first
        return _wrap(out, lambda o: _Spec(mesh, (Replicate(),), tuple(o.shape)))
    shard = next(iter(shards))
    for d in big:
        if isinstance(d._spec.placement, Shard) and tuple(d.shape) != shape:
            return None  # a broadcast sharded operand: let the fallback do it

    def piece(a: Any) -> Any:
        if not isinstance(a, DTensor):
            return a
        if isinstance(a._spec.placement, Shard) or a.ndim == 0:
            return a._local_tensor
        # a Replicate operand: this rank's rows of it, unless it broadcasts along them
        at = shard.dim - (len(shape) - a.ndim)
        if at < 0 or a.shape[at] == 1:
            return a._local_tensor
        return _my_chunk(a._local_tensor, at, mesh)

    local_args, local_kwargs = tree_map(piece, (args, kwargs))
    out = func(*local_args, **local_kwargs)
    first = args[0] if args else None
    if isinstance(first, DTensor) and out is first._local_tensor:
        return first
    return _wrap(out, lambda o: _Spec(mesh, (shard,), shape if tuple(o.shape) != () else ()))


def tree_leaves(args: Any, kwargs: dict) -> list:
    found: list = []
    tree_map(lambda a: found.append(a), (args, kwargs))
    return found


def _reduce_dims(func: Any, args: tuple, kwargs: dict, ndim: int) -> tuple[list[int], bool]:
    """The dims a reduction runs over and its keepdim."""
    name = func.overloadpacket.__name__
    schema_dims: Any = None
    keepdim = bool(kwargs.get("keepdim", False))
    if name in ("linalg_vector_norm",):
        schema_dims = args[2] if len(args) > 2 else kwargs.get("dim")
        keepdim = bool(args[3]) if len(args) > 3 else keepdim
    elif len(args) > 1 and not isinstance(args[1], (ember.dtype,)):
        schema_dims = args[1]
        keepdim = bool(args[2]) if len(args) > 2 and isinstance(args[2], bool) else keepdim
    else:
        schema_dims = kwargs.get("dim")
    if schema_dims is None or schema_dims == []:
        return list(range(ndim)), keepdim
    if isinstance(schema_dims, int):
        schema_dims = [schema_dims]
    return [int(d) % max(ndim, 1) for d in schema_dims], keepdim


def _reduction(func: Any, args: tuple, kwargs: dict, d: DTensor) -> Any:
    name = func.overloadpacket.__name__
    kind = _REDUCE[name]
    spec = d._spec
    if name in ("max", "min") and func.__name__ not in (f"{name}.default",):
        return None  # max(dim) returns indices too: the fallback
    if isinstance(spec.placement, Replicate):
        out = func(d._local_tensor, *args[1:], **kwargs)
        return _wrap(out, lambda o: spec.with_(shape=o.shape))
    if not isinstance(spec.placement, Shard):
        return None
    dims, keepdim = _reduce_dims(func, args, kwargs, d.ndim)
    local = d._local_tensor
    shape_out = [s for i, s in enumerate(spec.shape) if i not in dims or keepdim]
    if keepdim:
        shape_out = [1 if i in dims else s for i, s in enumerate(spec.shape)]
    if spec.placement.dim not in dims:
        out = func(local, *args[1:], **kwargs)
        removed = 0 if keepdim else sum(1 for i in dims if i < spec.placement.dim)
        return _wrap(out, lambda o: spec.with_(Shard(spec.placement.dim - removed), shape_out))
    if name == "mean":
        count = math.prod(spec.shape[i] for i in dims)
        out = ember.sum(local, dims, keepdim=keepdim, dtype=kwargs.get("dtype")) / count
        return _wrap(out, lambda o: spec.with_(Partial("sum"), shape_out))
    if local.numel() == 0 and kind in ("max", "min"):
        return None  # an empty piece has no max: the fallback
    out = func(local, *args[1:], **kwargs)
    if kind == "norm":
        ord_ = args[1] if len(args) > 1 else kwargs.get("ord", kwargs.get("p", 2))
        placement: Partial = _NormPartial(2.0 if ord_ is None else float(ord_))
    else:
        placement = Partial(kind)
    return _wrap(out, lambda o: spec.with_(placement, shape_out))


def _matmul(func: Any, args: tuple, kwargs: dict) -> Any:
    name = func.overloadpacket.__name__
    a, b = (args[1], args[2]) if name == "addmm" else (args[0], args[1])
    if not (isinstance(a, DTensor) and isinstance(b, DTensor)) or a.ndim != 2 or b.ndim != 2:
        return None
    pa, pb = a._spec.placement, b._spec.placement
    rows, cols = Shard(0), Shard(1)
    if pa == rows and pb == Replicate():
        out_p: Placement = rows
    elif pa == Replicate() and pb == cols:
        out_p = cols
    elif pa == cols and pb == rows:
        out_p = Partial("sum")
    elif pa == Replicate() and pb == Replicate():
        out_p = Replicate()
    else:
        return None
    if name == "addmm":
        bias = args[0]
        mesh = a._spec.mesh
        if isinstance(bias, DTensor):
            bp = bias._spec.placement
            if isinstance(out_p, Shard) and bp == Shard(bias.ndim - 2 + out_p.dim) \
                    and bias.ndim >= 1:
                bias = bias._local_tensor  # already this rank's rows / columns
            elif not isinstance(bp, Replicate):
                return None
            else:
                bias = bias._local_tensor
                if isinstance(out_p, Shard):  # this rank's rows / columns of a full bias
                    at = bias.ndim - 2 + out_p.dim
                    if at >= 0 and bias.shape[at] != 1:
                        bias = _my_chunk(bias, at, mesh)
                elif isinstance(out_p, Partial) and _me(mesh) != 0:
                    bias = ember.zeros_like(bias)  # a partial sum adds the bias once
        elif isinstance(out_p, (Shard, Partial)) and isinstance(bias, ember.Tensor):
            return None
        out = func(bias, a._local_tensor, b._local_tensor, *args[3:], **kwargs)
    else:
        out = func(a._local_tensor, b._local_tensor, **kwargs)
    shape = (a.shape[0], b.shape[1])
    return _wrap(out, lambda o: _Spec(a._spec.mesh, (out_p,), shape))


def _transpose(func: Any, args: tuple, d: DTensor) -> Any:
    p = d._spec.placement
    name = func.overloadpacket.__name__
    d0, d1 = (0, 1) if name == "t" else (int(args[1]) % d.ndim, int(args[2]) % d.ndim)
    if isinstance(p, Shard):
        p = Shard(d1 if p.dim == d0 else d0 if p.dim == d1 else p.dim)
    shape = list(d.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    out = func(d._local_tensor, *args[1:])
    return DTensor(out, d._spec.with_(p, shape))


def _reshape(func: Any, args: tuple, d: DTensor) -> Any:
    """A view / reshape of a Shard(d) DTensor that keeps the shard dimension whole (the dims
    before it and after it may merge or split): the pieces reshaped, Shard at its new index."""
    p = d._spec.placement
    old = list(d._spec.shape)
    new = [int(s) for s in (args[1] if len(args) > 1 else [])]
    if not isinstance(p, Shard) or not new:
        return None
    if -1 in new:
        known = math.prod(s for s in new if s != -1)
        new[new.index(-1)] = math.prod(old) // known if known else 0
    before, after = math.prod(old[:p.dim]), math.prod(old[p.dim + 1:])
    for nd in range(len(new)):
        if new[nd] == old[p.dim] and math.prod(new[:nd]) == before and \
                math.prod(new[nd + 1:]) == after:
            local_shape = list(new)
            local_shape[nd] = d._local_tensor.shape[p.dim]
            out = func(d._local_tensor, local_shape, *args[2:])
            return DTensor(out, d._spec.with_(Shard(nd), new))
    return None


def _along_other_dims(func: Any, args: tuple, kwargs: dict, ds: list[DTensor]) -> Any:
    """Ops that work along some dims of a tensor and leave the others alone (softmax along
    dim, layer norm over the last dims, an embedding of a column-split table) run on the
    pieces when the shard dimension is one of those left alone."""
    name = func.overloadpacket.__name__
    x = args[0]
    if name == "embedding":
        if isinstance(x, DTensor) and x._spec.placement == Shard(1):
            return _embedding_cols(func, args, kwargs, x)
        return None
    if name == "embedding_dense_backward":
        return _embedding_cols_backward(func, args, kwargs)
    if not isinstance(x, DTensor) or not isinstance(x._spec.placement, Shard):
        return None
    sd = x._spec.placement.dim
    if name in ("_softmax", "_log_softmax", "_softmax_backward_data",
                "_log_softmax_backward_data"):
        dim = int(args[2] if "backward" in name else args[1]) % x.ndim
        if sd == dim or any(d._spec != x._spec for d in ds):
            return None
        local_args, local_kwargs = _locals(args, kwargs)
        return _wrap(func(*local_args, **local_kwargs), lambda o: x._spec)
    if name == "native_layer_norm":
        axis = x.ndim - len(args[1])
        if sd >= axis or any(isinstance(a, DTensor) and not isinstance(
                a._spec.placement, Replicate) for a in args[2:4]):
            return None
        local_args, local_kwargs = _locals(args, kwargs)
        out, mean, rstd = func(*local_args, **local_kwargs)
        stats = tuple(x.shape[:axis]) + (1,) * (x.ndim - axis)
        return (DTensor(out, x._spec), DTensor(mean, x._spec.with_(shape=stats)),
                DTensor(rstd, x._spec.with_(shape=stats)))
    if name == "native_layer_norm_backward":
        inp = args[1]
        axis = inp.ndim - len(args[2])
        if not isinstance(inp, DTensor) or inp._spec != x._spec or sd >= axis or any(
                isinstance(a, DTensor) and not isinstance(a._spec.placement, Replicate)
                for a in args[5:7]):
            return None
        local_args, local_kwargs = _locals(args, kwargs)
        g_in, g_w, g_b = func(*local_args, **local_kwargs)
        # the affine parameters' gradients sum over rows spread across the ranks
        partial = [None if g is None else DTensor(g, _Spec(x._spec.mesh, (Partial("sum"),),
                                                             tuple(g.shape)))
                   for g in (g_w, g_b)]
        return (None if g_in is None else DTensor(g_in, x._spec), *partial)
    return None


def _embedding_cols(func: Any, args: tuple, kwargs: dict, weight: DTensor) -> Any:
    """An embedding of a table split by columns: this rank's columns of every row."""
    ids = args[1]
    if isinstance(ids, DTensor):
        if not isinstance(ids._spec.placement, Replicate):
            return None
        ids = ids._local_tensor
    out = func(weight._local_tensor, ids, *args[2:], **kwargs)
    shape = tuple(ids.shape) + (weight.shape[1],)
    return DTensor(out, weight._spec.with_(Shard(len(shape) - 1), shape))


def _embedding_cols_backward(func: Any, args: tuple, kwargs: dict) -> Any:
    grad, ids = args[0], args[1]
    if not isinstance(grad, DTensor) or grad._spec.placement != Shard(grad.ndim - 1):
        return None
    if isinstance(ids, DTensor):
        if not isinstance(ids._spec.placement, Replicate):
            return None
        ids = ids._local_tensor
    out = func(grad._local_tensor, ids, *args[2:], **kwargs)
    return DTensor(out, grad._spec.with_(Shard(1), (int(args[2]), grad.shape[-1])))


def _dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    ds = _dtensors(args, kwargs)
    mesh = ds[0]._spec.mesh
    if any(d._spec.mesh != mesh for d in ds):
        raise RuntimeError(f"{func}: DTensor operands on different device meshes")
    name = func.overloadpacket.__name__
    packet = _packet(func)
    result = None
    if name in ("t", "transpose") and isinstance(args[0], DTensor):
        return _transpose(func, args, args[0])
    if name in ("view", "reshape", "_unsafe_view") and isinstance(args[0], DTensor) and not kwargs:
        result = _reshape(func, args, args[0])
        if result is not None:
            return result
    if packet in _LIKE and isinstance(args[0], DTensor):
        d = args[0]
        if isinstance(d._spec.placement, Partial) and packet not in _LINEAR_PARTIAL:
            return _replicated(func, args, kwargs, mesh)
        out = func(d._local_tensor, *args[1:], **kwargs)
        return _wrap(out, lambda o: d._spec)
    if name in ("copy_",) and isinstance(args[0], DTensor) and isinstance(args[1], DTensor) \
            and args[0]._spec.placements == args[1]._spec.placements:
        args[0]._local_tensor.copy_(args[1]._local_tensor)
        return args[0]
    if packet in _POINTWISE:
        result = _pointwise(func, args, kwargs, ds)
    elif name in _REDUCE and isinstance(args[0], DTensor) and len(ds) == 1:
        result = _reduction(func, args, kwargs, args[0])
    elif name in ("mm", "addmm", "matmul"):
        result = _matmul(func, args, kwargs)
    elif name in ("_softmax", "_log_softmax", "_softmax_backward_data",
                  "_log_softmax_backward_data", "native_layer_norm",
                  "native_layer_norm_backward", "embedding", "embedding_dense_backward"):
        result = _along_other_dims(func, args, kwargs, ds)
    if result is not None:
        return result
    mixed = [a for a in tree_leaves(args, kwargs) if isinstance(a, ember.Tensor)
             and not isinstance(a, DTensor) and a.ndim > 0
             and (a.is_floating_point() or a.is_complex())]
    if mixed:  # indices and masks may be plain; values must be DTensors too (as torch)
        raise RuntimeError(f"{func}: got mixed ember.Tensor and DTensor operands; wrap the "
                           "plain tensor with DTensor.from_local or distribute_tensor first")
    return _replicated(func, args, kwargs, mesh)


# ---- making DTensors ---------------------------------------------------------------------------
def distribute_tensor(tensor: ember.Tensor, device_mesh: DeviceMesh | None = None,
                      placements: Sequence[Placement] | None = None, *,
                      src_data_rank: int | None = 0) -> DTensor:
    """tensor laid out over the mesh as placements, from the mesh's rank src_data_rank's copy
    (None: each rank's own). A leaf DTensor that requires grad as tensor does.

    Example::

        >>> d = distribute_tensor(ember.randn(8, 4), mesh, [Shard(0)])  # doctest: +SKIP
    """
    mesh = device_mesh or _default_mesh(tensor)
    target = _check_placements(placements or [Replicate()], mesh, tensor.ndim)
    with ember.no_grad():
        data = tensor.detach()
        if src_data_rank is not None:
            data = data.clone().contiguous()
            group = mesh.get_group(0)
            c10d.broadcast(data, c10d.get_global_rank(group, src_data_rank), group=group)
        spec = _Spec(mesh, target, tuple(tensor.shape))
        local = _move(data, spec.with_(Replicate()), target[0]) if not isinstance(
            target[0], Replicate) else data.clone()
    return DTensor(local, spec, requires_grad=tensor.requires_grad)


def _factory(make: Any, size: Any, device_mesh: DeviceMesh | None,
             placements: Sequence[Placement] | None, **kw: Any) -> DTensor:
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    mesh = device_mesh or init_device_mesh("cpu", (c10d.get_world_size(),))
    target = _check_placements(placements or [Replicate()], mesh, len(shape))
    local_shape = list(shape)
    if isinstance(target[0], Shard):
        local_shape[target[0].dim] = _chunk_sizes(shape[target[0].dim],
                                                  mesh.size(0))[_me(mesh)]
    requires_grad = kw.pop("requires_grad", False)
    return DTensor(make(local_shape, **kw), _Spec(mesh, target, tuple(int(s) for s in shape)),
                   requires_grad=requires_grad)


def zeros(*size: Any, device_mesh: DeviceMesh | None = None,
          placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """A DTensor of zeros of the global size, each rank making its own piece."""
    return _factory(ember.zeros, size, device_mesh, placements, **kw)


def ones(*size: Any, device_mesh: DeviceMesh | None = None,
         placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """A DTensor of ones of the global size, each rank making its own piece."""
    return _factory(ember.ones, size, device_mesh, placements, **kw)


def empty(*size: Any, device_mesh: DeviceMesh | None = None,
          placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """An uninitialized DTensor of the global size."""
    return _factory(ember.empty, size, device_mesh, placements, **kw)


def full(size: Sequence[int], fill_value: Any, *, device_mesh: DeviceMesh | None = None,
         placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """A DTensor filled with fill_value."""
    return _factory(lambda s, **k: ember.full(s, fill_value, **k), (tuple(size),), device_mesh,
                    placements, **kw)
