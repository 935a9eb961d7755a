"""Shared helpers of the core tests (imported by name; conftest.py only holds fixtures)."""

import ember
import numpy as np

try:
    import torch
except ImportError:  # the suite runs without PyTorch; comparisons against it are skipped
    torch = None


def dtype_of(name: str):
    return getattr(ember, name)


def make(arr: np.ndarray, dtype: str):
    """An ember tensor of `dtype` holding arr's values (bfloat16 goes through float32)."""
    if dtype == "bfloat16":
        return ember.tensor(arr.astype(np.float32)).to(ember.bfloat16)
    return ember.tensor(arr.astype(np.dtype(dtype)))


def to_np(t) -> np.ndarray:
    """float64/int64/bool NumPy copy of an ember tensor (any dtype)."""
    if t.dtype in (ember.float16, ember.bfloat16, ember.float32):
        t = t.double()
    return np.array(t.numpy(), copy=True)


def to_torch(t):
    if t.dtype is ember.bfloat16:
        return torch.from_numpy(t.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.numpy(), copy=True))


def tol(dtype: str) -> dict:
    return {"float16": dict(rtol=2e-2, atol=2e-2), "bfloat16": dict(rtol=5e-2, atol=5e-2),
            "float32": dict(rtol=2e-5, atol=1e-5)}.get(dtype, dict(rtol=1e-10, atol=1e-10))

