"""Tensor.grad_dtype (PyTorch 2.13): the dtype a leaf's .grad is kept in, incoming gradients
cast to it (fp32 gradients for bf16 parameters, say); None keeps any dtype."""

from __future__ import annotations

import ember
import numpy as np
import pytest


def test_default_is_the_tensor_dtype_and_leaves_only():
    x = ember.ones(2, dtype=ember.bfloat16, requires_grad=True)
    assert x.grad_dtype == ember.bfloat16
    assert ember.ones(2).grad_dtype == ember.float32  # a tensor without grad is a leaf too
    y = x * 2
    with pytest.raises(RuntimeError, match="grad_dtype can only be accessed on leaf tensors"):
        y.grad_dtype  # noqa: B018
    with pytest.raises(RuntimeError, match="grad_dtype can only be set on leaf tensors"):
        y.grad_dtype = ember.float32
    with pytest.raises(RuntimeError, match="grad_dtype must be a ember.dtype or None, but got int"):
        x.grad_dtype = 3
    x.grad_dtype = ember.int64  # accepted, as in PyTorch
    assert x.grad_dtype == ember.int64


def test_bf16_parameter_accumulates_float32_gradients():
    rng = np.random.default_rng(0)
    w64 = rng.standard_normal((4, 3))
    xs = [rng.standard_normal((5, 4)) for _ in range(3)]
    w = ember.tensor(w64, dtype=ember.bfloat16, requires_grad=True)
    w.grad_dtype = ember.float32
    for xn in xs:
        (ember.tensor(xn, dtype=ember.bfloat16) @ w).sum().backward()
    assert w.grad.dtype == ember.float32 and w.grad_dtype == ember.float32
    expected = sum(np.asarray(ember.tensor(xn, dtype=ember.bfloat16).float().tolist()).sum(0)
                   for xn in xs)[:, None].repeat(3, 1)
    np.testing.assert_allclose(np.asarray(w.grad.tolist()), expected, rtol=2e-2)


def test_none_keeps_any_assigned_dtype_and_changes_are_checked():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="assign a gradient with dtype 'float64' to a tensor "
                                           "with grad_dtype 'float32'"):
        x.grad = ember.ones(2, dtype=ember.float64)
    x.grad_dtype = None
    assert x.grad_dtype is None
    x.grad = ember.ones(2, dtype=ember.float16)
    assert x.grad.dtype == ember.float16
    with pytest.raises(RuntimeError, match="Cannot set grad_dtype to 'float32' because there is "
                                           "already a gradient with dtype 'float16'"):
        x.grad_dtype = ember.float32
    x.grad = None
    x.grad_dtype = ember.float64
    (x * 3).sum().backward()
    assert x.grad.dtype == ember.float64 and x.grad.tolist() == [3.0, 3.0]


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.ones(3, dtype=lib.bfloat16))
        p.grad_dtype = lib.float32
        (p * 0.1).sum().backward()
        (p * 0.1).sum().backward()
        assert str(p.grad.dtype).endswith("float32")
        assert abs(p.grad[0].item() - 0.2) < 2e-3
