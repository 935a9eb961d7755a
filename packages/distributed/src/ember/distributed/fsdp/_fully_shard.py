"""fully_shard: PyTorch's per-parameter FSDP ("FSDP2", torch.distributed.fsdp.fully_shard).

Each parameter a module manages (its own and those of submodules not sharded separately)
becomes a DTensor split along dim 0 (or the dim shard_placement_fn says) over a 1-D mesh (over
the second dimension of a 2-D mesh, replicated over the first: HSDP; a tensor-parallel DTensor
is split again over the first dimension of its 2-D mesh), kept on the CPU with
CPUOffloadPolicy, so ``model.parameters()``, the optimizer
and the state dict see sharded DTensors, as in torch. Around the module's forward:

- before it, each parameter's shards are all-gathered into a plain full-size ``nn.Parameter``
  (the *unsharded* parameter, one object per parameter, reused every step, cast to
  ``mp_policy.param_dtype``) that is registered on its module in the DTensor's place;
- after it (``reshard_after_forward``; by default every module but the root), the DTensors are
  registered again; autograd keeps the unsharded parameters the forward used;
- in backward, when a gradient has been accumulated into an unsharded parameter, a hook
  reduce-scatters it (in ``mp_policy.reduce_dtype``, averaged over the ranks) into the DTensor
  parameter's ``.grad``; with ``set_requires_gradient_sync(False)`` the gradient instead stays in
  the unsharded parameter, summing over backward passes, until the next synchronized one.

Collectives run synchronously when needed, so prefetching settings are accepted and have no
effect. A freed unsharded parameter keeps its memory until backward is done with it (ember
cannot shrink a storage in place): ember's fully_shard saves optimizer-state and gradient
memory, not parameter memory between forward and backward.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import ember
import ember.distributed as dist
from ember import nn

from .fully_sharded_data_parallel import _cast_inputs, _tensors_in

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """param_dtype: the unsharded parameters' dtype (forward and backward compute);
    reduce_dtype: the gradients' dtype in the reduce-scatter; output_dtype: the forward
    outputs' dtype; cast_forward_inputs: cast floating inputs to param_dtype."""

    param_dtype: ember.dtype | None = None
    reduce_dtype: ember.dtype | None = None
    output_dtype: ember.dtype | None = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    """No offloading (the default)."""


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Sharded parameters, gradients and optimizer state on the CPU (pinned when pin_memory
    and CUDA is there): gathered on the mesh's device for forward and backward, gradients
    brought back after the reduce-scatter, the optimizer steps on the CPU."""

    pin_memory: bool = True


class UnshardHandle:
    """What ``unshard(async_op=True)`` returns: ember gathers at once, so wait() returns."""

    def wait(self) -> None:
        return None


@dataclass(frozen=True)
class _Layout:
    """How a parameter is sharded: split along tensor dim `dim` over mesh dimension shard_dim
    of its DTensor's mesh, summed over replicate_dim too (HSDP); tp: the tensor-parallel mesh
    and placement of the piece fully_shard splits (2-D FSDP x TP), whose gathered form is a TP
    DTensor; offload: the shards live on the CPU, gathered on the mesh's device."""

    shard_dim: int
    replicate_dim: int | None = None
    tp: tuple[Any, Any] | None = None
    dim: int = 0
    offload: bool = False


class _Param:
    """One managed parameter: where it lives, its DTensor and its unsharded twin."""

    def __init__(self, owner: nn.Module, name: str, sharded: nn.Parameter,
                 layout: _Layout) -> None:
        self.owner, self.name, self.sharded, self.layout = owner, name, sharded, layout
        self.unsharded: nn.Parameter | None = None
        self.pending: ember.Tensor | None = None  # gradients kept under no-sync

    def register(self, p: nn.Parameter) -> None:
        self.owner._parameters[self.name] = p


class _State:
    def __init__(self, module: nn.Module, mesh: Any, params: list[_Param],
                 reshard_after_forward: bool | None, mp: MixedPrecisionPolicy) -> None:
        self.module, self.mesh, self.params = module, mesh, params
        self.reshard_after_forward = reshard_after_forward
        self.reshard_after_backward = True
        self.mp = mp
        self.sync = True
        self.divide_factor: float | None = None
        self.is_root: bool | None = None


def _gather(p: _Param) -> ember.Tensor:
    """The parameter gathered over its FSDP ranks: a plain tensor, or the TP DTensor."""
    from ember.distributed.tensor._dtensor import DTensor, _all_gather, _local_region, _Spec

    d, lay = p.sharded, p.layout
    mesh = d._spec.mesh
    piece = d._local_tensor
    if lay.offload:  # to the device the collectives run on
        piece = piece.to(mesh.device_type, non_blocking=True)
    if lay.tp is None:
        return _all_gather(piece, lay.dim, d.shape[lay.dim], mesh, lay.shard_dim)
    tp_mesh, tp_placement = lay.tp
    length = _local_region(d.shape, tp_mesh, (tp_placement,))[1][0]
    local = _all_gather(piece, 0, length, mesh, lay.shard_dim)
    return DTensor(local, _Spec(tp_mesh, (tp_placement,), tuple(d.shape)))


def _reduce_scatter(full: ember.Tensor, p: _Param, factor: float) -> ember.Tensor:
    """This rank's rows (its part of dim `dim`) of the sum over the FSDP ranks of full (with
    HSDP, summed over the replicas too), divided by factor."""
    from ember.distributed.tensor._dtensor import _chunk_sizes

    mesh, lay = p.sharded._spec.mesh, p.layout
    if lay.dim != 0:  # split along dim 0 of the transposed gradient
        full = full.transpose(0, lay.dim).contiguous()
    m = lay.shard_dim
    sizes = _chunk_sizes(full.shape[0], mesh.size(m))
    top = max(sizes)
    pieces = []
    start = 0
    for s in sizes:
        piece = full.narrow(0, start, s)
        if s < top:
            pad = list(full.shape)
            pad[0] = top - s
            piece = ember.cat([piece, full.new_zeros(pad)], 0)
        pieces.append(piece.contiguous())
        start += s
    out = ember.empty_like(pieces[0])
    dist.reduce_scatter(out, pieces, group=mesh.get_group(m))
    out = out.narrow(0, 0, sizes[mesh.get_local_rank(m)]).contiguous()
    if lay.replicate_dim is not None:
        dist.all_reduce(out, group=mesh.get_group(lay.replicate_dim))
    out.div_(factor)
    return out.transpose(0, lay.dim).contiguous() if lay.dim != 0 else out


class FSDPModule:
    """The methods fully_shard adds to a module (its class becomes FSDP<Name>)."""

    _fsdp_state: _State

    def unshard(self, async_op: bool = False) -> UnshardHandle | None:
        """Gathers this module's parameters (registers the unsharded ones)."""
        _unshard(self._fsdp_state)
        return UnshardHandle() if async_op else None

    def reshard(self) -> None:
        """Registers the sharded parameters again."""
        _reshard(self._fsdp_state)

    def _each(self, recurse: bool) -> list[_State]:
        if not recurse:
            return [self._fsdp_state]
        return [m._fsdp_state for m in self.modules() if isinstance(m, FSDPModule)]

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *,
                                   recurse: bool = True) -> None:
        """False: keep gradients unsharded and local over backward passes (accumulation)."""
        for s in self._each(recurse):
            s.sync = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        for s in self._each(recurse):
            s.reshard_after_forward = bool(reshard_after_forward)

    def set_reshard_after_backward(self, reshard_after_backward: bool, *,
                                   recurse: bool = True) -> None:
        for s in self._each(recurse):
            s.reshard_after_backward = bool(reshard_after_backward)

    def set_gradient_divide_factor(self, factor: float) -> None:
        for s in self._each(True):
            s.divide_factor = float(factor)

    set_reduce_scatter_divide_factor = set_gradient_divide_factor

    # scheduling hints for torch's asynchronous collectives: ember's run when needed
    def set_is_last_backward(self, is_last_backward: bool) -> None:
        pass

    def set_modules_to_forward_prefetch(self, modules: list[FSDPModule]) -> None:
        pass

    def set_modules_to_backward_prefetch(self, modules: list[FSDPModule]) -> None:
        pass

    def set_post_optim_event(self, event: Any) -> None:
        pass

    def set_unshard_in_backward(self, unshard_in_backward: bool) -> None:
        pass

    def set_requires_all_reduce(self, requires_all_reduce: bool, *, recurse: bool = True) -> None:
        pass


def _unshard(state: _State) -> None:
    # always gathered again: the optimizer changed the shards since the last time
    dtype = state.mp.param_dtype
    with ember.no_grad():
        for p in state.params:
            now = p.owner._parameters.get(p.name)
            if now is not p.sharded and now is not p.unsharded and hasattr(now, "_spec"):
                p.sharded = now  # module._apply (model.double(), .to()) made a new DTensor
            full = _gather(p)
            if dtype is not None and full.is_floating_point():
                full = full.to(dtype)
            if p.unsharded is not None and (p.unsharded.dtype != full.dtype
                                            or p.unsharded.device != full.device):
                p.unsharded = None  # a new dtype or device: a new gathered parameter
            if p.unsharded is None:
                p.unsharded = nn.Parameter(full, requires_grad=p.sharded.requires_grad)
                if p.sharded.requires_grad:
                    p.unsharded.register_post_accumulate_grad_hook(
                        lambda t, p=p, s=state: _reduce_grad(s, p))
            elif p.layout.tp is not None:  # a TP DTensor: its piece is its data
                p.unsharded._local_tensor = full._local_tensor
            else:
                p.unsharded.data = full
            p.register(p.unsharded)


def _regather(state: _State) -> None:
    """Registers the gathered parameters again for backward (once per backward pass)."""
    if any(p.owner._parameters.get(p.name) is not p.unsharded for p in state.params):
        _unshard(state)


def _reshard(state: _State) -> None:
    for p in state.params:
        p.register(p.sharded)


def _reduce_grad(state: _State, p: _Param) -> None:
    """The unsharded parameter's gradient is complete: into the DTensor's gradient."""
    from ember.distributed.tensor._dtensor import DTensor

    g = p.unsharded.grad
    if g is None:
        return
    if not state.sync:
        return  # stays in the unsharded parameter, summing, until a synchronized backward
    p.unsharded.grad = None
    with ember.no_grad():
        reduce_dtype = state.mp.reduce_dtype or g.dtype
        world = state.mesh.size()
        if p.layout.tp is not None:  # this rank's TP piece of the gradient
            from ember.distributed.tensor._dtensor import _move

            g = _move(g._local_tensor, g._spec, (p.layout.tp[1],))
        local = _reduce_scatter(g.to(reduce_dtype), p, state.divide_factor or float(world))
        local = local.to(p.sharded.dtype)
        if p.layout.offload:  # the optimizer steps the shards on the CPU
            local = local.to("cpu")
        grad = DTensor(local, p.sharded._spec)
        if p.sharded.grad is None:
            p.sharded.grad = grad
        else:
            p.sharded.grad._local_tensor.add_(local)
    if state.reshard_after_backward:
        p.register(p.sharded)


def _pre_forward(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    state = module._fsdp_state
    if state.is_root is None:  # the root: inside no other fully sharded module
        state.is_root = not any(m is not module and any(c is module for c in m.modules())
                                for m in _all_fsdp_modules())
    _unshard(state)
    mp = state.mp
    if mp.param_dtype is not None and mp.cast_forward_inputs:
        args, kwargs = _cast_inputs(args, mp.param_dtype), _cast_inputs(kwargs, mp.param_dtype)
    return args, kwargs


def _post_forward(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
    state = module._fsdp_state
    reshard = state.reshard_after_forward
    if reshard is None:
        reshard = not state.is_root
    if reshard or not ember.is_grad_enabled():
        _reshard(state)
        if ember.is_grad_enabled():
            # pre-backward: when the outputs' gradients arrive, gather again, so that
            # activation checkpointing recomputes this module with whole parameters
            for t in _tensors_in(output):
                if t.requires_grad:
                    t.register_hook(lambda g, s=state: (_regather(s), g)[1])
    if state.mp.output_dtype is not None:
        output = _cast_inputs(output, state.mp.output_dtype)
    return output


_LIVE: list = []  # weak references to the modules fully_shard made


def _all_fsdp_modules() -> list[nn.Module]:
    alive = [r() for r in _LIVE]
    _LIVE[:] = [r for r, m in zip(_LIVE, alive) if m is not None]
    return [m for m in alive if m is not None]


_CLASSES: dict[type, type] = {}


def fully_shard(module: nn.Module, *, mesh: Any = None, reshard_after_forward: bool | None = None,
                shard_placement_fn: Callable | None = None,
                mp_policy: MixedPrecisionPolicy = MixedPrecisionPolicy(),
                offload_policy: OffloadPolicy = OffloadPolicy(),
                ignored_params: set[nn.Parameter] | None = None,
                dp_mesh_dims: Any = None) -> nn.Module:
    """Shards module's parameters (those no inner fully_shard owns) over the mesh's ranks as
    dim-0 DTensors and gathers them around its forward; returns module, now an FSDPModule.
    Call it on the submodules first (transformer blocks), then on the root.

    Example (every rank)::

        for block in model.layers:
            fully_shard(block)
        fully_shard(model)
        opt = ember.optim.AdamW(model.parameters())  # DTensor parameters
    """
    import weakref

    from ember.distributed.device_mesh import init_device_mesh
    from ember.distributed.tensor import DTensor, Replicate, Shard
    from ember.distributed.tensor._dtensor import _my_chunk, _Spec

    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard: ember shards one module at a time")
    if not isinstance(module, nn.Module):
        raise TypeError(f"fully_shard: expected an nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"fully_shard: {type(module).__name__} is already fully sharded")
    if not isinstance(offload_policy, OffloadPolicy):
        raise TypeError(f"fully_shard: offload_policy must be an OffloadPolicy, got "
                        f"{type(offload_policy).__name__}")
    offload = isinstance(offload_policy, CPUOffloadPolicy)
    if not dist.is_initialized():
        raise RuntimeError("fully_shard needs an initialized process group "
                           "(ember.distributed.init_process_group)")
    if mesh is None:
        device = next((p.device.type for p in module.parameters()), "cpu")
        mesh = init_device_mesh(device, (dist.get_world_size(),))
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard expects a 1D or 2D DeviceMesh but got {mesh.ndim}-D")
    plain = _Layout(0) if mesh.ndim == 1 else _Layout(1, replicate_dim=0)
    placements = (Shard(0),) if mesh.ndim == 1 else (Replicate(), Shard(0))
    ignored = {id(p) for p in (ignored_params or ())}
    inner = {id(p) for m in module.modules() if m is not module and isinstance(m, FSDPModule)
             for p in m.parameters()}
    params: list[_Param] = []
    seen: dict[int, nn.Parameter] = {}
    for owner in module.modules():
        if owner is not module and isinstance(owner, FSDPModule):
            continue
        for name, p in list(owner._parameters.items()):
            if p is None or id(p) in ignored or id(p) in inner:
                continue
            if id(p) in seen:  # a tied parameter: the same DTensor in both places
                owner._parameters[name] = seen[id(p)]
                continue
            tp = _tp_layout(p, mesh, name, owner) if isinstance(p, DTensor) else None
            placement = shard_placement_fn(p) if shard_placement_fn else None
            dim = 0
            if placement is not None:
                if type(placement) is not Shard or not -p.ndim <= placement.dim < p.ndim:
                    raise ValueError(f"fully_shard: shard_placement_fn must return None or "
                                     f"Shard(d) with d a dim of the parameter, got "
                                     f"{placement!r} for {name} of shape {tuple(p.shape)}")
                dim = placement.dim % p.ndim
                if tp is not None and dim != 0:
                    raise NotImplementedError(f"fully_shard: a tensor-parallel parameter is "
                                              f"split along dim 0, got {placement} for {name}")
            if p.ndim == 0:
                raise NotImplementedError(f"fully_shard: 0-d parameter {name} cannot be "
                                          "sharded along dim 0")
            with ember.no_grad():
                if tp is None:
                    layout = dataclasses.replace(plain, dim=dim, offload=offload)
                    spec = _Spec(mesh, tuple(Shard(dim) if isinstance(q, Shard) else q
                                             for q in placements), tuple(p.shape))
                    local = _my_chunk(p.detach(), dim, mesh, plain.shard_dim).clone()
                else:  # this rank's rows of its TP piece, on the 2-D root mesh
                    layout = dataclasses.replace(tp[1], offload=offload)
                    spec = tp[0]
                    local = _my_chunk(p._local_tensor.detach(), 0, mesh, 0).clone()
                if offload:
                    local = local.to("cpu")
                    if offload_policy.pin_memory and ember.cuda.is_available():
                        local = local.pin_memory()
                sharded = nn.Parameter(DTensor(local, spec), requires_grad=p.requires_grad)
            seen[id(p)] = sharded
            owner._parameters[name] = sharded
            params.append(_Param(owner, name, sharded, layout))
    cls = type(module)
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    module.__class__ = _CLASSES[cls]
    module._fsdp_state = _State(module, mesh, params, reshard_after_forward, mp_policy)
    module.register_forward_pre_hook(_pre_forward, with_kwargs=True)
    module.register_forward_hook(_post_forward, with_kwargs=True)
    _LIVE.append(weakref.ref(module))
    return module


def _tp_layout(p: Any, mesh: Any, name: str, owner: nn.Module) -> tuple[Any, _Layout]:
    """(the 2-D spec, the layout) of a tensor-parallel DTensor parameter that fully_shard
    splits again over mesh: both meshes must be the two dimensions of one 2-D mesh (FSDP's
    first). A TP Shard(0) piece split again along dim 0 is torch's _StridedShard."""
    from ember.distributed.tensor import Shard
    from ember.distributed.tensor._dtensor import _Spec
    from ember.distributed.tensor.placement_types import _StridedShard

    tp_mesh = p.device_mesh
    root = mesh._root_mesh()
    if not (mesh.ndim == 1 and tp_mesh.ndim == 1 and tp_mesh._root_mesh() is root
            and root.ndim == 2 and mesh._root_dims == (0,) and tp_mesh._root_dims == (1,)):
        raise ValueError(f"fully_shard: parameter {name} of {type(owner).__name__} is already a "
                         "DTensor; fully_shard splits tensor-parallel parameters only over the "
                         "first dimension of the 2-D mesh whose second dimension holds them")
    tp_placement = p.placements[0]
    if tp_placement == Shard(0):
        dp_placement = _StridedShard(0, split_factor=tp_mesh.size())
    else:
        dp_placement = Shard(0)
    spec = _Spec(root, (dp_placement, tp_placement), tuple(p.shape))
    return spec, _Layout(0, tp=(tp_mesh, tp_placement))


def register_fsdp_forward_method(module: nn.Module, method_name: str) -> None:
    """Gathers the parameters around module.<method_name>() too (e.g. generate)."""
    if not isinstance(module, FSDPModule):
        return
    orig = getattr(module, method_name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _pre_forward(module, args, kwargs)
        return _post_forward(module, args, kwargs, orig(*args, **kwargs))

    setattr(module, method_name, wrapped)
