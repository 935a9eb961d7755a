"""Padding layers: constant, zero, reflection, replication and circular.

>>> import ember
>>> ember.nn.ZeroPad2d(1)(ember.ones(1, 1, 2, 2)).shape
ember.Size([1, 1, 4, 4])
"""

from __future__ import annotations

from typing import Any

from ember import Tensor
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = [
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
]


def _pad_tuple(cls: str, padding: Any, nd: int) -> tuple[int, ...]:
    if isinstance(padding, int):
        return (padding,) * (2 * nd)
    t = tuple(padding)
    if len(t) != 2 * nd:
        raise ValueError(f"{cls}: padding must be an int or {2 * nd} ints, got {padding!r}")
    return t


class _PadNd(Module):
    _nd = 0
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _pad_tuple(type(self).__name__, padding, self._nd)

    def forward(self, input: Tensor) -> Tensor:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(
                f"{self._get_name()}: expected {nd + 1}D or {nd + 2}D input, got {input.ndim}D "
                f"input of shape {tuple(input.shape)}"
            )
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with a constant.

    >>> import ember
    >>> ember.nn.ConstantPad1d(2, 3.5)
    ConstantPad1d(padding=(2, 2), value=3.5)
    """

    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with a constant.

    >>> import ember
    >>> ember.nn.ConstantPad2d((1, 0, 2, 0), 1.0)(ember.zeros(1, 1, 1)).shape
    ember.Size([1, 3, 2])
    """

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with a constant.

    >>> import ember
    >>> ember.nn.ConstantPad3d(1, 0.0)(ember.zeros(1, 1, 1, 1)).shape
    ember.Size([1, 3, 3, 3])
    """

    _nd = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last dim with zeros.

    >>> import ember
    >>> ember.nn.ZeroPad1d(1)(ember.ones(1, 2)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    """

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last 2 dims with zeros.

    >>> import ember
    >>> ember.nn.ZeroPad2d((1, 1, 2, 0))
    ZeroPad2d((1, 1, 2, 0))
    """

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last 3 dims with zeros.

    >>> import ember
    >>> ember.nn.ZeroPad3d(1)
    ZeroPad3d((1, 1, 1, 1, 1, 1))
    """

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Reflects the last dim at its edges (without repeating the edge).

    >>> import ember
    >>> ember.nn.ReflectionPad1d(2)(ember.tensor([[0.0, 1.0, 2.0]])).tolist()
    [[2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0]]
    """

    _nd = 1
    _mode = "reflect"


class ReflectionPad2d(_PadNd):
    """Reflects the last 2 dims.

    >>> import ember
    >>> ember.nn.ReflectionPad2d(1)
    ReflectionPad2d((1, 1, 1, 1))
    """

    _nd = 2
    _mode = "reflect"


class ReflectionPad3d(_PadNd):
    """Reflects the last 3 dims.

    >>> import ember
    >>> ember.nn.ReflectionPad3d(1)(ember.zeros(1, 2, 2, 2)).shape
    ember.Size([1, 4, 4, 4])
    """

    _nd = 3
    _mode = "reflect"


class ReplicationPad1d(_PadNd):
    """Repeats the edge values of the last dim.

    >>> import ember
    >>> ember.nn.ReplicationPad1d((1, 2))(ember.tensor([[0.0, 1.0]])).tolist()
    [[0.0, 0.0, 1.0, 1.0, 1.0]]
    """

    _nd = 1
    _mode = "replicate"


class ReplicationPad2d(_PadNd):
    """Repeats the edge values of the last 2 dims.

    >>> import ember
    >>> ember.nn.ReplicationPad2d(1)
    ReplicationPad2d((1, 1, 1, 1))
    """

    _nd = 2
    _mode = "replicate"


class ReplicationPad3d(_PadNd):
    """Repeats the edge values of the last 3 dims.

    >>> import ember
    >>> ember.nn.ReplicationPad3d(1)(ember.zeros(1, 1, 1, 1)).shape
    ember.Size([1, 3, 3, 3])
    """

    _nd = 3
    _mode = "replicate"


class CircularPad1d(_PadNd):
    """Wraps the last dim around.

    >>> import ember
    >>> ember.nn.CircularPad1d(1)(ember.tensor([[0.0, 1.0, 2.0]])).tolist()
    [[2.0, 0.0, 1.0, 2.0, 0.0]]
    """

    _nd = 1
    _mode = "circular"


class CircularPad2d(_PadNd):
    """Wraps the last 2 dims around.

    >>> import ember
    >>> ember.nn.CircularPad2d(1)
    CircularPad2d((1, 1, 1, 1))
    """

    _nd = 2
    _mode = "circular"


class CircularPad3d(_PadNd):
    """Wraps the last 3 dims around.

    >>> import ember
    >>> ember.nn.CircularPad3d(1)(ember.zeros(1, 2, 2, 2)).shape
    ember.Size([1, 4, 4, 4])
    """

    _nd = 3
    _mode = "circular"
