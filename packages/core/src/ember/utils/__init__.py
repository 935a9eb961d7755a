"""ember.utils: ``ember.utils.data`` is ``ember.data`` (from the ember-data distribution), as in
PyTorch's ``torch.utils.data``; ``cpp_extension`` builds C++ extensions (backends, kernels)
against ember's engine; ``model_zoo.load_url`` is ``ember.hub.load_state_dict_from_url``;
``dlpack`` exchanges tensors as DLPack capsules; ``benchmark`` times statements
(``Timer``, ``Measurement``, ``Compare``); ``rename_privateuse1_backend`` names the
PrivateUse1 device slot."""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name in ("data", "checkpoint", "cpp_extension", "model_zoo", "dlpack", "hooks",
                "benchmark", "_pytree", "_python_dispatch"):
        return importlib.import_module(f"ember.utils.{name}")
    raise AttributeError(f"module 'ember.utils' has no attribute {name!r}")


def rename_privateuse1_backend(name: str) -> None:
    """Names the PrivateUse1 device slot (once), so ``ember.device(name)`` and ``device=name``
    reach the backend an extension registers there (PyTorch's function of the same name).

    >>> import ember
    >>> name = ember._C._privateuse1_backend_name()  # "privateuseone" until a backend renames it
    >>> ember.utils.rename_privateuse1_backend(name)  # the current name: no change
    """
    from ember import _C

    _C._rename_privateuse1_backend(name)
