"""Fixes from the tenth drop-in compatibility round (nn)."""

from __future__ import annotations

import ember
import ember.nn as nn
import ember.nn.functional as F
import pytest


# ---- gaussian_nll_loss: variance shapes and messages ------------------------------------------
def test_gaussian_nll_loss_variance_shared_over_one_middle_dim():
    # an (N, 1, H, W) variance map for an (N, C, H, W) input, as torch accepts (it broadcasts)
    mu = ember.arange(24, dtype=ember.float32).reshape(2, 3, 2, 2) / 10
    tgt = ember.zeros(2, 3, 2, 2)
    var = ember.arange(1, 9, dtype=ember.float32).reshape(2, 1, 2, 2)
    got = F.gaussian_nll_loss(mu, tgt, var, reduction="none")
    full = var.expand(2, 3, 2, 2)
    want = 0.5 * (full.log() + mu.pow(2) / full)
    assert got.shape == (2, 3, 2, 2)
    assert ember.allclose(got, want)
    assert ember.allclose(nn.GaussianNLLLoss()(mu, tgt, var), want.mean())


@pytest.mark.parametrize("shape", [(2, 1, 2, 1), (3, 2, 2), (2, 3, 1, 3)])
def test_gaussian_nll_loss_rejects_other_shapes_with_torchs_message(shape):
    mu = ember.zeros(2, 3, 2, 2)
    with pytest.raises(ValueError, match=r"^var is of incorrect size$"):
        F.gaussian_nll_loss(mu, mu, ember.ones(*shape))


def test_gaussian_nll_loss_negative_variance_message():
    mu = ember.zeros(2, 3)
    with pytest.raises(ValueError, match=r"^var has negative entry/entries$"):
        F.gaussian_nll_loss(mu, mu, -ember.ones(2, 3))
    with pytest.raises(ValueError, match=r"^var has negative entry/entries$"):
        F.gaussian_nll_loss(mu, mu, -1.0)


# ---- InstanceNorm(momentum=None) ----------------------------------------------------------------
@pytest.mark.parametrize("cls,shape", [(nn.InstanceNorm1d, (3, 4, 7)), (nn.InstanceNorm2d, (2, 4, 3, 5)),
                                       (nn.LazyInstanceNorm3d, (2, 4, 3, 3, 3))])
def test_instance_norm_momentum_none_keeps_running_stats(cls, shape):
    # torch hands momentum 0.0 to instance_norm when it is None: no cumulative average as in
    # BatchNorm, the running statistics stay at their initial values
    m = cls(4, track_running_stats=True, momentum=None) if cls is not nn.LazyInstanceNorm3d \
        else cls(track_running_stats=True, momentum=None)
    for i in range(3):
        m(ember.arange(ember.Size(shape).numel(), dtype=ember.float32).reshape(shape) * (i + 1))
    assert m.running_mean.tolist() == [0.0] * 4
    assert m.running_var.tolist() == [1.0] * 4
    m2 = nn.InstanceNorm1d(4, track_running_stats=True)  # the default momentum still updates
    m2(ember.ones(3, 4, 7) * 2)
    assert ember.allclose(m2.running_mean, ember.full((4,), 0.2))
