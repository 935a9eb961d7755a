"""``ember._dynamo.config``: PyTorch's graph-capture settings, kept as assigned (ember runs
eagerly, so none changes what a program computes). Reading or assigning a name that
``torch._dynamo.config`` does not have raises AttributeError, as there.

>>> import ember._dynamo.config as config
>>> config.suppress_errors
False
>>> config.suppress_errors = True
"""

from __future__ import annotations

import sys
import types
from typing import Any

# PyTorch's defaults for the settings training scripts commonly change
_DEFAULTS: dict[str, Any] = {
    "suppress_errors": False,
    "verbose": False,
    "cache_size_limit": 8,
    "recompile_limit": 8,
    "accumulated_cache_size_limit": 256,
    "accumulated_recompile_limit": 256,
    "optimize_ddp": True,
    "capture_scalar_outputs": False,
    "capture_dynamic_output_shape_ops": False,
    "automatic_dynamic_shapes": True,
    "assume_static_by_default": True,
    "force_parameter_static_shapes": True,
    "inline_inbuilt_nn_modules": True,
    "specialize_int": False,
    "dynamic_shapes": True,
    "guard_nn_modules": False,
    "allow_unspec_int_on_nn_module": False,
    "skip_nnmodule_hook_guards": True,
    "error_on_recompile": False,
    "raise_on_ctx_manager_usage": True,
    "compiled_autograd": False,
}


class _ConfigModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name in _DEFAULTS:
            return _DEFAULTS[name]
        raise AttributeError(f"ember._dynamo.config.{name} does not exist")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__") or name in ("_DEFAULTS", "_ConfigModule", "sys", "types",
                                             "Any", "annotations"):
            return super().__setattr__(name, value)
        if name not in _DEFAULTS:
            raise AttributeError(f"ember._dynamo.config.{name} does not exist")
        _DEFAULTS[name] = value


sys.modules[__name__].__class__ = _ConfigModule
