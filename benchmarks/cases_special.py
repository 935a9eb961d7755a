"""Special functions on the CPU: erfc over a wide range of arguments (both tails, the
float32 underflow past 10 and float64's past 27 included), float32 and float64, one intra-op
thread per framework as everywhere. Inputs are the same random values for both frameworks."""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20


def _args(fw, dtype: str):
    """N values 6 * N(0, 1) (about a third past |x| = 3) of `dtype`, the same for both."""
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
