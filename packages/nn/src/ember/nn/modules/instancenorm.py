"""Instance normalization layers, at the module path PyTorch gives them
(``torch.nn.modules.instancenorm``); the eager ones are defined in
:mod:`ember.nn.modules.normalization`, the lazy ones (``num_features`` from the first input)
here.

>>> import ember
>>> from ember.nn.modules.instancenorm import InstanceNorm2d
>>> InstanceNorm2d(3)(ember.randn(1, 3, 4, 4)).shape
ember.Size([1, 3, 4, 4])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.nn.modules.batchnorm import _LazyNormMixin
from ember.nn.modules.normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class _LazyInstanceNormMixin(_LazyNormMixin):
    """A lazy instance norm: affine and running statistics off by default, as the eager one;
    ``num_features`` is the channel dim of the first input (dim 0 of an unbatched one)."""

    def __init__(self: Any, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)

    def _lazy_num_features(self: Any, input: Tensor) -> int:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"{self._get_name()}: expected {nd + 1}D (unbatched) or {nd + 2}D "
                             f"input, got {input.ndim}D input of shape {tuple(input.shape)}")
        return int(input.shape[0 if input.ndim == nd + 1 else 1])


class LazyInstanceNorm1d(_LazyInstanceNormMixin, InstanceNorm1d):
    """An ``InstanceNorm1d`` whose ``num_features`` comes from its first input.

    >>> import ember
    >>> m = ember.nn.LazyInstanceNorm1d(affine=True)
    >>> m(ember.randn(2, 3, 5)).shape, m
    (ember.Size([2, 3, 5]), InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=False))
    """

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNormMixin, InstanceNorm2d):
    """An ``InstanceNorm2d`` whose ``num_features`` comes from its first input."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNormMixin, InstanceNorm3d):
    """An ``InstanceNorm3d`` whose ``num_features`` comes from its first input."""

    cls_to_become = InstanceNorm3d
