"""Real pointwise arithmetic on the CPU, float32 and float64 tensors of 2^20 elements: the loops
that have baseline / AVX2 / AVX-512 copies picked at run time (kernels/cpu/pointwise_vec.h).

* out of place: ``a + b``, ``add(a, b, alpha=2)``, ``a - b``, ``a * b``, ``a / b``, ``a * 3``;
* in place: ``x.add_(1.0)``, ``x.add_(y)``, ``x.mul_(-1.0)`` (bounded: the values never drift
  towards overflow or the denormals), ``x.sub_(y)``, ``x.div_(-1.0)``;
* unary: neg, abs, sqrt (of |x|), relu.

Run: ``python3 benchmarks/run.py --quick --threads 1 --filter simd/``.
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20
DTYPES = (("float32", "f32"), ("float64", "f64"))


def _values(fw, dtype: str, seed: int, positive: bool = False):
    """A contiguous (N,) tensor of `dtype`, the same values for both frameworks."""
    key = ("simd", dtype, seed, positive)
    if key not in fw.data_cache:
        v = np.random.default_rng(seed).standard_normal(N)
        fw.data_cache[key] = (np.abs(v) if positive else v).astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


# case label -> (statement over a, b (x, y in place) and the module m, arrays read, in place)
CASES: dict[str, tuple[str, int, bool]] = {
    "add": ("a + b", 2, False),
    "add alpha": ("m.add(a, b, alpha=2)", 2, False),
    "sub": ("a - b", 2, False),
    "mul": ("a * b", 2, False),
    "div": ("a / b", 2, False),
    "mul scalar": ("a * 3.0", 1, False),
    "add_ scalar": ("a.add_(1.0)", 1, True),
    "add_": ("a.add_(b)", 2, True),
    "mul_ scalar": ("a.mul_(-1.0)", 1, True),
    "sub_": ("a.sub_(b)", 2, True),
    "div_ scalar": ("a.div_(-1.0)", 1, True),
    "neg": ("m.neg(a)", 1, False),
    "abs": ("m.abs(a)", 1, False),
    "sqrt": ("m.sqrt(p)", 1, False),
    "relu": ("m.relu(a)", 1, False),
}


def _register(label: str, stmt: str, nin: int, inplace: bool, dtype: str, short: str) -> None:
    item = np.dtype(dtype).itemsize
    nbytes = N * item * (nin + (0 if inplace else 1))

    # an in-place statement changes its operand: checked against torch only out of place
    @case(f"simd/{label} {short} 1M", unit="us", bytes=nbytes, check=not inplace, rtol=1e-6,
          doc=f"{stmt}, ({N},) {dtype}{' (in place)' if inplace else ''}")
    def _setup(fw):
        return Stmt(stmt, m=fw.mod, a=_values(fw, dtype, 1), b=_values(fw, dtype, 2),
                    p=_values(fw, dtype, 3, positive=True))


for _dtype, _short in DTYPES:
    for _label, (_stmt, _nin, _inplace) in CASES.items():
        _register(_label, _stmt, _nin, _inplace, _dtype, _short)
