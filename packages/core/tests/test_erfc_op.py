"""ember.erfc as a native op: values against math.erfc (the far right tail included, where
1 - erf loses every digit), float32 underflow, integer promotion, special values, the gradient
-2/sqrt(pi) exp(-x^2), every entry point (ember.erfc, Tensor.erfc / erfc_, special.erfc, out=)
and torch."""

import math

import ember
import numpy as np
import pytest

XS = [-30.0, -6.0, -3.5, -1.0, -0.3, -1e-8, 0.0, 1e-8, 0.2, 0.5, 0.9, 1.5, 2.5, 3.0, 4.0, 6.0,
      9.0, 10.0, 15.0, 26.0, 27.5]


def test_float64_matches_math_erfc_in_the_tail():
    got = ember.erfc(ember.tensor(XS, dtype=ember.float64)).numpy()
    want = np.array([math.erfc(x) for x in XS])
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    assert 2.08e-45 < ember.erfc(ember.tensor(10.0, dtype=ember.float64)).item() < 2.09e-45


def test_float32_tail_and_underflow():
    x = np.array(XS, dtype=np.float32)
    got = ember.erfc(ember.from_numpy(x)).numpy()
    assert got.dtype == np.float32
    want = np.array([math.erfc(float(v)) for v in x])
    tiny = np.finfo(np.float32).tiny
    normal = want >= tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-6)
    # past ~10.05 the float32 result is subnormal, then exactly 0
    assert got[x >= 15.0].max() == 0.0
    assert np.all(got >= 0)


def test_special_values_and_promotion():
    e = ember.erfc(ember.tensor([float("inf"), float("-inf"), float("nan"), -0.0]))
    v = e.numpy()
    assert v[0] == 0.0 and v[1] == 2.0 and math.isnan(v[2]) and v[3] == 1.0
    i = ember.erfc(ember.tensor([0, 1, 2]))
    assert i.dtype == ember.get_default_dtype()
    np.testing.assert_allclose(i.numpy(), [math.erfc(k) for k in (0, 1, 2)], rtol=1e-6)


def test_entry_points():
    x = ember.tensor([0.25, 2.0, 7.0], dtype=ember.float64)
    want = np.array([math.erfc(0.25), math.erfc(2.0), math.erfc(7.0)])
    np.testing.assert_allclose(x.erfc().numpy(), want, rtol=1e-14)
    np.testing.assert_allclose(ember.special.erfc(x).numpy(), want, rtol=1e-14)
    out = ember.empty(3, dtype=ember.float64)
    assert ember.erfc(x, out=out) is out
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-14)
    y = x.clone()
    assert y.erfc_() is y
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-14)
    with pytest.raises(TypeError):
        ember.erfc([1.0, 2.0])


def test_gradient():
    x = ember.tensor([-2.0, -0.5, 0.0, 0.7, 3.0], dtype=ember.float64, requires_grad=True)
    ember.erfc(x).sum().backward()
    xs = np.array([-2.0, -0.5, 0.0, 0.7, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), -2 / math.sqrt(math.pi) * np.exp(-xs * xs),
                               rtol=1e-14)
    assert ember.autograd.gradcheck(ember.erfc, (x,))


def test_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        a = (rng.standard_normal(4097) * 5).astype(dtype)
        np.testing.assert_allclose(ember.erfc(ember.from_numpy(a)).numpy(),
                                   torch.erfc(torch.from_numpy(a)).numpy(),
                                   rtol=2e-6 if dtype == np.float32 else 1e-14,
                                   atol=4 * np.finfo(dtype).smallest_subnormal)  # subnormal tail
