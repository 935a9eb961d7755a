"""FractionalMaxPool2d / FractionalMaxPool3d and F.fractional_max_pool2d/3d: given the same
_random_samples, outputs, indices and gradients match PyTorch's; gradcheck in float64; the
module's buffer and arguments; clear errors for bad arguments."""

from __future__ import annotations

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

CASES_2D = [  # input shape, kernel, output_size, output_ratio
    ((2, 3, 10, 9), 2, (4, 5), None),
    ((3, 11, 7), (3, 2), (5, 3), None),
    ((1, 2, 12, 12), 3, None, 0.5),
    ((2, 1, 9, 13), (2, 3), None, (0.6, 0.4)),
    ((1, 1, 5, 5), 2, 4, None),  # windows overlap (stride 1)
    ((1, 2, 6, 6), 2, 1, None),
]
CASES_3D = [
    ((2, 2, 6, 7, 8), 2, (3, 4, 5), None),
    ((3, 7, 6, 5), (2, 3, 2), (4, 2, 3), None),
    ((1, 1, 8, 8, 8), 3, None, 0.5),
]


def _samples(shape, nd, seed, dtype=np.float32):
    n = 1 if len(shape) == nd + 1 else shape[0]
    return np.random.default_rng(seed).uniform(0, 1, (n, shape[-nd - 1], nd)).astype(dtype)


def _both(nd, shape, kernel, size, ratio, dtype=np.float32, seed=0):
    x = np.random.default_rng(seed + 1).normal(size=shape).astype(dtype)
    u = _samples(shape, nd, seed + 2, dtype)
    ef = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    tf = TF.fractional_max_pool2d if nd == 2 else TF.fractional_max_pool3d
    ex = ember.from_numpy(x).requires_grad_()
    tx = torch.from_numpy(x).requires_grad_()
    eo, ei = ef(ex, kernel, size, ratio, True, _random_samples=ember.from_numpy(u))
    # torch's functional form wants a tuple ratio; ember's also takes a number
    tratio = (ratio,) * nd if isinstance(ratio, float) else ratio
    to, ti = tf(tx, kernel, size, tratio, True, _random_samples=torch.from_numpy(u))
    return (ex, eo, ei), (tx, to, ti)


@pytest.mark.parametrize("nd,case", [(2, c) for c in CASES_2D] + [(3, c) for c in CASES_3D])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_and_backward_match_torch(nd, case, dtype):
    (ex, eo, ei), (tx, to, ti) = _both(nd, *case, dtype=dtype)
    assert tuple(eo.shape) == tuple(to.shape) and eo.dtype == getattr(ember, dtype.__name__)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    np.testing.assert_array_equal(eo.detach().numpy(), to.detach().numpy())
    g = np.random.default_rng(5).normal(size=tuple(to.shape)).astype(dtype)
    eo.backward(ember.from_numpy(g))
    to.backward(torch.from_numpy(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_ties_and_nans_pick_what_torch_picks():
    x = np.zeros((1, 1, 6, 6), np.float32)
    x[0, 0, 1, 1] = x[0, 0, 2, 3] = np.nan
    x[0, 0, 4:, 4:] = -np.inf
    u = _samples(x.shape, 2, 3)
    eo, ei = F.fractional_max_pool2d(ember.from_numpy(x), 2, 3, return_indices=True,
                                     _random_samples=ember.from_numpy(u))
    to, ti = TF.fractional_max_pool2d(torch.from_numpy(x), 2, 3, return_indices=True,
                                      _random_samples=torch.from_numpy(u))
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    np.testing.assert_array_equal(eo.numpy(), to.numpy())


@pytest.mark.parametrize("nd,shape,kernel,size", [(2, (2, 2, 7, 6), 2, (3, 4)),
                                                  (3, (1, 2, 5, 4, 6), 2, (3, 2, 3))])
def test_gradcheck_float64(nd, shape, kernel, size):
    rng = np.random.default_rng(0)
    # distinct values: max pooling is differentiable away from ties
    x = ember.from_numpy(rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0)
    u = ember.from_numpy(_samples(shape, nd, 1, np.float64))
    f = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    fn = lambda t: f(t, kernel, size, _random_samples=u)  # noqa: E731
    x.requires_grad_()
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


def test_module_buffer_state_dict_and_repr():
    u = ember.rand(1, 2, 3)
    m = ember.nn.FractionalMaxPool3d(2, output_size=3, _random_samples=u)
    assert list(m.state_dict()) == ["_random_samples"] and m._random_samples is u
    assert m.kernel_size == (2, 2, 2) and m.output_size == (3, 3, 3) and m.output_ratio is None
    m2 = ember.nn.FractionalMaxPool2d((3, 2), output_ratio=0.5, return_indices=True)
    assert list(m2.state_dict()) == [] and m2.output_ratio == (0.5, 0.5)
    out, idx = m2(ember.randn(2, 3, 8, 8))
    assert tuple(out.shape) == (2, 3, 4, 4) and idx.dtype == ember.int64
    assert repr(m2) == "FractionalMaxPool2d()"
    x = ember.randn(1, 2, 6, 6, 6)
    assert ember.equal(m(x), m(x))  # fixed samples: the same windows every call
    tm = torch.nn.FractionalMaxPool3d(2, output_size=3, _random_samples=torch.from_numpy(u.numpy()))
    np.testing.assert_array_equal(m(x).numpy(), tm(torch.from_numpy(x.numpy())).numpy())


def test_default_samples_come_from_the_generator():
    x = ember.randn(2, 3, 9, 9)
    ember.manual_seed(3)
    a, ia = F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    ember.manual_seed(3)
    b, ib = F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
    assert ember.equal(a, b) and ember.equal(ia, ib)
    # each output is the input at its index
    flat = x.reshape(2, 3, -1)
    assert ember.equal(flat.gather(2, ia.reshape(2, 3, -1)).reshape(a.shape), a)


def test_bad_arguments():
    x = ember.randn(1, 2, 6, 6)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(ValueError, match="either an output size, or a pooling ratio"):
        ember.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        ember.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.5\)"):
        ember.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(RuntimeError, match="too large for an input of size 6"):
        F.fractional_max_pool2d(x, 2, output_size=6)
    with pytest.raises(RuntimeError, match=r"_random_samples of shape \(1, 2, 2\)"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=ember.rand(1, 3, 2))
    with pytest.raises(TypeError, match="_random_samples of the input's dtype float32"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=ember.rand(1, 2, 2).double())
    for bad in (3.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"_random_samples must lie in \[0, 1\]"):
            F.fractional_max_pool2d(x, 2, 3, _random_samples=ember.full((1, 2, 2), bad))
    with pytest.raises(RuntimeError, match="expected 4-D or 5-D input"):
        F.fractional_max_pool3d(x[0, 0], 2, 2)
    with pytest.raises(TypeError, match="floating-point input"):
        F.fractional_max_pool2d(ember.ones(1, 1, 4, 4, dtype=ember.int64), 2, 2,
                                _random_samples=ember.rand(1, 1, 2))
