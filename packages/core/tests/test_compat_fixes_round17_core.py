"""Fixes from the seventeenth drop-in compatibility round (core): NumPy arrays as the right
operand of a tensor's operators. A tensor's ``__mul__`` (and friends) declines an ndarray, so
NumPy's reflected operator computes; PyTorch's ``Tensor.__array_wrap__`` turns that result back
into a tensor (boolean results as uint8), so ``t * ndarray``, ``t += ndarray`` and ``np.exp(t)``
are tensors there, and ember returned ndarrays. ``t == ndarray`` is converted natively in
PyTorch (a bool tensor); ember's ``__eq__`` declined and Python fell back to identity - a silent
``False``. NumPy reads the tensor through the buffer protocol, so nothing refused a tensor that
requires grad (``numpy()`` does in both libraries): the ufunc result now raises the same
RuntimeError. ``torch.norm(W, p='nuc')`` / ``W.norm('nuc')`` - the nuclear-norm regularizer of
low-rank models - raised NotImplementedError; it is ``linalg.matrix_norm(ord='nuc')`` over the two
dims (all dims when None). Values are pinned explicitly and, where torch is installed, against
it; the nuclear norm's gradient is checked numerically in float64."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _cases(lib):
    return {
        "mul": lambda: lib.ones(2) * np.array([2.0, 3.0]),
        "add f32": lambda: lib.ones(2) + np.array([1.0, 2.0], dtype=np.float32),
        "sub int": lambda: lib.ones(2, dtype=lib.float64) - np.arange(2),
        "matmul": lambda: (lib.ones(2, 2) @ np.ones((2, 2))).flatten(),
        "pow": lambda: lib.full((2,), 2.0) ** np.array([2.0, 3.0]),
        "and": lambda: lib.arange(3) & np.array([1, 1, 0]),
        "0-d": lambda: lib.ones(1) * np.array(2.0),
        "exp": lambda: np.exp(lib.tensor([0.0, 1.0])),
        "exp scalar": lambda: np.exp(lib.tensor(1.0)),
        "sqrt": lambda: np.sqrt(lib.tensor([4.0, 9.0])),
        "greater": lambda: np.greater(lib.tensor([1.0, -1.0]), 0),
        "eq": lambda: lib.tensor([0, 1, 1]) == np.array([0, 1, 0]),
        "eq float": lambda: lib.tensor([0.5, 1.0]) == np.array([0.5, 2.0]),
    }


EXPECTED = {
    "mul": ("float64", [2.0, 3.0]),
    "add f32": ("float32", [2.0, 3.0]),
    "sub int": ("float64", [1.0, 0.0]),
    "matmul": ("float64", [2.0, 2.0, 2.0, 2.0]),
    "pow": ("float64", [4.0, 8.0]),
    "and": ("int64", [0, 1, 0]),
    "0-d": ("float64", [2.0]),
    "exp": ("float32", [1.0, 2.7182817459106445]),
    "exp scalar": ("float32", 2.7182817459106445),
    "sqrt": ("float32", [2.0, 3.0]),
    "greater": ("uint8", [1, 0]),
    "eq": ("bool", [True, True, False]),
    "eq float": ("bool", [True, False]),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_ndarray_operand_gives_a_tensor(case):
    out = _cases(ember)[case]()
    assert isinstance(out, ember.Tensor), type(out)
    dtype, values = EXPECTED[case]
    assert out.dtype == getattr(ember, dtype)
    assert out.tolist() == pytest.approx(values)


@needs_torch
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_ndarray_operand_matches_torch(case):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch's one-argument __array_wrap__
        ref = _cases(torch)[case]()
    got = _cases(ember)[case]()
    assert isinstance(ref, torch.Tensor)
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    assert got.tolist() == pytest.approx(ref.tolist())


def test_inplace_add_of_ndarray_rebinds_to_a_new_tensor():
    t = ember.zeros(3)
    alias = t
    t += np.ones(3)
    # the in-place operator declines, Python falls back to t = t + array (as in PyTorch)
    assert isinstance(t, ember.Tensor) and t.dtype == ember.float64
    assert t.tolist() == [1.0, 1.0, 1.0] and alias.tolist() == [0.0, 0.0, 0.0]


def test_ufunc_refuses_a_tensor_that_requires_grad():
    p = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        p * np.ones(2)
    with pytest.raises(RuntimeError, match="requires grad"):
        np.exp(p)
    with ember.no_grad():
        assert (p * np.ones(2)).tolist() == [1.0, 1.0]
    assert np.exp(p.detach()).tolist() == pytest.approx([np.e, np.e])


def test_eq_with_ndarray_checks_shapes_and_keeps_other_operands():
    with pytest.raises(RuntimeError):
        ember.ones(2) == np.ones(3)
    assert (ember.ones(2) == 1.0).tolist() == [True, True]
    assert (ember.ones(2) == ember.ones(2)).tolist() == [True, True]
    assert (ember.ones(2) == "a") is False
    assert (ember.ones(2) == None) is False  # noqa: E711


A = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]


def test_nuclear_norm_values():
    a = ember.tensor(A)
    expected = 24.364638  # the sum of the singular values
    assert ember.norm(a, p="nuc").item() == pytest.approx(expected, rel=1e-6)
    assert a.norm("nuc").item() == pytest.approx(expected, rel=1e-6)
    assert ember.norm(a, "nuc", dim=(1, 0)).item() == pytest.approx(expected, rel=1e-6)
    assert ember.norm(a, "nuc", keepdim=True).shape == (1, 1)
    b = ember.arange(24.0).view(2, 3, 4)
    assert ember.norm(b, "nuc", dim=(1, 2)).tolist() == pytest.approx([24.364638, 62.495085],
                                                                      rel=1e-6)
    assert ember.norm(b, "nuc", dim=(-1, 0)).shape == (3,)
    assert ember.norm(b, "nuc", dim=(1, 2), keepdim=True).shape == (2, 1, 1)
    assert ember.norm(a, "nuc").dtype == ember.float32
    assert ember.norm(a, "nuc", dtype=ember.float64).dtype == ember.float64
    # the nuclear norm of a rank-one matrix is its Frobenius norm
    u, v = ember.tensor([1.0, 2.0, 2.0]), ember.tensor([3.0, 4.0])
    assert ember.norm(ember.outer(u, v), "nuc").item() == pytest.approx(15.0, rel=1e-6)


def test_nuclear_norm_rejects_bad_inputs():
    with pytest.raises(RuntimeError, match="nuc"):
        ember.norm(ember.zeros(2, 3, 4), p="nuc")  # three dims, no dim given
    with pytest.raises(RuntimeError, match="nuc"):
        ember.norm(ember.zeros(2, 3), p="nuc", dim=(0,))
    with pytest.raises(RuntimeError, match="nuc"):
        ember.norm(ember.zeros(2, 3), p="nuc", dim=(1, -1))
    with pytest.raises(RuntimeError, match="floating point"):
        ember.norm(ember.zeros(2, 3, dtype=ember.int64), p="nuc")
    with pytest.raises(RuntimeError, match="not supported"):
        ember.norm(ember.zeros(2, 3), p="bogus")


def test_nuclear_norm_gradient_is_u_vt_and_matches_finite_differences():
    w = ember.tensor([[2.0, 0.5, -1.0], [0.3, 1.5, 0.2], [-0.7, 0.1, 0.9], [1.1, -0.4, 0.6]],
                     dtype=ember.float64, requires_grad=True)
    ember.norm(w, p="nuc").backward()
    u, _, vh = ember.linalg.svd(w.detach(), full_matrices=False)
    assert ember.allclose(w.grad, u @ vh, atol=1e-12)
    assert ember.autograd.gradcheck(lambda x: ember.norm(x, "nuc", dim=(0, 1)), (w.detach().clone().requires_grad_(),))


@needs_torch
def test_nuclear_norm_matches_torch():
    b = [[[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]], [[2.0, 2.0, 2.0], [1.0, -1.0, 0.0]]]
    for kw in ({"dim": (1, 2)}, {"dim": (2, 1), "keepdim": True}, {"dim": (0, 2)}):
        got = ember.norm(ember.tensor(b), "nuc", **kw)
        ref = torch.norm(torch.tensor(b), "nuc", **kw)
        assert tuple(got.shape) == tuple(ref.shape)
        assert got.flatten().tolist() == pytest.approx(ref.flatten().tolist(), rel=1e-6)
    w = ember.tensor(b[0], dtype=ember.float64, requires_grad=True)
    tw = torch.tensor(b[0], dtype=torch.float64, requires_grad=True)
    ember.norm(w, "nuc").backward()
    torch.norm(tw, "nuc").backward()
    assert w.grad.flatten().tolist() == pytest.approx(tw.grad.flatten().tolist(), abs=1e-12)


def test_nuclear_norm_of_nan_raises_like_svd():
    # PyTorch's SVD refuses NaN (LinAlgError, a RuntimeError); an infinity gives NaN
    with pytest.raises(RuntimeError, match="non-finite"):
        ember.norm(ember.tensor([[1.0, float("nan")], [0.0, 1.0]]), p="nuc")
    r = ember.norm(ember.tensor([[1.0, float("inf")], [0.0, 1.0]]), p="nuc")
    assert math.isnan(r.item())
    assert ember.norm(ember.zeros(0, 3), p="nuc").item() == 0.0
