"""default_collate / default_convert: samples -> batches, with PyTorch's rules.

Inside a DataLoader worker, tensors of at least ``SHARED_COLLATE_MIN_BYTES`` are stacked straight
into a shared-memory segment, so the batch reaches the main process without another copy.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import numbers
import re
from typing import Any, Callable, Sequence

import ember
from ember import _C
from ember._interop import foreign_tensor

__all__ = ["default_collate", "default_convert"]

# Smaller batches travel by value: a segment costs a few system calls on each side.
SHARED_COLLATE_MIN_BYTES = 32 * 1024

_np_str_obj_array_pattern = re.compile(r"[SaUO]")

_ERR_FORMAT = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

# Set in worker processes by the DataLoader (see _worker.py).
_use_shared_memory = False


def _shape_list(s: Any) -> list[int]:
    return list(s)


def _mismatch(path: str, batch: list, shape: Any) -> RuntimeError:
    for i, b in enumerate(batch):
        if tuple(b.shape) != tuple(shape):
            return RuntimeError(
                f"default_collate: cannot stack the samples' field {path}: sample 0 has shape "
                f"{_shape_list(shape)} but sample {i} has shape {_shape_list(b.shape)}; make "
                "the samples the same shape (resize, crop or pad them) or pass a collate_fn "
                "that pads them"
            )
    return RuntimeError(f"default_collate: cannot stack the samples' field {path}")


def _new_batch_tensor(shape: list, dtype: Any) -> ember.Tensor:
    if _use_shared_memory:
        n = dtype.itemsize
        for s in shape:
            n *= s
        if n >= SHARED_COLLATE_MIN_BYTES:
            return _C._empty_shared(shape, dtype, 2)  # pooled: recycled by this worker
    return ember.empty(shape, dtype=dtype)


def _check_kind(batch: Sequence, path: str, kind: Any, what: str) -> None:
    """Every sample's field is a ``kind`` like sample 0's (a TypeError naming the field and
    the first sample that differs, not an error from deep inside stacking)."""
    for i, b in enumerate(batch):
        if not isinstance(b, kind):
            raise TypeError(
                f"default_collate: the samples' field {path} is {what} in sample 0 but a "
                f"{type(b).__name__} in sample {i}; every sample must have the same structure"
            )


def _collate_tensors(batch: list, path: str) -> ember.Tensor:
    _check_kind(batch, path, ember.Tensor, "a Tensor")
    elem = batch[0]
    shape = elem.shape
    for b in batch:
        if b.shape != shape:
            raise _mismatch(path, batch, shape)
    if _use_shared_memory:
        out = _new_batch_tensor([len(batch), *shape], elem.dtype)
        return ember.stack(batch, 0, out=out)
    return ember.stack(batch, 0)


def _collate_arrays(batch: list, path: str) -> ember.Tensor:
    import numpy as np

    elem = batch[0]
    if _np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(_ERR_FORMAT.format(f"a numpy array of dtype {elem.dtype} at {path}"))
    shape = elem.shape
    dtype = elem.dtype
    same_dtype = True
    for b in batch:
        if b.shape != shape:
            raise _mismatch(path, batch, shape)
        if b.dtype != dtype:
            same_dtype = False
    if not same_dtype:
        return _collate_tensors([ember.as_tensor(b) for b in batch], path)
    # One copy: NumPy stacks straight into the (possibly shared) batch tensor.
    probe = ember.as_tensor(np.empty((0,), dtype=dtype))
    out = _new_batch_tensor([len(batch), *shape], probe.dtype)
    np.stack(batch, 0, out=out.numpy())
    return out


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _collate(batch: Sequence, path: str, fn_map: dict | None = None) -> Any:
    # `batch` is a list, or a tuple (a transposed field; strings come back as that tuple, like
    # PyTorch's). fn_map: torch's collate_fn_map (element type -> fn(batch, collate_fn_map=)),
    # consulted first at every level, the exact type before isinstance matches.
    elem = batch[0]
    elem_type = type(elem)
    if fn_map:
        fn = fn_map.get(elem_type)
        if fn is None:
            fn = next((f for kind, f in fn_map.items() if isinstance(elem, kind)), None)
        if fn is not None:
            return fn(batch, collate_fn_map=fn_map)
    if isinstance(elem, ember.Tensor):
        return _collate_tensors(batch, path)
    first = foreign_tensor(elem)  # torch tensors from torchvision's transforms, say
    if first is not None:
        return _collate_tensors([first, *(ember.as_tensor(b) for b in batch[1:])], path)
    if ember.is_tensor(elem):  # a sparse tensor (ember.sparse): refused, as PyTorch does
        raise RuntimeError(
            f"default_collate: batches of sparse tensors ({elem.layout} at {path}) are not "
            "supported by the default collate_fn; please provide a custom collate_fn (e.g. "
            "ember.stack of COO tensors, or ember.cat along a sparse dim)"
        )
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "bytes_"):
        import numpy as np

        if isinstance(elem, np.ndarray):
            return _collate_arrays(batch, path)
        if elem.shape == ():  # NumPy scalars: promoted as tensors are (np.array promoted
            # [float32, int64] to float64; PyTorch's collate gives float32)
            return ember.as_tensor(batch)
    if isinstance(elem, float):
        _check_kind(batch, path, numbers.Real, "a number")
        return ember.tensor(batch, dtype=ember.float64)
    if isinstance(elem, int):
        _check_kind(batch, path, numbers.Real, "a number")
        return ember.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        _check_kind(batch, path, collections.abc.Mapping, "a dict")
        try:
            out = {key: _collate([d[key] for d in batch], f"{path}[{key!r}]", fn_map)
                   for key in elem}
        except KeyError as e:
            raise KeyError(
                f"default_collate: key {e.args[0]!r} of {path} is missing in some samples "
                "(every sample must have the keys of the first)"
            ) from None
        if elem_type is dict:
            return out
        try:
            return elem_type(out)
        except TypeError:
            return out
    if _is_namedtuple(elem):
        for i, b in enumerate(batch):
            # zip() would drop the fields of a longer sample (or stop at a shorter one) silently
            if not isinstance(b, tuple):
                raise TypeError(
                    f"default_collate: the samples' field {path} is a {elem_type.__name__} in "
                    f"sample 0 but a {type(b).__name__} in sample {i}; every sample must have "
                    "the same structure")
            if len(b) != len(elem):
                raise RuntimeError(
                    f"each element in list of batch should be of equal size: {path} is a "
                    f"{elem_type.__name__} of {len(elem)} fields in sample 0 but has {len(b)} "
                    f"elements in sample {i}")
        return elem_type(
            *(_collate(s, f"{path}.{f}", fn_map) for f, s in zip(elem._fields, zip(*batch)))
        )
    if dataclasses.is_dataclass(elem) and not isinstance(elem, type):
        fields = [f.name for f in dataclasses.fields(elem) if f.init]
        return elem_type(
            **{f: _collate([getattr(b, f) for b in batch], f"{path}.{f}", fn_map) for f in fields}
        )
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        for i, b in enumerate(batch):
            # A str or dict of the same length would be zipped in silently, character by
            # character or key by key.
            if isinstance(b, (str, bytes, collections.abc.Mapping)):
                raise TypeError(
                    f"default_collate: the samples' field {path} is a {elem_type.__name__} in "
                    f"sample 0 but a {type(b).__name__} in sample {i}; every sample must have "
                    "the same structure")
            if len(b) != size:
                raise RuntimeError(
                    f"each element in list of batch should be of equal size: {path} has "
                    f"{size} elements in sample 0 but {len(b)} in sample {i}"
                )
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [_collate(s, f"{path}[{i}]", fn_map) for i, s in enumerate(transposed)]
        collated = [_collate(s, f"{path}[{i}]", fn_map) for i, s in enumerate(transposed)]
        if elem_type is list:
            return collated
        try:
            return elem_type(collated)
        except TypeError:
            return collated
    raise TypeError(_ERR_FORMAT.format(f"{elem_type} at {path}"))


def default_collate(batch: list) -> Any:
    """Merges a list of samples into a batch: tensors and NumPy arrays are stacked along a new
    first dimension, Python numbers become tensors, strings and bytes stay lists, and dicts,
    lists, tuples, namedtuples and dataclasses are collated field by field.

    >>> import ember
    >>> from ember.data import default_collate
    >>> default_collate([(ember.zeros(2), 1), (ember.ones(2), 2)])
    [tensor([[0., 0.],
            [1., 1.]]), tensor([1, 2])]
    """
    if not isinstance(batch, collections.abc.Sequence) or len(batch) == 0:
        if isinstance(batch, collections.abc.Sequence):
            raise ValueError("default_collate: got an empty batch")
        batch = list(batch)
    return _collate(batch, "sample")


def default_convert(data: Any) -> Any:
    """Converts NumPy arrays and scalars to tensors, through dicts, lists, tuples and
    namedtuples; everything else is returned as is (the DataLoader's collate when
    ``batch_size=None``)."""
    elem_type = type(data)
    if isinstance(data, ember.Tensor):
        return data
    foreign = foreign_tensor(data)
    if foreign is not None:
        return foreign
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "bytes_"):
        import numpy as np

        if isinstance(data, np.ndarray) and _np_str_obj_array_pattern.search(data.dtype.str):
            return data
        if isinstance(data, (np.ndarray, np.generic)):
            return ember.as_tensor(np.asarray(data))
        return data
    if isinstance(data, collections.abc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        if elem_type is dict:
            return out
        try:
            return elem_type(out)
        except TypeError:
            return out
    if _is_namedtuple(data):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        if elem_type is list:
            return converted
        try:
            return elem_type(converted)
        except TypeError:
            return converted
    return data


CollateFn = Callable[[list], Any]
