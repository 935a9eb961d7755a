"""Accuracy of the vectorized float32 exp / log / expm1 / log1p / sigmoid / tanh kernels.

Each op is run over a dense sweep of float32 bit patterns (both signs, denormals, +-0, +-inf,
NaN) and compared, in units in the last place, with the float64 result rounded to float32.
"""

import ember
import numpy as np
import pytest

MAX_ULP = 3  # the scalar std:: kernels are within 1; the polynomial ones a little more

_SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754942e-38,
     1.1754944e-38, -1.1754944e-38, 1.0, -1.0, 0.625, -0.625, 0.62499994, -0.62499994,
     88.72283, 88.72284, -88.72283, -88.72284, 89.0, -89.0, -87.33655, -103.97208, -104.0,
     9.0, -9.0, 3.4028235e38, -3.4028235e38, -0.99999994, -1.0000001, 1e-30, -1e-30],
    dtype=np.float32,
)


def _sweep() -> np.ndarray:
    """About a million float32 values: a stride through all bit patterns plus dense ranges."""
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    strided = bits.view(np.float32)
    dense = [np.linspace(a, b, 20001, dtype=np.float32)
             for a, b in [(-1.0, 1.0), (-12.0, 12.0), (-110.0, 110.0), (0.5, 2.0)]]
    tiny = np.arange(0, 2**17, dtype=np.uint32).view(np.float32)  # denormals and 0
    return np.concatenate([strided, *dense, tiny, -tiny, _SPECIALS])


def _f32_exp(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    """float64 math rounded once to float32 (sigmoid as 1 / (1 + exp(-x)) with a float32 exp,
    the formula the kernels evaluate, so it underflows to 0 where that exp overflows)."""
    with np.errstate(all="ignore"):
        xd = x.astype(np.float64)
        if name == "exp":
            r = np.exp(xd)
        elif name == "log":
            r = np.log(xd)
        elif name == "tanh":
            r = np.tanh(xd)
        elif name == "expm1":
            r = np.expm1(xd)
        elif name == "log1p":
            r = np.log1p(xd)
        else:
            r = 1.0 / (1.0 + _f32_exp(-x).astype(np.float64))
        return r.astype(np.float32)


def _ulp_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in float32 steps (the integer order of the bit patterns); 0 for NaN == NaN."""
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    d = np.abs(ordered(a) - ordered(b))
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    return np.where(both_nan, 0, np.where(one_nan, 2**31, d))


OPS = ["exp", "log", "expm1", "log1p", "sigmoid", "tanh"]


@pytest.mark.parametrize("name", OPS)
def test_float32_within_few_ulp(name):
    x = _sweep()
    got = getattr(ember, name)(ember.tensor(x)).numpy()
    assert got.dtype == np.float32
    want = _reference(name, x)
    d = _ulp_diff(got, want)
    worst = int(np.argmax(d))
    assert d[worst] <= MAX_ULP, (
        f"{name}({x[worst]!r}) = {got[worst]!r}, expected {want[worst]!r} ({d[worst]} ulp)")


@pytest.mark.parametrize("name", OPS)
def test_special_values_exact(name):
    x = _SPECIALS
    got = getattr(ember, name)(ember.tensor(x)).numpy()
    want = _reference(name, x)
    # NaN where expected, infinities, signed zeros and saturation exactly
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0) | (np.abs(want) == 1)
    np.testing.assert_array_equal(got[exact].view(np.int32), want[exact].view(np.int32))


def test_tanh_odd_and_bounded():
    x = np.linspace(0, 30, 100003, dtype=np.float32)
    p = ember.tanh(ember.tensor(x)).numpy()
    n = ember.tanh(ember.tensor(-x)).numpy()
    np.testing.assert_array_equal(p, -n)
    assert np.all(np.abs(p) <= 1) and np.all(np.diff(p) >= 0)
    assert np.all(p[x >= 9.1] == 1.0)


def test_log1p_edges():
    y = ember.log1p(ember.tensor([-1.0, -2.0, -np.inf, np.inf, -0.0, 1e-30])).numpy()
    assert y[0] == -np.inf and np.isnan(y[1]) and np.isnan(y[2]) and y[3] == np.inf
    assert y[4] == 0 and np.signbit(y[4]) and y[5] == np.float32(1e-30)


def test_expm1_edges():
    y = ember.expm1(ember.tensor([-np.inf, np.inf, -0.0, 1e-30, -200.0, 100.0])).numpy()
    assert y[0] == -1 and y[1] == np.inf and y[2] == 0 and np.signbit(y[2])
    assert y[3] == np.float32(1e-30) and y[4] == -1 and y[5] == np.inf


def test_sigmoid_range():
    x = np.linspace(-120, 120, 100003, dtype=np.float32)
    y = ember.sigmoid(ember.tensor(x)).numpy()
    assert np.all((y >= 0) & (y <= 1)) and np.all(np.diff(y) >= 0)


def test_log_negative_and_zero():
    y = ember.log(ember.tensor([-1.0, -0.0, 0.0, -np.inf, 1e-45])).numpy()
    assert np.isnan(y[0]) and np.isnan(y[3])
    assert y[1] == -np.inf and y[2] == -np.inf
    assert y[4] == pytest.approx(np.log(np.float64(np.float32(1e-45))), rel=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_layouts_give_same_bits(name):
    # contiguous, strided (transposed, sliced), in-place and out= all take the vector kernel
    rng = np.random.default_rng(0)
    base = (rng.standard_normal((37, 301)) * 4).astype(np.float32)
    if name in ("log", "log1p"):
        base = np.abs(base)
    fn = getattr(ember, name)
    t = ember.tensor(base)
    full = fn(t).numpy()
    np.testing.assert_array_equal(fn(t.t()).numpy(), full.T)
    np.testing.assert_array_equal(fn(t[:, 3:250:2]).numpy(), full[:, 3:250:2])
    np.testing.assert_array_equal(fn(t[5:9]).numpy(), full[5:9])
    out = ember.empty(37, 301)
    fn(t, out=out)
    np.testing.assert_array_equal(out.numpy(), full)
    c = t.clone()
    getattr(c, name + "_")()
    np.testing.assert_array_equal(c.numpy(), full)
    # lengths around the vector width exercise the partial last vector
    for n in range(1, 20):
        np.testing.assert_array_equal(fn(ember.tensor(base[0, :n])).numpy(), full[0, :n])


@pytest.mark.parametrize("name", OPS)
def test_float64_keeps_scalar_path(name):
    x = np.linspace(0.01, 5, 1001)
    got = getattr(ember, name)(ember.tensor(x)).numpy()
    assert got.dtype == np.float64
    want = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "expm1": np.expm1, "log1p": np.log1p,
            "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[name](x)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", OPS)
def test_integer_input_promotes(name):
    got = getattr(ember, name)(ember.tensor([1, 2, 3])).numpy()
    assert got.dtype == np.float32
    want = _reference(name, np.array([1, 2, 3], dtype=np.float32))
    assert np.all(_ulp_diff(got, want) <= MAX_ULP)
