"""``LazyModuleMixin``: modules whose parameter shapes come from their first input.

A lazy module (``LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm1d``, ...) holds
``UninitializedParameter``/``UninitializedBuffer`` objects until its first forward, which
calls ``initialize_parameters(*args, **kwargs)``: the parameters get their shapes from the
input and the same initialization as the eager module, and the module turns into its
``cls_to_become`` (``LazyLinear`` becomes ``Linear``).

Convert dtype/device before that first ("dry") run; an optimizer may hold the parameters before
it (they stay the same objects). ``load_state_dict`` materializes uninitialized parameters with
the shapes of the loaded tensors.

>>> import ember
>>> net = ember.nn.Sequential(ember.nn.LazyLinear(8), ember.nn.ReLU(), ember.nn.LazyLinear(2))
>>> net(ember.ones(4, 5)).shape
ember.Size([4, 2])
>>> net[0]
Linear(in_features=5, out_features=8, bias=True)
"""

from __future__ import annotations

import itertools
from typing import Any

import ember
from ember.nn.parameter import UninitializedBuffer, is_lazy

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    """Mixin of the lazy modules (put it first in the bases).

    Subclasses create their parameters as ``UninitializedParameter`` and implement
    ``initialize_parameters(*args, **kwargs)``, which materializes them from the first input
    and initializes them. ``cls_to_become`` is the class the module takes once initialized
    (None: it keeps its class).
    """

    cls_to_become: type | None = None

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._load_hook = self.register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True
        )

    def _save_to_state_dict(self: Any, destination: dict, prefix: str, keep_vars: bool) -> None:
        # Uninitialized tensors are saved as they are (there is no data to detach).
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def _lazy_load_hook(
        self: Any,
        module: Any,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        """Materializes each uninitialized tensor that the state dict has a value for (with
        that value's shape); loading then copies the value in."""
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if t is None or key not in state_dict or not is_lazy(t):
                continue
            value = state_dict[key]
            if isinstance(value, ember.Tensor) and not is_lazy(value):
                with ember.no_grad():
                    t.materialize(tuple(value.shape))
        self._replace_materialized_buffers()

    def _replace_materialized_buffers(self: Any) -> None:
        # An ember tensor cannot change its class, so a materialized UninitializedBuffer is
        # swapped for a plain tensor alias of its data.
        for name, b in list(self._buffers.items()):
            if isinstance(b, UninitializedBuffer) and not is_lazy(b):
                plain = b.detach()
                if b.requires_grad:
                    plain.requires_grad_(True)
                self._buffers[name] = plain

    def initialize_parameters(self: Any, *args: Any, **kwargs: Any) -> None:
        """Materializes and initializes the parameters from the first forward's arguments."""
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )

    def has_uninitialized_params(self: Any) -> bool:
        """Whether some parameter or buffer of this module (not its children) is still
        uninitialized."""
        tensors = itertools.chain(self._parameters.values(), self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def _infer_parameters(self: Any, module: Any, args: tuple, kwargs: dict | None = None) -> None:
        """The forward pre-hook of the first call: initialize, then become cls_to_become."""
        module.initialize_parameters(*args, **(kwargs or {}))
        module._replace_materialized_buffers()
        if module.has_uninitialized_params():
            raise RuntimeError(
                f"module {module._get_name()} has not been fully initialized by "
                "initialize_parameters (some parameter or buffer is still uninitialized)"
            )
        module._initialize_hook.remove()
        module._load_hook.remove()
        del module._initialize_hook
        del module._load_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self: Any) -> Any:
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. Run a "
            "dummy forward pass to correctly initialize the modules"
        )

