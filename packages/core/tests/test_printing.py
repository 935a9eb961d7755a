"""repr/str of tensors: PyTorch's format, checked against literal strings and against torch."""

import math
import time

import ember
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _default_printoptions():
    ember.set_printoptions(profile="default")
    yield
    ember.set_printoptions(profile="default")
    try:
        import torch
    except ImportError:
        return
    torch.set_printoptions(profile="default")


def _torch():
    return pytest.importorskip("torch")


def _torch_repr(torch, data, dtype_name):
    dt = getattr(torch, dtype_name) if dtype_name else None
    if isinstance(data, np.ndarray):
        t = torch.from_numpy(data.copy())
        return repr(t if dt is None else t.to(dt)).replace("torch", "ember")
    return repr(torch.tensor(data, dtype=dt)).replace("torch", "ember")


def _ember(data, dtype_name):
    dt = getattr(ember, dtype_name) if dtype_name else None
    return ember.tensor(data, dtype=dt)


# ---- literal expectations (hold without torch) ---------------------------------------------

@pytest.mark.parametrize("data,dtype,expected", [
    ([1.0, 2.0, 3.0], None, "tensor([1., 2., 3.])"),
    ([1, 2], None, "tensor([1, 2])"),
    ([True, False], None, "tensor([ True, False])"),
    (3.5, None, "tensor(3.5000)"),
    (3, None, "tensor(3)"),
    (True, None, "tensor(True)"),
    ([1.5, -2.25], None, "tensor([ 1.5000, -2.2500])"),
    ([1.0, 2.0], "float64", "tensor([1., 2.], dtype=ember.float64)"),
    ([1, 2], "int32", "tensor([1, 2], dtype=ember.int32)"),
    ([1, 2], "uint8", "tensor([1, 2], dtype=ember.uint8)"),
    ([0.5], "float16", "tensor([0.5000], dtype=ember.float16)"),
    ([1e-5, 1.0], None, "tensor([1.0000e-05, 1.0000e+00])"),
    ([1e10], None, "tensor([1.0000e+10])"),
    ([float("nan"), float("inf"), -float("inf"), 1.0], None, "tensor([nan, inf, -inf, 1.])"),
    ([float("nan"), 0.5], None, "tensor([   nan, 0.5000])"),
    ([0.0, 0.0], None, "tensor([0., 0.])"),
    ([[1, 2], [30, 4]], None, "tensor([[ 1,  2],\n        [30,  4]])"),
    ([[[1.0]], [[2.0]]], None, "tensor([[[1.]],\n\n        [[2.]]])"),
])
def test_literal(data, dtype, expected):
    t = _ember(data, dtype)
    assert repr(t) == expected
    assert str(t) == expected


def test_empty_literals():
    assert repr(ember.tensor([])) == "tensor([])"
    assert repr(ember.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(ember.zeros(0, dtype=ember.int64)) == "tensor([], dtype=ember.int64)"
    assert repr(ember.zeros(2, 0, dtype=ember.float64)) == "tensor([], size=(2, 0), dtype=ember.float64)"


def test_summarized_literal():
    t = ember.tensor(np.arange(2000))
    assert repr(t) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
    m = ember.tensor(np.arange(4000.0).reshape(1000, 4))
    assert repr(m) == (
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00, 3.0000e+00],\n"
        "        [4.0000e+00, 5.0000e+00, 6.0000e+00, 7.0000e+00],\n"
        "        [8.0000e+00, 9.0000e+00, 1.0000e+01, 1.1000e+01],\n"
        "        ...,\n"
        "        [3.9880e+03, 3.9890e+03, 3.9900e+03, 3.9910e+03],\n"
        "        [3.9920e+03, 3.9930e+03, 3.9940e+03, 3.9950e+03],\n"
        "        [3.9960e+03, 3.9970e+03, 3.9980e+03, 3.9990e+03]], dtype=ember.float64)"
    )


def test_wrapping_literal():
    t = ember.tensor([1.5] * 12)
    assert repr(t) == (
        "tensor([1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000, 1.5000,\n"
        "        1.5000, 1.5000, 1.5000])"
    )


def test_printoptions():
    ember.set_printoptions(precision=2)
    assert repr(ember.tensor([1.12345])) == "tensor([1.12])"
    ember.set_printoptions(threshold=5)
    assert repr(ember.tensor(np.arange(10))) == "tensor([0, 1, 2,  ..., 7, 8, 9])"
    ember.set_printoptions(profile="default")
    assert repr(ember.tensor([1.12345])) == "tensor([1.1235])"
    assert repr(ember.tensor(np.arange(10))) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"
    ember.set_printoptions(sci_mode=True)
    assert repr(ember.tensor([1.5])) == "tensor([1.5000e+00])"
    ember.set_printoptions(sci_mode=False)
    assert repr(ember.tensor([1e-6, 1.0])) == "tensor([0.0000, 1.0000])"
    ember.set_printoptions(profile="short")
    assert repr(ember.tensor([1.12345])) == "tensor([1.12])"
    ember.set_printoptions(profile="full")
    assert "..." not in repr(ember.tensor(np.arange(2000)))
    with pytest.raises(ValueError, match="profile"):
        ember.set_printoptions(profile="nope")


def test_default_dtype_changes_suffix():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        assert repr(ember.tensor([1.0], dtype=ember.float64)) == "tensor([1.])"
        assert repr(ember.tensor([1.0], dtype=ember.float32)) == "tensor([1.], dtype=ember.float32)"
    finally:
        ember.set_default_dtype(old)


def test_noncontiguous_and_views():
    a = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    t = ember.tensor(a)
    assert repr(ember.from_numpy(a.T)) == repr(ember.tensor(a.T.copy()))
    assert repr(t[::2, 1::3]) == repr(ember.tensor(a[::2, 1::3].copy()))


def test_large_tensor_is_fast():
    t = ember.zeros(3000, 3000)
    start = time.perf_counter()
    r = repr(t)
    assert time.perf_counter() - start < 5  # formatting all elements would take far longer
    assert "..." in r
    big1d = ember.ones(10_000_000, dtype=ember.int8)
    start = time.perf_counter()
    assert repr(big1d) == "tensor([1, 1, 1,  ..., 1, 1, 1], dtype=ember.int8)"
    assert time.perf_counter() - start < 5  # formatting all elements would take far longer


# ---- against torch -------------------------------------------------------------------------

_CASES = [
    ([1.0, 2.0, 3.0], None),
    ([1, 2, 3], None),
    ([True, False, True], None),
    ([], None),
    (3.5, None),
    (-0.0, None),
    (7, None),
    (1e-8, None),
    (123456789.0, None),
    ([0.1, 0.2, 1000.0], None),
    ([0.1, 0.2, 100.0], None),
    ([1e-4, 1.0], None),
    ([1.1e-4, 0.1], None),
    ([1e8, 1.0], None),
    ([1.0e8 + 1, 1.0], "float64"),
    ([-1.0, 2.0, -3.0], None),
    ([-0.0, 0.0], None),
    ([float("nan"), float("inf"), -float("inf")], None),
    ([float("nan"), 2.5], None),
    ([float("inf"), 1e-10], None),
    ([[1.0, -2.5], [3.25, 4.0]], None),
    ([[1, -200], [3, 4]], "int16"),
    ([[True], [False]], None),
    ([[[1.5, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.125]]], None),
    ([1, 255], "uint8"),
    ([-128, 127], "int8"),
    ([2**40, -(2**40)], None),
    ([1.5, 2.5], "float16"),
    ([1.5, 3.140625], "bfloat16"),
    ([1.0, 2.0], "float64"),
    ([1 / 3, 2 / 3], "float64"),
    ([65504.0, 1.0], "float16"),
    ([[1e-3, 1e3], [5.0, 6.0]], None),
    (list(range(30)), None),
    ([x / 7 for x in range(40)], None),
    ([x * 1e5 for x in range(40)], "float64"),
    ([[x / 3 for x in range(17)] for _ in range(3)], None),
]


@pytest.mark.parametrize("data,dtype", _CASES)
def test_matches_torch(data, dtype):
    torch = _torch()
    assert repr(_ember(data, dtype)) == _torch_repr(torch, data, dtype)


_ARRAYS = [
    np.arange(1001),
    np.arange(1001.0),
    np.arange(5000, dtype=np.float32).reshape(50, 100) / 7,
    np.arange(2000, dtype=np.int64).reshape(2, 1000),
    np.arange(2000, dtype=np.int64).reshape(1000, 2),
    np.arange(4096, dtype=np.float32).reshape(16, 16, 16) - 2000.5,
    np.arange(4096, dtype=np.int32).reshape(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2),
    np.linspace(-1e6, 1e6, 3000),
    (np.arange(1200) % 2).astype(np.bool_),
    np.array([1.0, 2.0]).reshape(1, 1, 2),
    np.arange(20000, dtype=np.float32).reshape(20, 10, 100) * -1.5,
    np.arange(3000, dtype=np.int16).reshape(3, 1000) - 1500,
    np.array([[np.nan, 1e-9, -np.inf], [1e12, -0.0, 3.0]]),
    np.array([np.nan, -np.inf, 5.0, -7.0], dtype=np.float32),
    np.array([60000.0, -0.001, 1.0], dtype=np.float16),
    np.full((40, 40), 12345678.0),
    np.zeros((0, 3), dtype=np.float32),
    np.zeros((3, 0, 2), dtype=np.int64),
    np.zeros((0,), dtype=np.int32),
    np.zeros((0,), dtype=np.float64),
]


@pytest.mark.parametrize("arr", _ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_matches_torch_arrays(arr):
    torch = _torch()
    assert repr(ember.tensor(arr)) == _torch_repr(torch, arr, None)


@pytest.mark.parametrize("opts", [
    dict(precision=2),
    dict(precision=8),
    dict(threshold=10),
    dict(threshold=10, edgeitems=1),
    dict(threshold=10, edgeitems=0),
    dict(edgeitems=0),
    dict(linewidth=30),
    dict(linewidth=200),
    dict(sci_mode=True),
    dict(sci_mode=False),
    dict(profile="short"),
    dict(profile="full"),
    dict(threshold=0),
])
def test_printoptions_match_torch(opts):
    torch = _torch()
    datas = [
        np.arange(40, dtype=np.float32) / 3,
        np.arange(40, dtype=np.int64).reshape(5, 8),
        np.arange(60, dtype=np.float64).reshape(3, 4, 5) * 1e3,
        np.array([1e-6, 1.0, 12345.678]),
        np.array(2.5),
        np.arange(2000, dtype=np.int64).reshape(10, 200),
    ]
    try:
        ember.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        for d in datas:
            assert repr(ember.tensor(d)) == _torch_repr(torch, d, None), d
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_random_values_match_torch():
    torch = _torch()
    rng = np.random.default_rng(0)
    for scale in (1e-6, 1e-3, 1.0, 1e3, 1e9):
        for dt in (np.float32, np.float64, np.float16):
            with np.errstate(over="ignore"):
                a = (rng.standard_normal((7, 9)) * scale).astype(dt)
            if not np.isfinite(a).all():
                continue
            assert repr(ember.tensor(a)) == _torch_repr(torch, a, None)


def test_set_printoptions_signature():
    import inspect

    params = list(inspect.signature(ember.set_printoptions).parameters)
    assert params == ["precision", "threshold", "edgeitems", "linewidth", "profile", "sci_mode"]
    assert math.isinf(
        (ember.set_printoptions(profile="full"), ember._printing.get_printoptions()["threshold"])[1]
    )
