"""Global average pooling on the CPU (every output window is its whole plane: adaptive pooling to
size 1, or a kernel covering the input) takes a fast path summing planes several at a time; it
must match torch for every plane count and size (vector body, scalar tail, planes left over after
the blocks of 8), NaN and inf, non-contiguous input, reduced-precision dtypes, and backward."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = {
    "float32": (ember.float32, torch.float32, 1e-5),
    "float64": (ember.float64, torch.float64, 1e-12),
    "float16": (ember.float16, torch.float16, 2e-3),
    "bfloat16": (ember.bfloat16, torch.bfloat16, 1e-2),
}


def _pair(shape, dtype, seed=0):
    et, tt, tol = DTYPES[dtype]
    a = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(a).to(et), torch.tensor(a).to(tt), tol


def _close(e, t, tol):
    np.testing.assert_allclose(e.double().numpy(), t.double().numpy(), rtol=tol, atol=tol,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("planes", [1, 7, 8, 9, 17])
@pytest.mark.parametrize("hw", [(1, 1), (1, 2), (3, 5), (7, 7), (8, 8), (5, 13)])
def test_adaptive_avg_pool2d_global(dtype, planes, hw):
    xe, xt, tol = _pair((1, planes) + hw, dtype)
    _close(F.adaptive_avg_pool2d(xe, 1), TF.adaptive_avg_pool2d(xt, 1), tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_1d_3d_and_avg_pool_whole_kernel(dtype):
    xe, xt, tol = _pair((3, 5, 11), dtype, 1)
    _close(F.adaptive_avg_pool1d(xe, 1), TF.adaptive_avg_pool1d(xt, 1), tol)
    _close(F.avg_pool1d(xe, 11), TF.avg_pool1d(xt, 11), tol)
    xe, xt, tol = _pair((2, 9, 3, 4, 5), dtype, 2)
    _close(F.adaptive_avg_pool3d(xe, 1), TF.adaptive_avg_pool3d(xt, 1), tol)
    xe, xt, tol = _pair((2, 11, 6, 6), dtype, 3)
    _close(F.avg_pool2d(xe, 6), TF.avg_pool2d(xt, 6), tol)
    _close(F.avg_pool2d(xe, 6, divisor_override=5), TF.avg_pool2d(xt, 6, divisor_override=5), tol)


def test_global_nan_inf_propagate():
    a = np.random.default_rng(4).standard_normal((2, 10, 7, 7)).astype(np.float32)
    a[0, 1, 3, 3] = np.nan
    a[0, 9, 6, 6] = np.nan  # in the scalar tail (49 = 6 * 8 + 1)
    a[1, 2, 0, 0] = np.inf
    a[1, 3, 0, 0] = np.inf
    a[1, 3, 4, 4] = -np.inf
    e = F.adaptive_avg_pool2d(ember.tensor(a), 1)
    t = TF.adaptive_avg_pool2d(torch.tensor(a), 1)
    _close(e, t, 1e-5)
    out = e.numpy().reshape(2, 10)
    assert np.isnan(out[0, 1]) and np.isnan(out[0, 9]) and np.isnan(out[1, 3])
    assert out[1, 2] == np.inf


def test_global_non_contiguous():
    a = np.random.default_rng(5).standard_normal((3, 7, 7, 19)).astype(np.float32)
    xe = ember.tensor(a).permute(0, 3, 1, 2)  # channels-last storage
    xt = torch.tensor(a).permute(0, 3, 1, 2)
    _close(F.adaptive_avg_pool2d(xe, 1), TF.adaptive_avg_pool2d(xt, 1), 1e-5)
    _close(F.adaptive_avg_pool2d(xe[:, ::2], 1), TF.adaptive_avg_pool2d(xt[:, ::2], 1), 1e-5)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_global_backward(dtype):
    xe, xt, tol = _pair((2, 9, 7, 7), dtype, 6)
    xe.requires_grad_(True)
    xt.requires_grad_(True)
    g = np.random.default_rng(7).standard_normal((2, 9, 1, 1))
    g[0, 0] = -0.0
    g[1, 1] = np.nan
    ge = ember.tensor(g).to(xe.dtype)
    gt = torch.tensor(g).to(xt.dtype)
    (de,) = ember.autograd.grad(F.adaptive_avg_pool2d(xe, 1), xe, ge)
    (dt,) = torch.autograd.grad(TF.adaptive_avg_pool2d(xt, 1), xt, gt)
    _close(de, dt, tol)
    (de,) = ember.autograd.grad(F.avg_pool2d(xe, 7, divisor_override=3), xe, ge)
    (dt,) = torch.autograd.grad(TF.avg_pool2d(xt, 7, divisor_override=3), xt, gt)
    _close(de, dt, tol)
