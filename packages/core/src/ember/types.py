"""``ember.types``: the type aliases PyTorch's ``torch.types`` defines, for annotating code
that works on ember tensors (``Number``, ``Device``, ``_size``, ``_dtype``, ...).

ember has no symbolic shapes, so the "int-like" aliases are plain ``int``/``float``/``bool``
and ``py_sym_types`` is empty; ``_dispatchkey`` is ``str`` (ember has no DispatchKey enum)
and there is no ``_qscheme`` (no quantized tensors).

>>> import ember
>>> from ember.types import Device, Number, _size
>>> def zeros(size: _size, device: Device = None) -> ember.Tensor:
...     return ember.zeros(size, device=device)
>>> zeros([2]).tolist()
[0.0, 0.0]
>>> isinstance(3, Number.__args__)
True
"""

from __future__ import annotations

import os
from typing import IO, Protocol, Sequence, TypeAlias, Union

from ember._C import Tensor, device, dtype
from ember._size import Size
from ember._toplevel import layout

__all__ = [
    "Number", "Device", "FileLike", "Storage", "IntLikeType", "FloatLikeType",
    "BoolLikeType", "py_sym_types",
]

# Python's own types under torch.types' names (used in signatures of generated stubs).
_bool = bool
_bytes = bytes
_complex = complex
_float = float
_int = int
_str = str

_dtype: TypeAlias = dtype
_device: TypeAlias = device
_layout: TypeAlias = layout
_dispatchkey: TypeAlias = str  # ember has no DispatchKey enum; PyTorch also accepts a str

_size: TypeAlias = Union[Size, list[int], tuple[int, ...]]
_symsize: TypeAlias = Union[Size, Sequence[int]]

IntLikeType: TypeAlias = int  # no SymInt in ember: sizes are always concrete
FloatLikeType: TypeAlias = float
BoolLikeType: TypeAlias = bool
py_sym_types: tuple[type, ...] = ()

_TensorOrTensors: TypeAlias = Union[Tensor, Sequence[Tensor]]
_TensorOrOptionalTensors: TypeAlias = Union[Tensor, None, Sequence[Union[Tensor, None]]]
_TensorOrTensorsOrGradEdge: TypeAlias = _TensorOrTensors

_Number = (bool, int, float)
Number: TypeAlias = Union[int, float, bool]
# A device argument: a device, a string such as "cuda:0", a CUDA index, or None (default).
Device: TypeAlias = Union[device, str, int, None]

FileLike: TypeAlias = Union[str, os.PathLike, IO[bytes]]


class Storage(Protocol):
    """What a storage offers (``ember.UntypedStorage``; for annotations, as
    ``torch.types.Storage``)."""

    device: device

    def nbytes(self) -> int: ...

    def data_ptr(self) -> int: ...
