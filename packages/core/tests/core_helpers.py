"""Shared helpers of the core tests (imported by name; conftest.py only holds fixtures)."""

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the suite runs without PyTorch; comparisons against it are skipped
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="compares against PyTorch (not installed)")


def dtype_of(name: str):
    return getattr(ember, name)


def make(arr, dtype: str | None = None):
    """A contiguous ember tensor of `dtype` (default: arr's own) holding arr's values (bfloat16
    goes through float32)."""
    arr = np.asarray(arr)
    dtype = dtype or str(arr.dtype)
    if dtype == "bfloat16":
        return ember.tensor(np.array(arr, dtype=np.float32, order="C")).to(ember.bfloat16)
    return ember.tensor(np.array(arr, dtype=np.dtype(dtype), order="C"))


def to_np(t) -> np.ndarray:
    """A NumPy copy of an ember (or torch) tensor's values, detached; floating dtypes widen to
    float64 (exact), the others keep theirs. Anything else (a NumPy array, a list) goes through
    np.array.

    >>> to_np(ember.tensor([1.5], dtype=ember.float16)).dtype
    dtype('float64')
    """
    if torch is not None and isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        return np.array((t.double() if t.is_floating_point() else t).numpy(), copy=True)
    if not isinstance(t, ember.Tensor):
        return np.array(t, copy=True)
    t = t.detach()
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


def load_test_backend():
    """The PrivateUse1 test backend (backend_ext/privateuse1_backend.cpp) built and imported
    through ember.utils.cpp_extension (cached), with the slot named "testdev"; None when no C++
    compiler is present."""
    import shutil
    from pathlib import Path

    if shutil.which("c++") is None:
        return None
    from ember.utils import cpp_extension

    if ember._C._privateuse1_backend_name() == "privateuseone":
        ember.utils.rename_privateuse1_backend("testdev")
    src = Path(__file__).parent / "backend_ext" / "privateuse1_backend.cpp"
    return cpp_extension.load("ember_test_backend", [str(src)])
