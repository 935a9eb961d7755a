"""``torch.nn.utils.init``: ``skip_init``, building a module without running its parameter
initialization (made on the meta device, then given uninitialized storage).

>>> import ember
>>> m = skip_init(ember.nn.Linear, 3, 2)
>>> tuple(m.weight.shape), m.weight.device.type
((2, 3), 'cpu')
"""

from __future__ import annotations

import inspect
from typing import Any


def skip_init(module_cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``module_cls(*args, **kwargs)`` with its parameters and buffers left uninitialized (the
    initializers run on the meta device, where they cost nothing); the module must take a
    ``device`` argument. ``device`` in ``kwargs`` says where the storage goes (default CPU)."""
    from ember.nn import Module

    if not isinstance(module_cls, type):  # as torch's issubclass(): a TypeError
        raise TypeError(f"skip_init: expected a Module class, got an object of type "
                        f"{type(module_cls).__name__}")
    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final_device = kwargs.pop("device", "cpu")
    kwargs["device"] = "meta"
    return module_cls(*args, **kwargs).to_empty(device=final_device)
