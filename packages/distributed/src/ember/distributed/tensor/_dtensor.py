"""DTensor: a tensor laid out over the ranks of a DeviceMesh (torch.distributed.tensor).

A DTensor is a storage-less wrapper (``Tensor._make_wrapper_subclass``) with the global shape,
holding this rank's piece (``_local_tensor``) and its layout (``_spec``: mesh, one placement per
mesh dimension, global shape). Shard(d) on mesh dimension m splits tensor dim d over the ranks
along m in torch.chunk's sizes; several mesh dimensions sharding the same tensor dim split it
again in mesh order (``(Shard(0), Shard(0))`` on a 2x2 mesh: four row blocks).

Every op on a DTensor reaches ``__torch_dispatch__`` below autograd, so gradients flow through
DTensors like through any tensor. There, as in torch, an op runs in three steps:

1. a *sharding rule* picks, for each mesh dimension on its own, the layout each DTensor operand
   must have and the layout of each output (``_RULES``; elementwise ops, reductions, matrix
   products, transposes and reshapes, softmax / layer norm along other dims, embeddings);
   a mesh dimension with no fitting rule gets Replicate operands and outputs, which is always
   right, only slower;
2. the operands are moved to those layouts (``_move``: all-gathers and all-reduces over the
   mesh dimension's group, or cutting this rank's piece out of a whole one, which is free);
3. the op runs on the pieces, and its outputs are wrapped with the global shapes that the same
   op gives on meta tensors.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import ember
from ember.utils._pytree import tree_map

from .. import distributed_c10d as c10d
from .._comm_count import counted_as
from ..device_mesh import DeviceMesh, init_device_mesh
from .placement_types import Partial, Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "distribute_module", "distribute_tensor", "empty", "full", "ones", "zeros"]


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

    def with_(self, placements: Sequence[Placement] | None = None, shape: Any = None) -> _Spec:
        return _Spec(self.mesh, tuple(self.placements if placements is None else placements),
                     tuple(self.shape if shape is None else (int(s) for s in shape)))

    def has_partial(self) -> bool:
        return any(isinstance(p, Partial) for p in self.placements)


# ---- where the pieces lie ----------------------------------------------------------------------
def _chunk_sizes(length: int, n: int) -> list[int]:
    """torch.chunk's piece sizes of length split n ways (trailing pieces may be empty)."""
    step = -(-length // n) if length else 0
    sizes, left = [], length
    for _ in range(n):
        sizes.append(max(0, min(step, left)))
        left -= sizes[-1]
    return sizes


def _cut_order(placements: Sequence[Placement]) -> list[int]:
    """The mesh dims in the order their Shards cut the tensor: mesh order, with the
    _StridedShard ones last (cuts of different tensor dims commute)."""
    n = range(len(placements))
    return ([m for m in n if not isinstance(placements[m], _StridedShard)]
            + [m for m in n if isinstance(placements[m], _StridedShard)])


def _levels(placements: Sequence[Placement], dim: int) -> list[int]:
    """The mesh dims cutting tensor dim dim, in cutting order."""
    return [m for m in _cut_order(placements)
            if isinstance(placements[m], Shard) and placements[m].dim == dim]


def _interleaved(placements: Sequence[Placement], m: int) -> bool:
    """Whether mesh dim m holds a _StridedShard that is the only cut of its tensor dim (torch's
    meaning: the dim seen as (split_factor, rest), the rest split over the ranks - what a
    sequence split becomes when it is flattened with the dims before it). A _StridedShard
    next to other cuts of its dim is fully_shard's over tensor parallel (cut after them)."""
    p = placements[m]
    return (isinstance(p, _StridedShard) and p.split_factor > 1
            and _levels(placements, p.dim) == [m])


def _local_region(shape: Sequence[int], mesh: DeviceMesh, placements: Sequence[Placement],
                  coord: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """(offsets, sizes) of the piece at mesh coordinate coord (default: this rank's) in the
    whole tensor: each Shard cuts the dim again, in cutting order (_cut_order)."""
    coord = mesh.get_coordinate() if coord is None else coord
    sizes, offsets = [int(s) for s in shape], [0] * len(shape)
    for m in _cut_order(placements):
        p = placements[m]
        if _interleaved(placements, m):  # not one block: the offset stays the dim's start
            sf = p.split_factor
            sizes[p.dim] = sf * _chunk_sizes(sizes[p.dim] // sf, mesh.size(m))[coord[m]]
        elif isinstance(p, Shard):
            chunks = _chunk_sizes(sizes[p.dim], mesh.size(m))
            offsets[p.dim] += sum(chunks[:coord[m]])
            sizes[p.dim] = chunks[coord[m]]
    return offsets, sizes


def _some_piece_empty(spec: _Spec, dims: Sequence[int]) -> bool:
    """Whether the piece of some rank is empty along one of dims (max / min of it fail)."""
    for coord in itertools.product(*(range(n) for n in spec.mesh.shape)):
        sizes = _local_region(spec.shape, spec.mesh, spec.placements, coord)[1]
        if any(sizes[d] == 0 for d in dims):
            return True
    return False


def _my_chunk(full: ember.Tensor, dim: int, mesh: DeviceMesh, mesh_dim: int = 0) -> ember.Tensor:
    """This rank's chunk of full along dim, split over mesh dimension mesh_dim."""
    sizes = _chunk_sizes(full.shape[dim], mesh.size(mesh_dim))
    me = mesh.get_local_rank(mesh_dim)
    return full.narrow(dim, sum(sizes[:me]), sizes[me]).contiguous()


def _my_strided_chunk(full: ember.Tensor, dim: int, sf: int, mesh: DeviceMesh,
                      m: int) -> ember.Tensor:
    """This rank's piece of full as _StridedShard(dim, sf) over mesh dim m: the dim seen as
    (sf, rest), this rank's chunk of rest."""
    split = full.unflatten(dim, (sf, full.shape[dim] // sf))
    return _my_chunk(split, dim + 1, mesh, m).flatten(dim, dim + 1).contiguous()


def _strided_gather(local: ember.Tensor, dim: int, sf: int, length: int, mesh: DeviceMesh,
                    m: int) -> ember.Tensor:
    """The whole dim back from its _StridedShard(dim, sf) pieces over mesh dim m (one
    all-gather, each rank's (sf, chunk) padded to the largest chunk)."""
    n = mesh.size(m)
    sizes = _chunk_sizes(length // sf, n)
    top = max(sizes)
    split = local.unflatten(dim, (sf, local.shape[dim] // sf))
    pad = list(split.shape)
    pad[dim + 1] = top - split.shape[dim + 1]
    padded = ember.cat([split, split.new_zeros(pad)], dim + 1) if pad[dim + 1] else split
    parts = [ember.empty_like(padded) for _ in sizes]
    with counted_as("c10d_functional.all_gather_into_tensor"):
        c10d.all_gather(parts, padded.contiguous(), group=mesh.get_group(m))
    whole = ember.cat([p.narrow(dim + 1, 0, s) for p, s in zip(parts, sizes)], dim + 1)
    return whole.flatten(dim, dim + 1)


def _all_gather(local: ember.Tensor, dim: int, length: int, mesh: DeviceMesh,
                mesh_dim: int = 0) -> ember.Tensor:
    """The chunks of a length-long dim, split over mesh dimension mesh_dim, put back together
    (padded to the largest chunk for the collective)."""
    if mesh.size(mesh_dim) == 1:  # the piece is the whole: no collective (as torch)
        return local
    sizes = _chunk_sizes(length, mesh.size(mesh_dim))
    top = max(sizes)
    pad = list(local.shape)
    pad[dim] = top - local.shape[dim]
    padded = ember.cat([local, local.new_zeros(pad)], dim) if pad[dim] else local
    parts = [ember.empty_like(padded) for _ in sizes]
    with counted_as("c10d_functional.all_gather_into_tensor"):
        c10d.all_gather(parts, padded.contiguous(), group=mesh.get_group(mesh_dim))
    return ember.cat([p.narrow(dim, 0, s) for p, s in zip(parts, sizes)], dim)


def _all_reduce(local: ember.Tensor, placement: Partial, mesh: DeviceMesh,
                mesh_dim: int = 0) -> ember.Tensor:
    if mesh.size(mesh_dim) == 1:  # reducing over one rank: no collective (as torch)
        return local.clone()
    with counted_as("c10d_functional.all_reduce"):
        return _all_reduce_uncounted(local, placement, mesh, mesh_dim)


_REDUCE_OPS = {"sum": c10d.ReduceOp.SUM, "avg": c10d.ReduceOp.AVG, "max": c10d.ReduceOp.MAX,
               "min": c10d.ReduceOp.MIN, "product": c10d.ReduceOp.PRODUCT}


def _reduce_scatter(local: ember.Tensor, placement: Partial, dim: int, mesh: DeviceMesh,
                    mesh_dim: int) -> ember.Tensor:
    """This rank's chunk along dim of the reduction over mesh dimension mesh_dim of a Partial
    (a Partial -> Shard move): one reduce-scatter, the dim padded to equal chunks."""
    n = mesh.size(mesh_dim)
    sizes = _chunk_sizes(local.shape[dim], n)
    top = max(sizes)
    if n == 1:
        return local
    if top == 0 or isinstance(placement, _NormPartial):
        return _my_chunk(_all_reduce(local, placement, mesh, mesh_dim), dim, mesh, mesh_dim)
    pad = list(local.shape)
    pad[dim] = top * n - local.shape[dim]
    padded = ember.cat([local, local.new_zeros(pad)], dim) if pad[dim] else local
    pieces = [p.contiguous() for p in padded.split(top, dim)]
    out = ember.empty_like(pieces[0])
    with counted_as("c10d_functional.reduce_scatter_tensor"):
        c10d.reduce_scatter(out, pieces, op=_REDUCE_OPS[placement.reduce_op],
                            group=mesh.get_group(mesh_dim))
    return out.narrow(dim, 0, sizes[mesh.get_local_rank(mesh_dim)])


def _all_reduce_uncounted(local: ember.Tensor, placement: Partial, mesh: DeviceMesh,
                          mesh_dim: int) -> ember.Tensor:
    group = mesh.get_group(mesh_dim)
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
    c10d.all_reduce(out, op=_REDUCE_OPS[placement.reduce_op], group=group)
    return out


def _partition(local: ember.Tensor, p: Partial, mesh: DeviceMesh, m: int) -> ember.Tensor:
    """A value's share on this rank as a Partial over mesh dim m (torch's split): a sum is
    divided evenly (integers: all of it at index 0), a p-norm by n^(1/p); max / min / avg and
    the infinite norms keep the value."""
    n = mesh.size(m)
    if isinstance(p, _NormPartial):
        if math.isinf(p.norm_type) or p.norm_type == 0:
            return local
        return local / n ** (1.0 / p.norm_type)
    if p.reduce_op in ("max", "min", "avg"):
        return local
    if local.is_floating_point() or local.is_complex():
        return local / n
    return local if mesh.get_local_rank(m) == 0 else ember.zeros_like(local)


def _move(local: ember.Tensor, spec: _Spec, target: Sequence[Placement]) -> ember.Tensor:
    """This rank's piece of the value laid out as target. Mesh dimensions whose placement
    changes are undone, last cut first (all-gather a Shard, all-reduce a Partial), then the
    new placements are applied in cutting order (cut this rank's chunk; a Partial sum keeps
    the value at index 0 of its mesh dimension and zeros elsewhere). A tensor dim cut on
    several mesh dimensions is regathered from the first cut that changes."""
    cur, target = list(spec.placements), list(target)
    if cur == target:
        return local
    mesh, n = spec.mesh, len(cur)
    undo = {m for m in range(n) if cur[m] != target[m] and not isinstance(cur[m], Replicate)}
    for d in range(len(spec.shape)):
        have, want = _levels(cur, d), _levels(target, d)
        k = 0
        while k < min(len(have), len(want)) and have[k] == want[k] and \
                cur[have[k]] == target[want[k]]:
            k += 1
        undo |= set(have[k:])
    # a Partial becoming a Shard on its mesh dim is reduce-scattered when it is cut (reducing
    # over a mesh dim commutes with the other moves: all-gathers and cuts the same on the ranks
    # being reduced over)
    scatter = {m for m in range(n) if isinstance(cur[m], Partial) and isinstance(target[m], Shard)
               and not isinstance(target[m], _StridedShard)}
    for m in [m for m in reversed(_cut_order(cur)) if m in undo and m not in scatter]:
        p = cur[m]
        if isinstance(p, Shard):
            before = _cut_order(cur)
            before = before[:before.index(m)]
            level = _local_region(spec.shape, mesh, [cur[i] if i in before else Replicate()
                                                     for i in range(n)])[1][p.dim]
            if _interleaved(cur, m):
                local = _strided_gather(local, p.dim, p.split_factor, level, mesh, m)
            else:
                local = _all_gather(local, p.dim, level, mesh, m)
        else:
            local = _all_reduce(local, p, mesh, m)
        cur[m] = Replicate()
    for m in _cut_order(target):
        p = target[m]
        if cur[m] == p:
            continue
        if isinstance(p, Shard) and m in scatter:
            local = _reduce_scatter(local, cur[m], p.dim, mesh, m)
        elif _interleaved(target, m):
            local = _my_strided_chunk(local, p.dim, p.split_factor, mesh, m)
        elif isinstance(p, Shard):
            local = _my_chunk(local, p.dim, mesh, m)
        elif isinstance(p, Partial):
            local = _partition(local, p, mesh, m)
        else:
            raise ValueError(f"DTensor: unknown placement {p!r}")
        cur[m] = p
    return local


def _whole(local: ember.Tensor, spec: _Spec) -> ember.Tensor:
    """The full value, on every rank."""
    return _move(local, spec, [Replicate()] * len(spec.placements))


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
                requires_grad: bool = False, stride: Sequence[int] | None = None) -> DTensor:
        # stride: the whole tensor's (what ember's C++ sees, e.g. whether a reshape can view)
        r = ember.Tensor._make_wrapper_subclass(
            cls, spec.shape, strides=stride, dtype=local_tensor.dtype,
            device=local_tensor.device, requires_grad=requires_grad)
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
        """This rank's piece (a view of it; differentiable). grad_placements: how the
        gradient of the piece is laid out (default: as this DTensor, Partial as Replicate)."""
        if grad_placements is not None:
            grad_placements = _check_placements(grad_placements, self._spec.mesh, self.ndim)
        return _ToLocal.apply(self, grad_placements)

    def full_tensor(self, *, grad_placements: Sequence[Placement] | None = None) -> ember.Tensor:
        """The whole value as a plain tensor, on every rank (differentiable)."""
        whole = [Replicate()] * self._spec.mesh.ndim
        return self.redistribute(self._spec.mesh, whole).to_local(
            grad_placements=grad_placements)

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
        return _Redistribute.apply(self, target)

    @staticmethod
    def from_local(local_tensor: ember.Tensor, device_mesh: DeviceMesh | None = None,
                   placements: Sequence[Placement] | None = None, *, run_check: bool = False,
                   shape: Sequence[int] | None = None,
                   stride: Sequence[int] | None = None) -> DTensor:
        """A DTensor whose piece on this rank is local_tensor (differentiable). The global
        shape is the local one times the mesh size along each Shard, unless shape says."""
        mesh = device_mesh or _default_mesh(local_tensor)
        target = _check_placements(placements or [Replicate()], mesh, local_tensor.ndim)
        if shape is None:
            shape = list(local_tensor.shape)
            for m, p in enumerate(target):
                if isinstance(p, Shard):
                    shape[p.dim] *= mesh.size(m)
        spec = _Spec(mesh, target, tuple(int(s) for s in shape))
        if run_check and any(isinstance(p, Replicate) for p in target):
            local_tensor = local_tensor.clone()
            for m, p in enumerate(target):
                if isinstance(p, Replicate):
                    group = mesh.get_group(m)
                    c10d.broadcast(local_tensor, c10d.get_global_rank(group, 0), group=group)
        return _FromLocal.apply(local_tensor, spec)

    # every op on a DTensor comes here (below autograd)
    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        return _dispatch(func, args, kwargs or {})


def _check_placements(placements: Sequence[Placement], mesh: DeviceMesh,
                      ndim: int) -> tuple[Placement, ...]:
    """One placement per mesh dimension (missing trailing ones are Replicate, as in torch),
    Shard dims in range and made non-negative."""
    placements = tuple(placements)
    if len(placements) > mesh.ndim:
        raise ValueError(f"DTensor: {len(placements)} placements {placements} for a "
                         f"{mesh.ndim}-D device mesh (one per mesh dimension)")
    placements += (Replicate(),) * (mesh.ndim - len(placements))
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"DTensor: a placement must be Shard, Replicate or Partial, got "
                            f"{p!r}")
        if isinstance(p, Shard):
            if not -ndim <= p.dim < max(ndim, 1):
                raise IndexError(f"DTensor: Shard(dim={p.dim}) is out of range for a "
                                 f"{ndim}-D tensor")
            if p.dim < 0:
                p = dataclasses.replace(p, dim=p.dim % ndim)
        out.append(p)
    return tuple(out)


def _default_mesh(t: ember.Tensor) -> DeviceMesh:
    return init_device_mesh(t.device.type, (c10d.get_world_size(),))


# ---- differentiable layout changes ----------------------------------------------------------
def _no_partial(placements: Sequence[Placement]) -> tuple[Placement, ...]:
    """The gradient of a partial value is the whole gradient."""
    return tuple(Replicate() if isinstance(p, Partial) else p for p in placements)


def _grad_to(grad: Any, spec: _Spec) -> ember.Tensor:
    """grad (a DTensor or a plain piece) as this rank's piece of spec's layout."""
    if not isinstance(grad, DTensor):
        return grad
    return _move(grad._local_tensor, grad._spec, _no_partial(spec.placements))


class _ToLocal(ember.autograd.Function):
    _node_name = "_ToTorchTensorBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, d: DTensor, grad_placements: Any = None) -> ember.Tensor:
        ctx.spec, ctx.grad_placements = d._spec, grad_placements
        return d._local_tensor.view_as(d._local_tensor)

    @staticmethod
    def backward(ctx: Any, grad: ember.Tensor) -> tuple:
        spec = ctx.spec
        placements = ctx.grad_placements or _no_partial(spec.placements)
        return DTensor(grad.contiguous(), spec.with_(placements)), None


class _FromLocal(ember.autograd.Function):
    _node_name = "_FromTorchTensorBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, local: ember.Tensor, spec: _Spec) -> DTensor:
        ctx.spec = spec
        return DTensor(local.view_as(local), spec)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        return _grad_to(grad, ctx.spec), None


class _Redistribute(ember.autograd.Function):
    _node_name = "RedistributeBackward"  # torch's node

    @staticmethod
    def forward(ctx: Any, d: DTensor, target: tuple[Placement, ...]) -> DTensor:
        ctx.spec = d._spec
        return DTensor(_move(d._local_tensor, d._spec, target), d._spec.with_(target))

    @staticmethod
    def backward(ctx: Any, grad: Any) -> tuple:
        spec = ctx.spec
        back = _no_partial(spec.placements)
        return DTensor(_grad_to(grad, spec), spec.with_(back)), None


# ---- sharding rules: for one mesh dimension, the operands' layouts -> what to run ------------
_POINTWISE = frozenset("""
abs acos acosh add addcdiv addcmul asin asinh atan atan2 atanh bitwise_and bitwise_not
bitwise_or bitwise_xor ceil clamp clamp_max clamp_min clip copysign cos cosh div elu eq erf
erfc erfinv exp exp2 expm1 fill float_power floor floor_divide fmod frac ge gelu gt hardsigmoid
hardswish hardtanh isfinite isinf isnan le leaky_relu lerp log log10 log1p log2 logical_and
logical_not logical_or logical_xor logit lt maximum minimum mish mul nan_to_num ne neg pow
reciprocal relu remainder round rsqrt rsub sgn sigmoid sign signbit silu sin sinh softplus sqrt
square sub tan tanh threshold true_divide trunc where xlogy zero _to_copy _to_dtype to copy
masked_fill
gelu_backward silu_backward sigmoid_backward tanh_backward threshold_backward
""".split())
_LIKE = frozenset("""clone contiguous detach alias empty_like zeros_like ones_like full_like rand_like
randn_like randint_like""".split())
_REDUCE = {"sum": "sum", "mean": "sum", "amax": "max", "amin": "min", "max": "max",
           "min": "min", "linalg_vector_norm": "norm", "norm": "norm"}
# ops through which a partial sum stays a partial sum
_LINEAR_PARTIAL = frozenset({"add", "sub", "neg", "clone", "contiguous", "detach", "alias",
                             "zeros_like", "empty_like"})
_SCALE_PARTIAL = frozenset({"mul", "div", "true_divide"})  # by a number (no rounding_mode)


@dataclass
class _Call:
    """One op call being planned: the op, its operands, the DTensors among them."""
    func: Any
    name: str
    args: tuple
    kwargs: dict
    ds: list[DTensor]
    mesh: DeviceMesh

    def at(self, m: int) -> list[Placement]:
        return [d._spec.placements[m] for d in self.ds]

    def index(self, d: Any) -> int:
        return next(i for i, e in enumerate(self.ds) if e is d)


# A rule gets the call and a mesh dimension m and returns (a layout for each DTensor operand,
# the layout of each output tensor, or one layout for all), or None: Replicate everything.
_Rule = Callable[[_Call, int], "tuple[list[Placement], Any] | None"]


def _is_plain_sum(p: Placement) -> bool:
    return type(p) is Partial and p.reduce_op == "sum"


def _packet(func: Any) -> str:
    name = func.overloadpacket.__name__
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _in_place(func: Any) -> bool:
    name = func.overloadpacket.__name__
    return name.endswith("_") and not name.startswith("_")


def _like_rule(c: _Call, m: int) -> Any:
    if c.args[0] is not c.ds[0]:
        return None
    pl = c.at(m)
    p = pl[0]
    if isinstance(p, Partial) and c.name not in _LINEAR_PARTIAL:
        if c.name.endswith("_like"):
            # only the shape is read: a Replicate result made here, the Partial not reduced
            # (the seed gradient of a partial loss costs no all-reduce)
            return [p] + [Replicate()] * (len(pl) - 1), Replicate()
        p = Replicate()
    return [p] + [Replicate()] * (len(pl) - 1), p


def _tensor_leaves(c: _Call) -> list[ember.Tensor]:
    return [a for a in tree_leaves(c.args, c.kwargs) if isinstance(a, ember.Tensor)]


def _cast_keeps_partial(c: _Call, p: Placement) -> bool:
    """A dtype cast of a Partial stays Partial (as torch's) unless the cast would change the
    reduction: to bool, or a floating sum / avg to an integer type."""
    if c.name not in ("_to_dtype", "_to_copy", "to") or not isinstance(p, Partial):
        return False
    target = c.kwargs.get("dtype")
    if target is None:
        target = next((a for a in c.args[1:] if isinstance(a, ember.dtype)), None)
    src = c.ds[0].dtype
    if target is None or target == src:
        return True
    if target == ember.bool:
        return False
    if p.reduce_op in ("max", "min"):
        return True
    return not (src.is_floating_point and not target.is_floating_point)


def _pointwise_rule(c: _Call, m: int) -> Any:
    pl = c.at(m)
    nd = max(t.ndim for t in _tensor_leaves(c))
    first = c.args[0] if c.args else None
    if _in_place(c.func) and isinstance(first, DTensor):
        mine = pl[c.index(first)]
        if isinstance(mine, Partial):
            linear = (c.name in ("add", "sub") and all(p == mine for p in pl)
                      and _is_plain_sum(mine) and "alpha" not in c.kwargs) or (
                c.name in _SCALE_PARTIAL and len(c.ds) == 1 and _is_plain_sum(mine)
                and c.kwargs.get("rounding_mode") is None)
            if not linear:
                return None
            return pl, mine
        size = first.shape[mine.dim] if isinstance(mine, Shard) else None
        return [mine if d is first else _aligned(mine, first.ndim, d, size) for d in c.ds], mine
    if any(isinstance(p, Partial) for p in pl):
        if (c.name in ("add", "sub") and len(c.ds) == 2 and pl[0] == pl[1]
                and _is_plain_sum(pl[0]) and "alpha" not in c.kwargs) or (
                c.name in _SCALE_PARTIAL and len(c.ds) == 1 and _is_plain_sum(pl[0])
                and c.args[0] is c.ds[0] and c.kwargs.get("rounding_mode") is None) or (
                c.name == "neg" and _is_plain_sum(pl[0])) or (
                len(c.ds) == 1 and _cast_keeps_partial(c, pl[0])):
            return pl, pl[0]
    # a plain Shard wins over a flattened sequence split (_StridedShard), as in torch
    shards = sorted((i for i, p in enumerate(pl) if isinstance(p, Shard)),
                    key=lambda i: _interleaved(c.ds[i]._spec.placements, m))
    out = (dataclasses.replace(pl[shards[0]], dim=pl[shards[0]].dim + nd - c.ds[shards[0]].ndim)
           if shards else Replicate())
    if isinstance(out, Shard) and ember.broadcast_shapes(
            *(tuple(t.shape) for t in _tensor_leaves(c)))[out.dim] == 1:
        out = Replicate()  # every operand broadcasts along it: nothing to split
    return [_aligned(out, nd, d) for d in c.ds], out


def _aligned(out: Placement, nd: int, d: DTensor, size: int | None = None) -> Placement:
    """The layout of operand d that gives this rank's piece of an nd-dim output laid out as
    out: its own Shard along the same (broadcast-aligned) dim, unless it broadcasts there
    (size 1 where the output's size there, when known, is not 1)."""
    if not isinstance(out, Shard):
        return out if isinstance(out, Replicate) else Replicate()
    at = out.dim - (nd - d.ndim)
    if at < 0 or (d.shape[at] == 1 and size != 1):
        return Replicate()
    return dataclasses.replace(out, dim=at)


def _reduce_dims(c: _Call, ndim: int) -> tuple[list[int], bool]:
    """The dims a reduction runs over and its keepdim."""
    args, kwargs = c.args, c.kwargs
    schema_dims: Any = None
    keepdim = bool(kwargs.get("keepdim", False))
    if c.name == "linalg_vector_norm":
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


def _reduce_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    if not isinstance(d, DTensor) or len(c.ds) != 1:
        return None
    if c.name in ("max", "min") and c.func.__name__ != f"{c.name}.default":
        return None  # max(dim) returns indices too
    kind = _REDUCE[c.name]
    p = d._spec.placements[m]
    if isinstance(p, Replicate):
        return [p], p
    if isinstance(p, Partial):
        if (kind == "sum" and _is_plain_sum(p)) or (
                type(p) is Partial and kind in ("max", "min") and p.reduce_op == kind):
            return [p], p
        return None
    dims, keepdim = _reduce_dims(c, d.ndim)
    if p.dim not in dims:
        removed = 0 if keepdim else sum(1 for i in dims if i < p.dim)
        return [p], dataclasses.replace(p, dim=p.dim - removed)
    if kind in ("max", "min") and _some_piece_empty(d._spec, [p.dim]):
        return None  # an empty piece has no max
    if kind == "norm":
        ord_ = c.args[1] if len(c.args) > 1 else c.kwargs.get("ord", c.kwargs.get("p", 2))
        return [p], _NormPartial(2.0 if ord_ is None else float(ord_))
    if c.name == "mean" and _even_over(d, dims):
        return [p], Partial("avg")  # as torch's: every piece's mean, averaged
    if c.name == "mean" and _interleaved(d._spec.placements, m):
        return None  # uneven strided pieces: torch gathers
    return [p], Partial(kind)


def _even_over(d: DTensor, dims: list[int]) -> bool:
    """Every rank's piece of d holds as many elements of dims as every other's (so the mean of
    the pieces' means is the mean)."""
    mesh = d._spec.mesh
    split: dict[int, int] = {}
    for m, p in enumerate(d._spec.placements):
        if _interleaved(d._spec.placements, m) and p.dim in dims:
            if (d.shape[p.dim] // p.split_factor) % mesh.size(m):
                return False
        elif isinstance(p, Shard) and p.dim in dims:
            split[p.dim] = split.get(p.dim, 1) * mesh.size(m)
    return all(d.shape[i] % n == 0 for i, n in split.items())


def _mean_over_shards(c: _Call, local_args: tuple, local_kwargs: dict,
                      outs: list[Any]) -> Any:
    """mean over a sharded dim: each piece's sum divided by the whole count (a partial sum)."""
    d = c.args[0]
    dims, keepdim = _reduce_dims(c, d.ndim)
    count = math.prod(d.shape[i] for i in dims)
    return ember.sum(local_args[0], dims, keepdim=keepdim,
                     dtype=local_kwargs.get("dtype")) / count


def _batched_matmul_rule(a: DTensor, b: DTensor, m: int) -> Any:
    """(..., n, k) @ (k, p): the leading and row dims split as a row split, the columns of b
    as a column split, k on both sides as a partial product."""
    pa, pb = a._spec.placements[m], b._spec.placements[m]
    rep, last = Replicate(), a.ndim - 1
    if isinstance(pa, Shard) and pa.dim < last and pb == rep:
        return [pa, pb], pa
    if pa == rep and pb == Shard(1):
        return [pa, pb], Shard(last)
    if pa == Shard(last) and pb == Shard(0):
        return [pa, pb], Partial("sum")
    if pa == rep and pb == rep:
        return [pa, pb], rep
    if _is_plain_sum(pa) and pb == rep or pa == rep and _is_plain_sum(pb):
        return [pa, pb], Partial("sum")
    return None


def _matmul_rule(c: _Call, m: int) -> Any:
    a, b = (c.args[1], c.args[2]) if c.name == "addmm" else (c.args[0], c.args[1])
    if c.name == "matmul" and isinstance(a, DTensor) and isinstance(b, DTensor) \
            and a.ndim > 2 and b.ndim == 2 and a is not b:
        return _batched_matmul_rule(a, b, m)
    if not (isinstance(a, DTensor) and isinstance(b, DTensor)) or a.ndim != 2 or b.ndim != 2:
        return None
    if a is b:
        return None
    pa, pb = a._spec.placements[m], b._spec.placements[m]
    rows, cols, rep = Shard(0), Shard(1), Replicate()
    table = {(rows, rep): rows, (rep, cols): cols, (cols, rows): Partial("sum"),
             (rep, rep): rep}
    sa, sb = _interleaved(a.placements, m), _interleaved(b.placements, m)
    if sa or sb:  # a flattened sequence split: its rows stay split, so do the contractions
        if sa and pa.dim == 0 and not sb:
            pb, out = rep, pa
        elif sa and sb and pa.dim == 1 and pb.dim == 0 and pa.split_factor == pb.split_factor:
            out = Partial("sum")
        else:
            return None
    elif (pa, pb) in table:
        out = table[(pa, pb)]
    elif _is_plain_sum(pa) and pb == rep or pa == rep and _is_plain_sum(pb):
        out = Partial("sum")
    elif pa == rows:
        pb, out = rep, rows
    elif pb == cols:
        pa, out = rep, cols
    elif pa == cols and pb == rep:  # cutting b's rows is free: a partial product
        pb, out = rows, Partial("sum")
    elif pa == rep and pb == rows:
        pa, out = cols, Partial("sum")
    else:
        return None
    targets = {id(a): pa, id(b): pb}
    if c.name == "addmm" and isinstance(c.args[0], DTensor):
        bias = c.args[0]
        if isinstance(out, Shard):  # this rank's rows / columns of the bias, unless broadcast
            at = bias.ndim - 2 + out.dim
            targets[id(bias)] = (dataclasses.replace(out, dim=at)
                                 if at >= 0 and bias.shape[at] != 1 else rep)
        else:  # a partial sum adds the bias once
            targets[id(bias)] = out
    elif c.name == "addmm" and not isinstance(out, Replicate):
        return None  # a plain bias next to pieces: refused below as mixed operands
    return [targets.get(id(d), rep) for d in c.ds], out


def _transpose_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    if not isinstance(d, DTensor):
        return None
    p = d._spec.placements[m]
    if isinstance(p, Shard):
        if c.name == "permute":
            perm = [int(i) % d.ndim for i in c.args[1]]
            p = dataclasses.replace(p, dim=perm.index(p.dim))
        else:
            d0, d1 = (0, 1) if c.name == "t" else (int(c.args[1]) % d.ndim,
                                                   int(c.args[2]) % d.ndim)
            p = dataclasses.replace(p, dim=d1 if p.dim == d0 else d0 if p.dim == d1 else p.dim)
    return [d._spec.placements[m]], p


def _view_shape(c: _Call) -> list[int] | None:
    """The global shape a view / reshape asks for, -1 resolved."""
    d = c.args[0]
    new = [int(s) for s in (c.args[1] if len(c.args) > 1 else [])]
    if c.kwargs or not new:
        return None
    if -1 in new:
        known = math.prod(s for s in new if s != -1)
        new[new.index(-1)] = math.prod(d.shape) // known if known else 0
    return new


def _reshape_rule(c: _Call, m: int) -> Any:
    """A Shard dim that the view keeps whole (the dims before it and after it may merge or
    split) stays sharded, at its new index; so does one that becomes the outer part of a merged
    dim, or is split with its outer part evenly divided over the ranks (each rank's piece is
    then still one block of the new dim). One merged with the dims before it becomes a
    _StridedShard (torch's: a flattened sequence split moves no data), and such a dim split
    back becomes a Shard again."""
    d = c.args[0]
    p = d._spec.placements[m]
    new = _view_shape(c)
    if new is None or len(c.ds) != 1:
        return None
    if not isinstance(p, Shard):
        return [p], p
    out = _reshaped(d, m, new)
    return None if out is None else ([p], out)


def _reshaped(d: DTensor, m: int, new: list[int]) -> Shard | None:
    """Where the Shard of d on mesh dim m lands when d is viewed as new (None: gather)."""
    p = d._spec.placements[m]
    old = list(d.shape)
    # tensor dims cut on the other mesh dims: a strided split must not merge with them
    others = {q.dim for i, q in enumerate(d.placements) if i != m and isinstance(q, Shard)}
    if _interleaved(d.placements, m):
        # as a plain Shard of the dim seen as (sf, rest)
        sf = p.split_factor
        if old[p.dim] % sf:
            return None
        old = old[:p.dim] + [sf, old[p.dim] // sf] + old[p.dim + 1:]
        others = {i + (i > p.dim) for i in others}
        return _reshape_shard(old, p.dim + 1, new, d.device_mesh.size(m), others)
    ways = math.prod(d.device_mesh.size(i) for i in _levels(d.placements, p.dim))
    if type(p) is Shard:
        return _reshape_shard(old, p.dim, new, ways,
                              others if ways == d.device_mesh.size(m) else None)
    before, after = math.prod(old[:p.dim]), math.prod(old[p.dim + 1:])
    for nd in range(len(new)):  # fully_shard's _StridedShard: only a dim kept whole
        if math.prod(new[:nd]) == before and new[nd] == old[p.dim] \
                and math.prod(new[nd + 1:]) == after:
            return dataclasses.replace(p, dim=nd)
    return None


def _reshape_shard(old: list[int], dim: int, new: list[int], ways: int,
                   others: set[int] | None) -> Shard | None:
    """Where Shard(dim) of shape old lands in the view new (split ways), or None: gather.
    others: the dims cut on other mesh dims (None: no _StridedShard may come out)."""
    before, after = math.prod(old[:dim]), math.prod(old[dim + 1:])
    for nd in range(len(new)):
        if math.prod(new[:nd]) == before:
            if new[nd] == old[dim] and math.prod(new[nd + 1:]) == after:
                return Shard(nd)
            merged = any(new[nd] == math.prod(old[dim:k]) for k in range(dim + 2, len(old) + 1))
            split = any(old[dim] == math.prod(new[nd:k]) for k in range(nd + 2, len(new) + 1))
            if (merged and old[dim] % ways == 0) or (split and new[nd] % ways == 0):
                return Shard(nd)
            return None
        if others is None or 0 in old or math.prod(new[nd + 1:]) != after:
            continue
        for j in range(dim):  # merged with old[j:dim] before it (and nothing after)
            if math.prod(old[:j]) == math.prod(new[:nd]) and \
                    new[nd] == math.prod(old[j:dim + 1]) and not others & set(range(j, dim)):
                sf = math.prod(old[j:dim])
                return _StridedShard(nd, split_factor=sf) if sf > 1 else Shard(nd)
    return None


def _expand_shape(c: _Call) -> list[int] | None:
    """The global shape expand asks for (-1 keeps a dim's size)."""
    d = c.args[0]
    new = [int(s) for s in (c.args[1] if len(c.args) > 1 else [])]
    if c.kwargs or len(new) < d.ndim:
        return None
    lead = len(new) - d.ndim
    return [d.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(new)]


def _expand_rule(c: _Call, m: int) -> Any:
    """A Shard dim that expand leaves alone stays sharded (shifted by the new leading dims)."""
    d = c.args[0]
    p = d._spec.placements[m]
    new = _expand_shape(c)
    if new is None or len(c.ds) != 1:
        return None
    if not isinstance(p, Shard):
        return [p], p
    at = p.dim + len(new) - d.ndim
    return ([p], dataclasses.replace(p, dim=at)) if new[at] == d.shape[p.dim] else None


def _reshape_locally(c: _Call, local_args: tuple, local_kwargs: dict, outs: list[Any]) -> Any:
    new = _expand_shape(c) if c.name == "expand" else _view_shape(c)
    local_shape = _local_region(new, c.mesh, _out_placements(outs, 0))[1]
    return c.func(local_args[0], local_shape, *local_args[2:])


def _softmax_rule(c: _Call, m: int) -> Any:
    x = c.args[0]
    back = "backward" in c.name
    dim = int(c.args[2] if back else c.args[1]) % x.ndim
    p = next((q for q in c.at(m) if isinstance(q, Shard) and q.dim != dim), Replicate())
    return [p] * len(c.ds), p


def _layer_norm_rule(c: _Call, m: int) -> Any:
    back = c.name == "native_layer_norm_backward"
    x = c.args[1] if back else c.args[0]
    if not isinstance(x, DTensor):
        return None
    axis = x.ndim - len(c.args[2] if back else c.args[1])
    p = x._spec.placements[m]
    if not isinstance(p, Shard) or p.dim >= axis:
        return None
    affine = {id(a) for a in (c.args[5:7] if back else c.args[2:4]) if isinstance(a, DTensor)}
    targets = [Replicate() if id(d) in affine else p for d in c.ds]
    if back:  # the affine parameters' gradients sum over rows spread across the ranks
        return targets, [p, Partial("sum"), Partial("sum")]
    return targets, [p, p, p]


def _embedding_rule(c: _Call, m: int) -> Any:
    weight, ids = c.args[0], c.args[1]
    wp = weight._spec.placements[m] if isinstance(weight, DTensor) else Replicate()
    ip = ids._spec.placements[m] if isinstance(ids, DTensor) else Replicate()
    if wp == Shard(1) and isinstance(ip, Replicate):  # this rank's columns of every row
        out: Placement = Shard(ids.ndim)
    elif wp == Shard(0) and isinstance(ip, Replicate):
        # the vocabulary split: each rank looks up the ids in its rows, zeros for the others
        # (_embedding_locally), and the pieces sum (torch's _MaskPartial)
        out = Partial("sum")
    elif isinstance(wp, Replicate) and isinstance(ip, Shard):  # the rows of this rank's ids
        out, wp = ip, Replicate()
    else:
        return None
    return [wp if d is weight else ip for d in c.ds], out


def _embedding_locally(c: _Call, local_args: tuple, local_kwargs: dict, outs: list[Any]) -> Any:
    """embedding on the pieces; over the mesh dims that split the vocabulary (a Partial
    output) each rank's ids are shifted to its rows, and the rows of ids it does not hold are
    zeros."""
    split = [m for m, o in enumerate(outs) if isinstance(o, Partial)]
    if not split:
        return c.func(*local_args, **local_kwargs)
    weight, ids = local_args[0], local_args[1]
    placements = [Shard(0) if m in split else Replicate() for m in range(c.mesh.ndim)]
    offsets, sizes = _local_region(c.args[0].shape, c.mesh, placements)
    shifted = ids - offsets[0]
    outside = (shifted < 0) | (shifted >= sizes[0])
    out = c.func(weight, shifted.masked_fill(outside, 0), *local_args[2:], **local_kwargs)
    return out.masked_fill(outside.unsqueeze(-1), 0)


def _embedding_backward_rule(c: _Call, m: int) -> Any:
    grad, ids = c.args[0], c.args[1]
    if not isinstance(grad, DTensor):
        return None
    gp = grad._spec.placements[m]
    ip = ids._spec.placements[m] if isinstance(ids, DTensor) else Replicate()
    if gp == Shard(grad.ndim - 1) and isinstance(ip, Replicate):
        out: Placement = Shard(1)
    elif isinstance(gp, Shard) and gp == ip and gp.dim < ids.ndim and not (
            len(c.args) > 4 and c.args[4]):
        out = Partial("sum")  # each rank's ids add their rows of the gradient
    else:
        return None
    return [gp if d is grad else ip for d in c.ds], out


# random fills: each piece drawn on its own rank; Replicate pieces then made equal
_RANDOM = frozenset("""bernoulli uniform normal random exponential geometric cauchy log_normal
rand_like randn_like randint_like native_dropout""".split())


def _random_fill_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    if d is not c.ds[0] or len(c.ds) != 1 or not (_in_place(c.func) or
                                                  c.name == "native_dropout"):
        return None
    p = d._spec.placements[m]
    p = Replicate() if isinstance(p, Partial) else p
    return [p], p


def _same_on_replicas(out: ember.Tensor, mesh: DeviceMesh,
                      placements: Sequence[Placement]) -> None:
    """A random piece made the same along every mesh dim that replicates it (as torch's
    DTensor random ops give), by a broadcast from index 0 of that dim."""
    for m, p in enumerate(placements):
        if isinstance(p, Replicate) and mesh.size(m) > 1:
            group = mesh.get_group(m)
            c10d.broadcast(out, c10d.get_global_rank(group, 0), group=group)


def _arg(c: _Call, i: int, name: str, default: Any = None) -> Any:
    """Argument i of the call (named name), or its default when the dispatched call left it
    out."""
    return c.args[i] if len(c.args) > i else c.kwargs.get(name, default)


def _slice_rule(c: _Call, m: int) -> Any:
    """slice / select / split / unbind along one dim: a Shard of another dim stays (moved down
    when the dim goes away); along the shard dim only a slice of all of it keeps it."""
    d = c.args[0]
    if not isinstance(d, DTensor) or len(c.ds) != 1:
        return None
    p = d._spec.placements[m]
    gone = c.name in ("select", "unbind")
    dim = int(_arg(c, 1, "dim", 0) if c.name in ("select", "slice", "unbind")
              else _arg(c, 2, "dim", 0)) % max(d.ndim, 1)
    if isinstance(p, Partial):  # linear: the pieces of a partial sum slice alike
        return [p], p
    if not isinstance(p, Shard):
        return [p], p
    if p.dim == dim:
        if c.name == "slice":
            start, end, step = (_arg(c, 2, "start"), _arg(c, 3, "end"), _arg(c, 4, "step", 1))
            if (start in (None, 0) and (end is None or end >= d.shape[dim]) and step == 1):
                return [p], p
        return None
    return [p], dataclasses.replace(p, dim=p.dim - 1 if gone and p.dim > dim else p.dim)


def _unsqueeze_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    p = d._spec.placements[m]
    dim = int(c.args[1]) % (d.ndim + 1)
    if isinstance(p, Shard) and p.dim >= dim:
        return [p], dataclasses.replace(p, dim=p.dim + 1)
    return [p], p


def _squeeze_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    p = d._spec.placements[m]
    dims = _arg(c, 1, "dim")
    dims = range(d.ndim) if dims is None else [dims] if isinstance(dims, int) else dims
    gone = {int(i) % max(d.ndim, 1) for i in dims if d.ndim and d.shape[int(i)] == 1}
    if not isinstance(p, Shard):
        return [p], p
    if p.dim in gone:
        return None
    return [p], dataclasses.replace(p, dim=p.dim - sum(1 for i in gone if i < p.dim))


def _cat_rule(c: _Call, m: int) -> Any:
    """Tensors joined along dim (cat) or a new dim (stack): pieces of a Shard of another dim
    join alike."""
    parts = c.args[0]
    stack = c.name == "stack"
    if any(not isinstance(t, DTensor) for t in parts) or len(c.ds) != len(parts):
        return None
    nd = max(t.ndim for t in parts)
    dim = int(_arg(c, 1, "dim", 0)) % max(nd + stack, 1)
    pl = c.at(m)
    out = next((p for p in pl if isinstance(p, Shard) and (stack or p.dim != dim)), None)
    if out is None:
        if all(isinstance(p, Replicate) for p in pl) or (
                all(p == pl[0] for p in pl) and _is_plain_sum(pl[0])):
            return pl, pl[0]
        return None
    if any(t.ndim != nd for t in parts):
        return None  # the legacy empty 1-D pieces
    if stack:
        return [out] * len(pl), dataclasses.replace(out, dim=out.dim + (out.dim >= dim))
    return [out] * len(pl), out


def _bmm_rule(c: _Call, m: int) -> Any:
    a, b = c.args[0], c.args[1]
    if not (isinstance(a, DTensor) and isinstance(b, DTensor)) or a is b:
        return None
    pa, pb = a._spec.placements[m], b._spec.placements[m]
    rep = Replicate()
    table = {(Shard(0), Shard(0)): Shard(0), (Shard(1), rep): Shard(1), (rep, Shard(2)): Shard(2),
             (Shard(2), Shard(1)): Partial("sum"), (rep, rep): rep}
    if (pa, pb) in table:
        return [pa, pb], table[(pa, pb)]
    if _is_plain_sum(pa) and pb == rep or pa == rep and _is_plain_sum(pb):
        return [pa, pb], Partial("sum")
    if pa == Shard(2) and pb == rep:  # cutting the other operand is free: a partial product
        return [pa, Shard(1)], Partial("sum")
    if pa == rep and pb == Shard(1):
        return [Shard(2), pb], Partial("sum")
    return None


def _attention_rule(c: _Call, m: int) -> Any:
    """Fused attention (and its backward) with every operand split alike over the batch or
    the heads: each rank attends its own."""
    pl = c.at(m)
    if len(c.ds) < 3 or any(d.ndim < 3 for d in c.ds):
        return None
    p = pl[0]
    if not all(q == p for q in pl):
        return None
    if isinstance(p, Replicate) or (isinstance(p, Shard) and p.dim in (0, 1)
                                    and c.ds[0].ndim == 4):
        return pl, p
    return None


def _convolution_rule(c: _Call, m: int) -> Any:
    """Convolutions of a batch split over the ranks (weights replicated): each rank its own
    images; the backward's weight and bias gradients are partial sums."""
    back = c.name == "convolution_backward"
    x, w = (c.args[1], c.args[2]) if back else (c.args[0], c.args[1])
    if not (isinstance(x, DTensor) and isinstance(w, DTensor)):
        return None
    px, pw = x._spec.placements[m], w._spec.placements[m]
    if isinstance(px, Replicate) and isinstance(pw, Replicate):
        return [Replicate()] * len(c.ds), [Replicate()] * 3 if back else Replicate()
    if px != Shard(0) or not isinstance(pw, Replicate):
        return None
    grad = c.args[0] if back else None
    targets = [Shard(0) if d is x or d is grad else Replicate() for d in c.ds]
    if back:
        return targets, [Shard(0), Partial("sum"), Partial("sum")]
    return targets, Shard(0)


# ops that work along one dim (scans, sorts, arg-reductions): a Shard of any other dim stays
# -> (position of dim, its default, whether the dim goes away without keepdim)
_ALONG_DIM = {
    "argmax": (1, None, True), "argmin": (1, None, True), "max": (1, None, True),
    "min": (1, None, True), "median": (1, None, True), "mode": (1, -1, True),
    "kthvalue": (2, -1, True), "sort": (1, -1, False), "argsort": (1, -1, False),
    "topk": (2, -1, False), "cumsum": (1, None, False), "cumprod": (1, None, False),
    "cummax": (1, None, False), "cummin": (1, None, False),
    "logcumsumexp": (1, None, False),
}
_DIM_NAMES = {"argmax": "dim", "argmin": "dim", "max": "dim", "min": "dim", "median": "dim",
              "mode": "dim", "kthvalue": "dim", "sort": "dim", "argsort": "dim", "topk": "dim"}


def _along_dim_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    if not isinstance(d, DTensor) or len(c.ds) != 1 or d.ndim == 0:
        return None
    at, default, drops = _ALONG_DIM[c.name]
    dim = _arg(c, at, _DIM_NAMES.get(c.name, "dim"), default)
    if dim is None or isinstance(dim, (list, tuple)) or isinstance(dim, ember.Tensor):
        return None  # over everything (or max(a, b)): not along one dim
    dim = int(dim) % d.ndim
    p = d._spec.placements[m]
    if isinstance(p, Replicate):
        return [p], p
    if not isinstance(p, Shard) or p.dim == dim:
        return None
    keepdim = bool(_arg(c, at + 1, "keepdim", False)) if drops else True
    return [p], dataclasses.replace(p, dim=p.dim - (not keepdim and p.dim > dim))


def _max_min_rule(c: _Call, m: int) -> Any:
    """max / min: over everything (a reduction), along a dim (values and indices)."""
    if c.func.__name__ == f"{c.name}.default":
        return _reduce_rule(c, m)
    if c.func.__name__ == f"{c.name}.dim":
        return _along_dim_rule(c, m)
    return None


def _lone_shard(c: _Call, m: int) -> tuple[DTensor | None, Any]:
    """For the rules of ops on one DTensor that keep a Shard of the dims they leave alone:
    (the operand, its Shard on mesh dim m), or (None, the rule's answer) when it is already
    known (Replicate stays; anything else, or other DTensor operands: no rule)."""
    d = c.args[0]
    if not isinstance(d, DTensor) or len(c.ds) != 1:
        return None, None
    p = d._spec.placements[m]
    if isinstance(p, Replicate):
        return None, ([p], p)
    return (d, p) if isinstance(p, Shard) else (None, None)


def _dims_reduce_rule(c: _Call, m: int) -> Any:
    """var / std / logsumexp / all / any over some dims: a Shard of another dim stays."""
    d, p = _lone_shard(c, m)
    if d is None:
        return p
    if len(c.args) > 1 and isinstance(c.args[1], bool):
        return None  # var(unbiased): over everything
    dims = _arg(c, 1, "dim")
    dims = (range(d.ndim) if dims is None or dims == [] else
            [dims] if isinstance(dims, int) else dims)
    dims = {int(i) % max(d.ndim, 1) for i in dims}
    if p.dim in dims:
        return None
    keepdim = bool(_arg(c, 3 if c.name in ("var", "std", "var_mean", "std_mean") else 2,
                        "keepdim", False))
    return [p], dataclasses.replace(p, dim=p.dim - (0 if keepdim else
                                                    sum(1 for i in dims if i < p.dim)))


def _new_factory_rule(c: _Call, m: int) -> Any:
    """new_zeros / new_ones / new_empty / new_full: a Replicate tensor of the size asked for,
    made on each rank (the source is not moved)."""
    if c.args[0] is not c.ds[0] or len(c.ds) != 1:
        return None
    return [c.ds[0]._spec.placements[m]], Replicate()


def _rms_norm_rule(c: _Call, m: int) -> Any:
    x = c.args[0]
    if not isinstance(x, DTensor):
        return None
    shape = c.args[1]
    axis = x.ndim - (1 if isinstance(shape, int) else len(shape))
    p = x._spec.placements[m]
    if not isinstance(p, Shard) or p.dim >= axis:
        return None
    outs: Any = p if c.name == "rms_norm" else [p, p]
    return [p if d is x else Replicate() for d in c.ds], outs


def _unflatten_rule(c: _Call, m: int) -> Any:
    d = c.args[0]
    p = d._spec.placements[m]
    if isinstance(p, Replicate):
        return [p], p
    if not isinstance(p, Shard):
        return None
    dim = int(c.args[1]) % d.ndim
    if p.dim < dim:
        return [p], p
    if p.dim > dim:
        return [p], dataclasses.replace(p, dim=p.dim + len(c.args[2]) - 1)
    if _interleaved(d.placements, m):  # a flattened sequence split unflattened: a view
        sizes = [int(s) for s in c.args[2]]
        if -1 in sizes:
            known = math.prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = d.shape[dim] // known if known else 0
        out = _reshaped(d, m, list(d.shape[:dim]) + sizes + list(d.shape[dim + 1:]))
        return None if out is None else ([p], out)
    return None


def _unflatten_locally(c: _Call, local_args: tuple, local_kwargs: dict, outs: list[Any]) -> Any:
    """unflatten of the pieces: their view as this rank's piece of the output."""
    d, dim = c.args[0], int(c.args[1]) % c.args[0].ndim
    sizes = [int(s) for s in c.args[2]]
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = d.shape[dim] // known if known else 0
    new = list(d.shape[:dim]) + sizes + list(d.shape[dim + 1:])
    return local_args[0].reshape(_local_region(new, c.mesh, _out_placements(outs, 0))[1])


def _class_loss_rule(c: _Call, m: int) -> Any:
    """cross_entropy / nll_loss of a batch split on dim 0 with its targets split alike, as
    torch's: each rank's loss of its rows, a Partial avg (mean: the rows split evenly) or sum
    (none: the rows stay split). The backward takes the gradient of a mean as a partial sum
    (each rank's share of it) and leaves the input's gradient split as the input."""
    back = c.name.endswith("_backward")
    x, target = (c.args[1], c.args[2]) if back else (c.args[0], c.args[1])
    weight = c.args[3] if back else _arg(c, 2, "weight")
    if not (isinstance(x, DTensor) and isinstance(target, DTensor)) or x.ndim < 2 \
            or weight is not None:
        return None
    px, pt = x._spec.placements[m], target._spec.placements[m]
    if not (isinstance(px, Shard) and px.dim == 0 and pt == px):
        return None
    if back:
        reduction = c.args[5] if c.name == "_cross_entropy_loss_backward" else c.args[4]
    else:
        reduction = _arg(c, 3, "reduction", "mean")
    if reduction == "mean" and x.shape[0] % c.mesh.size(m):
        return None  # uneven rows: a mean of means would be biased
    if back:
        grad = {"none": px, "mean": Partial("sum"), "sum": Replicate()}[reduction]
        return [grad if d is c.args[0] else px for d in c.ds], px
    out = {"none": px, "mean": Partial("avg"), "sum": Partial("sum")}[reduction]
    targets = [px for _ in c.ds]
    return targets, ([out, px] if c.name == "_cross_entropy_loss" else out)


def _keep_unless_dims_rule(c: _Call, m: int) -> Any:
    """flip / roll / repeat_interleave / pad: the op moves elements along some dims only, so a
    Shard of any other dim stays."""
    d, p = _lone_shard(c, m)
    if d is None:
        return p
    if c.name == "flip":
        dims = _arg(c, 1, "dims")
    elif c.name == "roll":
        dims = _arg(c, 2, "dims")
        if dims is None or dims == []:
            return None  # rolls the flattened tensor
    elif c.name == "repeat_interleave":
        dims = _arg(c, 2, "dim")
        if dims is None or isinstance(_arg(c, 1, "repeats"), ember.Tensor):
            return None
    else:  # pad: pairs from the last dim backwards
        dims = [-(i + 1) for i in range(len(_arg(c, 1, "pad")) // 2)]
    dims = [dims] if isinstance(dims, int) else dims
    if p.dim in {int(i) % d.ndim for i in dims}:
        return None
    return [p], p


def _expand_as_rule(c: _Call, m: int) -> Any:
    """expand_as: a Shard of a dim that is not broadcast stays."""
    d, other = c.args[0], c.args[1]
    if not isinstance(d, DTensor) or not isinstance(other, DTensor) or len(c.ds) != 2:
        return None
    p = d._spec.placements[m]
    if isinstance(p, Replicate):
        return [p, p], p
    if not isinstance(p, Shard) or d.shape[p.dim] == 1:
        return None
    out = dataclasses.replace(p, dim=p.dim + other.ndim - d.ndim)
    return [p, out], out  # other cut alike, so that the pieces' shapes agree


_RULES: dict[str, _Rule] = {
    "sum": _reduce_rule, "mean": _reduce_rule, "amax": _reduce_rule, "amin": _reduce_rule,
    "max": _max_min_rule, "min": _max_min_rule, "linalg_vector_norm": _reduce_rule,
    "norm": _reduce_rule,
    "mm": _matmul_rule, "addmm": _matmul_rule, "matmul": _matmul_rule,
    "t": _transpose_rule, "transpose": _transpose_rule, "permute": _transpose_rule,
    "view": _reshape_rule, "reshape": _reshape_rule, "_unsafe_view": _reshape_rule,
    "expand": _expand_rule,
    "_softmax": _softmax_rule, "_log_softmax": _softmax_rule,
    "_softmax_backward_data": _softmax_rule, "_log_softmax_backward_data": _softmax_rule,
    "native_layer_norm": _layer_norm_rule, "native_layer_norm_backward": _layer_norm_rule,
    "embedding": _embedding_rule, "embedding_dense_backward": _embedding_backward_rule,
    "slice": _slice_rule, "select": _slice_rule, "split": _slice_rule,
    "split_with_sizes": _slice_rule, "unbind": _slice_rule,
    "unsqueeze": _unsqueeze_rule, "squeeze": _squeeze_rule, "cat": _cat_rule, "stack": _cat_rule, "bmm": _bmm_rule,
    "_scaled_dot_product_flash_attention_for_cpu": _attention_rule,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _attention_rule,
    "_scaled_dot_product_fused_attention": _attention_rule,
    "_scaled_dot_product_fused_attention_backward": _attention_rule,
    "convolution": _convolution_rule, "convolution_backward": _convolution_rule,
    **{name: _random_fill_rule for name in _RANDOM if not name.endswith("_like")},
    **{name: _along_dim_rule for name in _ALONG_DIM if name not in ("max", "min")},
    **{name: _dims_reduce_rule for name in ("var", "std", "var_mean", "std_mean", "logsumexp",
                                            "all", "any", "prod", "count_nonzero")},
    **{name: _new_factory_rule for name in ("new_zeros", "new_ones", "new_empty", "new_full")},
    "rms_norm": _rms_norm_rule, "_fused_rms_norm": _rms_norm_rule,
    "unflatten": _unflatten_rule,
    **{name: _keep_unless_dims_rule for name in ("flip", "roll", "repeat_interleave", "pad")},
    "expand_as": _expand_as_rule,
    **{name: _class_loss_rule for name in ("_cross_entropy_loss", "nll_loss",
                                           "_cross_entropy_loss_backward",
                                           "nll_loss_backward")},
}
# the rules that treat a _StridedShard (the dim seen as (split_factor, rest), rest split) right
_KNOWS_STRIDED = frozenset({_pointwise_rule, _like_rule, _reshape_rule, _matmul_rule,
                            _transpose_rule, _reduce_rule, _unflatten_rule})
# how an op runs on the pieces when that is not the op itself
_LOCAL_RUN: dict[str, Callable] = {"view": _reshape_locally, "reshape": _reshape_locally,
                                   "_unsafe_view": _reshape_locally, "expand": _reshape_locally,
                                   "embedding": _embedding_locally,
                                   "unflatten": _unflatten_locally}
# ops computed over the ranks by code of their own while a context is on (loss_parallel):
# op name -> handler(call) returning the result, or None to go on as usual
_SPECIAL: dict[str, Callable[[_Call], Any]] = {}


def _rule_of(name: str) -> _Rule | None:
    if name in _LIKE:
        return _like_rule
    if name in _POINTWISE:
        return _pointwise_rule
    return _RULES.get(name)


# ---- running an op on DTensors -----------------------------------------------------------------
def tree_leaves(args: Any, kwargs: dict) -> list:
    found: list = []
    tree_map(lambda a: found.append(a), (args, kwargs))
    return found


def _dtensors(args: Any, kwargs: dict) -> list[DTensor]:
    found: list[DTensor] = []
    tree_map(lambda a: found.append(a) if isinstance(a, DTensor) else a, (args, kwargs))
    return found


def _refuse_mixed(c: _Call) -> None:
    """Indices and masks may be plain tensors; values must be DTensors too (as in torch)."""
    if any(isinstance(a, ember.Tensor) and not isinstance(a, DTensor) and a.ndim > 0
           and (a.is_floating_point() or a.is_complex()) for a in tree_leaves(c.args, c.kwargs)):
        raise RuntimeError(f"{c.func}: got mixed ember.Tensor and DTensor operands; wrap the "
                           "plain tensor with DTensor.from_local or distribute_tensor first")


def _plan(c: _Call) -> tuple[list[list[Placement]], list[Any]] | None:
    """For each DTensor operand its layout, and for each mesh dimension the outputs' layouts
    (a placement for all outputs, or one per output); None: no rule fits any dimension."""
    rule = _rule_of(c.name)
    n = c.mesh.ndim
    targets = [list(d._spec.placements) for d in c.ds]
    outs: list[Any] = []
    fitted = False
    for m in range(n):
        got = rule(c, m) if rule is not None else None
        if got is not None and rule not in _KNOWS_STRIDED and any(
                _interleaved(d._spec.placements, m) for d in c.ds):
            got = None  # a rule that assumes one block per rank: gather the strided split
        if got is None:
            for t in targets:
                t[m] = Replicate()
            outs.append(Replicate())
            continue
        fitted = True
        for t, p in zip(targets, got[0]):
            t[m] = p
        outs.append(got[1])
    return (targets, outs) if fitted else None


def _out_placements(outs: list[Any], i: int) -> tuple[Placement, ...]:
    return tuple(o[i] if isinstance(o, list) else o for o in outs)


def _meta(a: Any) -> Any:
    if isinstance(a, DTensor):
        return ember.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
    if isinstance(a, ember.Tensor):
        return a.to("meta")
    return a


def _global_shapes(c: _Call) -> list[tuple[tuple[int, ...], tuple[int, ...]] | None]:
    """The (shape, stride) of each output of the op on whole tensors (it runs on meta
    tensors)."""
    kwargs = {k: v for k, v in c.kwargs.items() if k not in ("device", "pin_memory")}
    with ember.no_grad():
        out = c.func(*tree_map(_meta, c.args), **tree_map(_meta, kwargs))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [(tuple(o.shape), tuple(o.stride())) if isinstance(o, ember.Tensor) else None
            for o in outs]


_IMPLICIT_REPLICATION: list[bool] = [False]  # on inside implicit_replication()


def _replicated_plain(args: Any, kwargs: dict, mesh: DeviceMesh) -> tuple[Any, dict]:
    """Plain tensors among the operands as Replicate DTensors (implicit_replication)."""
    rep = tuple(Replicate() for _ in range(mesh.ndim))
    return tree_map(lambda a: DTensor(a, _Spec(mesh, rep, tuple(a.shape)), stride=a.stride())
                    if isinstance(a, ember.Tensor) and not isinstance(a, DTensor) else a,
                    (args, kwargs))


def _dispatch(func: Any, args: tuple, kwargs: dict) -> Any:
    ds = _dtensors(args, kwargs)
    mesh = ds[0]._spec.mesh
    if _IMPLICIT_REPLICATION[0]:
        args, kwargs = _replicated_plain(args, kwargs, mesh)
        ds = _dtensors(args, kwargs)
    if any(d._spec.mesh != mesh for d in ds):
        raise RuntimeError(f"{func}: DTensor operands on different device meshes")
    c = _Call(func, _packet(func), args, kwargs, ds, mesh)
    special = _SPECIAL.get(c.name)
    if special is not None:
        result = special(c)
        if result is not None:
            return result
    if c.name == "copy" and _in_place(func) and len(ds) == 2 and args[0] is ds[0] \
            and args[1] is ds[1]:
        # copy_ between DTensors: the source moved to the destination's layout
        ds[0]._local_tensor.copy_(_move(ds[1]._local_tensor, ds[1]._spec, ds[0].placements))
        return ds[0]
    planned = None
    if not (_in_place(func) and c.name not in _POINTWISE and c.name not in _RANDOM) and not (c.name in _POINTWISE and any(
            isinstance(a, ember.Tensor) and not isinstance(a, DTensor) and a.ndim > 0
            for a in tree_leaves(args, kwargs))):
        planned = _plan(c)
    if planned is None:
        _refuse_mixed(c)
        return _replicated(c)
    targets, outs = planned
    _refuse_mixed(c)
    moved = {id(d): _move(d._local_tensor, d._spec, t) for d, t in zip(ds, targets)}
    local_args, local_kwargs = tree_map(
        lambda a: moved[id(a)] if isinstance(a, DTensor) else a, (args, kwargs))
    run = _LOCAL_RUN.get(c.name)
    if c.name == "mean" and any(_is_plain_sum(p) and not isinstance(
            ds[0].placements[m], Partial) for m, p in enumerate(outs)):
        run = _mean_over_shards
    out = run(c, local_args, local_kwargs, outs) if run else func(*local_args, **local_kwargs)
    if c.name in _RANDOM:
        for i, o in enumerate(out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(o, ember.Tensor):
                _same_on_replicas(o, mesh, _out_placements(outs, i))
    if _in_place(func) and isinstance(args[0], DTensor):
        first = args[0]
        if moved[id(first)] is not first._local_tensor:  # a Partial reduced: same piece shape
            first._local_tensor.copy_(moved[id(first)])
            first._spec = first._spec.with_(targets[c.index(first)])
        return first
    needs_shape = any(isinstance(p, Shard) for o in outs
                      for p in (o if isinstance(o, list) else [o]))
    shapes = _global_shapes(c) if needs_shape else None
    return _wrap_outputs(out, mesh, outs, shapes)


def _wrap_outputs(out: Any, mesh: DeviceMesh, outs: list[Any], shapes: list[Any] | None) -> Any:
    def one(o: Any, i: int) -> Any:
        if not isinstance(o, ember.Tensor):
            return o
        shape, stride = shapes[i] if shapes is not None else (tuple(o.shape), o.stride())
        return DTensor(o, _Spec(mesh, _out_placements(outs, i), shape), stride=stride)

    if isinstance(out, (tuple, list)):
        wrapped = [one(o, i) for i, o in enumerate(out)]
        return type(out)(wrapped) if not hasattr(out, "_fields") else type(out)(*wrapped)
    return one(out, 0)


def _replicated(c: _Call) -> Any:
    """The fallback: every operand whole, a Replicate result."""
    whole = tree_map(lambda a: _whole(a._local_tensor, a._spec) if isinstance(a, DTensor)
                     else a, (c.args, c.kwargs))
    out = c.func(*whole[0], **whole[1])
    first = c.args[0] if c.args else None
    if isinstance(first, DTensor) and _in_place(c.func):
        # in place: write this rank's piece of the new value back
        spec = first._spec.with_(_no_partial(first.placements))
        first._local_tensor.copy_(_move(whole[0][0], spec.with_(
            [Replicate()] * len(spec.placements)), spec.placements))
        first._spec = spec  # a Partial is now the reduced value
        return first
    rep = tuple(Replicate() for _ in range(c.mesh.ndim))
    return tree_map(lambda o: DTensor(o, _Spec(c.mesh, rep, tuple(o.shape)))
                    if isinstance(o, ember.Tensor) else o, out)


# ---- making DTensors ---------------------------------------------------------------------------
def distribute_tensor(tensor: ember.Tensor, device_mesh: DeviceMesh | None = None,
                      placements: Sequence[Placement] | None = None, *,
                      src_data_rank: int | None = 0) -> DTensor:
    """tensor laid out over the mesh as placements, from the mesh's rank src_data_rank's copy
    (None: each rank's own). A leaf DTensor that requires grad as tensor does.

    Example::

        >>> d = distribute_tensor(ember.randn(8, 4), mesh, [Shard(0)])  # doctest: +SKIP
    """
    if not tensor.is_leaf:
        raise RuntimeError("`distribute_tensor` should be used to distribute leaf tensors! but "
                           "found non-leaf tensor!")
    mesh = device_mesh or _default_mesh(tensor)
    target = _check_placements(placements or [Replicate()], mesh, tensor.ndim)
    with ember.no_grad():
        data = tensor.detach()
        spec = _Spec(mesh, target, tuple(tensor.shape))
        p = target[0]
        if (src_data_rank is not None and mesh.ndim == 1 and isinstance(p, Shard)
                and not isinstance(p, _StridedShard) and tensor.shape[p.dim] > 0):
            # each rank gets only its chunk (one scatter, as torch)
            local = _scatter_chunks(data, p.dim, mesh, src_data_rank)
            return DTensor(local, spec, requires_grad=tensor.requires_grad)
        if src_data_rank is not None:  # along each mesh dim from its index src_data_rank
            data = data.clone().contiguous()
            for m in range(mesh.ndim):
                group = mesh.get_group(m)
                c10d.broadcast(data, c10d.get_global_rank(group, src_data_rank), group=group)
        spec = _Spec(mesh, target, tuple(tensor.shape))
        local = _move(data, spec.with_([Replicate()] * mesh.ndim), target)
        if local is data:
            local = data.clone()
    return DTensor(local, spec, requires_grad=tensor.requires_grad)


def _scatter_chunks(data: ember.Tensor, dim: int, mesh: DeviceMesh, src: int) -> ember.Tensor:
    """This rank's chunk along dim of the 1-D mesh's rank src's data, scattered from it (the
    chunks padded to the largest)."""
    n = mesh.size(0)
    sizes = _chunk_sizes(data.shape[dim], n)
    top = max(sizes)
    group = mesh.get_group(0)
    shape = list(data.shape)
    shape[dim] = top
    out = data.new_empty(shape)
    pieces = None
    if mesh.get_local_rank(0) == src:
        pad = list(data.shape)
        pad[dim] = top * n - data.shape[dim]
        padded = ember.cat([data, data.new_zeros(pad)], dim) if pad[dim] else data
        pieces = [c.contiguous() for c in padded.split(top, dim)]
    c10d.scatter(out, pieces, src=c10d.get_global_rank(group, src), group=group)
    return out.narrow(dim, 0, sizes[mesh.get_local_rank(0)]).contiguous()


def _factory(make: Any, size: Any, device_mesh: DeviceMesh | None,
             placements: Sequence[Placement] | None, **kw: Any) -> DTensor:
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    mesh = device_mesh or init_device_mesh("cpu", (c10d.get_world_size(),))
    target = _check_placements(placements or [Replicate()], mesh, len(shape))
    local_shape = _local_region(shape, mesh, target)[1]
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


def _random_factory(make: Any, size: Any, device_mesh: DeviceMesh | None,
                    placements: Sequence[Placement] | None, kw: dict) -> DTensor:
    # drawn without grad (a leaf), then made equal where replicated, as the random ops are
    requires_grad = kw.pop("requires_grad", False)
    out = _factory(make, size, device_mesh, placements, **kw)
    _same_on_replicas(out._local_tensor, out._spec.mesh, out._spec.placements)
    return out.requires_grad_(requires_grad)


def rand(*size: Any, device_mesh: DeviceMesh | None = None,
         placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """A DTensor of uniform [0, 1) numbers of the global size: each rank draws its own piece
    from its generator, and the pieces of a Replicate dim are the same on every rank of it.

    Example::

        >>> d = rand(4, 6, device_mesh=mesh, placements=[Shard(1)])  # doctest: +SKIP
    """
    return _random_factory(ember.rand, size, device_mesh, placements, kw)


def randn(*size: Any, device_mesh: DeviceMesh | None = None,
          placements: Sequence[Placement] | None = None, **kw: Any) -> DTensor:
    """A DTensor of standard normal numbers of the global size, drawn as ``rand``'s.

    Example::

        >>> d = randn(4, 6, device_mesh=mesh, placements=[Replicate()])  # doctest: +SKIP
    """
    return _random_factory(ember.randn, size, device_mesh, placements, kw)


def distribute_module(module: Any, device_mesh: DeviceMesh | None = None,
                      partition_fn: Any = None, input_fn: Any = None,
                      output_fn: Any = None) -> Any:
    """Lays module's parameters out over the mesh: partition_fn(name, submodule, mesh) for
    each submodule (default: every parameter and buffer a Replicate DTensor); input_fn(module,
    inputs, mesh) and output_fn(module, outputs, mesh) become forward pre- / post-hooks.
    Returns module.

    Example::

        >>> distribute_module(model, mesh, output_fn=lambda m, out, mesh: out.to_local())
        ... # doctest: +SKIP
    """
    from ember import nn

    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, but it "
                           "has already been called on this module!")
    mesh = device_mesh or init_device_mesh("cpu", (c10d.get_world_size(),))
    rep = [Replicate()] * mesh.ndim

    def replicate(name: str, sub: nn.Module, mesh: DeviceMesh) -> None:
        for key, p in list(sub._parameters.items()):
            if p is not None and not isinstance(p, DTensor):
                sub._parameters[key] = nn.Parameter(distribute_tensor(p.data, mesh, rep),
                                                    requires_grad=p.requires_grad)
        for key, b in list(sub._buffers.items()):
            if b is not None and not isinstance(b, DTensor):
                sub._buffers[key] = distribute_tensor(b, mesh, rep)

    for name, sub in module.named_modules():
        (partition_fn or replicate)(name, sub, mesh)
        if partition_fn is not None:
            replicate(name, sub, mesh)  # what partition_fn left plain is replicated
    if input_fn is not None:
        module.register_forward_pre_hook(lambda m, inputs: input_fn(m, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda m, inputs, out: output_fn(m, out, mesh))
    module._distribute_module_applied = True
    return module
