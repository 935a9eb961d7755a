"""Fixes from the sixteenth drop-in compatibility round (nn): ``F.grid_sample(mode="nearest")``
with a grid that requires grad returned a tensor with no grad_fn when the input did not require
grad (the rounded, integer source indices cut the graph), so ``autograd.grad(out.sum(), grid)``
raised "does not require grad"; PyTorch records the op and gives the grid a zero gradient
(nearest sampling is piecewise constant in the grid). ``F.binary_cross_entropy`` differentiated
its clamped logs, so a probability of exactly 0 or 1 (a float32 sigmoid saturates at logits
beyond ~17) gave a NaN gradient (0 * inf) where PyTorch's (p - t) / max(p (1 - p), 1e-12) gives
0 when the target agrees and a large finite value otherwise; one NaN then spreads through the
optimizer step. ``F.multi_margin_loss`` (p=1) and ``F.multilabel_margin_loss`` clamped their
hinges, which passes a gradient at an exact tie (margin - x[y] + x[i] == 0, common with integer
scores); PyTorch's kernels add a term only where it is > 0. Values are pinned explicitly and, where torch is installed, against it."""

from __future__ import annotations

import math

import ember
import pytest
from ember.nn import functional as F

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

GRID = [[[[-1.2, 0.3], [0.5, 1.1], [0.0, 0.0]]]]


def _nearest(lib, padding_mode, align_corners, input_grad=False):
    img = lib.arange(16.0).view(1, 1, 4, 4).requires_grad_(input_grad)
    grid = lib.tensor(GRID, requires_grad=True)
    out = lib.nn.functional.grid_sample(img, grid, mode="nearest", padding_mode=padding_mode,
                                        align_corners=align_corners)
    wrt = (img, grid) if input_grad else (grid,)
    grads = lib.autograd.grad((out * lib.tensor([1.0, 2.0, 3.0])).sum(), wrt)
    return out.flatten().tolist(), [g.flatten().tolist() for g in grads], out.requires_grad


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_nearest_grid_gets_zero_gradient(padding_mode, align_corners):
    vals, (g_grid,), requires = _nearest(ember, padding_mode, align_corners)
    assert requires
    assert g_grid == [0.0] * 6
    assert vals[2] == 10.0  # the centre (0, 0) rounds to pixel (2, 2) either way


def test_nearest_values_and_input_gradient():
    vals, (g_img, g_grid), _ = _nearest(ember, "zeros", True, input_grad=True)
    assert vals == [8.0, 14.0, 10.0]
    # each sampled pixel gets its output's weight: pixel 8 <- 1, 14 <- 2, 10 <- 3
    expected = [0.0] * 16
    expected[8], expected[14], expected[10] = 1.0, 2.0, 3.0
    assert g_img == expected and g_grid == [0.0] * 6
    vals, _, _ = _nearest(ember, "zeros", False)
    assert vals == [0.0, 0.0, 10.0]  # (-1.2, 0.3) and (0.5, 1.1) fall outside without corners


def test_nearest_3d_and_no_grad():
    grid = ember.zeros(1, 1, 2, 2, 3, requires_grad=True)
    vol = ember.arange(8.0).view(1, 1, 2, 2, 2)
    out = F.grid_sample(vol, grid, mode="nearest", align_corners=False)
    (g,) = ember.autograd.grad(out.sum(), grid)
    assert g.shape == (1, 1, 2, 2, 3) and g.abs().sum().item() == 0.0
    with ember.no_grad():
        assert not F.grid_sample(vol, grid, mode="nearest").requires_grad
    # a grid that does not require grad records nothing
    assert not F.grid_sample(vol, grid.detach(), mode="nearest").requires_grad


def test_nearest_nan_grid_keeps_zero_gradient():
    grid = ember.tensor([[[[float("nan"), 0.0], [0.0, 0.0]]]], requires_grad=True)
    out = F.grid_sample(ember.ones(1, 1, 3, 3), grid, mode="nearest", align_corners=True)
    (g,) = ember.autograd.grad(out.sum(), grid)
    assert g.tolist() == [[[[0.0, 0.0], [0.0, 0.0]]]]


@needs_torch
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_nearest_matches_torch(padding_mode, align_corners):
    assert _nearest(ember, padding_mode, align_corners, True) == _nearest(torch, padding_mode, align_corners, True)
    assert _nearest(ember, padding_mode, align_corners) == _nearest(torch, padding_mode, align_corners)


def _bce(lib, reduction, dtype_name):
    dt = getattr(lib, dtype_name)
    p = lib.tensor([[1.0, 0.0, 0.3], [1.0, 0.0, 0.999]], dtype=dt, requires_grad=True)
    t = lib.tensor([[1.0, 0.0, 0.2], [0.3, 0.6, 1.0]], dtype=dt, requires_grad=True)
    w = lib.tensor([0.5, 2.0, 1.0], dtype=dt)
    loss = lib.nn.functional.binary_cross_entropy(p, t, weight=w, reduction=reduction)
    gp, gt = lib.autograd.grad(loss.sum(), (p, t))
    return loss.detach().flatten().tolist(), gp.flatten().tolist(), gt.flatten().tolist()


def test_bce_saturated_probabilities_have_finite_gradients():
    _, gp, gt = _bce(ember, "sum", "float64")
    # agreeing targets at p = 0 and 1: no gradient; disagreeing: (p - t) / 1e-12 * w
    assert gp[:2] == [0.0, 0.0]
    assert gp[3] == pytest.approx(0.5 * 0.7 / 9.999999960041972e-13, rel=1e-12)
    assert gp[4] == pytest.approx(-2.0 * 0.6 / 9.999999960041972e-13, rel=1e-12)
    assert gp[2] == pytest.approx(0.1 / 0.21, rel=1e-12)
    assert gp[5] == pytest.approx(-0.001 / (0.999 * 0.001), rel=1e-9)
    # d/dt = -logit(p) * w
    assert gt[2] == pytest.approx(-math.log(0.3 / 0.7), rel=1e-12)
    assert gt[0] == float("-inf") and gt[1] == float("inf")


def test_bce_of_saturated_sigmoid_trains():
    x = ember.tensor([30.0, -30.0, 0.5], requires_grad=True)
    loss = ember.nn.BCELoss()(ember.sigmoid(x), ember.tensor([1.0, 0.0, 1.0]))
    (g,) = ember.autograd.grad(loss, x)
    assert not g.isnan().any()
    assert g.tolist() == pytest.approx([0.0, 2.9188374197556925e-15, -0.12584689259529114], rel=1e-6)


def test_bce_mean_and_double_backward():
    p = ember.tensor([0.2, 0.7], dtype=ember.float64, requires_grad=True)
    t = ember.tensor([0.0, 1.0], dtype=ember.float64)
    loss = F.binary_cross_entropy(p, t)
    (g,) = ember.autograd.grad(loss, p, create_graph=True)
    assert g.tolist() == pytest.approx([0.625, -0.7142857142857143], rel=1e-12)
    (h,) = ember.autograd.grad(g.sum(), p)
    # d/dp of (p - t) / (2 p (1 - p)): (p^2 - 2pt + t) / (2 p^2 (1 - p)^2)
    assert h.tolist() == pytest.approx([0.78125, 1.0204081632653061], rel=1e-9)
    with ember.no_grad():
        assert not F.binary_cross_entropy(p, t).requires_grad


@needs_torch
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_bce_matches_torch(reduction, dtype_name):
    ours, theirs = _bce(ember, reduction, dtype_name), _bce(torch, reduction, dtype_name)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-6, abs=1e-12)
    assert ours[1] == pytest.approx(theirs[1], rel=1e-6)
    assert ours[2] == pytest.approx(theirs[2], rel=1e-6)


TIES = [[1.0, 2.0, 0.5], [2.0, 1.0, 1.5]]  # row 0: 1 - 2 + 1 == 0, an exact tie


def _margin(lib, which):
    x = lib.tensor(TIES, dtype=lib.float64, requires_grad=True)
    F_ = lib.nn.functional
    if which == "multi_margin":
        loss = F_.multi_margin_loss(x, lib.tensor([1, 0]))
    elif which == "multi_margin_p2":
        loss = F_.multi_margin_loss(x, lib.tensor([1, 0]), p=2)
    else:
        loss = F_.multilabel_margin_loss(x, lib.tensor([[1, -1, 0], [0, -1, 1]]))
    (g,) = lib.autograd.grad(loss, x)
    return loss.item(), g.flatten().tolist()


@pytest.mark.parametrize("which", ["multi_margin", "multilabel_margin"])
def test_margin_losses_no_gradient_at_a_tie(which):
    loss, g = _margin(ember, which)
    # only row 1's pair (0, 2) is active: 1 - 2 + 1.5 = 0.5, over 3 classes and 2 rows
    assert loss == pytest.approx(0.5 / 3 / 2, rel=1e-12)
    assert g == pytest.approx([0.0, 0.0, 0.0, -1 / 6, 0.0, 1 / 6], abs=1e-12)


def test_multi_margin_p2_at_a_tie():
    loss, g = _margin(ember, "multi_margin_p2")
    assert loss == pytest.approx(0.25 / 3 / 2, rel=1e-12)
    assert g == pytest.approx([0.0, 0.0, 0.0, -1 / 6, 0.0, 1 / 6], abs=1e-12)


@needs_torch
@pytest.mark.parametrize("which", ["multi_margin", "multi_margin_p2", "multilabel_margin"])
def test_margin_losses_match_torch(which):
    ours, theirs = _margin(ember, which), _margin(torch, which)
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12)
    assert ours[1] == pytest.approx(theirs[1], abs=1e-12)
