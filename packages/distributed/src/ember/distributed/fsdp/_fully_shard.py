"""fully_shard: PyTorch's per-parameter FSDP ("FSDP2", torch.distributed.fsdp.fully_shard).

Each parameter a module manages (its own and those of submodules not sharded separately)
becomes a DTensor split along dim 0 (or the dim shard_placement_fn says) over a 1-D mesh (over
the second dimension of a 2-D mesh, replicated over the first: HSDP; a tensor-parallel DTensor
is split again over the first dimension of its 2-D mesh), kept on the CPU with
CPUOffloadPolicy, so ``model.parameters()``, the optimizer
and the state dict see sharded DTensors, as in torch. Around the module's forward:

- before it, the parameters' shards are all-gathered together (as torch's FSDPParamGroup: one
  ``all_gather_into_tensor`` per fully_shard call, of each rank's pieces padded to
  ceil(dim / world size) rows and packed in one buffer, viewed as bytes when their dtypes
  differ, cast to ``mp_policy.param_dtype`` first) and copied out into plain full-size
  ``nn.Parameter``s (the *unsharded* parameters, one object per parameter, reused every step)
  that are registered on their modules in the DTensors' place;
- after it (``reshard_after_forward``; by default every module but the root), the DTensors are
  registered again; autograd keeps the unsharded parameters the forward used;
- in backward, once every parameter the forward's output reached has its gradient accumulated
  (ember's autograd has no end-of-backward callback: the parameters are found by walking the
  graph after forward), the gradients are packed (padded as in the all-gather, in
  ``mp_policy.reduce_dtype``) and reduce-scattered in one ``reduce_scatter_tensor`` (with HSDP
  then all-reduced over the replicas), averaged over the ranks, into the DTensor parameters'
  ``.grad``; with ``set_requires_gradient_sync(False)`` the gradients instead stay in the
  unsharded parameters, summing over backward passes, until the next synchronized one. The
  trainable parameters of one call must share a dtype (torch's AssertionError otherwise).
  (A parameter the output reaches whose gradient never comes, an output left out of the loss,
  holds back its group's reduce-scatter until the root's next forward.)

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
from ember.distributed.tensor._dtensor import _chunk_sizes

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
        self.checked = False  # the trainable parameters' dtypes (at the first gather)
        # backward: the parameters (by id) whose gradients the group waits for, and those in
        self.expected: set[int] = set()
        self.ready: dict[int, _Param] = {}


class _Slot:
    """Where one parameter sits in its group's flat collective buffers: each rank contributes
    ``rows`` rows (its piece padded to ceil(length / world), split dim moved first) of ``rest``
    elements each, at element ``offset`` of its part of the buffer."""

    def __init__(self, p: _Param, mesh: Any, length: int) -> None:
        lay = p.layout
        self.p, self.mesh, self.dim, self.length = p, mesh, lay.dim, length
        self.world = mesh.size(lay.shard_dim)
        self.group = mesh.get_group(lay.shard_dim)
        self.replicas = (mesh.get_group(lay.replicate_dim)
                         if lay.replicate_dim is not None else None)
        self.rows = -(-length // self.world) if length else 0
        self.mine = _chunk_sizes(length, self.world)[mesh.get_local_rank(lay.shard_dim)]
        self.offset = 0

    def size(self, rest: tuple[int, ...]) -> int:
        n = self.rows
        for s in rest:
            n *= s
        return n

    def padded(self, piece: ember.Tensor, rows: int) -> ember.Tensor:
        """piece (split dim first) with zero rows appended up to rows, flattened."""
        if piece.shape[0] < rows:
            pad = list(piece.shape)
            pad[0] = rows - piece.shape[0]
            piece = ember.cat([piece, piece.new_zeros(pad)], 0)
        return piece.contiguous().reshape(-1)


def _first(t: ember.Tensor, dim: int) -> ember.Tensor:
    """t with dim moved first (a split along dim becomes one along dim 0)."""
    return t.transpose(0, dim) if dim else t


def _buckets(slots: list[_Slot]) -> list[list[_Slot]]:
    """The slots by process group, in first-seen order: one collective each (normally one)."""
    out: dict[int, list[_Slot]] = {}
    for s in slots:
        out.setdefault(id(s.group), []).append(s)
    return list(out.values())


def _slot(p: _Param) -> _Slot:
    from ember.distributed.tensor._dtensor import _local_region

    d, lay = p.sharded, p.layout
    if lay.tp is None:
        return _Slot(p, d._spec.mesh, d.shape[lay.dim])
    tp_mesh, tp_placement = lay.tp
    return _Slot(p, d._spec.mesh, _local_region(d.shape, tp_mesh, (tp_placement,))[1][0])


def _gather_group(params: list[_Param], dtype: ember.dtype | None) -> list[ember.Tensor]:
    """Every parameter gathered over its FSDP ranks (a plain tensor, or the TP DTensor), cast
    to dtype (floating ones) before the collective: one all_gather_into_tensor per process
    group (as torch's FSDPParamGroup), of the ranks' padded pieces packed in one buffer (viewed
    as bytes when their dtypes differ)."""
    from ember.distributed.tensor._dtensor import DTensor, _Spec

    pieces: list[ember.Tensor] = []
    slots = [_slot(p) for p in params]
    for p in params:
        piece = p.sharded._local_tensor
        if p.layout.offload:  # to the device the collectives run on
            piece = piece.to(p.sharded._spec.mesh.device_type, non_blocking=True)
        if dtype is not None and piece.is_floating_point():
            piece = piece.to(dtype)
        pieces.append(_first(piece, p.layout.dim))
    full: dict[int, ember.Tensor] = {}
    for bucket in _buckets(slots):
        index = [slots.index(s) for s in bucket]
        if bucket[0].world == 1:  # the piece is the whole: no collective (as torch)
            for i in index:
                full[i] = pieces[i]
            continue
        dtypes = {pieces[i].dtype for i in index}
        as_bytes = len(dtypes) > 1
        flat = []
        for i in index:
            f = slots[i].padded(pieces[i], slots[i].rows)
            flat.append(f.view(ember.uint8) if as_bytes else f)
        sizes = [f.numel() for f in flat]
        inp = ember.cat(flat) if len(flat) > 1 else flat[0]
        out = inp.new_empty((bucket[0].world * inp.numel(),))
        dist.all_gather_into_tensor(out, inp, group=bucket[0].group)
        out = out.view(bucket[0].world, inp.numel())
        start = 0
        for i, n in zip(index, sizes):
            part = out.narrow(1, start, n).contiguous()
            start += n
            if as_bytes:
                part = part.view(pieces[i].dtype)
            rest = tuple(pieces[i].shape[1:])
            full[i] = part.reshape((bucket[0].world * slots[i].rows,) + rest).narrow(
                0, 0, slots[i].length)
    result = []
    for i, p in enumerate(params):
        t = _first(full[i], p.layout.dim).contiguous()
        if p.layout.tp is not None:
            t = DTensor(t, _Spec(p.layout.tp[0], (p.layout.tp[1],), tuple(p.sharded.shape)))
        result.append(t)
    return result


def _reduce_scatter_group(params: list[_Param], grads: list[ember.Tensor],
                          factor: float) -> list[ember.Tensor]:
    """Each rank's part (its rows of the split dim) of the gradients summed over the FSDP ranks
    (with HSDP, then over the replicas: an all-reduce), divided by factor: one
    reduce_scatter_tensor per process group of the gradients packed rank-major in one buffer
    (each padded to a multiple of the world size along the split dim, as torch)."""
    slots = [_slot(p) for p in params]
    firsts = [_first(g, p.layout.dim) for p, g in zip(params, grads)]
    out_parts: dict[int, ember.Tensor] = {}
    for bucket in _buckets(slots):
        index = [slots.index(s) for s in bucket]
        world = bucket[0].world
        cols = []
        for i in index:
            s = slots[i]
            rest = tuple(firsts[i].shape[1:])
            cols.append(s.padded(firsts[i], world * s.rows).reshape(world, s.size(rest)))
        inp = (ember.cat(cols, 1) if len(cols) > 1 else cols[0]).contiguous()
        if world > 1:
            out = inp.new_empty((inp.shape[1],))
            dist.reduce_scatter_tensor(out, inp.reshape(-1), group=bucket[0].group)
        else:  # one rank: nothing to scatter (as torch)
            out = inp.reshape(-1).clone()
        if bucket[0].replicas is not None:
            dist.all_reduce(out, group=bucket[0].replicas)
        out.div_(factor)
        start = 0
        for i, c in zip(index, cols):
            n = c.shape[1]
            rest = tuple(firsts[i].shape[1:])
            out_parts[i] = out.narrow(0, start, n).reshape((slots[i].rows,) + rest).narrow(
                0, 0, slots[i].mine)
            start += n
    return [_first(out_parts[i], p.layout.dim).contiguous() for i, p in enumerate(params)]


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
    for p in state.params:
        now = p.owner._parameters.get(p.name)
        if now is not p.sharded and now is not p.unsharded and hasattr(now, "_spec"):
            p.sharded = now  # module._apply (model.double(), .to()) made a new DTensor
    if not state.params:
        return
    if not state.checked:
        _check_dtypes(state)
    with ember.no_grad():
        for p, full in zip(state.params, _gather_group(state.params, dtype)):
            if p.unsharded is not None and (p.unsharded.dtype != full.dtype
                                            or p.unsharded.device != full.device):
                p.unsharded = None  # a new dtype or device: a new gathered parameter
            if p.unsharded is None:
                p.unsharded = nn.Parameter(full, requires_grad=p.sharded.requires_grad)
                if p.sharded.requires_grad:
                    p.unsharded.register_post_accumulate_grad_hook(
                        lambda t, p=p, s=state: _grad_ready(s, p))
            elif p.layout.tp is not None:  # a TP DTensor: its piece is its data
                p.unsharded._local_tensor = full._local_tensor
            else:
                p.unsharded.data = full
            p.register(p.unsharded)


def _check_dtypes(state: _State) -> None:
    """As torch's FSDPParamGroup: one reduce-scatter needs one gradient dtype, so the
    trainable parameters of one fully_shard call must share their dtype."""
    dtypes = {p.sharded.dtype for p in state.params if p.sharded.requires_grad}
    if len(dtypes) > 1:
        raise AssertionError(f"FSDP expects uniform original parameter dtype but got "
                             f"{{{', '.join(sorted(str(d) for d in dtypes))}}}")
    state.checked = True


def _regather(state: _State) -> None:
    """Registers the gathered parameters again for backward (once per backward pass)."""
    if any(p.owner._parameters.get(p.name) is not p.unsharded for p in state.params):
        _unshard(state)


def _reshard(state: _State) -> None:
    for p in state.params:
        p.register(p.sharded)


def _grad_ready(state: _State, p: _Param) -> None:
    """p's unsharded gradient is complete; once every parameter of the group expected to get
    one this backward has it, the group's gradients are reduce-scattered together."""
    if p.unsharded.grad is None or not state.sync:
        return  # stays in the unsharded parameter, summing, until a synchronized backward
    state.ready[id(p)] = p
    if state.expected.issubset(state.ready):
        _flush(state)


def _flush(state: _State) -> None:
    """Reduce-scatters the gradients of the ready parameters (in registration order, the
    same on every rank) into their DTensors' gradients."""
    from ember.distributed.tensor._dtensor import DTensor, _move

    params = [p for p in state.params
              if id(p) in state.ready and p.unsharded is not None and p.unsharded.grad is not None]
    state.ready = {}
    state.expected = set()
    if not params:
        return
    with ember.no_grad():
        grads = []
        for p in params:
            g = p.unsharded.grad
            p.unsharded.grad = None
            if p.layout.tp is not None:  # this rank's TP piece of the gradient
                g = _move(g._local_tensor, g._spec, (p.layout.tp[1],))
            grads.append(g.to(state.mp.reduce_dtype or g.dtype))
        factor = state.divide_factor or float(state.mesh.size())
        for p, local in zip(params, _reduce_scatter_group(params, grads, factor)):
            local = local.to(p.sharded.dtype)
            if p.layout.offload:  # the optimizer steps the shards on the CPU
                local = local.to("cpu")
            if p.sharded.grad is None:
                p.sharded.grad = DTensor(local, p.sharded._spec)
            else:
                p.sharded.grad._local_tensor.add_(local)
    if state.reshard_after_backward:  # the whole group, unused parameters too (as torch)
        _reshard(state)


def _expect_grads(state: _State, output: Any) -> None:
    """Adds the group's parameters that output's autograd graph reaches to those whose
    gradients the next backward waits for before reduce-scattering (ember's autograd has no
    end-of-backward callback: parameters a forward did not use must not be waited for)."""
    from ember.nn.parallel.distributed import _grad_accumulator

    want: dict[int, _Param] = {}
    keep = []  # the accumulator nodes, alive so that their ids stay theirs
    for p in state.params:
        if p.unsharded is None or not p.unsharded.requires_grad or id(p) in state.expected:
            continue
        try:
            node = _grad_accumulator(p.unsharded)
        except Exception:  # noqa: BLE001  (no accumulator to find: wait for it anyway)
            state.expected.add(id(p))
            continue
        keep.append(node)
        want[id(node)] = p
    stack = [t.grad_fn for t in _tensors_in(output) if t.grad_fn is not None]
    seen: dict[int, Any] = {}  # the nodes kept alive too: a freed node's id is reused
    while stack and want:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        hit = want.pop(id(node), None)
        if hit is not None:
            state.expected.add(id(hit))
        stack.extend(n for n, _ in node.next_functions if n is not None and id(n) not in seen)
    del keep, seen


def _pre_forward(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    state = module._fsdp_state
    if state.is_root is None:  # the root: inside no other fully sharded module
        state.is_root = not any(m is not module and any(c is module for c in m.modules())
                                for m in _all_fsdp_modules())
    if state.is_root:  # a new iteration: what the last backward left is reduced now
        for m in module.modules():
            if isinstance(m, FSDPModule):
                s = m._fsdp_state
                if s.ready:
                    _flush(s)
                s.expected = set()
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
    if ember.is_grad_enabled():
        _expect_grads(state, output)
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
    _register_state_dict_hooks(module._fsdp_state)
    _LIVE.append(weakref.ref(module))
    return module


def _register_state_dict_hooks(state: _State) -> None:
    """As torch: saving or loading the state of a module holding the group's parameters
    registers the sharded ones first (a root left gathered by a forward without backward, or a
    module unsharded by hand, still saves and loads its DTensors)."""
    def to_sharded(*_args: Any, **_kwargs: Any) -> None:
        _reshard(state)

    owners: dict[int, nn.Module] = {id(p.owner): p.owner for p in state.params}
    for owner in owners.values():
        owner.register_state_dict_pre_hook(to_sharded)
        owner._register_load_state_dict_pre_hook(to_sharded)


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
