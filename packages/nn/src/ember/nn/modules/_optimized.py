"""``OptimizedModule``: what ``ember.compile(module)`` returns, as ``torch.compile`` does.

ember runs eagerly, so the wrapper only reproduces the wrapper's visible shape: the model is its
submodule ``_orig_mod`` (state_dict keys and parameter names get the ``_orig_mod.`` prefix),
calling it calls the model (with the model's hooks), and other attribute reads, writes and
deletions go to the model. ``training`` is the model's.

>>> import warnings, ember
>>> model = ember.nn.Linear(2, 3)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     compiled = ember.compile(model)
>>> compiled._orig_mod is model, compiled.in_features
(True, 2)
>>> list(compiled.state_dict())
['_orig_mod.weight', '_orig_mod.bias']
"""

from __future__ import annotations

import warnings
from collections.abc import Sized
from typing import Any

from ember.nn.modules import module as _module
from ember.nn.modules.module import Module

__all__ = ["OptimizedModule"]


class OptimizedModule(Module):
    """Wraps a module as ``ember.compile`` returns it (``torch._dynamo.eval_frame``'s class).

    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     c = ember.compile(ember.nn.ReLU())
    >>> c(ember.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    # attributes the wrapper keeps itself; every other one set on it goes to the model
    _opt_mod_attributes = frozenset({"_orig_mod", "dynamo_ctx", "forward", "__dict__",
                                     "_super_module_initialized"})

    def __init__(self, mod: Module, dynamo_ctx: Any = None) -> None:
        if not isinstance(mod, Module):
            raise TypeError(f"OptimizedModule: expected an ember.nn.Module, got "
                            f"{type(mod).__name__}")
        # first: attribute access reads _orig_mod, and Module.__init__ sets `training`
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_super_module_initialized", False)
        super().__init__()
        self.__dict__.pop("training", None)  # the model's (the property below)
        object.__setattr__(self, "_super_module_initialized", True)
        self._orig_mod = mod  # registered as the submodule (Module.__setattr__)
        self.dynamo_ctx = dynamo_ctx

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the model (its own hooks run), eagerly."""
        return self._orig_mod(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (_module._global_forward_pre_hooks or _module._global_forward_hooks or
                _module._global_backward_hooks or _module._global_backward_pre_hooks):
            warnings.warn(
                "Using `ember.compile(module)` when there are global hooks on modules (e.g., "
                "from `register_module_forward_hook`); this will cause the hooks to fire an "
                "extra time for the `OptimizedModule` created by `ember.compile(module)`. If "
                "this causes undesired behavior, please try using `module.compile()`, or use "
                "the per-module hooks instead", stacklevel=2)
        return super().__call__(*args, **kwargs)

    @property  # type: ignore[override]
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_super_module_initialized"):
            self._orig_mod.training = value

    def __len__(self) -> int:
        if isinstance(self._orig_mod, Sized):
            return len(self._orig_mod)
        raise TypeError(f"{type(self._orig_mod).__name__} does not support len()")

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self.__dict__["_modules"]["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [a for a in super().__dir__() if a not in own]

    def __reduce__(self) -> tuple[type[OptimizedModule], tuple[Module, Any]]:
        return (type(self), (self._orig_mod, self.dynamo_ctx))
