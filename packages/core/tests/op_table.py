"""One table of op descriptions drives the pointwise op tests (values vs NumPy and PyTorch, dtypes,
broadcasting, non-contiguous and zero-stride inputs, empty and 0-d tensors, in-place and out=).

Each ``OpInfo`` names an op declared in ``packages/core/ops/pointwise.yaml``; ``test_pointwise``
checks that every declared op has an entry, so a new op cannot go untested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("uint8", "int8", "int16", "int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
INTEGRAL = INTS + ("bool",)


@dataclass
class OpInfo:
    name: str
    arity: int  # tensor inputs
    ref: Callable  # NumPy reference on float64/int64 arrays
    dtypes: tuple = NUMERIC
    domain: tuple = (-4.0, 4.0)
    result: str = "same"  # "same" | "float" (ints promote) | "bool"
    inplace: bool = True
    out: bool = True
    nonzero_rhs: bool = False  # second operand must avoid 0 (integer division)
    scalar_rhs: bool = True  # accepts a Python number as the second operand
    kwargs: dict = field(default_factory=dict)
    torch_name: str | None = None

    @property
    def torch_fn(self) -> str:
        return self.torch_name or self.name


def _sign(x):
    return np.sign(x)


def _remainder(a, b):
    return np.mod(a, b)


def _fmod(a, b):
    return np.fmod(a, b)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _erfinv(y):
    """Inverse of math.erf by bisection (the reference needs no SciPy)."""
    y = np.asarray(y, dtype=np.float64)
    lo, hi = np.full(y.shape, -6.0), np.full(y.shape, 6.0)
    for _ in range(80):
        mid = (lo + hi) / 2
        below = _erf(mid) < y
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    out = (lo + hi) / 2
    out = np.where(np.abs(y) == 1, np.sign(y) * np.inf, out)
    return np.where(np.abs(y) > 1, np.nan, out)


def _round(x):
    return np.round(x)


def _floor_divide(a, b):
    return np.floor_divide(a, b)


def _div_trunc(a, b):
    q = a / b
    return np.trunc(q) if np.issubdtype(q.dtype, np.floating) else q


def _pow(a, b):
    return np.power(a, b)


def _shift_left(a, b):
    return np.left_shift(a, b)


def _shift_right(a, b):
    return np.right_shift(a, b)


def _isclose(a, b):
    return np.isclose(a, b, rtol=1e-05, atol=1e-08)


unary_float = {
    "exp": (np.exp, (-4, 4)), "exp2": (np.exp2, (-4, 4)), "expm1": (np.expm1, (-4, 4)),
    "log": (np.log, (0.1, 8)), "log2": (np.log2, (0.1, 8)), "log10": (np.log10, (0.1, 8)),
    "log1p": (np.log1p, (-0.9, 8)), "sqrt": (np.sqrt, (0, 9)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 9)),
    "sin": (np.sin, (-4, 4)), "cos": (np.cos, (-4, 4)), "tan": (np.tan, (-1.2, 1.2)),
    "asin": (np.arcsin, (-0.99, 0.99)), "acos": (np.arccos, (-0.99, 0.99)), "atan": (np.arctan, (-4, 4)),
    "sinh": (np.sinh, (-3, 3)), "cosh": (np.cosh, (-3, 3)), "tanh": (np.tanh, (-3, 3)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-6, 6)), "erf": (_erf, (-3, 3)),
    "erfinv": (_erfinv, (-0.95, 0.95)), "reciprocal": (lambda x: 1 / x, (0.5, 4)),
}

OPS: list[OpInfo] = []
for _n, (_f, _d) in unary_float.items():
    OPS.append(OpInfo(_n, 1, _f, dtypes=NUMERIC, domain=_d, result="float"))
OPS += [
    OpInfo("neg", 1, np.negative, dtypes=tuple(d for d in NUMERIC if d != "uint8") ),
    OpInfo("abs", 1, np.abs, dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    OpInfo("sign", 1, _sign, dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    OpInfo("square", 1, np.square, dtypes=FLOATS + ("int32", "int64")),
    OpInfo("relu", 1, lambda x: np.maximum(x, 0), dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    OpInfo("floor", 1, np.floor, dtypes=FLOATS),
    OpInfo("ceil", 1, np.ceil, dtypes=FLOATS),
    OpInfo("trunc", 1, np.trunc, dtypes=FLOATS),
    OpInfo("frac", 1, lambda x: x - np.trunc(x), dtypes=FLOATS),
    OpInfo("round", 1, _round, dtypes=FLOATS),
    OpInfo("isnan", 1, np.isnan, dtypes=ALL, result="bool", inplace=False),
    OpInfo("isinf", 1, np.isinf, dtypes=ALL, result="bool", inplace=False),
    OpInfo("isfinite", 1, np.isfinite, dtypes=ALL, result="bool", inplace=False),
    OpInfo("logical_not", 1, np.logical_not, dtypes=ALL, result="bool", inplace=False),
    OpInfo("bitwise_not", 1, np.invert, dtypes=INTEGRAL, domain=(-50, 50)),
    OpInfo("nan_to_num", 1, np.nan_to_num, dtypes=FLOATS),
    OpInfo("add", 2, np.add, dtypes=NUMERIC),
    OpInfo("sub", 2, np.subtract, dtypes=NUMERIC),
    OpInfo("mul", 2, np.multiply, dtypes=ALL),
    OpInfo("div", 2, np.true_divide, dtypes=NUMERIC, result="float", nonzero_rhs=True),
    OpInfo("true_divide", 2, np.true_divide, dtypes=NUMERIC, result="float", nonzero_rhs=True,
           inplace=False),
    OpInfo("floor_divide", 2, _floor_divide, dtypes=NUMERIC, nonzero_rhs=True),
    OpInfo("remainder", 2, _remainder, dtypes=NUMERIC, nonzero_rhs=True),
    OpInfo("fmod", 2, _fmod, dtypes=NUMERIC, nonzero_rhs=True),
    OpInfo("pow", 2, _pow, dtypes=FLOATS, domain=(0.5, 3)),
    OpInfo("atan2", 2, np.arctan2, dtypes=FLOATS, result="float"),
    OpInfo("minimum", 2, np.minimum, dtypes=ALL, inplace=False, scalar_rhs=False),
    OpInfo("maximum", 2, np.maximum, dtypes=ALL, inplace=False, scalar_rhs=False),
    OpInfo("eq", 2, np.equal, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("ne", 2, np.not_equal, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("lt", 2, np.less, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("le", 2, np.less_equal, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("gt", 2, np.greater, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("ge", 2, np.greater_equal, dtypes=ALL, result="bool", inplace=False, domain=(-2, 2)),
    OpInfo("logical_and", 2, np.logical_and, dtypes=ALL, result="bool", inplace=False,
           scalar_rhs=False, domain=(-1, 1)),
    OpInfo("logical_or", 2, np.logical_or, dtypes=ALL, result="bool", inplace=False,
           scalar_rhs=False, domain=(-1, 1)),
    OpInfo("logical_xor", 2, np.logical_xor, dtypes=ALL, result="bool", inplace=False,
           scalar_rhs=False, domain=(-1, 1)),
    OpInfo("bitwise_and", 2, np.bitwise_and, dtypes=INTEGRAL, domain=(0, 100)),
    OpInfo("bitwise_or", 2, np.bitwise_or, dtypes=INTEGRAL, domain=(0, 100)),
    OpInfo("bitwise_xor", 2, np.bitwise_xor, dtypes=INTEGRAL, domain=(0, 100)),
    OpInfo("bitwise_left_shift", 2, _shift_left, dtypes=("int32", "int64"), domain=(0, 5)),
    OpInfo("bitwise_right_shift", 2, _shift_right, dtypes=("int32", "int64"), domain=(0, 5)),
    OpInfo("isclose", 2, _isclose, dtypes=FLOATS, result="bool", inplace=False, out=False,
           scalar_rhs=False),
]

# Ops with their own tests in test_pointwise.py (ternary or special signatures).
SPECIAL = {"rsub", "rpow", "clamp", "clip", "where", "lerp", "addcmul", "addcdiv", "allclose",
           "equal"}

BY_NAME = {op.name: op for op in OPS}
