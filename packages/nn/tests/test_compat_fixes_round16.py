"""Fixes from the sixteenth drop-in compatibility round (nn): ``F.grid_sample(mode="nearest")``
with a grid that requires grad returned a tensor with no grad_fn when the input did not require
grad (the rounded, integer source indices cut the graph), so ``autograd.grad(out.sum(), grid)``
raised "does not require grad"; PyTorch records the op and gives the grid a zero gradient
(nearest sampling is piecewise constant in the grid). Values are pinned explicitly and, where
torch is installed, against it."""

from __future__ import annotations

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
