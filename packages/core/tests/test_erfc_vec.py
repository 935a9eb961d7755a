"""erfc's vectorized float32 / float64 kernels (kernels/cpu/nn_vec_erfc.inc) against math.erfc on
dense grids: float64 within a few ulp of libm over the whole range (the right tail down to the
underflow past 27.2 included, in subnormal units there), float32 within 1 ulp of the correctly
rounded value, special values, strided and odd-length inputs (the vector loops' remainders), and
the AVX2 and baseline copies (forced with EMBER_CPU_ISA in subprocesses) giving the same."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import ember
import numpy as np
import pytest

TINY64 = 5e-324  # float64's smallest subnormal


def _grid() -> np.ndarray:
    """-8..28 densely, plus the regions where the kernel's parts meet or round: near 0, the
    float32 underflow (9..10.1) and the float64 one (26..27.3)."""
    return np.concatenate([
        np.linspace(-8.0, 28.0, 120_001),
        np.linspace(-1e-3, 1e-3, 2001),
        np.linspace(9.0, 10.1, 5001),
        np.linspace(26.0, 27.3, 5001),
        [5e-324, -5e-324, 1e-300, 1e-20, -1e-20, 0.5, 1.0, 2.0, 27.2, 27.22, 27.23],
    ])


def _ulps64(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of want's last place (subnormal units at the bottom)."""
    return np.abs(got - want) / np.maximum(np.spacing(np.abs(want)), TINY64)


def _erfc64(x: np.ndarray) -> np.ndarray:
    return ember.erfc(ember.from_numpy(x)).numpy()


def test_float64_within_a_few_ulp_of_libm_on_a_dense_grid():
    x = _grid()
    want = np.array([math.erfc(v) for v in x])
    got = _erfc64(x)
    u = _ulps64(got, want)
    worst = int(np.argmax(u))
    # measured: 4 ulp at most (libm's erfc is itself up to 2.4 ulp from the true value)
    assert u.max() <= 5, (x[worst], got[worst], want[worst], u.max())
    assert np.median(u) <= 1


def test_float64_tail_and_underflow():
    x = np.array([10.0, 20.0, 26.0, 26.5, 27.0, 27.2, 27.25, 27.3, 27.5, 30.0, 1e10, np.inf])
    got = _erfc64(x)
    assert 2.08e-45 < got[0] < 2.09e-45
    assert got[2] > 5e-296  # erfc(26) = 5.663e-296, normal
    assert 0 < got[5] < 2.3e-308  # subnormal
    np.testing.assert_array_equal(got[6:], 0.0)
    want = np.array([math.erfc(v) for v in x[:6]])
    assert np.all(_ulps64(got[:6], want) <= 5)


def test_float32_within_one_ulp_of_the_true_value():
    x = _grid().astype(np.float32)
    exact = np.array([math.erfc(float(v)) for v in x])  # float64: far more precise than needed
    got = ember.erfc(ember.from_numpy(x)).numpy()
    assert got.dtype == np.float32
    want32 = exact.astype(np.float32)
    ulp = np.maximum(np.spacing(np.abs(want32)), np.float32(2.0**-149)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact) / ulp
    assert err.max() <= 1.0, x[int(np.argmax(err))]
    assert np.all(got[x >= 10.5] == 0) and np.all(got[x <= -4] == 2)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_special_values(dtype):
    inf, nan = float("inf"), float("nan")
    v = ember.erfc(ember.tensor([inf, -inf, nan, 0.0, -0.0, 40.0, -40.0], dtype=dtype)).numpy()
    assert v[0] == 0 and v[1] == 2 and math.isnan(v[2])
    assert v[3] == 1 and v[4] == 1 and v[5] == 0 and v[6] == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_and_odd_lengths_give_the_same_values(dtype):
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((37, 41)) * 4).astype(dtype)
    full = ember.erfc(ember.from_numpy(base)).numpy()
    t = ember.from_numpy(base)
    np.testing.assert_array_equal(ember.erfc(t.t()).numpy(), full.T)
    np.testing.assert_array_equal(ember.erfc(t[:, ::3]).numpy(), full[:, ::3])
    for n in (1, 3, 7, 15, 33, 65):  # remainders of every vector width
        np.testing.assert_array_equal(ember.erfc(ember.from_numpy(base[0, :n].copy())).numpy(),
                                      full[0, :n])


_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import numpy as np, ember
import test_erfc_vec as t
x = t._grid()[::7]
print(json.dumps([t._erfc64(x).tolist(),
                  ember.erfc(ember.from_numpy(x.astype(np.float32))).numpy().tolist()]))
"""


def _run_isa(isa: str) -> list:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    code = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_every_isa_copy_is_as_accurate():
    x = _grid()[::7]
    want = np.array([math.erfc(v) for v in x])
    x32 = x.astype(np.float32)
    want32 = np.array([math.erfc(float(v)) for v in x32])
    for isa in ("avx2", "baseline"):
        got64, got32 = (np.array(a) for a in _run_isa(isa))
        assert _ulps64(got64, want).max() <= 5, isa
        ulp = np.maximum(np.spacing(np.abs(want32.astype(np.float32))), np.float32(2.0**-149))
        assert (np.abs(np.array(got32, dtype=np.float32) - want32) / ulp).max() <= 1.0, isa
