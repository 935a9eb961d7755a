"""``torch.nn.utils.memory_format``: converting the weights of a model's convolutions to a
memory format (``channels_last`` for NHWC kernels) in place.

>>> import ember
>>> m = convert_conv2d_weight_memory_format(ember.nn.Conv2d(2, 4, 3), ember.channels_last)
>>> m.weight.is_contiguous(memory_format=ember.channels_last)
True
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]

M = TypeVar("M")


def _convert(module: Any, memory_format: Any, kinds: tuple) -> Any:
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module: M, memory_format: Any) -> M:
    """Gives every Conv2d / ConvTranspose2d weight in ``module`` (itself included, recursively)
    the ``memory_format`` layout, keeping its values; returns ``module``."""
    from ember.nn import Conv2d, ConvTranspose2d

    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module: M, memory_format: Any) -> M:
    """Gives every Conv3d / ConvTranspose3d weight in ``module`` the ``memory_format`` layout
    (``channels_last_3d``); returns ``module``.

    >>> import ember
    >>> m = convert_conv3d_weight_memory_format(ember.nn.Conv3d(1, 2, 1), ember.channels_last_3d)
    >>> m.weight.is_contiguous(memory_format=ember.channels_last_3d)
    True
    """
    from ember.nn import Conv3d, ConvTranspose3d

    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
