"""Shared helpers of the nn tests (imported by name; a conftest.py would collide with others)."""

from __future__ import annotations

import ember
import numpy as np

try:
    import torch
except ImportError:  # the suite runs without PyTorch; comparisons against it are skipped
    torch = None

DTYPES = {"float32": (ember.float32, "float32"), "float64": (ember.float64, "float64")}


def to_np(t) -> np.ndarray:
    """A NumPy copy of an ember or torch tensor (or of an array)."""
    if isinstance(t, np.ndarray):
        return t.copy()
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().numpy().copy()
    return np.array(t.detach().numpy(), copy=True)


def to_torch(t, requires_grad: bool = False):
    out = torch.from_numpy(to_np(t))
    return out.requires_grad_(requires_grad)


def to_ember(t, requires_grad: bool = False):
    out = ember.from_numpy(to_np(t))
    return out.requires_grad_(requires_grad) if requires_grad else out


def copy_weights(src, dst) -> None:
    """Copies an ember module's state dict into an equivalent torch module (or the reverse)."""
    dst_sd = dst.state_dict()
    src_sd = src.state_dict()
    assert list(src_sd) == list(dst_sd), (list(src_sd), list(dst_sd))
    for k, v in src_sd.items():
        arr = to_np(v)
        if isinstance(dst_sd[k], ember.Tensor):
            with ember.no_grad():
                dst_sd[k].copy_(ember.from_numpy(arr))
        else:
            with torch.no_grad():
                dst_sd[k].copy_(torch.from_numpy(arr))


def assert_close(a, b, rtol: float = 1e-12, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(to_np(a), to_np(b), rtol=rtol, atol=atol)
