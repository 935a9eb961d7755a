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
