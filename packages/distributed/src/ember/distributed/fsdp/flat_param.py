"""The flat parameter of one FSDP unit: its original parameters flattened into one 1-D tensor,
padded to a multiple of the world size and split evenly, each rank keeping its shard.

``FlatParamHandle`` gathers the full flat parameter (``all_gather_into_tensor`` of the shards,
in ``MixedPrecision.param_dtype`` when set), points the original modules' attributes at views
of it for forward, and reduce-scatters the gradient back into the shard's gradient.

How the gathered parameters are freed between forward and backward: ember storages cannot be
shrunk in place (PyTorch frees the gathered storage with ``resize_(0)`` and refills it before
backward), so an FSDP forward runs under ``saved_tensors_hooks``: a tensor that autograd saves
and that aliases a gathered flat parameter is packed as (owner, offset, sizes, strides) rather
than kept, and unpacking it in backward gathers the flat parameter again if it was freed. The
views the module used in forward thus hold no memory once forward is over. A custom autograd
function between the shard and the gathered tensor (``_UnshardParams``) receives the full
gradient once every use of the unit's parameters in backward is done; it frees the gathered
tensor and reduce-scatters the gradient (averaged over the ranks) into the shard's gradient.
Between the arrival of the gradient of a unit's outputs and that function, the module's
attributes point at the gathered parameters again (for recomputation under activation
checkpointing); outside forward and backward they are placeholders or the sharded views.

Example (inside an initialized process group; FullyShardedDataParallel makes the handles)::

    handle = fsdp_model.module[0]._handle  # the unit wrapping the first layer
    full = handle.gather()  # padded, handle.padded_numel elements
    handle.flat.shape       # (handle.shard_numel,): this rank's shard
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

import ember
import ember.distributed as dist
from ember import nn

from .api import ShardingStrategy

__all__ = ["FlatParamHandle", "ParamInfo", "fsdp_saved_tensors_hooks", "is_flattened"]

# The original parameters already flattened into some unit, by id (weak references: a tensor's
# == is elementwise, so they cannot go into a WeakSet).
_FLATTENED: dict[int, weakref.ref] = {}


def is_flattened(p: ember.Tensor) -> bool:
    """Whether ``p`` is an original parameter that an FSDP unit has flattened."""
    ref = _FLATTENED.get(id(p))
    return ref is not None and ref() is p


def _mark_flattened(p: ember.Tensor) -> None:
    key = id(p)
    _FLATTENED[key] = weakref.ref(p, lambda _r, key=key: _FLATTENED.pop(key, None))


@dataclass
class ParamInfo:
    """One original parameter of a flat parameter: where it lived, its shape and its place in
    the (unpadded) flat tensor. ``aliases`` are other (module, name) places holding the same
    parameter (shared weights)."""

    module: nn.Module
    name: str
    fqn: str
    shape: tuple[int, ...]
    numel: int
    offset: int
    aliases: list[tuple[nn.Module, str, str]]


# Gathered flat parameters that may be freed before backward, by the data pointer of their
# storage: the saved-tensor hooks recognize the views of them that autograd saves.
_LIVE: dict[int, _Unsharded] = {}


class _Unsharded:
    """One gathered copy of a flat parameter (``tensor``: padded, full, None once freed);
    ``ensure()`` gathers it again when backward needs it after it was freed."""

    __slots__ = ("handle", "tensor", "__weakref__")

    def __init__(self, handle: FlatParamHandle) -> None:
        self.handle = handle
        self.tensor: ember.Tensor | None = None

    def ensure(self) -> ember.Tensor:
        if self.tensor is None:
            self.tensor = self.handle.gather(self.handle.param_dtype)
            if self.handle.sharded:
                _LIVE[self.tensor.untyped_storage().data_ptr()] = self
        return self.tensor

    def free(self) -> None:
        if self.tensor is not None:
            if self.handle.sharded:
                _LIVE.pop(self.tensor.untyped_storage().data_ptr(), None)
            self.tensor = None


class _PackedView:
    """A saved tensor that was a view of a gathered flat parameter."""

    __slots__ = ("unsharded", "offset", "size", "stride")

    def __init__(self, unsharded: _Unsharded, t: ember.Tensor) -> None:
        self.unsharded = unsharded
        self.offset = t.storage_offset()
        self.size = tuple(t.shape)
        self.stride = tuple(t.stride())


def _pack(t: ember.Tensor) -> Any:
    if not _LIVE:
        return t
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, TypeError, NotImplementedError):  # sparse, meta, ...
        return t
    u = _LIVE.get(ptr)
    if u is None or u.tensor is None or t.dtype != u.tensor.dtype:
        return t
    return _PackedView(u, t)


def _unpack(packed: Any) -> ember.Tensor:
    if isinstance(packed, _PackedView):
        return packed.unsharded.ensure().as_strided(packed.size, packed.stride, packed.offset)
    return packed


def fsdp_saved_tensors_hooks() -> ember.autograd.graph.saved_tensors_hooks:
    """The saved-tensor hooks an FSDP forward runs under (see the module's docstring)."""
    return ember.autograd.graph.saved_tensors_hooks(_pack, _unpack)


class _UnshardParams(ember.autograd.Function):
    """shard -> gathered flat parameter; backward reduces the gradient into the shard's."""

    @staticmethod
    def forward(ctx: Any, flat: ember.Tensor, unsharded: _Unsharded) -> ember.Tensor:
        ctx.unsharded = unsharded
        # an alias: the handle keeps its own reference without the graph's
        return unsharded.ensure().detach()

    @staticmethod
    def backward(ctx: Any, grad: ember.Tensor) -> tuple[None, None]:
        u: _Unsharded = ctx.unsharded
        handle = u.handle
        u.free()
        if handle._unsharded is u:
            handle._unsharded = None
        if handle.attrs_gathered:
            handle.attrs_gathered = False
            handle.use_sharded_attrs()
        handle.post_backward(grad)
        return None, None


def _placeholder(shape: tuple[int, ...], dtype: Any) -> ember.Tensor:
    return ember.empty(shape, dtype=dtype, device="meta")


def _set_tensor(module: nn.Module, name: str, value: ember.Tensor) -> None:
    """``module.name = value`` for a plain tensor, replacing a registered parameter."""
    module._parameters.pop(name, None)
    module.__dict__[name] = value


def _set_param(module: nn.Module, name: str, value: nn.Parameter) -> None:
    module.__dict__.pop(name, None)
    module._parameters[name] = value


class FlatParamHandle:
    """The flat parameter of one FSDP unit and what is done with it.

    ``flat`` is this rank's shard (for NO_SHARD the whole flat parameter): an
    ``nn.Parameter`` registered as ``_flat_param`` when ``use_orig_params=False``; with
    ``use_orig_params=True`` a plain leaf tensor, and ``orig_params`` are the parameters the
    module shows instead (1-D views of this rank's part of each original parameter, possibly
    empty, when sharded; views with the original shapes under NO_SHARD).
    """

    def __init__(self, infos: list[ParamInfo], params: list[nn.Parameter], group: Any,
                 strategy: ShardingStrategy, mixed_precision: Any, offload_params: bool,
                 use_orig_params: bool, compute_device: Any, replicate_group: Any = None) -> None:
        self.infos = infos
        self.group = group
        # hybrid sharding: the ranks holding the same shard, over which its gradient is averaged
        self.replicate_group = replicate_group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self.strategy = strategy
        self.sharded = strategy != ShardingStrategy.NO_SHARD
        self.use_orig_params = use_orig_params
        self.offload_params = offload_params
        self.compute_device = compute_device
        self.dtype = params[0].dtype
        # frozen and trainable parameters mix only with use_orig_params=True: the flat
        # parameter then requires grad if any does, and frozen ones get no gradient
        self.requires_grad = any(p.requires_grad for p in params)
        mp = mixed_precision
        self.param_dtype = None if mp is None or mp.param_dtype in (None, self.dtype) \
            else mp.param_dtype
        self.reduce_dtype = (mp.reduce_dtype if mp is not None and mp.reduce_dtype is not None
                             else self.param_dtype or self.dtype)
        # gradients left in the reduce dtype (the parameters' grad_dtype opened to any dtype)
        self.keep_low_precision_grads = bool(mp is not None and mp.keep_low_precision_grads
                                             and self.reduce_dtype != self.dtype)
        self.numel = sum(i.numel for i in infos)
        for p in params:
            _mark_flattened(p)
        self.padded_numel = (math.ceil(self.numel / self.world) * self.world if self.sharded
                             else self.numel)
        self.shard_numel = self.padded_numel // self.world if self.sharded else self.numel
        self.shard_offset = self.rank * self.shard_numel if self.sharded else 0
        with ember.no_grad():
            full = ember.cat([p.detach().reshape(-1) for p in params])
            if self.padded_numel > self.numel:
                full = ember.cat([full, full.new_zeros(self.padded_numel - self.numel)])
            shard = full[self.shard_offset:self.shard_offset + self.shard_numel].clone()
            if offload_params:
                shard = shard.to("cpu")
        self.flat: ember.Tensor
        self.orig_params: list[nn.Parameter] = []
        if use_orig_params:
            self.flat = shard.requires_grad_(self.requires_grad)
            for info, p in zip(infos, params):
                lo, hi = self._local_range(info)
                if self.sharded:
                    view = shard.detach()[lo:hi]
                else:
                    view = shard.detach()[lo:hi].view(info.shape)
                self.orig_params.append(nn.Parameter(view, requires_grad=p.requires_grad))
        else:
            self.flat = nn.Parameter(shard, requires_grad=self.requires_grad)
        self.sync_gradients = True
        self._pending_grad: ember.Tensor | None = None  # unsharded, accumulated under no_sync
        self._unsharded: _Unsharded | None = None  # the latest gathered copy
        self.attrs_gathered = False  # attributes point at a gathered copy during backward
        self.use_sharded_attrs()

    # ---- geometry -------------------------------------------------------------------------
    def _local_range(self, info: ParamInfo) -> tuple[int, int]:
        """The part of ``info``'s parameter in this rank's shard, as offsets into the shard."""
        lo = max(info.offset, self.shard_offset)
        hi = min(info.offset + info.numel, self.shard_offset + self.shard_numel)
        if hi <= lo:
            return 0, 0
        return lo - self.shard_offset, hi - self.shard_offset

    def views(self, full: ember.Tensor) -> list[ember.Tensor]:
        """Each original parameter as a view of the gathered flat tensor ``full``."""
        return [full[i.offset:i.offset + i.numel].view(i.shape) for i in self.infos]

    def _places(self, k: int) -> list[tuple[nn.Module, str]]:
        info = self.infos[k]
        return [(info.module, info.name)] + [(m, n) for m, n, _ in info.aliases]

    # ---- module attributes ----------------------------------------------------------------
    def use_views(self, tensors: list[ember.Tensor], as_params: bool = False) -> None:
        """Points the original attributes at ``tensors`` (plain tensors in forward; registered
        parameters inside summon_full_params)."""
        for k, t in enumerate(tensors):
            for m, n in self._places(k):
                (_set_param if as_params else _set_tensor)(m, n, t)

    def use_sharded_attrs(self) -> None:
        """The attributes outside forward: the sharded original parameters
        (use_orig_params=True), views of the flat parameter (NO_SHARD), or meta-device
        placeholders with the original shapes (the data is sharded)."""
        if self.use_orig_params:
            for k, p in enumerate(self.orig_params):
                for m, n in self._places(k):
                    _set_param(m, n, p)
        elif not self.sharded:
            with ember.no_grad():
                self.use_views(self.views(self.flat.detach()))
        else:
            self.use_views([_placeholder(i.shape, self.dtype) for i in self.infos])

    # ---- communication --------------------------------------------------------------------
    def gather(self, dtype: Any = None) -> ember.Tensor:
        """The full (padded) flat parameter, in ``dtype`` (default its own), without autograd."""
        with ember.no_grad():
            src = self.flat.detach()
            if self.offload_params and self.compute_device is not None:
                src = src.to(self.compute_device)
            if dtype is not None and dtype != src.dtype:
                src = src.to(dtype)
            if not self.sharded:
                return src
            out = ember.empty(self.padded_numel, dtype=src.dtype, device=src.device)
            dist.all_gather_into_tensor(out, src.contiguous(), group=self.group)
            return out

    def gather_shard_tensor(self, shard: ember.Tensor) -> ember.Tensor:
        """Any shard-shaped tensor (a gradient, optimizer state) gathered and unpadded."""
        if not self.sharded:
            return shard.detach().clone()
        out = ember.empty(self.padded_numel, dtype=shard.dtype, device=shard.device)
        dist.all_gather_into_tensor(out, shard.detach().contiguous(), group=self.group)
        return out[:self.numel]

    def pre_forward(self) -> _Unsharded:
        """Gathers the flat parameter for a forward and points the attributes at it."""
        u = _Unsharded(self)
        self._unsharded = u
        if ember.is_grad_enabled() and self.requires_grad:
            full = _UnshardParams.apply(self.flat, u)
        else:
            full = u.ensure()
        self.use_views(self.views(full))
        return u

    def post_forward(self, u: _Unsharded, free: bool) -> None:
        self.use_sharded_attrs()
        if free:
            u.free()
            if self._unsharded is u:
                self._unsharded = None

    def release(self) -> None:
        """Frees the gathered copy left from an earlier forward (backward regathers if needed)."""
        if self._unsharded is not None:
            self._unsharded.free()
            self._unsharded = None

    def is_gathered(self) -> bool:
        return self._unsharded is not None and self._unsharded.tensor is not None

    def post_backward(self, grad: ember.Tensor) -> None:
        """Reduces the full gradient of one backward over the ranks (averaged) into this rank's
        shard gradient; under no_sync it is accumulated locally, unsharded, instead."""
        with ember.no_grad():
            g = grad.detach()
            if g.dtype != self.reduce_dtype:
                g = g.to(self.reduce_dtype)
            if not self.sync_gradients:
                self._pending_grad = g.clone() if self._pending_grad is None \
                    else self._pending_grad.add_(g)
                return
            if self._pending_grad is not None:
                g = g + self._pending_grad
                self._pending_grad = None
            if self.sharded:
                shard = ember.empty(self.shard_numel, dtype=g.dtype, device=g.device)
                dist.reduce_scatter_tensor(shard, g.contiguous(), group=self.group)
            else:
                shard = g.clone()
                dist.all_reduce(shard, group=self.group)
            shard.div_(self.world)
            if self.replicate_group is not None:
                dist.all_reduce(shard, group=self.replicate_group)
                shard.div_(dist.get_world_size(self.replicate_group))
            if not self.keep_low_precision_grads:
                shard = shard.to(self.dtype)
            if self.offload_params:
                shard = shard.to("cpu")
            self._accumulate(shard)

    def _accumulate(self, shard: ember.Tensor) -> None:
        if not self.use_orig_params:
            if self.flat.grad is None:
                if self.keep_low_precision_grads:
                    self.flat.grad_dtype = None
                self.flat.grad = shard
            else:
                self.flat.grad.add_(shard)
            return
        for info, p in zip(self.infos, self.orig_params):
            lo, hi = self._local_range(info)
            if hi == lo or not p.requires_grad:
                continue  # nothing of it here, or frozen: its gradient stays None
            piece = shard[lo:hi] if self.sharded else shard[lo:hi].view(info.shape)
            if p.grad is None:
                if self.keep_low_precision_grads:
                    p.grad_dtype = None
                p.grad = piece.clone()
            else:
                p.grad.add_(piece)

    def shard_grad(self) -> ember.Tensor | None:
        """This rank's gradient as one shard-shaped tensor (None when there is none)."""
        if not self.use_orig_params:
            return self.flat.grad
        grads = [p.grad for p in self.orig_params if p.grad is not None]
        if not grads:
            return None
        out = ember.zeros(self.shard_numel, dtype=grads[0].dtype, device=grads[0].device)
        for info, p in zip(self.infos, self.orig_params):
            lo, hi = self._local_range(info)
            if p.grad is not None and hi > lo:
                out[lo:hi] = p.grad.reshape(-1)
        return out

    def local_grads(self) -> list[ember.Tensor]:
        """The gradient tensors this rank holds for the unit (to scale them in place)."""
        if not self.use_orig_params:
            return [] if self.flat.grad is None else [self.flat.grad]
        return [p.grad for p in self.orig_params if p.grad is not None]

    def write_back(self, full: ember.Tensor) -> None:
        """Copies this rank's part of an (unpadded or padded) full flat tensor into the shard."""
        with ember.no_grad():
            lo = self.shard_offset
            hi = min(lo + self.shard_numel, self.numel)
            if hi > lo:
                self.flat.detach()[: hi - lo].copy_(full[lo:hi].to(self.flat.dtype))
