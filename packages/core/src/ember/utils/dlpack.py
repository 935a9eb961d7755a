"""``torch.utils.dlpack``: exchanging tensors with other array libraries through DLPack
capsules (zero-copy on the CPU).

>>> import numpy as np
>>> from ember.utils.dlpack import from_dlpack, to_dlpack
>>> t = from_dlpack(np.arange(3.0))
>>> from_dlpack(to_dlpack(t)).tolist()
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

from typing import Any

from ember import Tensor

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor: Tensor) -> Any:
    """A DLPack capsule sharing ``tensor``'s memory (consumed once by ``from_dlpack``)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack: expected a Tensor, got {type(tensor).__name__}")
    return tensor.__dlpack__()


def from_dlpack(ext_tensor: Any) -> Tensor:
    """A tensor sharing the memory of ``ext_tensor``: an object with ``__dlpack__`` (a NumPy
    array, another library's tensor) or a DLPack capsule."""
    import ember

    return ember.from_dlpack(ext_tensor)
