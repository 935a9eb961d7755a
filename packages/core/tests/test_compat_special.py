"""ember.special and ember.lgamma/digamma/xlogy (issue 15: Bayesian and VAE programs call
torch.lgamma, torch.special.*), values and gradients against torch in float64."""

from __future__ import annotations

import ember
import numpy as np
import pytest

X = np.array([-3.7, -1.2, -0.3, 0.0, 0.4, 1.0, 2.5, 7.0])
P = np.array([1e-6, 0.02, 0.3, 0.5, 0.77, 0.999])
POS = np.array([0.05, 0.5, 1.0, 2.5, 11.0, 40.0])

UNARY = {
    "expit": X, "logit": P, "erf": X, "erfc": X, "erfinv": 2 * P - 1, "gammaln": POS,
    "digamma": POS, "psi": POS, "entr": np.array([-1.0, 0.0, 0.3, 1.0, 2.0]),
    "ndtr": X, "ndtri": P, "log_ndtr": np.array([-30.0, -8.0, -5.5, -5.0, -1.0, 0.0, 3.0]),
    "sinc": X, "exp2": X, "expm1": X, "log1p": POS,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_torch(name):
    torch = pytest.importorskip("torch")
    a = UNARY[name]
    got = getattr(ember.special, name)(ember.from_numpy(a)).numpy()
    want = getattr(torch.special, name)(torch.from_numpy(a)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["expit", "erf", "gammaln", "digamma", "ndtr", "log_ndtr",
                                  "sinc", "entr", "xlogy", "xlog1py"])
def test_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    a = POS if name in ("gammaln", "digamma", "entr") else np.array([-6.0, -0.7, 0.3, 1.9])
    e = ember.from_numpy(a.copy()).requires_grad_(True)
    t = torch.from_numpy(a.copy()).requires_grad_(True)
    if name in ("xlogy", "xlog1py"):
        y = np.abs(a) + 0.5
        ge = getattr(ember.special, name)(e, ember.from_numpy(y))
        gt = getattr(torch.special, name)(t, torch.from_numpy(y))
    else:
        ge, gt = getattr(ember.special, name)(e), getattr(torch.special, name)(t)
    ge.sum().backward()
    gt.sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-10)


def test_binary_and_reductions_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 0.0, 1.5, -2.0, 3.0, np.nan])
    y = np.array([0.0, np.nan, 2.0, 0.5, 0.0, 1.0])
    for name in ("xlogy", "xlog1py"):
        got = getattr(ember.special, name)(ember.from_numpy(x), ember.from_numpy(y)).numpy()
        want = getattr(torch.special, name)(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
        got = getattr(ember.special, name)(2.0, ember.from_numpy(y)).numpy()
        want = getattr(torch.special, name)(2.0, torch.from_numpy(y)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    a, xx = np.array([0.5, 1.0, 3.0, 10.0]), np.array([0.2, 1.0, 2.5, 12.0])
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_allclose(
            getattr(ember.special, name)(ember.from_numpy(a), ember.from_numpy(xx)).numpy(),
            getattr(torch.special, name)(torch.from_numpy(a), torch.from_numpy(xx)).numpy(),
            rtol=1e-9)
    m = np.random.default_rng(0).standard_normal((3, 4))
    for name in ("logsumexp", "softmax", "log_softmax"):
        np.testing.assert_allclose(getattr(ember.special, name)(ember.from_numpy(m), 1).numpy(),
                                   getattr(torch.special, name)(torch.from_numpy(m), 1).numpy(),
                                   rtol=1e-12)
    np.testing.assert_array_equal(ember.special.round(ember.from_numpy(m), decimals=2).numpy(),
                                  torch.special.round(torch.from_numpy(m), decimals=2).numpy())


def test_top_level_and_methods_match_torch():
    torch = pytest.importorskip("torch")
    e, t = ember.from_numpy(POS.copy()), torch.from_numpy(POS.copy())
    np.testing.assert_allclose(ember.lgamma(e).numpy(), torch.lgamma(t).numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(e.lgamma().numpy(), t.lgamma().numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(ember.digamma(e).numpy(), torch.digamma(t).numpy(), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(e.xlogy(e).numpy(), t.xlogy(t).numpy(), rtol=1e-12)
    e2, t2 = e.clone(), t.clone()
    e2.lgamma_()
    t2.lgamma_()
    np.testing.assert_allclose(e2.numpy(), t2.numpy(), rtol=1e-10, atol=1e-13)
    # float32 in, float32 out; integers are promoted to the default dtype
    assert ember.lgamma(ember.tensor([3.0])).dtype == ember.float32
    assert ember.special.ndtr(ember.tensor([0, 1])).dtype == ember.float32


def test_errors():
    with pytest.raises(TypeError, match=r"special.erf\(\): expected a Tensor, got str"):
        ember.special.erf("x")
    with pytest.raises(TypeError, match="at least one Tensor"):
        ember.special.xlogy(1.0, 2.0)
