"""``ember._utils``: the private helpers of ``torch._utils`` that libraries call.

>>> from ember._utils import _get_device_index
>>> _get_device_index("cuda:1"), _get_device_index(3), _get_device_index("cpu", allow_cpu=True)
(1, 3, -1)
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """The index of ``device`` (an ``ember.device``, a string such as ``"cuda:1"`` or an int).

    A CPU device gives -1 when ``allow_cpu`` and is refused otherwise; a device without an
    index (``"cuda"``, ``None``) gives the current device of its kind when ``optional``."""
    import ember

    if isinstance(device, str):
        device = ember.device(device)
    if isinstance(device, ember.device):
        if device.type == "cpu":
            if not allow_cpu:
                raise ValueError(f"Expected a non cpu device, but got: {device}")
            return -1
        if device.index is not None:
            return device.index
        kind = device.type
    elif isinstance(device, int) and not isinstance(device, bool):
        return device
    elif device is None:
        kind = "cuda"
    else:
        raise ValueError(f"Expected an ember.device, a device string or an integer, but got: "
                         f"{device!r}")
    if not optional:
        raise ValueError(f"Expected a device with a specified index or an integer, but got: "
                         f"{device}")
    module = getattr(ember, kind, None)
    current = getattr(module, "current_device", None)
    if current is None:
        raise ValueError(f"_get_device_index: no current device for device type {kind!r}")
    return current()


def _holds(pred: Any, *objs: Any) -> bool:
    """Whether pred is true of any of objs (tensors, sequences of tensors, None) or of an
    item of one of them (autograd.grad's outputs / inputs / grad_outputs arguments)."""
    return any(pred(o) or (isinstance(o, (list, tuple)) and any(pred(t) for t in o))
               for o in objs)


def _flatten_dense_tensors(tensors: Any) -> Any:
    """The tensors' elements one after another in a new 1-D tensor (a flat view of the one
    tensor when there is only one), as ZeRO / apex-style code packs parameters or gradients
    into one buffer for a single collective. Differentiable.

    >>> import ember
    >>> _flatten_dense_tensors([ember.ones(2, 2), ember.arange(2.0)]).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    """
    import ember

    tensors = list(tensors)
    if not tensors:
        raise ValueError("_flatten_dense_tensors: expected a non-empty list of Tensors")
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return ember.cat([t.contiguous().view(-1) for t in tensors])


def _unflatten_dense_tensors(flat: Any, tensors: Any) -> tuple:
    """Views of the 1-D ``flat`` shaped as each of ``tensors`` in turn (the inverse of
    ``_flatten_dense_tensors``; only the shapes of ``tensors`` are used).

    >>> import ember
    >>> [t.shape for t in _unflatten_dense_tensors(ember.arange(6.0),
    ...                                            [ember.ones(2, 2), ember.ones(2)])]
    [ember.Size([2, 2]), ember.Size([2])]
    """
    out, offset = [], 0
    for t in tensors:
        n = t.numel()
        if offset + n > flat.numel():
            raise RuntimeError(f"_unflatten_dense_tensors: the tensors need more than the "
                               f"{flat.numel()} elements of flat (tensor {len(out)} of shape "
                               f"{tuple(t.shape)} ends at element {offset + n})")
        out.append(flat.narrow(0, offset, n).view_as(t))
        offset += n
    return tuple(out)
