"""Communication hooks for DistributedDataParallel (``ddp.register_comm_hook(state, hook)``),
and ``register_ddp_comm_hook(DDPCommHookType.X, model, state)`` to register a built-in one by
name (``state``: the process group, None for the default).

>>> from ember.distributed.algorithms.ddp_comm_hooks import default_hooks
>>> sorted(default_hooks.__all__)[:3]
['allreduce_hook', 'bf16_compress_hook', 'bf16_compress_wrapper']
>>> DDPCommHookType.POWER_SGD.name
'POWER_SGD'
"""

from __future__ import annotations

from enum import Enum
from functools import partial
from typing import Any, Callable

from ember.distributed.algorithms.ddp_comm_hooks import (
    debugging_hooks,
    default_hooks,
    post_localSGD_hook,
    powerSGD_hook,
)

# torch's short names of the hook modules
default = default_hooks
debugging = debugging_hooks
powerSGD = powerSGD_hook

__all__ = ["DDPCommHookType", "debugging_hooks", "default_hooks", "post_localSGD_hook",
           "powerSGD_hook", "register_ddp_comm_hook"]


def _ddp_comm_hook_wrapper(comm_hook: Callable, model: Any, state: Any) -> None:
    model.register_comm_hook(state, comm_hook)


def _powerSGD_comm_hook_wrapper(comm_hook: Callable, model: Any, state: Any,  # noqa: N802
                                matrix_approximation_rank: int,
                                start_powerSGD_iter: int = 1_000) -> None:  # noqa: N803
    # as torch: state is only the process group; the PowerSGD state is made here
    ps = powerSGD_hook.PowerSGDState(process_group=state,
                                     matrix_approximation_rank=matrix_approximation_rank,
                                     start_powerSGD_iter=start_powerSGD_iter)
    model.register_comm_hook(ps, comm_hook)


class _Member:
    """An enum value that is a callable (a bare function would become a method)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class DDPCommHookType(Enum):
    """The built-in hooks by name; ``DDPCommHookType.X.value(model=ddp, state=group)``
    registers one (torch's quantization hooks are not provided)."""

    ALLREDUCE = _Member(partial(_ddp_comm_hook_wrapper, comm_hook=default_hooks.allreduce_hook))
    FP16_COMPRESS = _Member(partial(_ddp_comm_hook_wrapper,
                                    comm_hook=default_hooks.fp16_compress_hook))
    BF16_COMPRESS = _Member(partial(_ddp_comm_hook_wrapper,
                                    comm_hook=default_hooks.bf16_compress_hook))
    POWER_SGD = _Member(partial(_powerSGD_comm_hook_wrapper,
                                comm_hook=powerSGD_hook.powerSGD_hook,
                                matrix_approximation_rank=1))
    POWER_SGD_RANK2 = _Member(partial(_powerSGD_comm_hook_wrapper,
                                      comm_hook=powerSGD_hook.powerSGD_hook,
                                      matrix_approximation_rank=2))
    BATCHED_POWER_SGD = _Member(partial(_powerSGD_comm_hook_wrapper,
                                        comm_hook=powerSGD_hook.batched_powerSGD_hook,
                                        matrix_approximation_rank=1))
    BATCHED_POWER_SGD_RANK2 = _Member(partial(_powerSGD_comm_hook_wrapper,
                                              comm_hook=powerSGD_hook.batched_powerSGD_hook,
                                              matrix_approximation_rank=2))
    NOOP = _Member(partial(_ddp_comm_hook_wrapper, comm_hook=debugging_hooks.noop_hook))


def register_ddp_comm_hook(comm_hook_type: DDPCommHookType, model: Any,
                           state: Any = None) -> None:
    """Registers the built-in hook ``comm_hook_type`` on the DDP ``model`` (``state``: the
    process group, None for the default).

    Example::

        >>> register_ddp_comm_hook(DDPCommHookType.FP16_COMPRESS, ddp_model)  # doctest: +SKIP
    """
    if not isinstance(comm_hook_type, DDPCommHookType):
        raise TypeError(f"register_ddp_comm_hook: comm_hook_type must be a DDPCommHookType, "
                        f"got {type(comm_hook_type).__name__}")
    comm_hook_type.value(model=model, state=state)
