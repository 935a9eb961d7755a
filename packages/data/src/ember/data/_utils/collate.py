"""``torch.utils.data._utils.collate``: ``collate`` dispatching on the element type through a
``collate_fn_map`` (so a program can teach the DataLoader a new type), the leaf functions of the
default map, and ``default_collate`` / ``default_convert``.

>>> import ember
>>> from ember.data._utils.collate import collate, default_collate_fn_map
>>> class Box:
...     def __init__(self, v): self.v = v
>>> def collate_box(batch, *, collate_fn_map=None):
...     return ember.tensor([b.v for b in batch])
>>> collate([Box(1), Box(2)], collate_fn_map={Box: collate_box, **default_collate_fn_map}).tolist()
[1, 2]
"""

from __future__ import annotations

import collections.abc
from typing import Any, Callable

import ember
from ember.data._collate import _collate, default_convert
from ember.data._collate import default_collate as _default_collate

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map",
           "collate_tensor_fn", "collate_numpy_array_fn", "collate_numpy_scalar_fn",
           "collate_float_fn", "collate_int_fn", "collate_str_fn",
           "default_collate_err_msg_format"]

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def default_collate(batch: list) -> Any:
    """:func:`ember.data.default_collate`."""
    return _default_collate(batch)


def collate_tensor_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Tensors stacked along a new first dim."""
    return _default_collate(list(batch))


def collate_numpy_array_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """NumPy arrays as one stacked tensor."""
    return _default_collate(list(batch))


def collate_numpy_scalar_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """NumPy scalars as a 1-D tensor."""
    return _default_collate(list(batch))


def collate_float_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Python floats as a float64 tensor."""
    return ember.tensor(list(batch), dtype=ember.float64)


def collate_int_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Python ints as an int64 tensor."""
    return ember.tensor(list(batch))


def collate_str_fn(batch: list, *, collate_fn_map: dict | None = None) -> Any:
    """Strings (and bytes) as they are."""
    return batch


def _numpy_types() -> dict:
    try:
        import numpy as np
    except ImportError:
        return {}
    return {np.ndarray: collate_numpy_array_fn, np.bool_: collate_numpy_scalar_fn,
            np.number: collate_numpy_scalar_fn}


default_collate_fn_map: dict[type | tuple, Callable] = {
    ember.Tensor: collate_tensor_fn,
    **_numpy_types(),
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch: Any, *, collate_fn_map: dict | None = None) -> Any:
    """Collates a batch: the first entry of ``collate_fn_map`` whose type the elements have
    handles them (an exact type match first), else the default collation (``default_collate``'s,
    with the map consulted again at every level of mappings, namedtuples and sequences).

    >>> from ember.data._utils.collate import collate, default_collate_fn_map
    >>> collate([{"a": 1}, {"a": 2}], collate_fn_map=default_collate_fn_map)["a"].tolist()
    [1, 2]
    """
    if not isinstance(batch, collections.abc.Sequence):
        batch = list(batch)
    return _collate(batch, "sample", collate_fn_map)
