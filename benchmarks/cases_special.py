"""torch.special's Bessel, Airy and polynomial functions on 2^20 float64 and float32 values:
arguments uniform in (0.1, 30) for the Bessel / Airy functions (the series, recurrence and
quadrature regions of kernels/special_math.h; the large-argument expansions start at 25), in
(-1, 1) for the polynomials (order 10: the recurrence; the Chebyshev T uses its cosine form).
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20
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
