"""Identity, Linear, Bilinear, Flatten, Unflatten against PyTorch with identical weights."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from ember import nn
from nn_helpers import assert_close, copy_weights, to_ember, to_np, to_torch, torch

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}


def _run_both(ours, theirs, inputs, dtype):
    """Forward and backward of both modules on the same inputs; compares everything."""
    copy_weights(ours, theirs)
    ex = [to_ember(x, requires_grad=True) for x in inputs]
    tx = [to_torch(x, requires_grad=True) for x in inputs]
    out, ref = ours(*ex), theirs(*tx)
    assert tuple(out.shape) == tuple(ref.shape)
    assert_close(out, ref, **TOL[dtype])
    g = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(dtype)
    out.backward(ember.from_numpy(g))
    ref.backward(torch.from_numpy(g))
    for a, b in zip(ex, tx):
        assert_close(a.grad, b.grad, **TOL[dtype])
    tp = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, tp[name].grad, **TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
def test_linear_matches_torch(dtype, bias, shape):
    pytest.importorskip("torch")
    dt = getattr(ember, dtype)
    ours = nn.Linear(4, 3, bias=bias, dtype=dt)
    theirs = torch.nn.Linear(4, 3, bias=bias, dtype=getattr(torch, dtype))
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    _run_both(ours, theirs, [x], dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bilinear_matches_torch(dtype):
    pytest.importorskip("torch")
    ours = nn.Bilinear(3, 4, 5, dtype=getattr(ember, dtype))
    theirs = torch.nn.Bilinear(3, 4, 5, dtype=getattr(torch, dtype))
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((2, 6, 3)).astype(dtype)
    x2 = rng.standard_normal((2, 6, 4)).astype(dtype)
    _run_both(ours, theirs, [x1, x2], dtype)


@pytest.mark.parametrize(
    "ours,theirs,shape",
    [
        (lambda: nn.Flatten(), lambda: torch.nn.Flatten(), (2, 3, 4)),
        (lambda: nn.Flatten(0, 1), lambda: torch.nn.Flatten(0, 1), (2, 3, 4)),
        (lambda: nn.Unflatten(1, (3, 4)), lambda: torch.nn.Unflatten(1, (3, 4)), (2, 12)),
        (lambda: nn.Unflatten(-1, (2, -1)), lambda: torch.nn.Unflatten(-1, (2, -1)), (2, 12)),
        (lambda: nn.Identity(3, x=1), lambda: torch.nn.Identity(3, x=1), (2, 2)),
    ],
)
def test_shape_layers_match_torch(ours, theirs, shape):
    pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal(shape)
    _run_both(ours(), theirs(), [x], "float64")


def test_linear_default_init_bounds_and_spread():
    m = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w, b = to_np(m.weight), to_np(m.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound) has std bound / sqrt(3)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert abs(w.mean()) < 0.02 * bound
    with pytest.warns(UserWarning, match="zero-element"):
        z = nn.Linear(0, 3)
    assert tuple(z.weight.shape) == (3, 0) and float(np.abs(to_np(z.bias)).max()) == 0.0


def test_linear_bad_input_messages():
    fc = nn.Linear(4, 2)
    with pytest.raises(RuntimeError, match=r"expected input of shape \(\*, 4\).*got input of shape \(3, 5\)"):
        fc(ember.zeros(3, 5))
    with pytest.raises(RuntimeError, match="got input of shape"):
        fc(ember.zeros(()))
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(-1, 2)
    bl = nn.Bilinear(2, 3, 4)
    with pytest.raises(RuntimeError, match="input2"):
        bl(ember.zeros(5, 2), ember.zeros(5, 2))
    with pytest.raises(RuntimeError, match="leading"):
        bl(ember.zeros(5, 2), ember.zeros(4, 3))
    with pytest.raises(RuntimeError, match="multiply up"):
        nn.Unflatten(1, (5, 2))(ember.zeros(2, 12))
    with pytest.raises(TypeError, match="tuple or list"):
        nn.Unflatten(1, 12)


def test_functional_linear_1d_weight():
    import ember.nn.functional as F

    out = F.linear(ember.ones(3, 2), ember.tensor([1.0, 2.0]), ember.tensor(1.0))
    assert out.tolist() == [4.0, 4.0, 4.0]


@pytest.mark.parametrize("bias_shape", [(5,), (), (1, 5), (4, 5)])
def test_linear_bias_broadcasts_as_torch(bias_shape):
    # torch adds the bias by broadcasting to the (N, out) result, so a (N, out) bias is accepted
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(4, 3)), rng.normal(size=(5, 3)), rng.normal(size=bias_shape)
    want = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    got = nn.functional.linear(ember.tensor(x), ember.tensor(w), ember.tensor(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="linear: expected bias of shape"):
        nn.functional.linear(ember.tensor(x), ember.tensor(w), ember.ones(3))
