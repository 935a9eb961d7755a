"""Comparisons, predicates and the nonzero family on complex tensors, including ones that
require grad (their bool / integer results record no history, as in PyTorch, instead of
tripping the complex-autograd guard), against NumPy and, where installed, PyTorch. (The CUDA
backend has no complex kernels.)"""

from __future__ import annotations

import ember
import numpy as np
import pytest

Z = np.array([[1 + 2j, 0, 0 + 1j], [3 + 0j, 0, -1 - 1j]], dtype=np.complex64)
W = np.array([[1 + 2j, 1, 0 + 1j], [3 + 1j, 0, complex("nan+1j")]], dtype=np.complex64)

# name -> (ember op, NumPy reference); z, w: complex tensors (arrays for NumPy).
CASES = {
    "eq": (lambda m, z, w: z == w, lambda z, w: z == w),
    "ne": (lambda m, z, w: z != w, lambda z, w: z != w),
    "eq_scalar": (lambda m, z, w: z == 3, lambda z, w: z == 3),
    "isnan": (lambda m, z, w: m.isnan(w), lambda z, w: np.isnan(w)),
    "isinf": (lambda m, z, w: m.isinf(w), lambda z, w: np.isinf(w)),
    "isfinite": (lambda m, z, w: m.isfinite(w), lambda z, w: np.isfinite(w)),
    "logical_not": (lambda m, z, w: m.logical_not(z), lambda z, w: np.logical_not(z)),
    "logical_and": (lambda m, z, w: m.logical_and(z, w), lambda z, w: np.logical_and(z, w)),
    "logical_or": (lambda m, z, w: m.logical_or(z, w), lambda z, w: np.logical_or(z, w)),
    "logical_xor": (lambda m, z, w: m.logical_xor(z, w), lambda z, w: np.logical_xor(z, w)),
    "nonzero": (lambda m, z, w: m.nonzero(z), lambda z, w: np.argwhere(z)),
    "argwhere": (lambda m, z, w: m.argwhere(z), lambda z, w: np.argwhere(z)),
    "count_nonzero": (lambda m, z, w: m.count_nonzero(z), lambda z, w: np.count_nonzero(z)),
    "count_nonzero_dim": (lambda m, z, w: m.count_nonzero(z, dim=1),
                          lambda z, w: np.count_nonzero(z, axis=1)),
    "any": (lambda m, z, w: z.any(), lambda z, w: z.any()),
    "all": (lambda m, z, w: w.all(), lambda z, w: w.all()),
    "any_dim": (lambda m, z, w: z.any(0), lambda z, w: z.any(0)),
    "all_dim": (lambda m, z, w: w.all(1, keepdim=True), lambda z, w: w.all(1, keepdims=True)),
}


def _check(got, want):
    g = np.asarray(got.tolist())
    assert g.shape == np.shape(want) and (g == want).all(), (g, want)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(name, requires_grad):
    op, ref = CASES[name]
    z = ember.tensor(Z).requires_grad_(requires_grad)
    w = ember.tensor(W).requires_grad_(requires_grad)
    got = op(ember, z, w)
    assert got.dtype in (ember.bool, ember.int64) and not got.requires_grad
    _check(got, ref(Z, W))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    op, _ = CASES[name]
    got = op(ember, ember.tensor(Z).requires_grad_(), ember.tensor(W).requires_grad_())
    want = op(torch, torch.tensor(Z).requires_grad_(), torch.tensor(W).requires_grad_())
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    _check(got, np.asarray(want.tolist()))


def test_floating_results_keep_their_history():
    # Only bool / integer results pass without history; real and complex ones still record it.
    z = ember.tensor(Z).requires_grad_()
    assert z.abs().requires_grad and (z * 2).requires_grad
    assert not (z.abs() > 1).requires_grad and not ember.isnan(z * 2).requires_grad
    (z * 2).abs().sum().backward()
    assert z.grad is not None and z.grad.dtype == ember.complex64
