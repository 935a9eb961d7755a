"""sigmoid_backward / tanh_backward: the one-pass backward ops of sigmoid and tanh (torch's
aten ops of the same names), their own gradients (double backward) and tangents."""

from __future__ import annotations

import ember
import numpy as np
import pytest

OPS = {"sigmoid_backward": (ember.sigmoid, lambda g, y: g * (1 - y) * y),
       "tanh_backward": (ember.tanh, lambda g, y: g * (1 - y * y))}


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
def test_values_against_the_formula(name, dtype):
    rng = np.random.default_rng(0)
    g = rng.standard_normal((7, 33))
    y = np.tanh(rng.standard_normal((7, 33)))
    got = getattr(ember, name)(ember.tensor(g).to(dtype), ember.tensor(y).to(dtype))
    assert got.dtype == dtype
    want = OPS[name][1](ember.tensor(g).to(dtype).double().numpy(),
                        ember.tensor(y).to(dtype).double().numpy())
    tol = 1e-2 if dtype == ember.bfloat16 else 1e-6
    np.testing.assert_allclose(got.double().numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", OPS)
def test_against_torch_broadcast_and_strided(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    g = rng.standard_normal((5, 1, 6)).astype(np.float32)
    y = rng.random((4, 6)).astype(np.float32)
    got = getattr(ember, name)(ember.tensor(g), ember.tensor(y))
    want = getattr(torch.ops.aten, name)(torch.tensor(g), torch.tensor(y))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    gt = rng.standard_normal((5, 4)).astype(np.float32)
    got = getattr(ember, name)(ember.tensor(gt).t(), ember.tensor(y[:, :5].T.copy()).t())
    want = getattr(torch.ops.aten, name)(torch.tensor(gt).t(), torch.tensor(y[:, :5].T.copy()).t())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", OPS)
def test_activation_gradient_matches_torch(name):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((9, 11))
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    fwd = OPS[name][0]
    fwd(ex).sum().backward()
    getattr(torch, fwd.__name__)(tx).sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", OPS)
def test_double_backward_numerically(name):
    rng = np.random.default_rng(3)
    g = ember.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    y = ember.tensor(np.tanh(rng.standard_normal((4, 5))), requires_grad=True)
    op = getattr(ember, name)
    assert ember.autograd.gradcheck(op, (g, y))
    assert ember.autograd.gradgradcheck(op, (g, y))
    x = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    fwd = OPS[name][0]
    assert ember.autograd.gradgradcheck(fwd, (x,))


@pytest.mark.parametrize("name", OPS)
def test_forward_ad_tangent(name):
    import ember.autograd.forward_ad as fwad
    rng = np.random.default_rng(4)
    g, y, tg, ty = (rng.standard_normal((3, 4)) for _ in range(4))
    op = getattr(ember, name)
    with fwad.dual_level():
        out = op(fwad.make_dual(ember.tensor(g), ember.tensor(tg)),
                 fwad.make_dual(ember.tensor(y), ember.tensor(ty)))
        tangent = fwad.unpack_dual(out).tangent.numpy()
    f = OPS[name][1]
    eps = 1e-6
    numeric = (f(g + eps * tg, y + eps * ty) - f(g - eps * tg, y - eps * ty)) / (2 * eps)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-6, atol=1e-8)


def test_bad_input_names_the_op():
    with pytest.raises(TypeError, match="sigmoid_backward"):
        ember.sigmoid_backward(ember.tensor([1, 2]), ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="tanh_backward"):
        ember.tanh_backward(ember.ones(3), ember.ones(4))
