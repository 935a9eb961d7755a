"""Activation checkpointing and CPU offload of saved activations as module wrappers
(torch.distributed.algorithms._checkpoint.checkpoint_wrapper), the way FSDP training scripts
apply them: ``apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))``
wraps each matching submodule so its forward runs under ``ember.utils.checkpoint``.

A wrapper is invisible in names: ``state_dict``, ``load_state_dict`` and ``named_parameters``
drop its ``_checkpoint_wrapped_module.`` level, so checkpoints match the unwrapped model, and
attribute and item lookups fall through to the wrapped module.

Example::

    from ember.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing, checkpoint_wrapper, CheckpointImpl)

    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.TransformerEncoderLayer))
"""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, Iterator

import ember
from ember import nn
from ember.utils.checkpoint import checkpoint as _checkpoint

__all__ = ["ActivationWrapper", "CheckpointImpl", "CheckpointWrapper", "OffloadWrapper",
           "apply_activation_checkpointing", "checkpoint_wrapper", "offload_wrapper"]

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"
_CHECKPOINT_PREFIX = _CHECKPOINT_WRAPPED_MODULE + "."


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


def _strip_prefix(module: nn.Module, state_dict: dict, prefix: str, *args: Any) -> dict:
    for key in [k for k in state_dict if k.startswith(prefix + _CHECKPOINT_PREFIX)]:
        state_dict[prefix + key[len(prefix + _CHECKPOINT_PREFIX):]] = state_dict.pop(key)
    return state_dict


def _add_prefix(module: nn.Module, state_dict: dict, prefix: str, *args: Any) -> None:
    for key in [k for k in state_dict if k.startswith(prefix)
                and not k.startswith(prefix + _CHECKPOINT_PREFIX)]:
        state_dict[prefix + _CHECKPOINT_PREFIX + key[len(prefix):]] = state_dict.pop(key)


class ActivationWrapper(nn.Module):
    """Base of the wrappers: holds the module and hides itself from names."""

    def __init__(self, mod: nn.Module) -> None:
        super().__init__()
        self._checkpoint_wrapped_module = mod
        self._register_state_dict_hook(_strip_prefix)
        self._register_load_state_dict_pre_hook(_add_prefix, with_module=True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Subclasses should implement forward().")

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key: Any) -> Any:
        return self._checkpoint_wrapped_module.__getitem__(key)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[tuple[str, nn.Parameter]]:
        for name, p in super().named_parameters(*args, **kwargs):
            yield name.replace(_CHECKPOINT_PREFIX, ""), p


class CheckpointWrapper(ActivationWrapper):
    """Runs the wrapped module's forward under activation checkpointing (non-reentrant by
    default; checkpoint_fn replaces ember.utils.checkpoint.checkpoint, with
    checkpoint_fn_kwargs)."""

    def __init__(self, mod: nn.Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                 checkpoint_fn: Callable | None = None, **checkpoint_fn_kwargs: Any) -> None:
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            self.checkpoint_fn = functools.partial(
                _checkpoint, use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT,
                **checkpoint_fn_kwargs)
        else:
            self.checkpoint_fn = functools.partial(checkpoint_fn, **checkpoint_fn_kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mod = self._checkpoint_wrapped_module
        if self.checkpoint_impl == CheckpointImpl.REENTRANT and kwargs:
            # reentrant checkpointing takes positional inputs only: bind the keywords here
            return self.checkpoint_fn(lambda *a: mod(*a, **kwargs), *args)
        return self.checkpoint_fn(mod, *args, **kwargs)


class OffloadWrapper(ActivationWrapper):
    """Runs the wrapped module's forward with its saved activations moved to (pinned) CPU
    memory until backward (ember.autograd.graph.save_on_cpu)."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with ember.autograd.graph.save_on_cpu(pin_memory=ember.cuda.is_available()):
            return self._checkpoint_wrapped_module(*args, **kwargs)


def checkpoint_wrapper(module: nn.Module,
                       checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                       checkpoint_fn: Callable | None = None,
                       **checkpoint_fn_kwargs: Any) -> CheckpointWrapper:
    """module wrapped so that its forward runs under activation checkpointing.

    >>> from ember import nn
    >>> w = checkpoint_wrapper(nn.Linear(2, 2))
    >>> sorted(w.state_dict())
    ['bias', 'weight']
    """
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def offload_wrapper(module: nn.Module) -> OffloadWrapper:
    """module wrapped so that its saved activations wait for backward in CPU memory."""
    return OffloadWrapper(module)


def apply_activation_checkpointing(model: nn.Module,
                                   checkpoint_wrapper_fn: Callable = checkpoint_wrapper,
                                   check_fn: Callable[[nn.Module], bool] = lambda _: True,
                                   auto_wrap_policy: Callable | None = None) -> None:
    """Replaces, in place and bottom-up, each submodule of model (not model itself) for which
    check_fn (or auto_wrap_policy, an FSDP wrap policy) says so by
    ``checkpoint_wrapper_fn(submodule)``.

    >>> from ember import nn
    >>> m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    >>> apply_activation_checkpointing(m, check_fn=lambda s: isinstance(s, nn.Linear))
    >>> type(m[0]).__name__
    'CheckpointWrapper'
    """
    def decide(module: nn.Module, recurse: bool, numel: int) -> Any:
        if auto_wrap_policy is not None:
            return auto_wrap_policy(module=module, recurse=recurse, nonwrapped_numel=numel)
        return True if recurse else check_fn(module)

    def unwrapped_numel(module: nn.Module) -> int:
        inside = {id(p) for m in module.modules() if isinstance(m, ActivationWrapper)
                  for p in m.parameters()}
        return sum(p.numel() for p in module.parameters() if id(p) not in inside)

    def visit(module: nn.Module) -> None:
        for name, child in list(module.named_children()):
            if isinstance(child, ActivationWrapper):
                continue
            if not decide(child, True, unwrapped_numel(child)):
                continue
            visit(child)
            if decide(child, False, unwrapped_numel(child)):
                setattr(module, name, checkpoint_wrapper_fn(child))

    visit(model)
