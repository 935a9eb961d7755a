"""Special functions on the CPU, one intra-op thread per framework as everywhere; inputs are
the same random values for both frameworks.

* erfc over a wide range of arguments (both tails, the float32 underflow past 10 and float64's
  past 27 included), float32 and float64;
* torch.special's Bessel, Airy and polynomial functions on 2^20 float64 and float32 values:
  arguments uniform in (0.1, 30) for the Bessel / Airy functions (the series, recurrence and
  quadrature regions of kernels/special_math.h; the large-argument expansions start at 25), in
  (-1, 1) for the polynomials (order 10: the recurrence; the Chebyshev T uses its cosine form).
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20


def _args(fw, dtype: str):
    """erfc's N values 6 * N(0, 1) (about a third past |x| = 3) of `dtype`, the same for both."""
    key = ("special", dtype)
    if key not in fw.data_cache:
        fw.data_cache[key] = (np.random.default_rng(7).standard_normal(N) * 6).astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


for _dtype, _short in (("float32", "f32"), ("float64", "f64")):

    def _setup(fw, dtype=_dtype):
        return Stmt("m.erfc(x)", m=fw.mod, x=_args(fw, dtype))

    case(f"special/erfc {_short} 1M", unit="us", bytes=2 * N * np.dtype(_dtype).itemsize,
         rtol=1e-5 if _dtype == "float32" else 1e-12, atol=1e-30,
         doc=f"torch.erfc(x), x ({N},) {_dtype}, 6 * standard normal")(_setup)

UNARY = ("bessel_j0", "bessel_y1", "modified_bessel_k0", "airy_ai")
POLY = ("chebyshev_polynomial_t", "legendre_polynomial_p")


def _values(fw, dtype: str, lo: float, hi: float):
    key = ("special", dtype, lo, hi)
    if key not in fw.data_cache:
        fw.data_cache[key] = np.random.default_rng(3).uniform(lo, hi, N).astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


def _register(name: str, dtype: str) -> None:
    poly = name in POLY

    # float32 polynomials: torch's fused multiply-adds move values near the roots by ~1e-6
    @case(f"special/{name} {dtype}", unit="ms", rtol=1e-5, atol=1e-4 if poly else 1e-5,
          doc=f"special.{name}(x{', 10' if poly else ''}), {N} {dtype} values")
    def _run(fw):
        x = _values(fw, dtype, -1.0, 1.0) if poly else _values(fw, dtype, 0.1, 30.0)
        f = getattr(fw.mod.special, name)
        return Stmt("f(x, 10)" if poly else "f(x)", f=f, x=x)


for _name in UNARY + POLY:
    for _dtype in ("float64", "float32"):
        _register(_name, _dtype)
