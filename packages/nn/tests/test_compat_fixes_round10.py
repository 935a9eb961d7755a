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


# ---- torch's exception classes for shape errors (programs catch RuntimeError / ValueError) -----
@pytest.mark.parametrize("fn,exc", [
    (lambda: F.nll_loss(ember.zeros(2, 3), ember.tensor([[0], [1]])), RuntimeError),  # multi-target
    (lambda: F.nll_loss(ember.zeros(2, 3), ember.tensor([0, 1, 2])), ValueError),  # batch sizes
    (lambda: F.cross_entropy(ember.zeros(2, 3), ember.tensor(0)), ValueError),
    (lambda: F.cross_entropy(ember.zeros(2, 3, 4, 4), ember.zeros(2, 4, 5, dtype=ember.int64)),
     RuntimeError),
    (lambda: F.cross_entropy(ember.zeros(2, 3, 4), ember.tensor([0, 1])), RuntimeError),
    (lambda: F.nll_loss(ember.zeros(3), ember.tensor([0, 1])), ValueError),
    (lambda: F.nll_loss(ember.zeros(3), ember.zeros(1, 1, dtype=ember.int64)), RuntimeError),
    (lambda: F.interpolate(ember.zeros(1, 1, 4), scale_factor=2, mode="bilinear"),
     NotImplementedError),
    (lambda: F.interpolate(ember.zeros(1, 4), scale_factor=2), NotImplementedError),
    (lambda: nn.BatchNorm1d(3)(ember.zeros(2, 4)), RuntimeError),
    (lambda: nn.BatchNorm2d(3).eval()(ember.zeros(2, 4, 2, 2)), RuntimeError),
    (lambda: nn.BatchNorm1d(3, track_running_stats=False)(ember.zeros(2, 4)), RuntimeError),
    (lambda: nn.GroupNorm(2, 4)(ember.zeros(2, 6, 3)), RuntimeError),
    (lambda: nn.GroupNorm(2, 4, affine=False)(ember.zeros(2, 5, 3)), RuntimeError),
])
def test_shape_errors_raise_torchs_classes(fn, exc):
    with pytest.raises(exc) as info:
        fn()
    assert type(info.value) is exc


def test_one_element_target_of_a_1d_input():
    # torch takes a size-1 target for an unbatched (C,) input as the 0-D class index
    logp = ember.tensor([-1.0, -2.0, -3.0])
    assert F.nll_loss(logp, ember.tensor([1])).item() == 2.0
    out = F.cross_entropy(ember.tensor([1.0, 2.0, 3.0]), ember.tensor([2]), reduction="none")
    assert out.shape == () and abs(out.item() - F.cross_entropy(
        ember.tensor([1.0, 2.0, 3.0]), ember.tensor(2)).item()) < 1e-7


def test_norms_without_state_take_any_channel_count():
    # no running statistics and no affine parameters: torch normalizes the channels the input has
    x = (ember.arange(24.0).reshape(2, 6, 2) + 1).sqrt()
    y = nn.BatchNorm1d(3, affine=False, track_running_stats=False)(x)
    want = (x - x.mean((0, 2), keepdim=True)) / (x.var((0, 2), unbiased=False, keepdim=True)
                                                 + 1e-5).sqrt()
    assert ember.allclose(y, want, atol=1e-5)
    g = nn.GroupNorm(2, 4, affine=False)(x)
    assert g.shape == (2, 6, 2) and ember.allclose(g.reshape(2, 2, 6).mean(-1), ember.zeros(2, 2),
                                                    atol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda: F.pad(ember.zeros(1, 1, 4), (1,)),
    lambda: F.pad(ember.zeros(1, 1, 4), (1, 1) * 4),
    lambda: F.huber_loss(ember.zeros(2), ember.zeros(2), delta=0.0),
    lambda: F.smooth_l1_loss(ember.zeros(2), ember.zeros(2), beta=-1.0),
    lambda: F.cross_entropy(ember.zeros(2, 3), ember.tensor([0, 1]), label_smoothing=2.0),
])
def test_argument_errors_raise_runtime_error_as_torch(fn):
    with pytest.raises(RuntimeError) as info:
        fn()
    assert type(info.value) is RuntimeError
