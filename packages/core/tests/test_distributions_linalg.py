"""The multivariate distributions on ember.linalg (LAPACK cholesky / triangular solves):
log_prob, entropy, KL, samples and their gradients agree with PyTorch, and a covariance that is
not positive definite raises linalg's LinAlgError as in PyTorch."""

import ember
import ember.distributions as ED
import numpy as np
import pytest
from core_helpers import needs_torch, torch

pytestmark = needs_torch


def _spd(rng, n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _both(a, grad=False):
    e = ember.tensor(a, dtype=ember.float64)
    t = torch.tensor(a, dtype=torch.float64)
    if grad:
        e.requires_grad_()
        t.requires_grad_()
    return e, t


def _close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_mvn_matches_torch(param):
    rng = np.random.default_rng(0)
    cov = _spd(rng, 4, (2,))
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[param]
    em, tm = _both(mat, grad=True)
    eloc, tloc = _both(rng.standard_normal((2, 4)), grad=True)
    ex, tx = _both(rng.standard_normal((3, 2, 4)))
    ed = ED.MultivariateNormal(eloc, **{param: em})
    td = torch.distributions.MultivariateNormal(tloc, **{param: tm})
    for name in ("scale_tril", "covariance_matrix", "precision_matrix"):
        _close(getattr(ed, name), getattr(td, name))
    el = ed.log_prob(ex).sum() + ed.entropy().sum()
    tl = td.log_prob(tx).sum() + td.entropy().sum()
    _close(el, tl)
    el.backward()
    tl.backward()
    _close(em.grad, tm.grad)
    _close(eloc.grad, tloc.grad)


def test_lowrank_mvn_and_kl_match_torch():
    rng = np.random.default_rng(1)
    eloc, tloc = _both(rng.standard_normal(5))
    ew, tw = _both(rng.standard_normal((5, 2)), grad=True)
    ed_, td_ = _both(rng.random(5) + 0.5, grad=True)
    ed = ED.LowRankMultivariateNormal(eloc, ew, ed_)
    td = torch.distributions.LowRankMultivariateNormal(tloc, tw, td_)
    ex, tx = _both(rng.standard_normal((4, 5)))
    ecov, tcov = _both(_spd(rng, 5))
    eq = ED.MultivariateNormal(eloc * 0.5, covariance_matrix=ecov)
    tq = torch.distributions.MultivariateNormal(tloc * 0.5, covariance_matrix=tcov)
    _close(ed.scale_tril, td.scale_tril)
    _close(ed.precision_matrix, td.precision_matrix)
    # KL of the full-rank pair (kl.py's triangular solves), q against p's covariance.
    ep = ED.MultivariateNormal(eloc, scale_tril=ed.scale_tril)
    tp = torch.distributions.MultivariateNormal(tloc, scale_tril=td.scale_tril)
    el = ed.log_prob(ex).sum() + ed.entropy() + ED.kl_divergence(ep, eq) + ED.kl_divergence(eq, ep)
    tl = td.log_prob(tx).sum() + td.entropy() + torch.distributions.kl_divergence(tp, tq) + (
        torch.distributions.kl_divergence(tq, tp)
    )
    _close(el, tl)
    el.backward()
    tl.backward()
    _close(ew.grad, tw.grad)
    _close(ed_.grad, td_.grad)


def test_rsample_uses_the_factor():
    rng = np.random.default_rng(2)
    ecov, _ = _both(_spd(rng, 3))
    ember.manual_seed(0)
    d = ED.MultivariateNormal(ember.zeros(3, dtype=ember.float64), covariance_matrix=ecov)
    x = d.rsample((20000,))
    np.testing.assert_allclose(np.cov(x.numpy().T), ecov.numpy(), rtol=0.1, atol=0.1)


def test_not_positive_definite_raises_like_torch():
    bad = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(torch.linalg.LinAlgError):
        torch.distributions.MultivariateNormal(torch.zeros(2), covariance_matrix=torch.tensor(bad),
                                               validate_args=False)
    with pytest.raises(ember.linalg.LinAlgError, match="positive-definite"):
        ED.MultivariateNormal(ember.zeros(2), covariance_matrix=ember.tensor(bad), validate_args=False)
    with pytest.raises(ValueError):  # the constraint check comes first when validating
        ED.MultivariateNormal(ember.zeros(2), covariance_matrix=ember.tensor(bad), validate_args=True)
