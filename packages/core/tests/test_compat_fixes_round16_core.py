"""Fixes from the sixteenth drop-in compatibility round (core): the distributions' stable
softplus ``clamp(x, min=0) + log1p(exp(-|x|))`` had gradient 1 (or 0) at exactly x == 0, where
softplus'(0) = sigmoid(0) = 1/2 (clamp passes the gradient at its boundary, abs gives 0). So
``Bernoulli(logits=w @ X.T).log_prob(y)`` differentiated at w = 0 - the usual starting point of
HMC or MAP on a logistic regression - gave the wrong gradient; Geometric, Binomial,
NegativeBinomial, ContinuousBernoulli, RelaxedBernoulli, the Bernoulli KL and SigmoidTransform's
log-det-Jacobian shared the helper. Values are pinned explicitly and, where torch is installed,
against it; the gradients are also checked numerically in float64."""

from __future__ import annotations

import ember
import pytest
from ember.distributions import (
    Bernoulli,
    Binomial,
    ContinuousBernoulli,
    Geometric,
    NegativeBinomial,
    RelaxedBernoulli,
    kl_divergence,
)
from ember.distributions.transforms import SigmoidTransform

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

LOGITS = [0.0, 0.0, 1.0, -2.0]
TARGET = [1.0, 0.0, 1.0, 0.0]


def _cases(lib):
    d = lib.distributions
    y = lib.tensor(TARGET, dtype=lib.float64)
    return {
        "bernoulli": lambda z: d.Bernoulli(logits=z).log_prob(y).sum(),
        "bernoulli_entropy": lambda z: d.Bernoulli(logits=z).entropy().sum(),
        "geometric": lambda z: d.Geometric(logits=z).log_prob(y).sum(),
        "binomial": lambda z: d.Binomial(3, logits=z).log_prob(y).sum(),
        "negative_binomial": lambda z: d.NegativeBinomial(3, logits=z).log_prob(y).sum(),
        "continuous_bernoulli": lambda z: d.ContinuousBernoulli(logits=z).log_prob(y * 0.5 + 0.2).sum(),
        "kl_bernoulli": lambda z: d.kl_divergence(d.Bernoulli(logits=z), d.Bernoulli(logits=z * 0.5 + 0.3)).sum(),
        "sigmoid_transform": lambda z: d.transforms.SigmoidTransform().log_abs_det_jacobian(z, lib.sigmoid(z)).sum(),
        "relaxed_bernoulli": lambda z: d.RelaxedBernoulli(lib.tensor(0.5, dtype=lib.float64), logits=z).log_prob(y * 0.5 + 0.2).sum(),
    }


def _grad(lib, name):
    z = lib.tensor(LOGITS, dtype=lib.float64, requires_grad=True)
    (g,) = lib.autograd.grad(_cases(lib)[name](z), z)
    return g.tolist()


def test_bernoulli_log_prob_gradient_at_zero_logit():
    # d/dz log p(y | sigmoid(z)) = y - sigmoid(z): 1/2 and -1/2 at z = 0 (was 0 and -1)
    g = _grad(ember, "bernoulli")
    assert g == pytest.approx([0.5, -0.5, 1 - 0.7310585786300049, -0.11920292202211755], abs=1e-12)


def test_logistic_regression_posterior_gradient_at_origin():
    # the gradient HMC takes its first leapfrog step with: X^T (y - 1/2) at w = 0
    X = ember.tensor([[1.0, 2.0], [-1.0, 0.5], [0.5, -1.5]], dtype=ember.float64)
    y = ember.tensor([1.0, 0.0, 1.0], dtype=ember.float64)
    w = ember.zeros(2, dtype=ember.float64, requires_grad=True)
    lp = Bernoulli(logits=X @ w).log_prob(y).sum()
    (g,) = ember.autograd.grad(lp, w)
    assert g.tolist() == pytest.approx((X.T @ (y - 0.5)).tolist(), abs=1e-12)
    assert g.tolist() == pytest.approx([1.25, 0.0], abs=1e-12)


def test_other_distributions_at_zero_logit():
    assert _grad(ember, "geometric")[:2] == pytest.approx([0.0, 0.5], abs=1e-12)
    assert _grad(ember, "binomial")[:2] == pytest.approx([-0.5, -1.5], abs=1e-12)
    assert _grad(ember, "negative_binomial")[:2] == pytest.approx([-1.0, -1.5], abs=1e-12)
    assert _grad(ember, "sigmoid_transform")[:2] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert _grad(ember, "continuous_bernoulli")[:2] == pytest.approx([0.2, -0.3], abs=1e-9)


@pytest.mark.parametrize("name", sorted(_cases(ember)))
def test_gradients_match_finite_differences(name):
    f = _cases(ember)[name]
    g = _grad(ember, name)
    h = 1e-6
    for i in range(len(LOGITS)):
        up, down = list(LOGITS), list(LOGITS)
        up[i] += h
        down[i] -= h
        fd = (f(ember.tensor(up, dtype=ember.float64)) - f(ember.tensor(down, dtype=ember.float64))).item() / (2 * h)
        assert g[i] == pytest.approx(fd, abs=1e-6), (name, i)


def test_values_unchanged():
    z = ember.tensor([0.0, 30.0, -30.0, 1.5], dtype=ember.float64)
    y = ember.tensor([1.0, 1.0, 0.0, 0.0], dtype=ember.float64)
    lp = Bernoulli(logits=z).log_prob(y)
    assert lp.tolist() == pytest.approx([-0.6931471805599453, -9.357622968839299e-14,
                                         -9.357622968839299e-14, -1.7014132779827524], rel=1e-9)
    assert Geometric(logits=z[:1]).log_prob(ember.tensor([2.0], dtype=ember.float64)).item() == pytest.approx(-3 * 0.6931471805599453)
    assert Binomial(4, logits=z[3:]).log_prob(ember.tensor([2.0], dtype=ember.float64)).item() == pytest.approx(-2.013893642702955, rel=1e-12)
    assert NegativeBinomial(2, logits=z[:1]).log_prob(ember.tensor([1.0], dtype=ember.float64)).item() == pytest.approx(-1.3862943611198906)
    assert ContinuousBernoulli(logits=z[:1]).log_prob(ember.tensor([0.3], dtype=ember.float64)).item() == pytest.approx(0.0, abs=1e-9)
    assert RelaxedBernoulli(ember.tensor(0.5, dtype=ember.float64), logits=z[:1]).log_prob(
        ember.tensor([0.5], dtype=ember.float64)).item() == pytest.approx(-0.6931471805599453)
    assert kl_divergence(Bernoulli(logits=z[:1]), Bernoulli(logits=z[:1])).item() == pytest.approx(0.0, abs=1e-12)
    assert SigmoidTransform().log_abs_det_jacobian(z[:1], ember.sigmoid(z[:1])).item() == pytest.approx(-1.3862943611198906)


@needs_torch
@pytest.mark.parametrize("name", sorted(_cases(ember)))
def test_matches_torch(name):
    assert _grad(ember, name) == pytest.approx(_grad(torch, name), abs=1e-10)
    z = [0.0, 0.5, -1.0, 3.0]
    ours = _cases(ember)[name](ember.tensor(z, dtype=ember.float64)).item()
    theirs = _cases(torch)[name](torch.tensor(z, dtype=torch.float64)).item()
    assert ours == pytest.approx(theirs, rel=1e-10, abs=1e-12)
