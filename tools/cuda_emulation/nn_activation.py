"""Emulation of packages/core/csrc/cuda/nn_activation.cu's functors (elementwise: one value in, one
out, in the compute type; the elementwise engine itself is another file's) against ember's CPU
activations, over values that probe every branch: 0, +-small, the hard* corners (+-3, +-1), the
softplus / elu thresholds, +-inf and NaN, in every floating dtype. The functors are transcribed
vectorized (numpy arrays of the compute type, rounding after every operation).
Run: PYTHONPATH=<build>/site python3 nn_activation.py [-q]."""

from __future__ import annotations

import sys
import time

import numpy as np
from nn_norm import E, npv, tensor
from nn_sim import BF16, F16, F32, F64, TOL, close, report

K_SQRT1_2 = 0.70710678118654752440
K_SQRT2_OVER_PI = 0.79788456080286535588
K_GELU_C = 0.044715


def erf(x):
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def softplus1(x, A):
    with np.errstate(all="ignore"):
        return np.where(x > A(20), x, np.log1p(np.exp(x)).astype(A))


def functors(A):
    def gelu(x, tanh_form):
        if tanh_form:
            return A(0.5) * x * (A(1) + np.tanh(A(K_SQRT2_OVER_PI) * (x + A(K_GELU_C) * x * x * x)))
        return A(0.5) * x * (A(1) + erf(x * A(K_SQRT1_2)))

    return {
        "gelu": lambda x: gelu(x, False),
        "gelu_tanh": lambda x: gelu(x, True),
        "silu": lambda x: x / (A(1) + np.exp(-x)),
        "elu": lambda x, a=1.3, sc=1.1, is_=0.7: np.where(
            x > A(0), A(sc) * x, A(sc * a) * np.expm1(x * A(is_))
        ),
        "leaky_relu": lambda x, s=0.02: np.where(x > A(0), x, x * A(s)),
        "softplus": lambda x, b=2.0, t=10.0: np.where(
            x * A(b) > A(t), x, np.log1p(np.exp(x * A(b))) / A(b)
        ),
        "hardtanh": lambda x, lo=-1.5, hi=2.0: np.where(
            x < A(lo), A(lo), np.where(x > A(hi), A(hi), x)
        ),
        "hardsigmoid": lambda x: np.where(
            x <= A(-3), A(0), np.where(x >= A(3), A(1), x / A(6) + A(0.5))
        ),
        "hardswish": lambda x: np.where(
            x <= A(-3), A(0), np.where(x >= A(3), x, x * (x + A(3)) / A(6))
        ),
        "mish": lambda x: x * np.tanh(softplus1(x, A)),
        "softsign": lambda x: x / (A(1) + np.abs(x)),
        "logsigmoid": lambda x: np.where(A(0) < x, A(0), x) - np.log1p(np.exp(-np.abs(x))),
    }


def cpu_op(name, xt):
    C_ = E()._C
    return {
        "gelu": lambda: C_.gelu(xt, approximate="none"),
        "gelu_tanh": lambda: C_.gelu(xt, approximate="tanh"),
        "silu": lambda: C_.silu(xt),
        "elu": lambda: C_.elu(xt, 1.3, 1.1, 0.7),
        "leaky_relu": lambda: C_.leaky_relu(xt, 0.02),
        "softplus": lambda: C_.softplus(xt, 2.0, 10.0),
        "hardtanh": lambda: C_.hardtanh(xt, -1.5, 2.0),
        "hardsigmoid": lambda: C_.hardsigmoid(xt),
        "hardswish": lambda: C_.hardswish(xt),
        "mish": lambda: C_.mish(xt),
        "softsign": lambda: C_.softsign(xt),
        "logsigmoid": lambda: C_.logsigmoid(xt),
    }[name]()


def values(T):
    special = [
        0.0,
        -0.0,
        1e-3,
        -1e-3,
        1.0,
        -1.0,
        1.5,
        -1.5,
        2.0,
        3.0,
        -3.0,
        2.9,
        -2.9,
        3.1,
        -3.1,
        5.0,
        5.1,
        4.9,
        20.0,
        20.5,
        -20.0,
        40.0,
        -40.0,
        88.0,
        -88.0,
        1e4,
        -1e4,
        np.inf,
        -np.inf,
        np.nan,
    ]
    rng = np.random.default_rng(23)
    return T.mem(np.concatenate([special, rng.standard_normal(200) * 4]))


def check(name, T, fails):
    x = values(T)
    A = T.acc
    xa = x.astype(A)
    with np.errstate(all="ignore"):
        y = functors(A)[name](xa).astype(A)
    y = np.array([T.from_op(v) for v in y], dtype=np.float64)
    cy = cpu_op(name, tensor(x, T, [x.size]))
    # transcendental functions: the device's and the host's libm may differ by an ulp or two
    tol = {"float32": 1e-5, "float64": 1e-12, "float16": 1e-3, "bfloat16": 8e-3}[T.name]
    close(f"{name} {T}", y, npv(cy), tol, atol=tol, failures=fails)


def check_backward(T, fails):
    C_ = E()._C
    x = values(T)
    g = T.mem(np.linspace(-3, 3, x.size))
    A = T.acc
    xa, ga = x.astype(A), g.astype(A)
    xt, gt = tensor(x, T, [x.size]), tensor(g, T, [x.size])
    # threshold_backward: x <= threshold ? 0 : g (a NaN x passes g)
    y = np.where(xa <= A(0.5), A(0), ga)
    close(
        f"threshold_backward {T}",
        [T.from_op(v) for v in y],
        npv(C_.threshold_backward(gt, xt, 0.5)),
        TOL[T.name],
        failures=fails,
    )
    yv = T.mem(np.clip(np.nan_to_num(x.astype(np.float64)), -0.99, 0.99))
    yt = tensor(yv, T, [x.size])
    ya = yv.astype(A)
    with np.errstate(all="ignore"):
        s = ga * (A(1) - ya) * ya
        t = ga * (A(1) - ya * ya)
    close(
        f"sigmoid_backward {T}",
        [T.from_op(v) for v in s],
        npv(C_.sigmoid_backward(gt, yt)),
        TOL[T.name],
        failures=fails,
    )
    close(
        f"tanh_backward {T}",
        [T.from_op(v) for v in t],
        npv(C_.tanh_backward(gt, yt)),
        TOL[T.name],
        failures=fails,
    )


def main():
    quiet = "-q" in sys.argv
    t0 = time.time()
    fails = []
    for T in (F32, F64, F16, BF16):
        for name in functors(np.float32):
            check(name, T, fails)
        check_backward(T, fails)
    return report("nn_activation", fails, t0, quiet)


if __name__ == "__main__":
    sys.exit(main())
