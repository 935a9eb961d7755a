"""ember.fake_quantize_per_tensor_affine / fake_quantize_per_channel_affine (quantization-aware
training): values equal to PyTorch's (ties rounded half to even, float32 arithmetic), the
straight-through gradient, and clear errors for bad ranges, scales and zero points."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch


def _data(shape=(4, 5, 3), seed=0):
    return np.random.default_rng(seed).normal(0, 2, shape).astype(np.float32)


@needs_torch
@pytest.mark.parametrize("scale,zp,lo,hi", [(0.1, 3, -128, 127), (0.37, 0, 0, 15),
                                            (1.0, -2, -4, 3), (0.05, 0, -20, 20)])
def test_per_tensor_matches_torch_values_and_gradients(scale, zp, lo, hi):
    x = _data()
    got, want = [], []
    for lib, out in ((ember, got), (torch, want)):
        xx = lib.tensor(x, requires_grad=True)
        y = lib.fake_quantize_per_tensor_affine(xx, scale, zp, lo, hi)
        (y * lib.tensor(x)).sum().backward()
        out += [y.detach().numpy(), xx.grad.numpy()]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@needs_torch
def test_per_tensor_ties_and_tensor_qparams_match_torch():
    x = (np.arange(-40, 40) * 0.05).astype(np.float32)  # many exact ties at scale 0.1
    a = ember.fake_quantize_per_tensor_affine(ember.tensor(x), ember.tensor([0.1]),
                                              ember.tensor([1], dtype=ember.int32), -10, 10)
    b = torch.fake_quantize_per_tensor_affine(torch.tensor(x), torch.tensor([0.1]),
                                              torch.tensor([1], dtype=torch.int32), -10, 10)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@needs_torch
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_matches_torch(axis):
    x = _data()
    n = x.shape[axis]
    rng = np.random.default_rng(1)
    sc = rng.uniform(0.05, 0.3, n).astype(np.float32)
    zp = rng.integers(-3, 3, n).astype(np.int32)
    outs = []
    for lib in (ember, torch):
        xx = lib.tensor(x, requires_grad=True)
        y = lib.fake_quantize_per_channel_affine(xx, lib.tensor(sc), lib.tensor(zp), axis, -8, 7)
        (y * lib.tensor(x)).sum().backward()
        outs.append((y.detach().numpy(), xx.grad.numpy()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_straight_through_gradient():
    x = ember.tensor([-1.0, 0.26, 0.74, 3.0], requires_grad=True)
    y = ember.fake_quantize_per_tensor_affine(x, 0.5, 0, -2, 2)
    assert y.tolist() == [-1.0, 0.5, 0.5, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 0.0]  # clamped elements get no gradient
    assert y.dtype == ember.float32
    x64 = ember.tensor([0.26], dtype=ember.float64)
    assert ember.fake_quantize_per_tensor_affine(x64, 0.5, 0, -2, 2).dtype == ember.float64


@pytest.mark.parametrize("call,exc,fragment", [
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3), 0.1, 0, 5, 2), RuntimeError,
     "quant_min (5) must be less than or equal to quant_max (2)"),
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3), 0.1, 9, 0, 2), RuntimeError,
     "zero_point (9) must be between"),
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3), 0.0, 0, 0, 2), RuntimeError,
     "scale must be a positive finite number"),
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3), float("nan"), 0, 0, 2),
     RuntimeError, "scale must be a positive finite number"),
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3, dtype=ember.int64), 0.1, 0, 0,
                                                   2), RuntimeError, "floating-point input"),
    (lambda: ember.fake_quantize_per_tensor_affine(None, 0.1, 0, 0, 2), TypeError, "Tensor"),
    (lambda: ember.fake_quantize_per_tensor_affine(ember.ones(3), 0.1, 0, 0.5, 2), TypeError,
     "ints"),
    (lambda: ember.fake_quantize_per_channel_affine(ember.ones(2, 3), ember.ones(3),
                                                    ember.zeros(3), 0, -8, 7), RuntimeError,
     "length 2"),
    (lambda: ember.fake_quantize_per_channel_affine(ember.ones(2, 3), ember.ones(2),
                                                    ember.zeros(2), 2, -8, 7), IndexError,
     "axis 2 is out of range"),
    (lambda: ember.fake_quantize_per_channel_affine(ember.ones(2, 3), -ember.ones(2),
                                                    ember.zeros(2), 0, -8, 7), RuntimeError,
     "positive finite"),
    (lambda: ember.fake_quantize_per_channel_affine(ember.ones(2, 3), ember.ones(2),
                                                    ember.full((2,), 9), 0, -8, 7), RuntimeError,
     "zero_point must be between"),
])
def test_bad_arguments_raise_clearly(call, exc, fragment):
    with pytest.raises(exc, match=None) as info:
        call()
    assert fragment in str(info.value)
