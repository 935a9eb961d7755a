"""Gradients of the view, shape and indexing ops (ops/views.yaml, shape.yaml, indexing.yaml,
tensor.yaml): gradcheck with contiguous and strided inputs, first and second derivatives against
PyTorch (the cases are op_db.GRAD_SHAPE, run by op_db.run_case)."""

import ember
import numpy as np
import pytest
from core_helpers import torch
from op_db import GRAD_SHAPE, run_case

CASES = GRAD_SHAPE


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad(case):
    run_case(case)


def test_scatter_reduce_prod_with_zeros():
    """prod's gradient where factors are zero: one zero (the others' product) and two (zero)."""
    pytest.importorskip("torch")
    self_ = np.array([[2.0, 0.0], [3.0, 1.5]])
    src = np.array([[0.0, 4.0], [5.0, 0.0], [0.0, 2.0]])
    index = np.array([[0, 0], [0, 1], [1, 0]])
    for include_self in (True, False):
        outs = []
        for L in (ember, torch):
            a = L.tensor(self_, requires_grad=True)
            s = L.tensor(src, requires_grad=True)
            out = a.scatter_reduce(0, L.tensor(index), s, "prod", include_self=include_self)
            out.backward(L.tensor(np.arange(1.0, 5.0).reshape(2, 2)))
            outs.append((np.array(a.grad.tolist()), np.array(s.grad.tolist())))
        np.testing.assert_allclose(outs[0][0], outs[1][0])
        np.testing.assert_allclose(outs[0][1], outs[1][1])


def test_scatter_multiply_is_a_clear_error():
    a = ember.zeros(3, 2, dtype=ember.float64, requires_grad=True)
    out = a.scatter(0, ember.tensor([[0, 1]]), 2.0, reduce="multiply")
    with pytest.raises(NotImplementedError, match="reduce='multiply'"):
        out.sum().backward()


def test_view_dtype_is_not_differentiable():
    a = ember.ones(4, requires_grad=True)
    assert not a.view(ember.float32).requires_grad
    assert not a.view(ember.int32).requires_grad


def test_ops_returning_self_keep_leaves_intact():
    """contiguous()/to()/flatten() may return self itself; a leaf must stay a leaf."""

    for f in (lambda x: x.contiguous(), lambda x: x._to_dtype(ember.float32),
              lambda x: x.flatten(0, 0), lambda x: ember.atleast_1d(x)):
        x = ember.ones(3, requires_grad=True)
        y = f(x)
        assert x.is_leaf and x.grad_fn is None
        (y * 2).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_random_fills_have_zero_gradient():
    x = ember.ones(4, dtype=ember.float64, requires_grad=True)
    for fill in (lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.exponential_(),
                 lambda t: t.bernoulli_(0.5)):
        y = x * 1
        fill(y)
        (y * 3).sum().backward()
        assert x.grad.tolist() == [0.0] * 4
    m = ember.zeros(3, dtype=ember.float64, requires_grad=True)
    ember.normal(m * 1, 1.0).sum().backward()
    assert m.grad.tolist() == [0.0] * 3


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_forward_matches_torch(mode):
    tt = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    pads = [(1, 2), (2, 1, 1, 0), (1, 1, 2, 2, 1, 0), (0, -1, 1, 1), (-2, 1, 0, 3)]
    for pad in pads:
        xx = x[None] if len(pad) == 6 else (x[0] if len(pad) == 2 else x)
        want = tt.nn.functional.pad(tt.tensor(xx), pad, mode=mode).numpy()
        got = ember.pad(ember.tensor(xx), list(pad), mode=mode).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"{mode} {pad}")
    ints = ember.arange(6).view(2, 3)
    assert ember.pad(ints, [1, 1], mode=mode).dtype == ember.int64


def test_pad_values_and_dtypes():
    assert ember.constant_pad_nd(ember.arange(3), [1, 1], 2.5).tolist() == [2, 0, 1, 2, 2]
    assert ember.pad(ember.ones(2), [1, 0], value=3.0).tolist() == [3.0, 1.0, 1.0]
    assert ember.pad(ember.ones(2, 2), [-1, -1, 0, 0]).shape == (2, 0)
    assert ember.pad(ember.ones(2, 3), [1, 1], mode="reflect").tolist() == [[1.0] * 5] * 2


def test_pad_bad_input():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="divisible by 2"):
        ember.pad(x, [1])
    with pytest.raises(RuntimeError, match="less than or equal to two times"):
        ember.pad(x, [1, 1, 1, 1, 1, 1])
    with pytest.raises(RuntimeError, match="negative size"):
        ember.pad(x, [-2, -2])
    with pytest.raises(NotImplementedError, match="unrecognised padding mode 'foo'"):
        ember.pad(x, [1, 1], mode="foo")
    with pytest.raises(RuntimeError, match="doesn't take in value"):
        ember.pad(x, [1, 1], mode="reflect", value=1.0)
    with pytest.raises(NotImplementedError, match="not supported for a 1D input"):
        ember.pad(ember.ones(3), [1, 1], mode="reflect")
    with pytest.raises(RuntimeError, match="less than the corresponding input dimension"):
        ember.pad(x, [3, 0], mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        ember.pad(x, [0, 4], mode="circular")
    with pytest.raises(RuntimeError, match="size 0"):
        ember.pad(ember.ones(1, 0), [1, 1], mode="replicate")
