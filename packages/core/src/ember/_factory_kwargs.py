"""The ``layout=`` keyword of the tensor factories (``zeros``, ``empty``, ``arange``, ...,
``zeros_like``, ``Tensor.new_zeros``, ...), as PyTorch takes it.

``None`` and ``ember.strided`` (and ``ember.jagged``, which PyTorch's factories also take for a
dense result) give the usual dense tensor. A sparse layout makes an all-zero sparse tensor from
``zeros`` / ``empty`` and their ``_like`` / ``new_`` forms; the other factories refuse it, as
PyTorch does (there is no sparse ``ones`` or ``arange``).

>>> import ember
>>> ember.zeros(2, layout=ember.strided).tolist()
[0.0, 0.0]
"""

from __future__ import annotations

from typing import Any, Callable

# the factories whose sparse-layout result is all zeros (what an empty sparse tensor holds)
_ZERO_FACTORIES = ("zeros", "empty", "zeros_like", "empty_like", "new_zeros", "new_empty")


def take_layout(name: str, kwargs: dict[str, Any]) -> Any:
    """Pops ``layout`` from ``kwargs``: None for a dense result, else the sparse layout asked
    for. Anything but an ``ember.layout`` is a TypeError."""
    from ember._toplevel import jagged, layout, strided

    value = kwargs.pop("layout", None)
    if value is None or value is strided or value is jagged:
        return None
    if not isinstance(value, layout):
        raise TypeError(f"{name}(): argument 'layout' must be ember.layout, not "
                        f"{type(value).__name__}")
    return value


def sparse_result(name: str, fn: Callable[..., Any], layout: Any, args: tuple,
                  kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` in a sparse ``layout``: an all-zero sparse tensor of the dense
    result's shape, dtype and device (``zeros`` / ``empty`` and their variants only)."""
    if name not in _ZERO_FACTORIES:
        raise NotImplementedError(f"{name}(...) is not implemented for the {layout} layout "
                                  "(only zeros and empty make sparse tensors)")
    requires_grad = kwargs.pop("requires_grad", False)
    out = fn(*args, **kwargs).zero_().to_sparse(layout=layout)
    return out.requires_grad_(True) if requires_grad else out


def like_of_sparse(name: str, args: tuple) -> bool:
    """A ``*_like`` of a sparse tensor: those handle ``layout=`` themselves (a layout change
    included)."""
    from ember._toplevel import strided

    layout = getattr(args[0], "layout", strided) if args else strided
    return name.endswith("_like") and layout is not strided and layout is not None


def with_layout(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` (a factory or a ``Tensor.new_*`` method) also taking ``layout=`` and
    ``pin_memory=False``."""

    def factory(*args: Any, **kwargs: Any) -> Any:
        if "layout" in kwargs:
            sparse = take_layout(name, kwargs)
            if sparse is not None:
                return sparse_result(name, fn, sparse, args, kwargs)
        if kwargs.get("pin_memory", None) is False:
            del kwargs["pin_memory"]
        return fn(*args, **kwargs)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = fn.__doc__
    factory.__wrapped__ = fn  # type: ignore[attr-defined]
    return factory
