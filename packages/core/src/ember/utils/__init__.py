"""ember.utils: ``ember.utils.data`` is ``ember.data`` (from the ember-data distribution), as in
PyTorch's ``torch.utils.data``; ``cpp_extension`` builds C++ extensions (backends, kernels)
against ember's engine; ``model_zoo.load_url`` is ``ember.hub.load_state_dict_from_url``;
``dlpack`` exchanges tensors as DLPack capsules; ``benchmark`` times statements
(``Timer``, ``Measurement``, ``Compare``); ``rename_privateuse1_backend`` names the
PrivateUse1 device slot."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str):
    if name in ("data", "checkpoint", "cpp_extension", "model_zoo", "dlpack", "hooks",
                "benchmark", "_pytree", "_python_dispatch", "weak"):
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


def swap_tensors(t1: Any, t2: Any) -> None:
    """Swaps the contents of two tensors in place: afterwards ``t1`` (the same Python object) has
    ``t2``'s data, metadata, autograd state, class (``Parameter`` or not) and attributes, and
    ``t2`` has ``t1``'s (PyTorch's ``torch.utils.swap_tensors``). Refused while anything else
    refers to either tensor: a weak reference, a view, an autograd graph that saved it.

    >>> import ember
    >>> a, b = ember.zeros(2), ember.ones(3)
    >>> ember.utils.swap_tensors(a, b)
    >>> a.tolist(), b.tolist()
    ([1.0, 1.0, 1.0], [0.0, 0.0])
    """
    import weakref

    from ember import _C, Tensor

    for name, t in (("t1", t1), ("t2", t2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"swap_tensors: expected {name} to be a tensor, got "
                            f"{type(t).__name__}")
        if weakref.getweakrefcount(t) > 0:
            raise RuntimeError(f"Cannot swap {name} because it has weakref associated with it")
    if t1 is t2:
        return
    if getattr(type(t1), "__slots__", ()) != getattr(type(t2), "__slots__", ()):
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    c1, c2, d1, d2 = type(t1), type(t2), t1.__dict__, t2.__dict__
    # The C++ swap first: it is the step that can refuse, and nothing has changed until it passes.
    _C._swap_tensor_impl(t1, t2)
    t1.__class__, t2.__class__ = c2, c1
    t1.__dict__, t2.__dict__ = d2, d1
