"""Composable APIs (torch.distributed._composable): functions that change how a module runs
without wrapping it in another class. ``checkpoint(module)`` recomputes its activations in
backward; ``fsdp.fully_shard`` is FSDP2 under its older path."""

from __future__ import annotations

from typing import Any

from ember import nn

__all__ = ["checkpoint", "checkpoint_activation"]


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
