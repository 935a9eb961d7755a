"""arange / linspace / logspace / eye (ops/creation.yaml) against NumPy and torch."""

from __future__ import annotations

import itertools
import math

import ember
import numpy as np
import pytest


def test_arange_overloads_and_dtype_inference():
    assert ember.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert ember.arange(5).dtype is ember.int64
    assert ember.arange(5.0).dtype is ember.float32
    assert ember.arange(2, 5).tolist() == [2, 3, 4]
    assert ember.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert ember.arange(1, 2, 0.25).dtype is ember.float32
    assert ember.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert ember.arange(start=1, end=4).tolist() == [1, 2, 3]
    assert ember.arange(end=3).tolist() == [0, 1, 2]
    assert ember.arange(0).shape == (0,)
    assert ember.arange(3, 3).shape == (0,)
    assert ember.arange(5, dtype=ember.float64).dtype is ember.float64
    assert ember.arange(0, 300, 100, dtype=ember.uint8).tolist() == [0, 100, 200]
    assert ember.arange(3, dtype=ember.float16).tolist() == [0.0, 1.0, 2.0]
    assert ember.arange(3, dtype=ember.bfloat16).to(ember.float32).tolist() == [0.0, 1.0, 2.0]
    # int64 results use the truncated arguments, as in PyTorch
    assert ember.arange(0.5, 5.5, 1.5, dtype=ember.int64).tolist() == [0, 1, 2, 3, 4]


def test_arange_default_dtype():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.arange(2.0).dtype is ember.float64
        assert ember.arange(2).dtype is ember.int64
    finally:
        ember.set_default_dtype(old)


@pytest.mark.parametrize(
    "args,kw",
    [
        ((0, 1, 0.1), {}),
        ((-3.5, 7.25, 0.75), {}),
        ((10,), {}),
        ((1, 4, 0.5), {"dtype": "int32"}),
        ((0, 1, 0.1), {"dtype": "float64"}),
        ((-1, 1, 0.3), {"dtype": "float16"}),
        ((5, -5, -3), {}),
    ],
)
def test_arange_vs_torch(args, kw):
    torch = pytest.importorskip("torch")
    e = ember.arange(*args, **{k: getattr(ember, v) for k, v in kw.items()})
    t = torch.arange(*args, **{k: getattr(torch, v) for k, v in kw.items()})
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(
        np.asarray(e.to(ember.float64)), t.double().numpy(), rtol=1e-6, atol=1e-6
    )


def test_arange_errors():
    with pytest.raises(RuntimeError, match="arange: step must be nonzero"):
        ember.arange(0, 5, 0)
    with pytest.raises(
        RuntimeError, match="upper bound and lower bound inconsistent with step sign"
    ):
        ember.arange(0, 5, -1)
    with pytest.raises(
        RuntimeError, match="upper bound and lower bound inconsistent with step sign"
    ):
        ember.arange(-3)
    with pytest.raises(RuntimeError, match="unsupported range: 0 -> inf"):
        ember.arange(0, float("inf"))
    with pytest.raises(RuntimeError, match="unsupported range"):
        ember.arange(0, float("nan"))
    with pytest.raises(TypeError, match="arange: not implemented for dtype bool"):
        ember.arange(3, dtype=ember.bool)


def test_arange_out():
    out = ember.empty(0, dtype=ember.int64)
    ember.arange(4, out=out)
    assert out.tolist() == [0, 1, 2, 3]


def test_linspace():
    r = ember.linspace(0, 1, 5)
    assert r.dtype is ember.float32 and r.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    r = ember.linspace(-2.5, 7.5, 11, dtype=ember.float64)
    np.testing.assert_allclose(np.asarray(r), np.linspace(-2.5, 7.5, 11), rtol=0, atol=1e-12)
    assert r[-1].item() == 7.5 and r[0].item() == -2.5
    assert ember.linspace(3, 7, 1).tolist() == [3.0]
    assert ember.linspace(0, 1, 0).shape == (0,)
    assert ember.linspace(0, 10, 4, dtype=ember.int64).tolist() == [0, 3, 6, 10]
    assert ember.linspace(10, 0, 4, dtype=ember.int64).tolist() == [10, 6, 3, 0]
    assert ember.linspace(-5, 5, 7, dtype=ember.int32).tolist() == [-5, -3, -1, 0, 1, 3, 5]
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        ember.linspace(0, 1, -1)


def test_linspace_logspace_vs_torch():
    torch = pytest.importorskip("torch")
    for args, dt in [
        ((0, 1, 7), "float32"),
        ((-3, 11.5, 100), "float32"),
        ((1, -1, 10), "float64"),
        ((0, 100, 9), "int64"),
        ((0, 1, 5), "float16"),
    ]:
        e = ember.linspace(*args, dtype=getattr(ember, dt))
        t = torch.linspace(*args, dtype=getattr(torch, dt))
        np.testing.assert_allclose(
            np.asarray(e.to(ember.float64)), t.double().numpy(), rtol=1e-6, atol=1e-6
        )
    for args, kw in [
        ((0, 3, 4), {}),
        ((-1, 2, 7), {"base": 2.0}),
        ((0, 3, 4), {"base": 2, "dtype": "int64"}),
    ]:
        ekw = {k: getattr(ember, v) if k == "dtype" else v for k, v in kw.items()}
        tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
        e, t = ember.logspace(*args, **ekw), torch.logspace(*args, **tkw)
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_allclose(np.asarray(e.to(ember.float64)), t.double().numpy(), rtol=1e-6)


def test_logspace_bit_equal_to_torch():
    # PyTorch's CPU kernel: the ends rounded (integers truncated) to the dtype, their difference
    # in the dtype, the exponents and the power in double; float32/half/bfloat16 were off by an
    # ulp in about a quarter of these cases when the exponents were computed in the dtype.
    torch = pytest.importorskip("torch")
    ends = [(0, 1), (-3, 11.5), (0.1, 2.7), (1, -1), (-10, 10), (0.5, 3.5), (-1.3, 0.2), (2, 38)]
    for dt in ["float32", "float64", "float16", "bfloat16", "int64", "int32"]:
        for (start, end), steps, base in itertools.product(ends, [1, 2, 5, 33],
                                                           [10.0, 2.0, math.e]):
            e = ember.logspace(start, end, steps, base=base, dtype=getattr(ember, dt))
            t = torch.logspace(start, end, steps, base=base, dtype=getattr(torch, dt))
            assert np.asarray(e.to(ember.float64)).tolist() == t.double().tolist(), (
                dt, start, end, steps, base)


def test_logspace():
    assert ember.logspace(0, 3, 4).tolist() == [1.0, 10.0, 100.0, 1000.0]
    assert ember.logspace(0, 3, 4, base=2, dtype=ember.int64).tolist() == [1, 2, 4, 8]
    assert ember.logspace(0, 3, 4, 2.0, dtype=ember.float64).tolist() == [1.0, 2.0, 4.0, 8.0]
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        ember.logspace(0, 1, -2)


def test_eye():
    np.testing.assert_array_equal(np.asarray(ember.eye(3)), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(ember.eye(3, 2)), np.eye(3, 2, dtype=np.float32))
    np.testing.assert_array_equal(
        np.asarray(ember.eye(2, m=4, dtype=ember.int64)), np.eye(2, 4, dtype=np.int64)
    )
    assert ember.eye(2, dtype=ember.bool).tolist() == [[True, False], [False, True]]
    assert ember.eye(0).shape == (0, 0)
    assert ember.eye(2, dtype=ember.bfloat16).to(ember.float32).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        ember.eye(-1)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -1"):
        ember.eye(2, -1)
