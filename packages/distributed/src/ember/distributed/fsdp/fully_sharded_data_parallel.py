"""FullyShardedDataParallel: PyTorch's FSDP wrapper (torch.distributed.fsdp, "FSDP1") on
ember's process groups.

Each FSDP instance is a unit: the parameters of its module that no nested FSDP unit owns are
flattened into one flat parameter, of which every rank keeps a 1/world shard (see
``flat_param.FlatParamHandle`` for how gathering, freeing and gradient reduction work). The
optimizer is built on ``fsdp_model.parameters()`` (the shards) and steps locally; each step is
then that of single-process training on the whole batch, the gradients being averaged.

ember specifics: collectives run synchronously when first needed, so ``backward_prefetch``,
``forward_prefetch`` and ``limit_all_gathers`` are accepted and have no effect;
SHARDED_STATE_DICT (which needs DTensor) raises NotImplementedError. HYBRID_SHARD and
_HYBRID_SHARD_ZERO2 shard within a group (``process_group=(shard, replicate)``, a 2-D
``device_mesh`` (replicate, shard), or else the nodes found from LOCAL_WORLD_SIZE) and average
each shard's gradient over its replicas after the reduce-scatter; outside
forward the original parameters of a sharded unit are meta-device placeholders with the
original shapes (``use_orig_params=False``) or 1-D parameters viewing this rank's part of each
(``use_orig_params=True``; empty where a rank holds none of it, and then its gradient stays
None). Under ``no_sync()`` gradients accumulate unsharded beside the flat parameter (not in its
``.grad``) until the next synchronized backward reduces them. When backward reaches a unit its
attributes show the gathered parameters again, so activation checkpointing works around and
inside units. Saved-tensor hooks set by the caller around an FSDP forward (e.g.
``save_on_cpu``) do not apply to the tensors saved inside FSDP units: FSDP's own hooks (which
keep gathered parameters from being held until backward) are the innermost there. Parameters
shared between modules must belong to one unit (their lowest common FSDP ancestor).
``MixedPrecision(keep_low_precision_grads=True)`` leaves the gradients in the reduce dtype
(the parameters' ``grad_dtype`` set to None).

Example (every rank runs it, inside an initialized process group)::

    import ember, ember.distributed as dist
    from ember import nn
    from ember.distributed.fsdp import FullyShardedDataParallel as FSDP
    from ember.distributed.fsdp.wrap import ModuleWrapPolicy

    model = FSDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)),
                 auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    loss = model(ember.randn(4, 8)).square().mean()
    loss.backward()
    model.clip_grad_norm_(1.0)
    opt.step()
    full = model.state_dict()  # original names, unsharded
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from typing import Any, Callable, Iterable, Iterator

import ember
import ember.distributed as dist
from ember import nn

from .api import (
    BackwardPrefetch,
    CPUOffload,
    FullOptimStateDictConfig,
    FullStateDictConfig,
    LocalStateDictConfig,
    MixedPrecision,
    OptimStateDictConfig,
    ShardedStateDictConfig,
    ShardingStrategy,
    StateDictConfig,
    StateDictSettings,
    StateDictType,
)
from .flat_param import FlatParamHandle, ParamInfo, fsdp_saved_tensors_hooks, is_flattened
from .wrap import _recursive_wrap

__all__ = ["FullyShardedDataParallel"]

FSDP_WRAPPED_MODULE = "_fsdp_wrapped_module"
FLAT_PARAM = "_flat_param"
_PREFIX = FSDP_WRAPPED_MODULE + "."


def _clean(key: str) -> str:
    return key.replace(_PREFIX, "")


def _tensors_in(obj: Any) -> Iterator[ember.Tensor]:
    if isinstance(obj, ember.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors_in(x)


def _pre_backward(handle: FlatParamHandle, u: Any, grad: ember.Tensor) -> None:
    """A gradient hook on a unit's outputs: points its attributes at the gathered parameters
    (values only; the gradients flow through forward's graph) until its backward is done."""
    # requiring grad as in forward, so a recomputation saves the same tensors
    full = u.ensure().detach().requires_grad_(handle.requires_grad)
    handle.use_views(handle.views(full))
    handle.attrs_gathered = True


def _node_groups(strategy: ShardingStrategy) -> tuple[Any, Any]:
    """HYBRID_SHARD without groups: shard within each node (LOCAL_WORLD_SIZE consecutive ranks,
    as the launcher numbers them) and replicate across nodes (the ranks with the same local
    rank). Collective: every rank makes every group."""
    local = os.environ.get("LOCAL_WORLD_SIZE")
    world = dist.get_world_size()
    if local is None or not local.isdigit() or int(local) < 1 or world % int(local):
        raise ValueError(f"{strategy} without process groups shards within each node, found from "
                         f"LOCAL_WORLD_SIZE (set by the launcher; here {local!r}, world size "
                         f"{world}); pass process_group=(shard group, replicate group) or a 2-D "
                         "device_mesh instead")
    n = int(local)
    shard, _ = dist.new_subgroups_by_enumeration(
        [list(range(i, i + n)) for i in range(0, world, n)])
    replicate, _ = dist.new_subgroups_by_enumeration(
        [list(range(i, world, n)) for i in range(n)])
    return shard, replicate


def _cast_inputs(obj: Any, dtype: Any) -> Any:
    if isinstance(obj, ember.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_cast_inputs(x, dtype) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast_inputs(x, dtype) for x in obj)
    if isinstance(obj, dict):
        return {k: _cast_inputs(v, dtype) for k, v in obj.items()}
    return obj


class FullyShardedDataParallel(nn.Module):
    """Shards ``module``'s parameters over the ranks of ``process_group`` (see the module's
    docstring); the arguments are PyTorch's. ``auto_wrap_policy`` makes submodules units of
    their own (torch.distributed.fsdp.wrap); ``ignored_modules`` / ``ignored_states`` keep
    parameters out of sharding (they stay plain, unsynchronized parameters);
    ``sync_module_states`` broadcasts rank 0's parameters and buffers first; ``param_init_fn``
    materializes a module built on the meta device (default: ``to_empty`` then each
    submodule's ``reset_parameters``)."""

    def __init__(
        self,
        module: nn.Module,
        process_group: Any = None,
        sharding_strategy: ShardingStrategy | None = None,
        cpu_offload: CPUOffload | None = None,
        auto_wrap_policy: Callable | None = None,
        backward_prefetch: BackwardPrefetch | None = BackwardPrefetch.BACKWARD_PRE,
        mixed_precision: MixedPrecision | None = None,
        ignored_modules: Iterable[nn.Module] | None = None,
        param_init_fn: Callable[[nn.Module], None] | None = None,
        device_id: Any = None,
        sync_module_states: bool = False,
        forward_prefetch: bool = False,
        limit_all_gathers: bool = True,
        use_orig_params: bool = False,
        ignored_states: Iterable[Any] | None = None,
        device_mesh: Any = None,
    ) -> None:
        super().__init__()
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        hybrid = strategy in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
        replicate_group = None
        if device_mesh is not None:
            if process_group is not None:
                raise ValueError("Cannot pass both process_group and device_mesh at the same time")
            ndim = getattr(device_mesh, "ndim", 1)
            if hybrid:
                if ndim != 2:
                    raise ValueError(f"{strategy} takes a 2-D device mesh (replicate, shard), got "
                                     f"{device_mesh}")
                replicate_group, process_group = device_mesh.get_group(0), device_mesh.get_group(1)
            else:
                if ndim != 1:
                    raise ValueError(f"{strategy} takes a 1-D device mesh, got {device_mesh} (a "
                                     "2-D mesh is for HYBRID_SHARD)")
                process_group = device_mesh.get_group()
        elif isinstance(process_group, tuple):
            if not hybrid or len(process_group) != 2:
                raise ValueError("a tuple of process groups is (shard group, replicate group), "
                                 f"for HYBRID_SHARD or _HYBRID_SHARD_ZERO2 only; got "
                                 f"{len(process_group)} groups with {strategy}")
            process_group, replicate_group = process_group
        elif hybrid:
            if process_group is not None:
                raise ValueError(f"{strategy} needs process_group=(shard group, replicate group) "
                                 "or a 2-D device_mesh, not one group")
            process_group, replicate_group = _node_groups(strategy)
        group = process_group if process_group is not None else dist.group.WORLD
        if group is None:
            raise RuntimeError("FullyShardedDataParallel needs an initialized process group "
                               "(ember.distributed.init_process_group)")
        world = dist.get_world_size(group)
        if world == 1 and strategy != ShardingStrategy.NO_SHARD:
            warnings.warn(f"FSDP is switching to use `NO_SHARD` instead of {strategy} since "
                          "the world size is 1.", stacklevel=2)
            strategy = ShardingStrategy.NO_SHARD
        if ignored_modules is not None and ignored_states is not None:
            raise ValueError("Cannot pass both ignored_modules and ignored_states at the same "
                             "time. Please just pass ignored_states.")
        ignored_mods: set[nn.Module] = set()
        ignored_params: set[int] = set()
        for item in list(ignored_modules or ()) + list(ignored_states or ()):
            if isinstance(item, nn.Module):
                if isinstance(item, FullyShardedDataParallel):
                    raise ValueError("ignored_modules should not include FSDP modules")
                for m in item.modules():
                    ignored_mods.add(m)
                    ignored_params.update(id(p) for p in m.parameters(recurse=False))
            else:
                ignored_params.add(id(item))
        d = self.__dict__
        d["process_group"] = group  # the shard group
        d["_inter_node_pg"] = replicate_group  # hybrid sharding: the replicas of a shard
        d["rank"] = dist.get_rank(group)
        d["world_size"] = world
        d["sharding_strategy"] = strategy
        d["cpu_offload"] = cpu_offload or CPUOffload()
        d["backward_prefetch"] = backward_prefetch
        d["forward_prefetch"] = forward_prefetch
        d["limit_all_gathers"] = limit_all_gathers
        d["mixed_precision"] = mixed_precision
        d["_use_orig_params"] = use_orig_params
        d["_ignored_modules"] = ignored_mods
        d["_ignored_params"] = ignored_params
        d["_is_root"] = None
        d["_state_dict_type"] = StateDictType.FULL_STATE_DICT
        d["_state_dict_config"] = FullStateDictConfig()
        d["_optim_state_dict_config"] = FullOptimStateDictConfig()
        d["_in_summon"] = False
        d["_buffer_dtypes"] = {}  # (id(module), name) -> (module, original dtype)

        if auto_wrap_policy is not None:
            # the children share this unit's groups (a mesh passes on as the mesh)
            if device_mesh is not None:
                process_group = None
            elif hybrid:
                process_group = (group, replicate_group)
            kwargs = dict(process_group=process_group, sharding_strategy=sharding_strategy,
                          cpu_offload=cpu_offload, backward_prefetch=backward_prefetch,
                          mixed_precision=mixed_precision, param_init_fn=param_init_fn,
                          device_id=device_id, sync_module_states=sync_module_states,
                          forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
                          use_orig_params=use_orig_params, ignored_states=ignored_states
                          if ignored_modules is None else None, ignored_modules=ignored_modules,
                          device_mesh=device_mesh)
            _recursive_wrap(module, auto_wrap_policy, type(self), ignored_mods, ignored_params,
                            only_wrap_children=True, **kwargs)

        own_modules = self._own_modules(module)
        self._materialize(module, own_modules, param_init_fn)
        compute_device = self._place(own_modules, device_id)
        d["compute_device"] = compute_device
        infos, params = self._collect_params(own_modules)
        if sync_module_states:
            self._broadcast_states(own_modules, params)
        self._fsdp_wrapped_module = module
        handle = None
        if params:
            dtypes = {p.dtype for p in params}
            grads = {p.requires_grad for p in params}
            if len(dtypes) > 1:
                raise ValueError(f"Must flatten tensors with uniform dtype but got {dtypes}")
            if len(grads) > 1 and not use_orig_params:
                raise ValueError("Must flatten tensors with uniform `requires_grad` when "
                                 "`use_orig_params=False`")
            handle = FlatParamHandle(infos, params, group, strategy, mixed_precision,
                                     self.cpu_offload.offload_params, use_orig_params,
                                     compute_device, replicate_group)
            if not use_orig_params:
                module.register_parameter(FLAT_PARAM, handle.flat)
        d["_handle"] = handle
        if mixed_precision is not None and mixed_precision.buffer_dtype is not None:
            with ember.no_grad():
                for m in own_modules:
                    for name, b in list(m._buffers.items()):
                        if b is not None and b.is_floating_point() \
                                and b.dtype != mixed_precision.buffer_dtype:
                            self._buffer_dtypes[(id(m), name)] = (m, b.dtype)
                            m._buffers[name] = b.to(mixed_precision.buffer_dtype)
        for m in module.modules():
            if isinstance(m, FullyShardedDataParallel):
                m.__dict__["_is_root"] = False

    # ---- construction helpers ---------------------------------------------------------------
    def _own_modules(self, module: nn.Module) -> list[nn.Module]:
        """``module`` and its descendants, less nested FSDP units and ignored modules."""
        out, stack, seen = [], [module], set()
        while stack:
            m = stack.pop(0)
            if id(m) in seen or m in self._ignored_modules:
                continue
            seen.add(id(m))
            out.append(m)
            stack.extend(c for c in m._modules.values()
                         if c is not None and not isinstance(c, FullyShardedDataParallel))
        return out

    @staticmethod
    def _materialize(module: nn.Module, own: list[nn.Module],
                     param_init_fn: Callable | None) -> None:
        tensors = [t for m in own for t in (*m._parameters.values(), *m._buffers.values())
                   if t is not None]
        if not any(t.device.type == "meta" for t in tensors):
            return
        if param_init_fn is not None:
            param_init_fn(module)
            return
        device = "cpu"
        for m in own:
            m.to_empty(device=device, recurse=False)
        with ember.no_grad():
            for m in own:
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()

    @staticmethod
    def _place(own: list[nn.Module], device_id: Any) -> Any:
        if device_id is None:
            for m in own:
                for p in m._parameters.values():
                    if p is not None:
                        return p.device
            return ember.device("cpu")
        device = ember.device("cuda", device_id) if isinstance(device_id, int) \
            else ember.device(device_id)
        for m in own:
            for name, p in list(m._parameters.items()):
                if p is not None and p.device != device:
                    m._parameters[name] = nn.Parameter(p.detach().to(device), p.requires_grad)
            for name, b in list(m._buffers.items()):
                if b is not None and b.device != device:
                    m._buffers[name] = b.to(device)
        return device

    def _collect_params(self, own: list[nn.Module]) -> tuple[list[ParamInfo], list[nn.Parameter]]:
        """The parameters this unit flattens (deduplicated, in module order) and their infos."""
        names = {id(m): n for n, m in self._named_own(own)}
        infos: list[ParamInfo] = []
        params: list[nn.Parameter] = []
        where: dict[int, ParamInfo] = {}
        offset = 0
        for m in own:
            for name, p in list(m._parameters.items()):
                if p is None or id(p) in self._ignored_params:
                    continue
                prefix = names.get(id(m), "")
                fqn = f"{prefix}.{name}" if prefix else name
                if is_flattened(p):
                    raise ValueError(
                        f"parameter {fqn!r} is shared with a nested FSDP unit that already "
                        "flattened it: shared parameters must belong to one unit (wrap their "
                        "lowest common ancestor, or keep them out of nested units)")
                if id(p) in where:
                    where[id(p)].aliases.append((m, name, fqn))
                    continue
                info = ParamInfo(m, name, fqn, tuple(p.shape), p.numel(), offset, [])
                where[id(p)] = info
                infos.append(info)
                params.append(p)
                offset += p.numel()
        return infos, params

    @staticmethod
    def _named_own(own: list[nn.Module]) -> list[tuple[str, nn.Module]]:
        root = own[0]
        allowed = {id(m) for m in own}
        return [(n, m) for n, m in root.named_modules() if id(m) in allowed]

    def _broadcast_states(self, own: list[nn.Module], params: list[nn.Parameter]) -> None:
        tensors = list(params) + [b for m in own for b in m._buffers.values() if b is not None]
        # within the shard group, then (hybrid sharding) across its replicas
        for g in (self.process_group, self._inter_node_pg):
            if g is None:
                continue
            src = dist.get_global_rank(g, 0)
            with ember.no_grad():
                for t in tensors:
                    buf = t.detach().contiguous().clone()
                    dist.broadcast(buf, src, group=g)
                    t.detach().copy_(buf)

    # ---- the module --------------------------------------------------------------------------
    @property
    def module(self) -> nn.Module:
        """The wrapped module."""
        return self._fsdp_wrapped_module

    def __getattr__(self, name: str) -> Any:
        """Attributes FSDP lacks come from the wrapped module, as in PyTorch."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            wrapped = self.__dict__.get("_modules", {}).get(FSDP_WRAPPED_MODULE)
            if wrapped is None:
                raise
            return getattr(wrapped, name)

    def __getitem__(self, key: int) -> Any:
        return self._fsdp_wrapped_module.__getitem__(key)  # type: ignore[operator]

    @property
    def _flat_handles(self) -> list[FlatParamHandle]:
        return [] if self._handle is None else [self._handle]

    def _units(self) -> list[FullyShardedDataParallel]:
        return FullyShardedDataParallel.fsdp_modules(self)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Gathers this unit's parameters, runs the wrapped module, frees them again
        (FULL_SHARD, not the root) and hooks gradient reduction into backward."""
        root = self._is_root is not False
        if root:
            self.__dict__["_is_root"] = True
            for unit in self._units():
                if unit._handle is not None:
                    unit._handle.release()
        mp = self.mixed_precision
        if mp is not None and mp.param_dtype is not None and (
                mp.cast_forward_inputs or (root and mp.cast_root_forward_inputs)):
            args, kwargs = _cast_inputs(args, mp.param_dtype), _cast_inputs(kwargs, mp.param_dtype)
        handle = self._handle
        u = handle.pre_forward() if handle is not None else None
        try:
            with fsdp_saved_tensors_hooks():
                out = self._fsdp_wrapped_module(*args, **kwargs)
        finally:
            if handle is not None and u is not None:
                free = not ember.is_grad_enabled() or (self.sharding_strategy in (
                    ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD) and not root)
                handle.post_forward(u, free)
        if handle is not None and u is not None and handle.sharded and ember.is_grad_enabled():
            # When backward reaches this unit, its attributes show the gathered parameters
            # again: activation checkpointing inside the unit recomputes forward with them.
            hook = functools.partial(_pre_backward, handle, u)
            for t in _tensors_in(out):
                if t.requires_grad:
                    t.register_hook(hook)
        return out

    def apply(self, fn: Callable[[nn.Module], None]) -> FullyShardedDataParallel:
        """Module.apply with each unit's full parameters summoned (and written back), so
        initialization functions see and change real data."""
        with FullyShardedDataParallel.summon_full_params(self, recurse=False, writeback=True):
            return super().apply(fn)

    # ---- PyTorch's static helpers ------------------------------------------------------------
    @staticmethod
    def fsdp_modules(module: nn.Module, root_only: bool = False) -> list[FullyShardedDataParallel]:
        """The FSDP instances in ``module``'s tree (``root_only``: the outermost ones)."""
        out = []
        stack: list[tuple[nn.Module, bool]] = [(module, False)]
        while stack:
            m, inside = stack.pop(0)
            is_fsdp = isinstance(m, FullyShardedDataParallel)
            if is_fsdp and not (root_only and inside):
                out.append(m)
            stack.extend((c, inside or is_fsdp) for c in m._modules.values() if c is not None)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward inside it reduces no gradients: they accumulate locally (unsharded) and
        are reduced with the next backward outside it."""
        units = self._units()
        old = [u._handle.sync_gradients for u in units if u._handle is not None]
        for u in units:
            if u._handle is not None:
                u._handle.sync_gradients = False
        try:
            yield
        finally:
            for u, s in zip([u for u in units if u._handle is not None], old):
                u._handle.sync_gradients = s

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> ember.Tensor:
        """Clips the gradients of all ranks' shards together by their global norm (an
        all-reduce of the local norms) and returns that norm, as clip_grad_norm_ of the
        unsharded module would."""
        p = float(norm_type)
        sharded: list[ember.Tensor] = []
        local: list[ember.Tensor] = []
        units = self._units()
        managed: set[int] = set()
        for u in units:
            h = u._handle
            if h is None:
                continue
            managed.add(id(h.flat))
            managed.update(id(q) for q in h.orig_params)
            (sharded if h.sharded else local).extend(h.local_grads())
        local += [q.grad for q in self.parameters() if id(q) not in managed and q.grad is not None]
        device = self.compute_device

        def part(gs: list[ember.Tensor]) -> ember.Tensor:
            vals = [g.detach().float().abs() for g in gs if g.numel()]
            if not vals:
                return ember.zeros((), device=device)
            if p == float("inf"):
                return ember.stack([v.max() for v in vals]).max()
            return ember.stack([v.pow(p).sum() for v in vals]).sum()

        s, loc = part(sharded), part(local)
        if p == float("inf"):
            dist.all_reduce(s, op=dist.ReduceOp.MAX, group=self.process_group)
            total = ember.maximum(s, loc)
        else:
            dist.all_reduce(s, group=self.process_group)
            total = (s + loc).pow(1.0 / p)
        coef = float(max_norm) / (float(total) + 1e-6)
        if coef < 1.0:
            with ember.no_grad():
                for g in sharded + local:
                    g.mul_(coef)
        grads = sharded + local
        return total.to(grads[0].dtype) if grads else total

    # ---- full parameters ----------------------------------------------------------------------
    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module: nn.Module, recurse: bool = True, writeback: bool = True,
                           rank0_only: bool = False, offload_to_cpu: bool = False,
                           with_grads: bool = False) -> Iterator[None]:
        """Within it, the FSDP units in ``module`` show their full, unsharded parameters as
        registered parameters under the original names (``writeback``: changes made to them
        in place are kept; ``rank0_only``: only rank 0 sees them; ``with_grads``: their
        gradients too)."""
        if writeback and rank0_only:
            raise ValueError("writeback=True and rank0_only=True is not supported, as model "
                             "parameter shapes will be different across ranks, and writing "
                             "to them can lead to inconsistencies across ranks when the "
                             "context is exited.")
        units = FullyShardedDataParallel.fsdp_modules(module, root_only=not recurse)
        if any(u._in_summon for u in units):
            raise AssertionError("summon_full_params: FSDP unit is already summoned")
        opened: list[tuple[FullyShardedDataParallel, ember.Tensor]] = []
        try:
            for u in units:
                u.__dict__["_in_summon"] = True
                h = u._handle
                if h is None:
                    continue
                full = h.gather()[:h.numel]
                grad_full = None
                if with_grads:
                    g = h.shard_grad()
                    if g is not None:
                        grad_full = h.gather_shard_tensor(g)
                if rank0_only and u.rank != 0:
                    continue
                if offload_to_cpu:
                    full = full.cpu()
                opened.append((u, full))
                grads_on = [q.requires_grad for q in h.orig_params] if h.use_orig_params \
                    else [h.requires_grad] * len(h.infos)
                params = [nn.Parameter(v, requires_grad=g)
                          for v, g in zip(h.views(full), grads_on)]
                if grad_full is not None:
                    for param, gv in zip(params, h.views(grad_full)):
                        param.grad = gv
                if not h.use_orig_params:
                    u._fsdp_wrapped_module._parameters.pop(FLAT_PARAM, None)
                h.use_views(params, as_params=True)
            yield
        finally:
            for u, full in opened:
                h = u._handle
                if writeback:
                    h.write_back(full)
                h.use_sharded_attrs()
                if not h.use_orig_params:
                    u._fsdp_wrapped_module._parameters[FLAT_PARAM] = h.flat
            for u in units:
                u.__dict__["_in_summon"] = False

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, nn.Parameter]]:
        """As Module's; inside summon_full_params the FSDP prefixes are left out of names."""
        for name, p in super().named_parameters(prefix, recurse, remove_duplicate):
            yield (_clean(name) if self._in_summon else name), p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, ember.Tensor]]:
        """As Module's; inside summon_full_params the FSDP prefixes are left out of names."""
        for name, b in super().named_buffers(prefix, recurse, remove_duplicate):
            yield (_clean(name) if self._in_summon else name), b

    # ---- state dicts ---------------------------------------------------------------------------
    @staticmethod
    def set_state_dict_type(module: nn.Module, state_dict_type: StateDictType,
                            state_dict_config: StateDictConfig | None = None,
                            optim_state_dict_config: OptimStateDictConfig | None = None
                            ) -> StateDictSettings:
        """Sets the state-dict type of every FSDP unit in ``module``; returns the previous
        settings."""
        defaults = {StateDictType.FULL_STATE_DICT: (FullStateDictConfig, FullOptimStateDictConfig),
                    StateDictType.LOCAL_STATE_DICT: (LocalStateDictConfig, OptimStateDictConfig),
                    StateDictType.SHARDED_STATE_DICT: (ShardedStateDictConfig,
                                                       OptimStateDictConfig)}
        if state_dict_type == StateDictType.SHARDED_STATE_DICT:
            raise NotImplementedError("SHARDED_STATE_DICT needs sharded tensors (DTensor), "
                                      "which ember does not have: use FULL_STATE_DICT or "
                                      "LOCAL_STATE_DICT")
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError("set_state_dict_type: no FSDP module in the given module")
        prev = FullyShardedDataParallel.get_state_dict_type(module)
        sd_cfg = state_dict_config or defaults[state_dict_type][0]()
        osd_cfg = optim_state_dict_config or defaults[state_dict_type][1]()
        for u in units:
            u.__dict__["_state_dict_type"] = state_dict_type
            u.__dict__["_state_dict_config"] = sd_cfg
            u.__dict__["_optim_state_dict_config"] = osd_cfg
        return prev

    @staticmethod
    def get_state_dict_type(module: nn.Module) -> StateDictSettings:
        """The state-dict settings of the FSDP units in ``module``."""
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError("get_state_dict_type: no FSDP module in the given module")
        u = units[0]
        return StateDictSettings(u._state_dict_type, u._state_dict_config,
                                 u._optim_state_dict_config)

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module: nn.Module, state_dict_type: StateDictType,
                        state_dict_config: StateDictConfig | None = None,
                        optim_state_dict_config: OptimStateDictConfig | None = None
                        ) -> Iterator[None]:
        """Within it, ``state_dict()`` / ``load_state_dict()`` of the FSDP units in ``module``
        (and ``optim_state_dict``) use ``state_dict_type`` with the given configs.

        Example::

            cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
                sd = model.state_dict()  # rank 0: the full state; other ranks: {}
        """
        prev = FullyShardedDataParallel.set_state_dict_type(
            module, state_dict_type, state_dict_config, optim_state_dict_config)
        try:
            yield
        finally:
            FullyShardedDataParallel.set_state_dict_type(
                module, prev.state_dict_type, prev.state_dict_config,
                prev.optim_state_dict_config)

    def state_dict(self, *args: Any, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Any]:
        """FULL_STATE_DICT (the default): the unsharded parameters and buffers under the
        original names, as copies (every rank gathers; with ``rank0_only`` the others get an
        empty dict). LOCAL_STATE_DICT: Module's own, with this rank's flat shards."""
        if args:
            names = ("destination", "prefix", "keep_vars")
            values = dict(zip(names, args))
            destination = values.get("destination", destination)
            prefix = values.get("prefix", prefix)
            keep_vars = values.get("keep_vars", keep_vars)
        if self._in_summon or self._state_dict_type == StateDictType.LOCAL_STATE_DICT:
            return super().state_dict(destination=destination, prefix=prefix,
                                      keep_vars=keep_vars)
        cfg = self._state_dict_config
        rank0_only = bool(getattr(cfg, "rank0_only", False))
        with FullyShardedDataParallel.summon_full_params(self, writeback=False):
            local = super().state_dict(prefix=prefix, keep_vars=False)
            out = type(local)()
            buffer_dtypes = self._original_buffer_dtypes(prefix)
            for key, value in local.items():
                ck = _clean(key)
                if isinstance(value, ember.Tensor):
                    value = value.detach().clone()
                    if ck in buffer_dtypes:
                        value = value.to(buffer_dtypes[ck])
                    if getattr(cfg, "offload_to_cpu", False):
                        value = value.cpu()
                out[ck] = value
        if rank0_only and self.rank != 0:
            return destination if destination is not None else type(out)()
        if destination is None:
            return out
        destination.update(out)
        return destination

    def _original_buffer_dtypes(self, prefix: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for u in self._units():
            for (mid, name), (m, dtype) in u._buffer_dtypes.items():
                for mname, mm in self.named_modules(prefix=prefix.rstrip(".")):
                    if mm is m:
                        found[_clean(f"{mname}.{name}" if mname else name)] = dtype
        return found

    def load_state_dict(self, state_dict: Any, strict: bool = True,
                        assign: bool = False) -> Any:
        """Loads a FULL_STATE_DICT (original names, unsharded tensors: e.g. a plain module's
        state dict) into the shards; LOCAL_STATE_DICT as Module does."""
        if self._in_summon or self._state_dict_type == StateDictType.LOCAL_STATE_DICT:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        with FullyShardedDataParallel.summon_full_params(self, writeback=True):
            actual = {_clean(k): k for k in nn.Module.state_dict(self, keep_vars=True)}
            mapped = type(state_dict)() if isinstance(state_dict, dict) else {}
            for k, v in state_dict.items():
                mapped[actual.get(k, k)] = v
            with ember.no_grad():
                result = super().load_state_dict(mapped, strict=strict, assign=False)
        return type(result)([_clean(k) for k in result.missing_keys],
                            [_clean(k) for k in result.unexpected_keys])

    # ---- optimizer state -------------------------------------------------------------------------
    @staticmethod
    def _param_maps(model: nn.Module) -> tuple[dict[int, FlatParamHandle],
                                               dict[int, tuple[FlatParamHandle, int]],
                                               dict[int, str]]:
        """id(flat parameter) -> handle (use_orig_params=False); id(original parameter) ->
        (handle, index) (use_orig_params=True); id(any other parameter) -> its clean name."""
        flats: dict[int, FlatParamHandle] = {}
        origs: dict[int, tuple[FlatParamHandle, int]] = {}
        for u in FullyShardedDataParallel.fsdp_modules(model):
            h = u._handle
            if h is None:
                continue
            if h.use_orig_params:
                origs.update((id(p), (h, k)) for k, p in enumerate(h.orig_params))
            else:
                flats[id(h.flat)] = h
        names = {id(p): _clean(n) for n, p in model.named_parameters() if id(p) not in flats}
        return flats, origs, names

    @staticmethod
    def _fqns(model: nn.Module, handle: FlatParamHandle) -> list[str]:
        """The clean names, from ``model``, of a flat parameter's original parameters."""
        for name, p in model.named_parameters():
            if p is handle.flat:
                base = _clean(name)[: -len(FLAT_PARAM)]
                return [base + i.fqn for i in handle.infos]
        raise KeyError("flat parameter not in the model")

    @staticmethod
    def _gather_orig_states(model: nn.Module, optim: Any, osd: dict[str, Any],
                            names: dict[int, str]) -> dict[str, dict[str, Any]]:
        """use_orig_params=True: each original parameter's optimizer state, unsharded (every
        rank holds a 1-D part of it, or none)."""
        index = {id(p): i for i, p in enumerate(p for g in optim.param_groups
                                                 for p in g["params"])}
        out: dict[str, dict[str, Any]] = {}
        for u in FullyShardedDataParallel.fsdp_modules(model):
            h = u._handle
            if h is None or not h.use_orig_params:
                continue
            local = [osd["state"].get(index[id(p)], {}) if id(p) in index else {}
                     for p in h.orig_params]
            # which keys are per-element tensors, and the scalars, from every rank
            meta = [{k: ("tensor" if isinstance(v, ember.Tensor) and v.dim() > 0
                         and tuple(v.shape) == tuple(p.shape) else ("value", v))
                     for k, v in st.items()} for st, p in zip(local, h.orig_params)]
            metas: list[Any] = [None] * h.world
            dist.all_gather_object(metas, meta, group=h.group)
            tensor_keys = sorted({k for m in metas for per in m for k, v in per.items()
                                  if v == "tensor"})
            gathered = {}
            for key in tensor_keys:
                buf = ember.zeros(h.shard_numel, dtype=h.dtype, device=h.flat.device)
                for info, p, st in zip(h.infos, h.orig_params, local):
                    lo, hi = h._local_range(info)
                    if key in st and hi > lo:
                        buf[lo:hi] = st[key].detach().reshape(-1).to(h.dtype)
                gathered[key] = h.views(h.gather_shard_tensor(buf))
            for k, p in enumerate(h.orig_params):
                entry: dict[str, Any] = {}
                for m in metas:
                    for key, v in m[k].items():
                        if key not in entry:
                            entry[key] = gathered[key][k].clone() if v == "tensor" else v[1]
                if entry:
                    out[names[id(p)]] = entry
        return out

    @staticmethod
    def optim_state_dict(model: nn.Module, optim: Any,
                         optim_state_dict: dict[str, Any] | None = None,
                         group: Any = None) -> dict[str, Any]:
        """The optimizer's state with each flat parameter's state gathered and split back into
        the original parameters, keyed by their names (FULL_STATE_DICT; every rank takes part;
        with ``FullOptimStateDictConfig(rank0_only=True)`` the other ranks get {})."""
        osd = optim.state_dict() if optim_state_dict is None else optim_state_dict
        flats, origs, names = FullyShardedDataParallel._param_maps(model)
        order = [p for g in optim.param_groups for p in g["params"]]
        state: dict[str, dict[str, Any]] = {}
        keys_of: list[list[str]] = []
        orig_states = FullyShardedDataParallel._gather_orig_states(model, optim, osd, names)
        for idx, p in enumerate(order):
            s = osd["state"].get(idx, {})
            h = flats.get(id(p))
            if h is None:
                keys_of.append([names[id(p)]])
                if id(p) in origs:
                    if names[id(p)] in orig_states:
                        state[names[id(p)]] = orig_states[names[id(p)]]
                elif s:
                    state[names[id(p)]] = {k: v.detach().clone() if isinstance(v, ember.Tensor)
                                           else v for k, v in s.items()}
                continue
            fqns = FullyShardedDataParallel._fqns(model, h)
            keys_of.append(fqns)
            per: dict[str, dict[str, Any]] = {f: {} for f in fqns}
            for k, v in s.items():
                if isinstance(v, ember.Tensor) and tuple(v.shape) == (h.shard_numel,):
                    full = h.gather_shard_tensor(v)
                    for f, view in zip(fqns, h.views(full)):
                        per[f][k] = view.clone()
                else:
                    for f in fqns:
                        per[f][k] = v.clone() if isinstance(v, ember.Tensor) else v
            if s:
                state.update(per)
        groups = []
        pos = 0
        for g in osd["param_groups"]:
            n = len(g["params"])
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": [f for ks in keys_of[pos:pos + n] for f in ks]})
            pos += n
        first = FullyShardedDataParallel.fsdp_modules(model)[0]
        if getattr(first._optim_state_dict_config, "rank0_only", False) and first.rank != 0:
            return {}
        return {"state": state, "param_groups": groups}

    @staticmethod
    def optim_state_dict_to_load(model: nn.Module, optim: Any, optim_state_dict: dict[str, Any],
                                 is_named_optimizer: bool = False, load_directly: bool = False,
                                 group: Any = None) -> dict[str, Any]:
        """The inverse of ``optim_state_dict``: a state dict (keyed by parameter index) that
        ``optim.load_state_dict`` takes, each rank keeping its shard of each state tensor."""
        flats, origs, names = FullyShardedDataParallel._param_maps(model)
        order = [p for g in optim.param_groups for p in g["params"]]
        src = optim_state_dict["state"]
        state: dict[int, dict[str, Any]] = {}
        for idx, p in enumerate(order):
            h = flats.get(id(p))
            if h is None:
                saved = src.get(names[id(p)])
                if not saved:
                    continue
                if id(p) not in origs:
                    state[idx] = dict(saved)
                    continue
                oh, k = origs[id(p)]
                info = oh.infos[k]
                lo, hi = oh._local_range(info)
                if hi == lo:
                    continue  # this rank holds none of the parameter
                start = oh.shard_offset + lo - info.offset
                entry = {}
                for key, v in saved.items():
                    if isinstance(v, ember.Tensor) and tuple(v.shape) == info.shape and v.dim():
                        piece = v.detach().reshape(-1)[start:start + hi - lo]
                        entry[key] = piece.reshape(p.shape).to(oh.dtype).clone()
                    else:
                        entry[key] = v.clone() if isinstance(v, ember.Tensor) else v
                state[idx] = entry
                continue
            fqns = FullyShardedDataParallel._fqns(model, h)
            if not any(f in src for f in fqns):
                continue
            entry = {}
            for k, v in src[fqns[0]].items():
                if isinstance(v, ember.Tensor) and tuple(v.shape) == h.infos[0].shape \
                        and v.dim() > 0:
                    pieces = [src[f][k].detach().reshape(-1).to(h.dtype) for f in fqns]
                    full = ember.cat(pieces)
                    if h.padded_numel > h.numel:
                        full = ember.cat([full, full.new_zeros(h.padded_numel - h.numel)])
                    entry[k] = full[h.shard_offset:h.shard_offset + h.shard_numel].clone()
                else:
                    entry[k] = v.clone() if isinstance(v, ember.Tensor) else v
            state[idx] = entry
        groups = []
        pos = 0
        for g_new, g_old in zip(optim_state_dict["param_groups"], optim.param_groups):
            n = len(g_old["params"])
            groups.append({**{k: v for k, v in g_new.items() if k != "params"},
                           "params": list(range(pos, pos + n))})
            pos += n
        out = {"state": state, "param_groups": groups}
        if load_directly:
            optim.load_state_dict(out)
        return out

    # ---- the older optimizer-state API -----------------------------------------------------------
    @staticmethod
    def full_optim_state_dict(model: nn.Module, optim: Any, optim_input: Any = None,
                              rank0_only: bool = True, group: Any = None) -> dict[str, Any]:
        """``optim_state_dict`` under the name older scripts use: the full state on rank 0
        (``rank0_only``) or on every rank."""
        osd = FullyShardedDataParallel.optim_state_dict(model, optim)
        first = FullyShardedDataParallel.fsdp_modules(model)[0]
        return {} if rank0_only and first.rank != 0 else osd

    @staticmethod
    def shard_full_optim_state_dict(full_optim_state_dict: dict[str, Any], model: nn.Module,
                                    optim_input: Any = None, optim: Any = None
                                    ) -> dict[str, Any]:
        """This rank's shard of a full optimizer state dict (every rank holds the full one);
        ember needs ``optim`` (the optimizer it will be loaded into)."""
        if optim is None:
            raise ValueError("shard_full_optim_state_dict in ember needs optim= (the optimizer "
                             "the result is loaded into)")
        return FullyShardedDataParallel.optim_state_dict_to_load(model, optim,
                                                                 full_optim_state_dict)

    @staticmethod
    def scatter_full_optim_state_dict(full_optim_state_dict: dict[str, Any] | None,
                                      model: nn.Module, optim_input: Any = None,
                                      optim: Any = None, group: Any = None) -> dict[str, Any]:
        """As ``shard_full_optim_state_dict`` when only rank 0 holds the full state dict (it is
        broadcast first)."""
        first = FullyShardedDataParallel.fsdp_modules(model)[0]
        pg = group if group is not None else first.process_group
        box = [full_optim_state_dict if first.rank == 0 else None]
        dist.broadcast_object_list(box, src=dist.get_global_rank(pg, 0), group=pg)
        return FullyShardedDataParallel.shard_full_optim_state_dict(box[0], model, optim=optim)
