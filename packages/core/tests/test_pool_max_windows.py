"""max_pool1d/2d on the CPU: the row kernel (columns with whole windows, several outputs per
input element) and the window-by-window columns at padded edges must pick the same element as
torch, indices included: ties (the first maximum wins), NaNs (the last one wins), windows of -inf,
dilation, ceil_mode, and float64."""

from __future__ import annotations

import itertools

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

CONFIGS = [  # kernel, stride, padding, dilation, ceil_mode
    (3, 2, 1, 1, False),
    (3, 1, 1, 1, False),
    (2, 2, 0, 1, False),
    (3, 2, 0, 1, True),
    (3, 2, 1, 2, False),
    (5, 3, 2, 1, True),
    ((3, 2), (2, 1), (1, 0), 1, False),
    (4, 1, 2, 1, False),
]


def _data(shape, kind, dtype):
    rng = np.random.default_rng(3)
    if kind == "ties":  # few distinct values: many equal maxima in a window
        a = rng.integers(-2, 3, size=shape).astype(dtype)
    elif kind == "special":
        a = rng.standard_normal(shape).astype(dtype)
        flat = a.reshape(-1)
        flat[rng.integers(0, flat.size, 40)] = np.nan
        flat[rng.integers(0, flat.size, 40)] = -np.inf
        flat[rng.integers(0, flat.size, 20)] = np.inf
    elif kind == "neginf":  # every element -inf: the first of each window wins
        a = np.full(shape, -np.inf, dtype=dtype)
    else:
        a = rng.standard_normal(shape).astype(dtype)
    return a


@pytest.mark.parametrize("cfg", CONFIGS, ids=[str(c) for c in CONFIGS])
@pytest.mark.parametrize("kind", ["random", "ties", "special", "neginf"])
def test_max_pool2d_values_and_indices(cfg, kind):
    k, s, p, d, ceil = cfg
    for dtype, shape in itertools.product((np.float32, np.float64), [(2, 3, 11, 13), (1, 2, 7, 6)]):
        a = _data(shape, kind, dtype)
        ey, ei = ember.nn.functional.max_pool2d(ember.tensor(a), k, s, p, d, ceil_mode=ceil,
                                                return_indices=True)
        ty, ti = torch.nn.functional.max_pool2d(torch.tensor(a), k, s, p, d, ceil_mode=ceil,
                                                return_indices=True)
        np.testing.assert_array_equal(ey.numpy(), ty.numpy())
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())


@pytest.mark.parametrize("cfg", [(3, 2, 1, 1, False), (3, 1, 1, 1, False), (4, 3, 2, 2, True)])
@pytest.mark.parametrize("kind", ["random", "ties", "special"])
def test_max_pool1d_values_indices_and_gradient(cfg, kind):
    k, s, p, d, ceil = cfg
    a = _data((3, 4, 29), kind, np.float32)
    ex = ember.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    ey, ei = ember.nn.functional.max_pool1d(ex, k, s, p, d, ceil_mode=ceil, return_indices=True)
    ty, ti = torch.nn.functional.max_pool1d(tx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    g = np.random.default_rng(1).standard_normal(ty.shape).astype(np.float32)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
