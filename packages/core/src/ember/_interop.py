"""Conversions between ember tensors and other array libraries (NumPy, DLPack)."""

from __future__ import annotations

import warnings
from typing import Any

from ember import _C
from ember._C import Tensor
from ember._legacy import tensor as _tensor


def from_dlpack(ext_tensor: Any) -> Tensor:
    """A tensor sharing memory with any object that implements ``__dlpack__``.

    >>> import numpy as np, ember
    >>> ember.from_dlpack(np.arange(3.0)).tolist()
    [0.0, 1.0, 2.0]
    """
    if hasattr(ext_tensor, "__dlpack__"):
        capsule = ext_tensor.__dlpack__()
    else:  # a bare capsule (the legacy protocol)
        capsule = ext_tensor
    return _C._from_dlpack_capsule(capsule)


def foreign_tensor(obj: Any) -> Tensor | None:
    """An ember tensor over the memory of another framework's tensor (a torch.Tensor, a CuPy or
    JAX array: anything exporting itself through DLPack, NumPy arrays aside), or None for
    anything else. One that records gradients is detached first: DLPack carries no autograd
    history (PyTorch refuses to export such a tensor)."""
    t = type(obj)
    if isinstance(obj, Tensor) or t.__module__ == "numpy" or not hasattr(t, "__dlpack__"):
        return None
    detach = getattr(obj, "detach", None)
    if getattr(obj, "requires_grad", False) is True and callable(detach):
        obj = detach()
    return from_dlpack(obj)


_warned_read_only = False


def from_numpy(ndarray: Any) -> Tensor:
    """A tensor sharing memory with the NumPy array ``ndarray`` (writes show on both sides).
    A non-writable array is shared too, with a warning once per process (as PyTorch), and the
    tensor is read-only: an in-place write raises a RuntimeError naming the op (in PyTorch it
    changes memory NumPy promised not to change, and crashes on ``np.memmap(mode='r')``).

    >>> import numpy as np, ember
    >>> a = np.zeros(2, dtype=np.float32); t = ember.from_numpy(a); t[0] = 3.0; a.tolist()
    [3.0, 0.0]
    """
    t = _C.from_numpy(ndarray)
    global _warned_read_only
    if not _warned_read_only and not ndarray.flags.writeable:
        _warned_read_only = True
        warnings.warn(
            "The given NumPy array is not writable, and ember does not support non-writable "
            "tensors. This means writing to this tensor raises an error (in-place ops, out=, "
            "item assignment). You may want to copy the array to protect its data or make it "
            "writable before converting it to a tensor. This type of warning will be suppressed "
            "for the rest of this program.", UserWarning, stacklevel=2)
    return t


def as_tensor(data: Any, *, dtype=None, device=None) -> Tensor:
    """Like ``tensor()`` but shares memory with ``data`` when it can (tensors, NumPy arrays,
    other frameworks' tensors through DLPack).

    >>> import numpy as np, ember
    >>> a = np.zeros(2, dtype=np.float32); t = ember.as_tensor(a); a[0] = 1; t[0].item()
    1.0
    """
    foreign = foreign_tensor(data)
    if foreign is not None:
        data = foreign
    if isinstance(data, Tensor):
        if device is not None:
            data = data.to(device)
        return data if dtype is None or data.dtype is dtype else data._to_dtype(dtype)
    if type(data) is _C.UntypedStorage or type(data).__name__ == "TypedStorage":
        return _tensor(data, dtype=dtype, device=device)  # a view of the storage, as tensor()
    if device is not None and _C.device(device).type != "cpu":
        # Host memory can't be shared with a device: copy, and let tensor() report a missing one.
        return _C.tensor(data, dtype=dtype, device=device)
    if hasattr(data, "__array_interface__") and hasattr(data, "dtype"):
        try:
            t = from_numpy(data)
        except (TypeError, ValueError):
            t = None
        if t is not None:
            return t if dtype is None or t.dtype is dtype else t._to_dtype(dtype)
    return _tensor(data, dtype=dtype, device=device)  # any sequence (deque, range, ...)
