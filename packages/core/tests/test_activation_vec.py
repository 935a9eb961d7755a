"""The float32 activations run on vectorized kernels (kernels/cpu/nn_vec_act.inc, one copy per
ISA); every other dtype runs the scalar formulas of kernels/activation_math.h. These tests hold
the vector code to the scalar formulas computed in float64: values, first and second
derivatives, special values (NaN, +-inf, +-0, denormals, the kinks), strided inputs, and the
AVX2 / baseline copies (forced with EMBER_CPU_ISA in subprocesses)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import ember
import numpy as np
import pytest

F = ember.nn.functional

# name, keyword arguments
ACTS = [
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("silu", {}),
    ("elu", {"alpha": 0.7}),
    ("selu", {}),
    ("celu", {"alpha": 1.3}),
    ("softplus", {"beta": 2.0, "threshold": 10.0}),
    ("mish", {}),
    ("logsigmoid", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("relu6", {}),
    ("leaky_relu", {"negative_slope": 0.05}),
    ("hardsigmoid", {}),
    ("hardswish", {}),
    ("softsign", {}),
]
IDS = [n + ("-" + "-".join(f"{k}{v}" for k, v in kw.items()) if kw else "") for n, kw in ACTS]


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-30, -1e-30, 20.0, 20.5,
               88.0, -88.0, 89.0, -104.0, 0.875, -0.875, 4.0, -4.0, 3.0, -3.0, 6.0, -0.5, 2.0,
               5.0, 9.99, 10.0]
    return np.concatenate([rng.standard_normal(3000) * 4, np.linspace(-40, 40, 4001),
                           special]).astype(np.float32)


def _grads(name: str, kw: dict, x: ember.Tensor):
    """f(x), f'(x) and f''(x) through autograd (the second from double backward)."""
    x = x.detach().requires_grad_(True)
    y = getattr(F, name)(x, **kw)
    (g1,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    (g2,) = ember.autograd.grad(g1.sum(), x) if g1.requires_grad else (ember.zeros_like(x),)
    return y.detach().numpy(), g1.detach().numpy(), g2.detach().numpy()


def _close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    want32 = want.astype(np.float32)  # what the float64 result rounds to
    assert np.array_equal(np.isnan(got), np.isnan(want32)), "NaN positions differ"
    inf = np.isinf(want32)
    assert np.array_equal(got[inf], want32[inf]), "infinities differ"
    fin = ~np.isnan(want32) & ~inf
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol)


@pytest.mark.parametrize("name,kw", ACTS, ids=IDS)
def test_float32_matches_the_float64_formula(name, kw):
    x = _inputs()
    got = _grads(name, kw, ember.tensor(x))
    want = _grads(name, kw, ember.tensor(x.astype(np.float64)))
    for g, w, what in zip(got, want, ("value", "first derivative", "second derivative")):
        # values within a few float32 ulp; the derivatives' absolute floor covers their
        # cancellations (1 - s, 1 - t^2) near saturation.
        try:
            _close(g, w, rtol=4e-6, atol=1e-6 if what == "value" else 4e-6)
        except AssertionError as e:
            raise AssertionError(f"{name}{kw} {what}: {e}") from None


@pytest.mark.parametrize("name,kw", ACTS, ids=IDS)
def test_strided_input_gives_the_same_bits(name, kw):
    x = ember.tensor(_inputs()[:4000].reshape(40, 100))
    a = getattr(F, name)(x.t(), **kw).numpy()  # strided inner loop: the buffered path
    b = getattr(F, name)(x.t().contiguous(), **kw).numpy()
    np.testing.assert_array_equal(a, b)


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = _inputs()
    x = x[np.isfinite(x)]  # torch's float32 kernels give NaN for some infinities (gelu(inf))
    for name, kw in ACTS:
        tx = torch.tensor(x, requires_grad=True)
        ty = getattr(torch.nn.functional, name)(tx, **kw)
        ty.sum().backward()
        ey, eg, _ = _grads(name, kw, ember.tensor(x))
        np.testing.assert_allclose(ey, ty.detach().numpy(), rtol=1e-5, atol=2e-6,
                                   err_msg=f"{name}{kw}")
        np.testing.assert_allclose(eg, tx.grad.numpy(), rtol=1e-5, atol=5e-6,
                                   err_msg=f"{name}{kw} gradient")



def _gelu_exact(x: np.ndarray) -> np.ndarray:
    """gelu in float64 as x * erfc(-x / sqrt(2)) / 2: accurate in the negative tail too."""
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / np.maximum(spacing, 2.0**-149)


def test_gelu_float32_accuracy_on_a_dense_grid():
    # The exact-erf gelu in float32 against the float64 erfc form, in float32 ulps of the true
    # value. The AVX-512 copy (a piecewise polynomial of Phi) holds 2 ulp from -1 up and stays
    # accurate in absolute terms below; the other copies (erf polynomial) 4.5 ulp from -1 up.
    x = np.concatenate([np.linspace(-12, 12, 240001), np.linspace(-1e-3, 1e-3, 2001),
                        np.linspace(5.2, 5.6, 4001), np.linspace(-6.1, -5.9, 2001)])
    x = x.astype(np.float32)
    got = F.gelu(ember.tensor(x)).numpy()
    want = _gelu_exact(x)
    u = _ulps(got, want)
    fast = ember._C._cpu_isa() == "avx512"
    assert u[x >= -1].max() <= (2.0 if fast else 4.5), x[x >= -1][np.argmax(u[x >= -1])]
    if fast:
        mid = (x >= -3) & (x < -1)
        assert u[mid].max() <= 4.0, x[mid][np.argmax(u[mid])]
    err = np.abs(got.astype(np.float64) - want)
    assert (err[x < -1] <= 2e-7 * np.abs(x[x < -1])).all()
    assert np.all(got[x >= 5.5] == x[x >= 5.5])  # Phi rounds to 1
    assert np.all(got[x <= 0] <= 0)


def test_gelu_float32_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, -6.0, -1e30, 1e30],
                 np.float32)
    got = F.gelu(ember.tensor(x)).numpy()
    want = F.gelu(ember.tensor(x.astype(np.float64))).numpy()  # the scalar formula
    assert np.array_equal(np.isnan(got), np.isnan(want))  # NaN and -inf (-inf * 0) give NaN
    assert got[2] == np.inf and got[0] == 0 and np.signbit(got[1])
    np.testing.assert_allclose(got[5:7], [5e-41, -5e-41], rtol=1e-2)
    assert got[8] == 0 and np.signbit(got[8]) and got[9] == 1e30
    assert abs(got[7] - want[7]) < 1e-8  # |gelu(-6)| is 5.9e-9


def test_gelu_float64_accuracy_and_special_values():
    # float64 exact gelu (AVX-512: a piecewise polynomial of Phi; elsewhere the scalar formula)
    # against the erfc form: relative 5e-15 from -3 up (the formula: 5e-14, its cancellation in
    # 1 + erf), absolute 4e-15 max(1, |x|) everywhere; special values as the formula gives.
    x = np.concatenate([np.linspace(-12, 12, 120001), np.linspace(-1e-6, 1e-6, 1001),
                        np.linspace(8.2, 8.8, 1001), np.linspace(-8.8, -8.2, 1001)])
    got = F.gelu(ember.tensor(x)).numpy()
    want = _gelu_exact(x)
    err = np.abs(got - want)
    mid = x >= -3
    rel = err[mid] / np.maximum(np.abs(want[mid]), 1e-300)
    bound = 5e-15 if ember._C._cpu_isa() == "avx512" else 5e-14
    assert rel.max() <= bound, (x[mid][np.argmax(rel)], rel.max())
    assert (err <= 4e-15 * np.maximum(1.0, np.abs(x))).all()
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300, -1e300])
    out = F.gelu(ember.tensor(sp)).numpy()
    assert out[0] == 0 and np.signbit(out[1]) and out[2] == np.inf
    assert np.isnan(out[3]) and np.isnan(out[4])
    np.testing.assert_allclose(out[5:7], [5e-301, -5e-301], rtol=1e-15)
    assert out[7] == 1e300 and out[8] == 0 and np.signbit(out[8])
    xs = ember.tensor(np.linspace(-9, 9, 4000).reshape(40, 100))
    np.testing.assert_array_equal(F.gelu(xs.t()).numpy(), F.gelu(xs.t().contiguous()).numpy())

@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_reduced_precision_is_the_float32_kernel_rounded(dtype, approximate):
    # bfloat16 / float16 run the float32 kernel (in chunks): the same values as float32 gelu
    # rounded to the dtype, for every length (vector tails) and for strided inputs.
    rng = np.random.default_rng(3)
    dt = getattr(ember, dtype)
    for n in (1, 15, 16, 17, 1023, 1025, 4100):
        x = ember.tensor((rng.standard_normal(n) * 5).astype(np.float32)).to(dt)
        got = F.gelu(x, approximate=approximate)
        assert got.dtype == dt
        want = F.gelu(x.float(), approximate=approximate).to(dt)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    x = ember.tensor(rng.standard_normal((30, 40)).astype(np.float32)).to(dt)
    np.testing.assert_array_equal(F.gelu(x.t(), approximate=approximate).float().numpy(),
                                  F.gelu(x.t().contiguous(), approximate=approximate).float().numpy())
    special = ember.tensor(np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)).to(dt)
    out = F.gelu(special, approximate=approximate).float().numpy()
    assert np.isnan(out[0]) and out[1] == np.inf and np.signbit(out[3])

def test_hardswish_gradient_at_its_ends_is_torchs():
    # torch: 0 at x <= -3, 1 at x >= 3 (the one-sided limits from outside the curved part)
    x = ember.tensor([-3.0, 3.0, -2.0, 2.0], requires_grad=True)
    F.hardswish(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 1.0, -2 / 3 + 0.5, 2 / 3 + 0.5], rtol=1e-6)


_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, {here!r})
import test_activation_vec as t
import ember
x = ember.tensor(t._inputs())
out = {{}}
for (name, kw), key in zip(t.ACTS, t.IDS):
    out[key] = [a.tolist() for a in t._grads(name, kw, x)]
print(json.dumps(out))
"""


def _run_isa(isa: str) -> dict:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    code = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_every_isa_copy_agrees():
    runs = {isa: _run_isa(isa) for isa in ("avx512", "avx2", "baseline")}
    for key in IDS:
        for i in range(3):
            ref = np.array(runs["avx512"][key][i], dtype=np.float32)
            for isa in ("avx2", "baseline"):
                got = np.array(runs[isa][key][i], dtype=np.float32)
                # the same lane arithmetic, with or without FMA contraction
                _close(got, ref.astype(np.float64), rtol=4e-6, atol=1e-6)
