"""The vectorized complex64 / complex128 kernels (kernels/cpu/complex_vec.cpp: add and sub
with alpha, mul, div, reciprocal, square and pow(z, 2), abs, angle, sgn, conj_physical, sigmoid's last step;
pow(z, 0.5) as sqrt) against torch on products of special values (signed zeros, tiny, huge
magnitudes whose squares overflow or underflow, inf, NaN) and random values; every layout (strided, broadcast, scalar operand,
in-place, out=) and every length (the kernels' block tails) giving the contiguous result's bits.
"""

import itertools
import math
import os
import subprocess
import sys

import ember
import numpy as np
import pytest


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


DTYPES = ["complex64", "complex128"]
RTOL = {"complex64": 4e-6, "complex128": 1e-13}
# Parts of the special values: huge ones overflow |z|^2 (and complex64 itself), tiny ones
# underflow it.
SPECIAL = [0.0, -0.0, 1e-300, 1e-40, 1e-20, 0.5, -1.0, 3.0, 1e20, -1e30, 1e200, 1.7e308,
           math.inf, -math.inf, math.nan]


def special_grid() -> np.ndarray:
    return np.array([complex(a, b) for a, b in itertools.product(SPECIAL, SPECIAL)])


def random_values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.integers(-20, 20, n))
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)) * scale


def _pair(torch, values, dtype):
    with np.errstate(over="ignore"):
        e = ember.tensor(values.astype(np.complex128)).to(getattr(ember, dtype))
        t = torch.tensor(values.astype(np.complex128)).to(getattr(torch, dtype))
    return e, t


def _np(x) -> np.ndarray:
    if hasattr(x, "resolve_conj"):
        x = x.resolve_conj()
    return np.asarray(x.numpy()).astype(np.complex128)


def _agree(a, b, scale, rtol, signed_zeros=True):
    """Both NaN, equal with the same sign of zero, or finite and within rtol * scale."""
    with np.errstate(invalid="ignore"):
        nan = np.isnan(a) & np.isnan(b)
        eq = (a == b) & ((np.signbit(a) == np.signbit(b)) | (not signed_zeros))
        fin = np.isfinite(a) & np.isfinite(b) & ((a != 0) | (b != 0))
        close = fin & (np.abs(a - b) <= rtol * scale)
    return nan | eq | close


def _assert_match(got, want, dtype, what, inputs, signed_zeros=True, loose=None):
    """got agrees with want elementwise (see _agree); where `loose` is set, finite parts only
    within 1e-2 of themselves (the inf / NaN pattern still exact)."""
    g, w = _np(got), _np(want)
    assert g.shape == w.shape
    scale = np.abs(w)
    scale = np.where(np.isfinite(scale), scale, 0.0)
    ok = (_agree(g.real, w.real, scale, RTOL[dtype], signed_zeros)
          & _agree(g.imag, w.imag, scale, RTOL[dtype], signed_zeros))
    if loose is not None:
        ok |= loose & (_agree(g.real, w.real, np.abs(w.real), 1e-2, signed_zeros)
                       & _agree(g.imag, w.imag, np.abs(w.imag), 1e-2, signed_zeros))
    bad = np.flatnonzero(~ok.reshape(-1))
    detail = [(tuple(np.asarray(x).reshape(-1)[i] for x in inputs), g.reshape(-1)[i],
               w.reshape(-1)[i]) for i in bad[:4]]
    assert bad.size == 0, f"{what} {dtype}: {bad.size} mismatches, e.g. {detail}"


BINARY = {
    "mul": lambda m, x, y: m.mul(x, y),
    "div": lambda m, x, y: m.div(x, y),
    "add": lambda m, x, y: m.add(x, y),
    "sub": lambda m, x, y: m.sub(x, y),
    "add alpha": lambda m, x, y: m.add(x, y, alpha=2 - 0.5j),
    "sub alpha": lambda m, x, y: m.sub(x, y, alpha=-3),
}
UNARY = {
    "reciprocal": lambda m, x: m.reciprocal(x),
    "square": lambda m, x: m.square(x),
    "pow 2": lambda m, x: m.pow(x, 2),
    "pow 0.5": lambda m, x: m.pow(x, 0.5),
    "abs": lambda m, x: m.abs(x),
    "sgn": lambda m, x: m.sgn(x),
    "conj_physical": lambda m, x: m.conj_physical(x),
    "angle": lambda m, x: m.angle(x),
    "sigmoid": lambda m, x: m.sigmoid(x),
}


def _subnormal_part(z, dtype):
    tiny = np.finfo(np.float32 if dtype == "complex64" else np.float64).tiny
    with np.errstate(over="ignore"):
        z = z.astype(dtype)
    return [(np.abs(p) < tiny) & (p != 0) for p in (z.real, z.imag)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_special_values_match_torch(torch, op, dtype):
    z = special_grid()
    x, y = (a.reshape(-1) for a in np.meshgrid(z, z, indexing="ij"))
    (ex, tx), (ey, ty) = _pair(torch, x, dtype), _pair(torch, y, dtype)
    f = BINARY[op]
    if op != "div":
        _assert_match(f(ember, ex, ey), f(torch, tx, ty), dtype, op, (x, y))
        return
    # Known difference: ember divides by Smith's scaled form (as numpy and torch's own scalar
    # path), torch's vectorized path by the conjugate product over |y|^2 scaled: the sign of a
    # zero result may differ, and so may the last digits where y has a subnormal part.
    sub = _subnormal_part(y, dtype)
    _assert_match(f(ember, ex, ey), f(torch, tx, ty), dtype, op, (x, y), signed_zeros=False,
                  loose=sub[0] | sub[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_random_values_match_torch(torch, op, dtype):
    x, y = random_values(4099, 1), random_values(4099, 2)
    (ex, tx), (ey, ty) = _pair(torch, x, dtype), _pair(torch, y, dtype)
    f = BINARY[op]
    _assert_match(f(ember, ex, ey), f(torch, tx, ty), dtype, op, (x, y))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_special_and_random_values_match_torch(torch, op, dtype):
    z = np.concatenate([special_grid(), random_values(1031, 3)])
    e, t = _pair(torch, z, dtype)
    f = UNARY[op]
    got, want = f(ember, e), f(torch, t)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    _assert_match(got, want, dtype, op, (z,))


@pytest.mark.parametrize("dtype", DTYPES)
def test_abs_does_not_overflow_or_underflow(torch, dtype):
    big = 3e38 if dtype == "complex64" else 1e308
    tiny = 3e-39 if dtype == "complex64" else 1e-310
    z = np.array([big + big * 1j, tiny + tiny * 1j, big + 0j, tiny * 1j, 3 + 4j,
                  complex(math.inf, math.nan), complex(math.nan, -math.inf)])
    e, t = _pair(torch, z, dtype)
    got, want = ember.abs(e).numpy(), torch.abs(t).numpy()
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=0)
    assert np.isinf(got[-2:]).all()
    # sgn = z / |z| with that |z|: the unit vector also where |z|^2 underflows (torch's
    # complex128 sgn gives inf there); complex64's |big + big i| overflows float, so 0 there
    sgn = ember.sgn(e).numpy()
    want = np.array([0.0 if dtype == "complex64" else (1 + 1j) / math.sqrt(2),
                     (1 + 1j) / math.sqrt(2), 1, 1j, 0.6 + 0.8j])
    np.testing.assert_allclose(sgn[:5], want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 3, 127, 128, 129, 1000])
def test_every_length_gives_the_elementwise_result(dtype, n):
    # the kernels work in blocks: every tail length gives each element's own value
    x, y = random_values(n, 4), random_values(n, 5)
    ex = ember.tensor(x).to(getattr(ember, dtype))
    ey = ember.tensor(y).to(getattr(ember, dtype))
    for f in list(BINARY.values()):
        whole = _np(f(ember, ex, ey))
        single = np.array([_np(f(ember, ex[i:i + 1], ey[i:i + 1]))[0] for i in range(min(n, 5))])
        np.testing.assert_array_equal(whole[:5], single)
    for f in UNARY.values():
        whole = _np(f(ember, ex))
        one = _np(f(ember, ex[n - 1:]))
        np.testing.assert_array_equal(whole[n - 1:], one)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_give_the_contiguous_bits(dtype):
    z = special_grid()[:200]
    base = ember.tensor(np.concatenate([z, random_values(200, 6)])).to(getattr(ember, dtype))
    x = base.reshape(20, 20)
    y = base.flip(0).reshape(20, 20)
    xt, yt = x.t(), y.t()  # transposed: strided inner loops
    assert not xt.is_contiguous()
    for key, f in BINARY.items():
        name = key.split()[0]
        want = _np(f(ember, xt.contiguous(), yt.contiguous()))
        np.testing.assert_array_equal(_np(f(ember, xt, yt)), want, err_msg=name)
        # broadcast row, a Python scalar and a 0-d tensor operand
        row = y[3]
        np.testing.assert_array_equal(_np(f(ember, x, row)),
                                      _np(f(ember, x, row.expand(20, 20).contiguous())))
        s = complex(_np(y[2, 5])[()])
        np.testing.assert_array_equal(_np(f(ember, x, s)), _np(f(ember, x, y[2, 5])))
        np.testing.assert_array_equal(
            _np(f(ember, x, y[2, 5])),
            _np(f(ember, x, y[2, 5].expand(20, 20).contiguous())))
        out = ember.empty(20, 20, dtype=getattr(ember, dtype))
        getattr(ember, name)(x, y, out=out)
        np.testing.assert_array_equal(_np(out), _np(BINARY[name](ember, x, y)))
        inplace = x.clone()
        getattr(inplace, name + "_")(y)
        np.testing.assert_array_equal(_np(inplace), _np(BINARY[name](ember, x, y)))
    for name, f in UNARY.items():
        want = _np(f(ember, xt.contiguous()))
        np.testing.assert_array_equal(_np(f(ember, xt)), want, err_msg=name)
    for name in ("reciprocal", "square", "sgn"):
        inplace = x.clone()
        getattr(inplace, name + "_")()
        np.testing.assert_array_equal(_np(inplace), _np(getattr(ember, name)(x)), err_msg=name)
    out = ember.empty(20, 20, dtype=ember.float32 if dtype == "complex64" else ember.float64)
    ember.abs(xt, out=out)
    np.testing.assert_array_equal(out.numpy(), ember.abs(xt.contiguous()).numpy())


def test_mixed_precision_and_real_operands(torch):
    # complex64 * complex128 promotes; a real tensor operand is cast to complex first
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(300) + 1j * rng.standard_normal(300)).astype(np.complex64)
    b = rng.standard_normal(300) + 1j * rng.standard_normal(300)
    r = rng.standard_normal(300).astype(np.float32)
    for op in ("mul", "div", "add", "sub"):
        got = getattr(ember, op)(ember.tensor(a), ember.tensor(b))
        want = getattr(torch, op)(torch.tensor(a), torch.tensor(b))
        assert str(got.dtype) == "ember.complex128"
        _assert_match(got, want, "complex128", op, (a, b))
        got = getattr(ember, op)(ember.tensor(a), ember.tensor(r))
        want = getattr(torch, op)(torch.tensor(a), torch.tensor(r))
        assert str(got.dtype) == "ember.complex64"
        _assert_match(got, want, "complex64", op, (a, r))


_CHILD = """
import sys
sys.path.insert(0, {here!r})
import hashlib
import numpy as np
import ember
import test_complex_arith as t
z = np.concatenate([t.special_grid(), t.random_values(1000, 8)])


def digest(v):
    # NaNs canonical: which operand's NaN (its sign bit) an operation passes on may differ
    parts = [np.where(np.isnan(p), np.nan, p) for p in (v.real, v.imag)]
    return hashlib.sha1(np.stack(parts).tobytes()).hexdigest()


for dtype in t.DTYPES:
    x = ember.tensor(z).to(getattr(ember, dtype))
    y = x.flip(0)
    for key, f in sorted(t.BINARY.items()):
        print(dtype, key, digest(t._np(f(ember, x, y))))
    for key, f in sorted(t.UNARY.items()):
        print(dtype, key, digest(t._np(f(ember, x))))
"""


def _run_isa(isa: str) -> list[str]:
    env = dict(os.environ, EMBER_CPU_ISA=isa)
    code = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()


def test_every_isa_copy_gives_the_same_bits():
    # no contraction into FMA in any copy: baseline, AVX2 and AVX-512 agree bit for bit (NaNs
    # but for their sign)
    runs = {isa: _run_isa(isa) for isa in ("avx512", "avx2", "baseline")}
    assert len(runs["avx512"]) == 2 * (len(BINARY) + len(UNARY))
    assert runs["avx2"] == runs["avx512"]
    assert runs["baseline"] == runs["avx512"]
