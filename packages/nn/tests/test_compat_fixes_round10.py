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
