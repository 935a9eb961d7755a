"""Composable APIs (torch.distributed._composable): functions that change how a module runs
without wrapping it in another class. ``checkpoint(module)`` recomputes its activations in
backward; ``replicate(module)`` is DistributedDataParallel through hooks on the module itself;
``fsdp.fully_shard`` is FSDP2 under its older path."""

from __future__ import annotations

from typing import Any

import ember
from ember import nn

__all__ = ["DDP", "checkpoint", "checkpoint_activation", "replicate"]


def checkpoint(module: nn.Module, **kwargs: Any) -> nn.Module:
    """Makes module's forward non-reentrant activation checkpointed (its activations are
    recomputed in backward instead of kept); the module keeps its class and state-dict keys.
    Keyword arguments go to ember.utils.checkpoint.checkpoint. Returns module.

    Example::

        >>> for block in model.layers:  # doctest: +SKIP
        ...     checkpoint(block)
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"checkpoint: expected an nn.Module, got {type(module).__name__}")
    if kwargs.pop("use_reentrant", False):
        raise NotImplementedError("checkpoint(module) is non-reentrant; use_reentrant=True is "
                                  "not supported (as in torch)")
    if getattr(module, "_ember_composable_checkpoint", False):
        raise RuntimeError("checkpoint: the module is already checkpointed")
    from ember.utils.checkpoint import checkpoint as run_checkpointed

    inner = module.forward

    def forward(*args: Any, **kw: Any) -> Any:
        return run_checkpointed(inner, *args, use_reentrant=False, **kwargs, **kw)

    module.forward = forward
    module._ember_composable_checkpoint = True
    return module


checkpoint_activation = checkpoint


class _ReplicateState:
    """What replicate keeps on a module: the DistributedDataParallel over its parameters (made
    at the first forward, as torch does), its arguments, the no-sync flag and comm hooks."""

    def __init__(self, params: list, kwargs: dict) -> None:
        self.params, self.kwargs = params, kwargs
        self.ddp: Any = None
        self.no_sync = False
        self.hooks: list[tuple[tuple, dict]] = []
        self.will_sync = False

    def get(self) -> Any:
        if self.ddp is None:
            from ember.nn.parallel import DistributedDataParallel

            self.ddp = DistributedDataParallel(nn.ParameterList(self.params), **self.kwargs)
            for args, kwargs in self.hooks:
                self.ddp.register_comm_hook(*args, **kwargs)
            self.hooks.clear()
        return self.ddp


class DDP:
    """The methods replicate adds to a module (its class becomes DDP<Name>)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # a container's slicing (model[0:2]) builds type(self)(...): a plain module of the
        # original class, not a replicated one without its state
        orig = cls.__mro__[2]
        obj = orig.__new__(orig)
        obj.__init__(*args, **kwargs)
        return obj

    def set_requires_gradient_sync(self, requires_gradient_sync: bool) -> None:
        """False: gradients stay local (accumulation without communication)."""
        self.__dict__["_ember_replicate"].no_sync = not requires_gradient_sync

    def register_comm_hook(self, *args: Any, **kwargs: Any) -> None:
        """A DistributedDataParallel communication hook for this module's gradients."""
        state = self.__dict__["_ember_replicate"]
        if state.ddp is None:
            state.hooks.append((args, kwargs))
        else:
            state.ddp.register_comm_hook(*args, **kwargs)

    def __deepcopy__(self, memo: dict) -> Any:
        raise AssertionError("DDP does not support deepcopy. Please use state dict for "
                             "serialization.")


_CLASSES: dict[type, type] = {}


def replicate(module: nn.Module, ignored_modules: Any = None, **kwargs: Any) -> nn.Module:
    """Data parallelism on module in place, as torch's replicate: at the first forward a
    DistributedDataParallel over the module's parameters (those of ignored_modules left out)
    broadcasts rank 0's values, then gradients are averaged over the ranks in backward. The
    module's buffers are not synchronized. Its class becomes DDP<Name> (adding
    set_requires_gradient_sync and register_comm_hook); its state-dict keys stay. kwargs go to
    DistributedDataParallel (device_id: one device, cpu or cuda). Returns module.

    Example (every rank)::

        >>> model = replicate(nn.Linear(3, 3))  # doctest: +SKIP
        >>> model(x).sum().backward()  # the gradients are averaged  # doctest: +SKIP
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"replicate: expected an nn.Module, got {type(module).__name__}")
    if "_ember_replicate" in module.__dict__:
        raise RuntimeError("replicate: the module is already replicated")
    if "device_id" in kwargs:
        device = kwargs.pop("device_id")
        if device is not None and not isinstance(device, (int, ember.device)):
            raise RuntimeError(f"Expected device_id to be int or torch.device, but got "
                               f"{type(device)}")
        cpu = device is None or (isinstance(device, ember.device) and device.type == "cpu")
        kwargs["device_ids"] = None if cpu else [device]
    ignored = {id(p) for m in (ignored_modules or ()) for p in m.parameters()}
    params = [p for p in module.parameters() if id(p) not in ignored]
    state = _ReplicateState(params, kwargs)
    module.__dict__["_ember_replicate"] = state  # not a submodule: keys stay the module's own

    def pre(mod: nn.Module, args: tuple, kw: dict) -> tuple[tuple, dict]:
        ddp = state.get()
        ddp.require_backward_grad_sync = not state.no_sync
        args, kw, state.will_sync = ddp._pre_forward(args, kw)
        return args, kw

    def post(mod: nn.Module, args: tuple, out: Any) -> Any:
        return state.get()._post_forward(out, state.will_sync)

    module.register_forward_pre_hook(pre, with_kwargs=True)
    module.register_forward_hook(post)
    cls = type(module)
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"DDP{cls.__name__}", (DDP, cls), {})
    module.__class__ = _CLASSES[cls]
    return module
