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



def val(t):
    """A tensor's values as a float64 NumPy array (None stays None); works for ember and torch."""
    return None if t is None else np.asarray(t.detach().tolist(), dtype=np.float64)


def same(a, b):
    """Two logs (nested lists/tuples of arrays and plain values) agree; arrays by value."""
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    else:
        assert a == b, (a, b)


def compare(scenario):
    """Runs scenario(L) with ember and torch; the logs must match (ember's alone is returned)."""
    ours = scenario(ember)
    if torch is not None:
        same(ours, scenario(torch))
    return ours
