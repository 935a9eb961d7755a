"""Complex pointwise ops on the CPU: complex64 and complex128 tensors of 2^20 elements whose real
and imaginary parts are standard normal samples (the same values for both frameworks).

* binary arithmetic: ``x + y``, ``x * y``, ``x / y``;
* unary ops: reciprocal, abs and angle (real results), exp, log, sqrt, sin, tanh, sigmoid, sgn,
  conj_physical, ``x ** 2`` and ``x ** 0.5``;
* ``x.real`` / ``x.imag`` copied out (a strided read of every other part);
* the backward of ``(x * y).abs().sum()`` (mul, abs and their complex gradients).

Run: ``python3 benchmarks/run.py --quick --threads 1 --filter complex``.
"""

from __future__ import annotations

import numpy as np
from harness import Stmt, case

N = 1 << 20
DTYPES = (("complex64", "c64"), ("complex128", "c128"))


def _values(fw, dtype: str, seed: int):
    """A contiguous (N,) complex tensor of `dtype`, the same values for both frameworks."""
    key = ("complex", dtype, seed)
    if key not in fw.data_cache:
        rng = np.random.default_rng(seed)
        z = rng.standard_normal(N) + 1j * rng.standard_normal(N)
        fw.data_cache[key] = z.astype(dtype)
    return fw.from_numpy(fw.data_cache[key])


def _tol(dtype: str) -> dict:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "complex64" else {"rtol": 1e-10, "atol": 1e-12}


# case label -> (statement over x, y and the module m, number of complex inputs, complex output)
UNARY_BINARY: dict[str, tuple[str, int, bool]] = {
    "add": ("x + y", 2, True),
    "mul": ("x * y", 2, True),
    "div": ("x / y", 2, True),
    "reciprocal": ("m.reciprocal(x)", 1, True),
    "abs": ("m.abs(x)", 1, False),
    "angle": ("m.angle(x)", 1, False),
    "exp": ("m.exp(x)", 1, True),
    "log": ("m.log(x)", 1, True),
    "sqrt": ("m.sqrt(x)", 1, True),
    "sin": ("m.sin(x)", 1, True),
    "tanh": ("m.tanh(x)", 1, True),
    "sigmoid": ("m.sigmoid(x)", 1, True),
    "sgn": ("m.sgn(x)", 1, True),
    "conj_physical": ("m.conj_physical(x)", 1, True),
    "pow 2": ("m.pow(x, 2)", 1, True),
    "pow 0.5": ("m.pow(x, 0.5)", 1, True),
    "real copy": ("x.real.clone()", 1, False),
    "imag copy": ("x.imag.clone()", 1, False),
}


def _register(label: str, stmt: str, nin: int, complex_out: bool, dtype: str, short: str) -> None:
    item = np.dtype(dtype).itemsize
    nbytes = N * (nin * item + (item if complex_out else item // 2))

    @case(f"complex/{label} {short} 1M", unit="us", bytes=nbytes, **_tol(dtype),
          doc=f"{stmt}, x{' and y' if nin == 2 else ''} ({N},) {dtype}")
    def _setup(fw):
        return Stmt(stmt, m=fw.mod, x=_values(fw, dtype, 1), y=_values(fw, dtype, 2))


for _dtype, _short in DTYPES:
    for _label, (_stmt, _nin, _cout) in UNARY_BINARY.items():
        _register(_label, _stmt, _nin, _cout, _dtype, _short)

    def _backward(fw, dtype=_dtype):
        x = _values(fw, dtype, 1).requires_grad_(True)
        y = _values(fw, dtype, 2).requires_grad_(True)
        return Stmt("(x * y).abs().sum().backward()", x=x, y=y)

    case(f"complex/(x*y).abs().sum() fwd+bwd {_short} 1M", unit="us", check=False,
         doc=f"(x * y).abs().sum().backward(), x and y ({N},) {_dtype} requiring grad")(_backward)
