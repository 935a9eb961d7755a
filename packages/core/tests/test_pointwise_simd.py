"""The baseline / AVX2 / AVX-512 copies of the real pointwise loops (kernels/cpu/pointwise_vec.cpp:
float32 and float64 add and sub with alpha, mul, div, neg, abs, sqrt, relu). Each ISA copy
available on this machine runs (EMBER_CPU_ISA caps the choice, so each copy runs in a process of
its own) over products of special values (signed zeros, denormals, huge, inf, NaN) and random
values, in every layout the loops take (tensor op tensor, tensor op scalar, scalar op tensor, in
place with a tensor or a scalar) and the strided fallback, at odd lengths and misaligned offsets
(the vector loops' tails and heads): the results must equal NumPy's (the same formula, rounded
the same way, no FMA contraction) and every copy must give the same bits (NaNs aside: see
digest).
"""

import hashlib
import os
import subprocess
import sys

import ember
import numpy as np
import pytest

DTYPES = ["float32", "float64"]
# Special operands: signed zeros, denormals of both dtypes, the extremes, inf and NaN.
SPECIAL = [0.0, -0.0, 1e-45, -1e-40, 1e-310, 1e-300, 1.1754944e-38, 0.5, -1.0, 3.0, -7.25,
           3.4028235e38, -1e30, 1.7e308, np.inf, -np.inf, np.nan, -np.nan]
# Scalar operands (a Python number, and a 0-d tensor) and alphas.
SCALARS = [0.0, -0.0, 1e-40, 2.5, -np.inf, np.nan]
ALPHAS = {"add": [1, 2.5, -0.0], "sub": [1, -3.0]}
# (start, stop) slices of the operands: misaligned starts and odd lengths.
SLICES = [(0, None), (1, None), (3, -2), (5, 22), (7, 8), (2, 2)]


def operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """x and y: every pair of special values, then random values of wide exponents."""
    s = np.array(SPECIAL)
    rng = np.random.default_rng(3)
    n = 1001
    r = rng.standard_normal((2, n)) * np.exp2(rng.integers(-60, 60, (2, n)))
    with np.errstate(over="ignore"):
        x = np.concatenate([np.repeat(s, len(s)), r[0]]).astype(dtype)
        y = np.concatenate([np.tile(s, len(s)), r[1]]).astype(dtype)
    return x, y


def reference(name: str, x, y=None, alpha=1):
    """NumPy's result of the op: each operation rounded to the dtype, as the kernels."""
    with np.errstate(all="ignore"):
        if name == "add":
            return x + x.dtype.type(alpha) * y
        if name == "sub":
            return x - x.dtype.type(alpha) * y
        if name == "mul":
            return x * y
        if name == "div":
            return x / y
        if name == "neg":
            return -x
        if name == "abs":
            return np.where(x <= 0, x.dtype.type(0) - x, x)
        if name == "sqrt":
            return np.sqrt(x)
        assert name == "relu"
        return np.where(np.isnan(x) | (x > 0), x, x.dtype.type(0))


def same(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal values with the same signs of zero, NaN where NaN (its sign and payload aside:
    IEEE leaves open which operand's NaN an operation passes on)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    nan = np.isnan(want)
    if not np.array_equal(np.isnan(got), nan):
        return False
    return bool(np.all((got == want) & (np.signbit(got) == np.signbit(want)) | nan))


def digest(v: np.ndarray) -> str:
    # NaNs canonical: where both operands are NaN (or an invalid product meets a NaN), which
    # one's sign and payload an instruction passes on depends on the operand order the compiler
    # picked, which may differ between copies (IEEE 754 leaves it open; torch's vary too)
    v = np.where(np.isnan(v), v.dtype.type(np.nan), v)
    return hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]


def cases(dtype: str):
    """(label, ember result as NumPy, NumPy reference) for every op, layout and slice."""
    edt = getattr(ember, dtype)
    xn, yn = operands(dtype)
    x, y = ember.tensor(xn), ember.tensor(yn)
    assert x.dtype == edt and y.dtype == edt
    for name, alphas in [("add", ALPHAS["add"]), ("sub", ALPHAS["sub"]), ("mul", [None]),
                         ("div", [None])]:
        for alpha in alphas:
            kw = {} if alpha is None else {"alpha": alpha}
            al = 1 if alpha is None else alpha
            op = getattr(ember, name)
            tag = f"{dtype} {name} alpha={alpha}"
            for a, b in SLICES:
                xs, ys, xr, yr = x[a:b], y[a:b], xn[a:b], yn[a:b]
                yield f"{tag} tt[{a}:{b}]", op(xs, ys, **kw), reference(name, xr, yr, al)
                inplace = xs.clone()
                getattr(inplace, name + "_")(ys, **kw)
                yield f"{tag} it[{a}:{b}]", inplace, reference(name, xr, yr, al)
                for s in SCALARS:
                    sv = np.array(s, dtype=dtype)
                    yield f"{tag} ts({s})[{a}:{b}]", op(xs, s, **kw), reference(name, xr, sv, al)
                    zero_d = ember.tensor(sv)
                    yield (f"{tag} st({s})[{a}:{b}]", op(zero_d, ys, **kw),
                           reference(name, sv, yr, al))
                    inplace = xs.clone()
                    getattr(inplace, name + "_")(s, **kw)
                    yield f"{tag} is({s})[{a}:{b}]", inplace, reference(name, xr, sv, al)
            # the strided fallback, and an operand aliasing the output
            yield f"{tag} strided", op(x[1::2], y[::2][:-1], **kw), reference(
                name, xn[1::2], yn[::2][:-1], al)
            inplace = x.clone()
            getattr(inplace, name + "_")(inplace, **kw)
            yield f"{tag} self", inplace, reference(name, xn, xn, al)
    for name in ("neg", "abs", "sqrt", "relu"):
        op = getattr(ember, name)
        for a, b in SLICES:
            yield f"{dtype} {name}[{a}:{b}]", op(x[a:b]), reference(name, xn[a:b])
            inplace = x[a:b].clone()
            getattr(inplace, name + "_")()
            yield f"{dtype} {name}_[{a}:{b}]", inplace, reference(name, xn[a:b])
        yield f"{dtype} {name} strided", op(x[::3]), reference(name, xn[::3])


_CHILD = """
import sys
sys.path.insert(0, {here!r})
import ember
import test_pointwise_simd as t
print("isa", ember._C._cpu_isa())
for dtype in t.DTYPES:
    for label, got, want in t.cases(dtype):
        got = got.numpy()
        print(label, t.digest(got), "ok" if t.same(got, want) else "MISMATCH")
"""


def _run_isa(isa: str) -> list[str]:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    code = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()


def test_matches_numpy_in_every_layout():
    # the copy this CPU picks, in this process
    bad = [label for dtype in DTYPES for label, got, want in cases(dtype)
           if not same(got.numpy(), want)]
    assert not bad, bad[:20]


def test_every_isa_copy_gives_the_same_bits():
    # baseline, AVX2 and AVX-512 (those this CPU has) agree bit for bit (signed zeros,
    # denormals, infinities; NaN where NaN), and each agrees with NumPy
    order = ["baseline", "avx2", "avx512"]
    isas = order[: order.index(ember._C._cpu_isa()) + 1]  # capped by EMBER_CPU_ISA here too
    if len(isas) < 2:
        pytest.skip("this CPU has only the baseline copy")
    runs = {isa: _run_isa(isa) for isa in isas}
    for isa, lines in runs.items():
        assert lines[0] == f"isa {isa}"
        assert len(lines) > 500
        assert not [ln for ln in lines if ln.endswith("MISMATCH")], isa
    for isa in isas[1:]:
        diff = [(a, b) for a, b in zip(runs["baseline"], runs[isa]) if a != b][1:]
        assert len(runs[isa]) == len(runs["baseline"])
        assert not diff, (isa, diff[:10])

