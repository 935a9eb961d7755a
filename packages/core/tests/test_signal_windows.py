"""ember.signal.windows against torch.signal.windows: every window, symmetric and periodic,
lengths 0/1/2/odd/even, float32 and float64, and the argument errors."""

from __future__ import annotations

import ember
import numpy as np
import pytest

torch = pytest.importorskip("torch")

CASES = [
    ("cosine", {}), ("exponential", {}), ("exponential", {"tau": 2.5}), ("gaussian", {}),
    ("gaussian", {"std": 2.5}), ("general_cosine", {"a": [0.46, 0.23, 0.31]}),
    ("general_hamming", {}), ("general_hamming", {"alpha": 0.6}), ("hamming", {}), ("hann", {}),
    ("kaiser", {}), ("kaiser", {"beta": 3.0}), ("nuttall", {}), ("blackman", {}),
    ("bartlett", {}),
]


@pytest.mark.parametrize("name,kwargs", CASES)
@pytest.mark.parametrize("sym", [True, False])
def test_windows_match_torch(name, kwargs, sym):
    ew = getattr(ember.signal.windows, name)
    tw = getattr(torch.signal.windows, name)
    for M in (0, 1, 2, 7, 10):
        for edt, tdt, tol in ((ember.float32, torch.float32, 1e-6),
                              (ember.float64, torch.float64, 1e-12)):
            e = ew(M, sym=sym, dtype=edt, **kwargs)
            t = tw(M, sym=sym, dtype=tdt, **kwargs)
            assert tuple(e.shape) == tuple(t.shape) and e.dtype == edt
            np.testing.assert_allclose(e.numpy(), t.numpy(), atol=tol, rtol=0)


def test_exponential_center_on_periodic_windows():
    for M in (1, 6):
        np.testing.assert_allclose(
            ember.signal.windows.exponential(M, center=1.5, tau=2.0, sym=False).numpy(),
            torch.signal.windows.exponential(M, center=1.5, tau=2.0, sym=False).numpy(),
            atol=1e-6)
    with pytest.raises(ValueError, match="Center must be None"):
        ember.signal.windows.exponential(4, center=1.0)


def test_default_dtype_and_requires_grad():
    w = ember.signal.windows.hann(5, requires_grad=True)
    assert w.dtype == ember.get_default_dtype() and w.requires_grad and w.is_leaf


@pytest.mark.parametrize("call,match", [
    (lambda: ember.signal.windows.hann(-1), "non-negative window length"),
    (lambda: ember.signal.windows.hann(3, dtype=ember.int64), "float32 or float64"),
    (lambda: ember.signal.windows.gaussian(3, std=0.0), "Standard deviation must be positive"),
    (lambda: ember.signal.windows.exponential(3, tau=-1.0), "Tau must be positive"),
    (lambda: ember.signal.windows.kaiser(3, beta=-1.0), "beta must be non-negative"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_general_cosine_needs_a_coefficient_list():
    with pytest.raises(TypeError, match="list/tuple"):
        ember.signal.windows.general_cosine(3, a=0.5)
