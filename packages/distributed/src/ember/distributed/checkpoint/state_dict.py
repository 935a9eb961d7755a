"""get / set state dicts of a model and its optimizers by module path, whatever wraps the model
(torch.distributed.checkpoint.state_dict's API): DistributedDataParallel's ``module.`` prefix,
FSDP's ``_fsdp_wrapped_module.`` and activation checkpointing's wrapper are left out of the
names, FSDP's parameters are gathered whole, and optimizer state is keyed by parameter name
instead of by position, so a checkpoint does not depend on how the model was wrapped.

Example::

    from ember.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(ddp_model, optimizer)   # "0.weight", not "module.0.weight"
    set_state_dict(plain_model, optimizer2, model_state_dict=model_sd, optim_state_dict=optim_sd)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import ember
from ember import nn

from ._flatten import is_dtensor

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict",
           "get_state_dict", "set_model_state_dict", "set_optimizer_state_dict",
           "set_state_dict"]

# wrapper modules' attribute names, which are not part of a parameter's name
_WRAPPER_PARTS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


@dataclass
class StateDictOptions:
    """How the get/set functions treat the state dicts.

    full_state_dict: gather sharded (FSDP) parameters and states whole. cpu_offload: move the
    tensors to the CPU (with full_state_dict, only rank 0 gets them; the others get {}).
    ignore_frozen_params: leave out parameters that do not require grad. strict: set_* raises
    on missing or unexpected keys. broadcast_from_rank0: set_* takes rank 0's state dict
    (the others may pass {}). flatten_optimizer_state_dict: one level of "state.<name>.<key>"
    and "param_groups.<name>.<key>" entries.
    """

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _clean(name: str) -> str:
    for part in _WRAPPER_PARTS:
        name = name.replace(part, "")
    return name


def _inner(model: nn.Module) -> nn.Module:
    """The model without DistributedDataParallel / DataParallel around it."""
    from ember.nn.parallel import DataParallel, DistributedDataParallel

    while isinstance(model, (DistributedDataParallel, DataParallel)):
        model = model.module
    return model


def _fsdp(model: nn.Module) -> Any:
    from ember.distributed.fsdp import FullyShardedDataParallel

    return FullyShardedDataParallel if any(
        isinstance(m, FullyShardedDataParallel) for m in model.modules()) else None


@contextlib.contextmanager
def _full(model: nn.Module) -> Iterator[None]:
    """FSDP's FULL_STATE_DICT for the block (whole parameters on every rank)."""
    fsdp = _fsdp(model)
    if fsdp is None:
        yield
        return
    from ember.distributed.fsdp import (
        FullOptimStateDictConfig,
        FullStateDictConfig,
        StateDictType,
    )

    with fsdp.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(),
                              FullOptimStateDictConfig()):
        yield


def _rank() -> int:
    import ember.distributed as dist

    return dist.get_rank() if dist.is_initialized() else 0


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, ember.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj


def _optimizers(optimizers: Any) -> list[Any]:
    return [optimizers] if hasattr(optimizers, "param_groups") else list(optimizers)


def _param_names(model: nn.Module) -> dict[int, str]:
    """id(parameter) -> its name (the first, for tied parameters)."""
    from ember.distributed.fsdp._fully_shard import FSDPModule

    for m in model.modules():  # fully_shard modules left gathered: their DTensors, as torch
        if isinstance(m, FSDPModule):
            m.reshard()
    names: dict[int, str] = {}
    for name, p in _inner(model).named_parameters(remove_duplicate=False):
        names.setdefault(id(p), _clean(name))
    return names


def _frozen(model: nn.Module) -> set[str]:
    return {_clean(n) for n, p in _inner(model).named_parameters(remove_duplicate=False)
            if not p.requires_grad}


def _full_tensors(obj: Any) -> Any:
    """DTensors gathered whole (full_state_dict)."""
    if is_dtensor(obj):
        return obj.full_tensor()
    if isinstance(obj, dict):
        return {k: _full_tensors(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_full_tensors(v) for v in obj]
    return obj


def _like(value: Any, template: Any) -> Any:
    """value laid out as template: this rank's piece of a whole tensor when template is a
    DTensor (set_* given a full state dict for a sharded model)."""
    if is_dtensor(template) and isinstance(value, ember.Tensor) and not is_dtensor(value) \
            and tuple(value.shape) == tuple(template.shape):
        from ember.distributed.tensor import distribute_tensor

        return distribute_tensor(value.to(template.dtype), template.device_mesh,
                                 template.placements, src_data_rank=None)
    return value


def _finish(sd: dict, opts: StateDictOptions) -> dict:
    if opts.full_state_dict:
        sd = _full_tensors(sd)
    if opts.cpu_offload:
        if opts.full_state_dict and _rank() != 0:
            return {}
        sd = _to_cpu(sd)
    return sd


def get_model_state_dict(model: nn.Module, *, submodules: set[nn.Module] | None = None,
                         options: StateDictOptions | None = None) -> dict[str, Any]:
    """The model's state dict under its module paths (no DDP / FSDP wrapper names).

    Example::

        >>> get_model_state_dict(ddp_model).keys()  # doctest: +SKIP
        dict_keys(['0.weight', '0.bias'])
    """
    opts = options or StateDictOptions()
    with _full(model):
        raw = _inner(model).state_dict()
    sd = {_clean(k): v for k, v in raw.items()}
    if opts.ignore_frozen_params:
        frozen = _frozen(model)
        sd = {k: v for k, v in sd.items() if k not in frozen}
    if submodules:
        prefixes = [_clean(n) + "." for n, m in _inner(model).named_modules() if m in submodules]
        keep = {}
        for k, v in sd.items():
            for pre in prefixes:
                if k.startswith(pre):
                    keep[k if opts.keep_submodule_prefixes else k[len(pre):]] = v
        sd = keep
    return _finish(sd, opts)


def _init_optim_state(optim: Any) -> None:
    """A fresh optimizer's state made by one step that changes nothing (zero gradients, lr 0),
    so a checkpoint's state has entries to load into (as torch does); skipped when a
    parameter already has a gradient."""
    if optim.state:
        return
    params = [p for g in optim.param_groups for p in g["params"] if p.requires_grad]
    if not params or any(p.grad is not None for p in params) or any(
            "lr" not in g for g in optim.param_groups):
        return
    lrs = [g["lr"] for g in optim.param_groups]
    for p in params:
        p.grad = ember.zeros_like(p)
    for g in optim.param_groups:
        g["lr"] = 0.0 if not isinstance(g["lr"], ember.Tensor) else g["lr"].fill_(0.0)
    try:
        optim.step()
    finally:
        for g, lr in zip(optim.param_groups, lrs):
            g["lr"] = lr
        for p in params:
            p.grad = None


def _named_optim_state(model: nn.Module, optim: Any) -> dict[str, Any]:
    _init_optim_state(optim)
    fsdp = _fsdp(model)
    if fsdp is not None:
        with _full(model):
            return fsdp.optim_state_dict(model, optim)
    names = _param_names(model)
    osd = optim.state_dict()
    order = [p for g in optim.param_groups for p in g["params"]]
    missing = [i for i, p in enumerate(order) if id(p) not in names]
    if missing:
        raise RuntimeError(f"get_optimizer_state_dict: the optimizer's parameters {missing} "
                           "(by position) are not parameters of the model")
    fqn = [names[id(p)] for p in order]
    groups, pos = [], 0
    for g in osd["param_groups"]:
        n = len(g["params"])
        groups.append({**{k: v for k, v in g.items() if k != "params"},
                       "params": fqn[pos:pos + n]})
        pos += n
    return {"state": {fqn[i]: s for i, s in osd["state"].items()}, "param_groups": groups}


def _flatten_optim(osd: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, s in osd["state"].items():
        for k, v in s.items():
            flat[f"state.{name}.{k}"] = v
    for g in osd["param_groups"]:
        for name in g["params"]:
            for k, v in g.items():
                if k != "params":
                    flat[f"param_groups.{name}.{k}"] = v
    return flat


def get_optimizer_state_dict(model: nn.Module, optimizers: Any, *,
                             submodules: set[nn.Module] | None = None,
                             options: StateDictOptions | None = None) -> dict[str, Any]:
    """The optimizers' state keyed by parameter name: {"state": {name: {...}},
    "param_groups": [{..., "params": [names]}]} (several optimizers: their groups in order).

    Example::

        >>> get_optimizer_state_dict(model, opt)["param_groups"][0]["params"]  # doctest: +SKIP
        ['0.weight', '0.bias']
    """
    opts = options or StateDictOptions()
    merged: dict[str, Any] = {"state": {}, "param_groups": []}
    for optim in _optimizers(optimizers):
        osd = _named_optim_state(model, optim)
        if not osd:  # FSDP's rank0_only on another rank
            continue
        merged["state"].update(osd["state"])
        merged["param_groups"].extend(osd["param_groups"])
    if opts.ignore_frozen_params:
        frozen = _frozen(model)
        merged["state"] = {k: v for k, v in merged["state"].items() if k not in frozen}
    if opts.flatten_optimizer_state_dict:
        merged = _flatten_optim(merged)
    return _finish(merged, opts)


def get_state_dict(model: nn.Module, optimizers: Any, *,
                   submodules: set[nn.Module] | None = None,
                   options: StateDictOptions | None = None) -> tuple[dict, dict]:
    """(get_model_state_dict(model), get_optimizer_state_dict(model, optimizers))."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules,
                                     options=options))


def _from_rank0(sd: Any, opts: StateDictOptions) -> Any:
    if not opts.broadcast_from_rank0:
        return sd
    import ember.distributed as dist

    if not dist.is_initialized():
        return sd
    box = [_to_cpu(sd) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def set_model_state_dict(model: nn.Module, model_state_dict: dict[str, Any], *,
                         options: StateDictOptions | None = None) -> Any:
    """Loads a state dict named by module paths into the (possibly wrapped) model; returns
    (missing_keys, unexpected_keys) like Module.load_state_dict.

    Example::

        >>> set_model_state_dict(ddp_model, {"0.weight": w, "0.bias": b})  # doctest: +SKIP
    """
    opts = options or StateDictOptions()
    sd = _from_rank0(model_state_dict, opts)
    current = {_clean(k): v for k, v in _inner(model).state_dict(keep_vars=True).items()}
    sd = {k: _like(v, current.get(k)) for k, v in sd.items()}
    frozen = _frozen(model) if opts.ignore_frozen_params else set()
    with _full(model):
        result = _inner(model).load_state_dict(sd, strict=False)
    missing = [_clean(k) for k in result.missing_keys if _clean(k) not in frozen]
    unexpected = [_clean(k) for k in result.unexpected_keys]
    if opts.strict and (missing or unexpected):
        raise RuntimeError(f"Error(s) in loading state_dict for {type(_inner(model)).__name__}: "
                           f"Missing key(s): {missing}. Unexpected key(s): {unexpected}.")
    return type(result)(missing, unexpected)


def _unflatten_optim(flat: dict[str, Any], optimizers: list[Any],
                     names: dict[int, str]) -> dict[str, Any]:
    state: dict[str, dict[str, Any]] = {}
    groups = []
    for optim in optimizers:
        for g in optim.param_groups:
            fqns = [names[id(p)] for p in g["params"]]
            group: dict[str, Any] = {"params": fqns}
            prefix = f"param_groups.{fqns[0]}." if fqns else None
            for k, v in flat.items():
                if prefix and k.startswith(prefix):
                    group[k[len(prefix):]] = v
            groups.append(group)
    for k, v in flat.items():
        if k.startswith("state."):
            for fqn in sorted(names.values(), key=len, reverse=True):
                if k.startswith(f"state.{fqn}."):
                    state.setdefault(fqn, {})[k[len(f"state.{fqn}."):]] = v
                    break
    return {"state": state, "param_groups": groups}


def set_optimizer_state_dict(model: nn.Module, optimizers: Any,
                             optim_state_dict: dict[str, Any], *,
                             options: StateDictOptions | None = None) -> None:
    """Loads optimizer state keyed by parameter name into each optimizer (each takes the
    groups and states of its own parameters).

    Example::

        >>> set_optimizer_state_dict(model, opt, get_optimizer_state_dict(model, opt))  # doctest: +SKIP
    """
    opts = options or StateDictOptions()
    optims = _optimizers(optimizers)
    names = _param_names(model)
    osd = _from_rank0(optim_state_dict, opts)
    if opts.flatten_optimizer_state_dict:
        osd = _unflatten_optim(osd, optims, names)
    fsdp = _fsdp(model)
    saved_groups = {g["params"][0]: g for g in osd["param_groups"] if g["params"]}
    for optim in optims:
        if fsdp is not None:
            with _full(model):
                optim.load_state_dict(fsdp.optim_state_dict_to_load(model, optim, osd))
            continue
        order = [p for g in optim.param_groups for p in g["params"]]
        fqn = [names.get(id(p)) for p in order]
        groups = []
        pos = 0
        for g in optim.param_groups:
            n = len(g["params"])
            saved = saved_groups.get(fqn[pos]) if n else None
            if saved is None:
                raise RuntimeError(f"set_optimizer_state_dict: no saved parameter group holds "
                                   f"{fqn[pos] if n else 'an empty group'}")
            groups.append({**{k: v for k, v in saved.items() if k != "params"},
                           "params": list(range(pos, pos + n))})
            pos += n
        state = {i: {k: _like(v, order[i]) for k, v in osd["state"][f].items()}
                 for i, f in enumerate(fqn) if f in osd["state"]}
        optim.load_state_dict({"state": state, "param_groups": groups})


def set_state_dict(model: nn.Module, optimizers: Any, *, model_state_dict: dict[str, Any],
                   optim_state_dict: dict[str, Any],
                   options: StateDictOptions | None = None) -> Any:
    """set_model_state_dict then set_optimizer_state_dict; returns the model's
    (missing_keys, unexpected_keys)."""
    keys = set_model_state_dict(model, model_state_dict, options=options)
    if optim_state_dict:
        set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return keys

