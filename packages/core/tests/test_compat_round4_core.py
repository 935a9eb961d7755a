"""Regression tests for core gaps the fourth round of compat programs found: torch.index_reduce
/ Tensor.index_reduce_ (values and gradients against torch, every reduction, with and without
the slices' own values) and its argument errors."""

from __future__ import annotations

import warnings

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_matches_torch(reduce, include_self, dim):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5))
    sshape = [4, 5]
    sshape[dim] = 3
    s = rng.normal(size=sshape)
    idx = np.array([1, 3, 1]) if dim == 0 else np.array([0, 4, 0])  # a repeated slice
    ex, es = ember.from_numpy(x).requires_grad_(), ember.from_numpy(s).requires_grad_()
    tx, ts = torch.from_numpy(x).requires_grad_(), torch.from_numpy(s).requires_grad_()
    eo = ember.index_reduce(ex, dim, ember.from_numpy(idx), es, reduce, include_self=include_self)
    with warnings.catch_warnings():  # torch's (once-only) beta note
        warnings.simplefilter("ignore")
        to = torch.index_reduce(tx, dim, torch.from_numpy(idx), ts, reduce,
                                include_self=include_self)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    g = rng.normal(size=tuple(to.shape))
    eo.backward(ember.from_numpy(g))
    to.backward(torch.from_numpy(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(es.grad.numpy(), ts.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_index_reduce_in_place_and_method():
    x = ember.ones(3, 2)
    out = x.index_reduce_(0, ember.tensor([2, -1]), ember.tensor([[5.0, 0.0], [7.0, 2.0]]),
                          "amax")
    assert out is x and x.tolist() == [[1.0, 1.0], [1.0, 1.0], [7.0, 2.0]]
    y = ember.full((2, 2), 2.0).index_reduce(1, ember.tensor([0]), ember.ones(2, 1) * 3, "mean")
    assert y.tolist() == [[2.5, 2.0], [2.5, 2.0]]


def test_index_reduce_errors():
    x = ember.zeros(3, 2)
    with pytest.raises(RuntimeError, match="one of prod, mean, amax or amin"):
        x.index_reduce(0, ember.tensor([0]), ember.ones(1, 2), "sum")
    with pytest.raises(IndexError, match="index out of range for dim 0 of size 3"):
        x.index_reduce(0, ember.tensor([3]), ember.ones(1, 2), "prod")
    with pytest.raises(RuntimeError, match="the index has 2 entries but source has 1"):
        x.index_reduce(0, ember.tensor([0, 1]), ember.ones(1, 2), "prod")
    with pytest.raises(RuntimeError, match="must match self of shape"):
        x.index_reduce(0, ember.tensor([0]), ember.ones(1, 3), "prod")
    with pytest.raises(IndexError, match="1-D tensor of int64 or int32"):
        x.index_reduce(0, ember.tensor([0.0]), ember.ones(1, 2), "prod")
    with pytest.raises(RuntimeError, match="same dtype"):
        x.index_reduce(0, ember.tensor([0]), ember.ones(1, 2, dtype=ember.float64), "prod")
