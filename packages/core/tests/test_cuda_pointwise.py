"""The CUDA elementwise engine and the pointwise ops on the GPU, against the CPU kernels.

Every op runs on the same values on both devices, in each dtype it takes and in the layouts the
engine treats differently: contiguous (the vectorized path, aligned or not), transposed, sliced
with a step (the strided path), broadcast inputs, Python numbers and 0-d CPU tensors as operands
(passed to the kernel by value), 0-d and empty tensors, a few million elements with odd sizes
and misaligned starts, and a tensor past 2 GiB (cut into 32-bit-indexable pieces). Skipped
without a GPU."""

from __future__ import annotations

import ember
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA device")

F32, F64, F16, BF16 = ember.float32, ember.float64, ember.float16, ember.bfloat16
I8, U8, I16, I32, I64, BOOL = (ember.int8, ember.uint8, ember.int16, ember.int32, ember.int64,
                               ember.bool)
FLOATS = [F32, F64, F16, BF16]
INTS = [I32, I64, I8, U8, I16]
NUMERIC = FLOATS + INTS
ALL = NUMERIC + [BOOL]

# (rtol, atol) by result dtype: the GPU computes the 16-bit floats in float, as the CPU does,
# but its float math may differ by an ulp, which can flip the last bit of a 16-bit result.
TOL = {F32: (2e-5, 1e-6), F64: (1e-12, 1e-12), F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)}


def values(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype == BF16 else t.numpy()


def assert_same(got, want, where=""):
    if not isinstance(want, ember.Tensor):
        assert got == want, where
        return
    assert got.device.type == "cuda", where
    assert (tuple(got.shape), got.dtype) == (tuple(want.shape), want.dtype), where
    rtol, atol = TOL.get(want.dtype, (0, 0))
    np.testing.assert_allclose(values(got).astype(np.float64), values(want).astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=where)


# ---- inputs --------------------------------------------------------------------------------

def sample(shape, dtype, domain, rng):
    """A NumPy array of `shape` with values suited to the op's domain in `dtype`."""
    n = int(np.prod(shape))
    if dtype == BOOL:
        a = rng.random(n) < 0.5
    elif dtype in (I8, U8, I16, I32, I64):
        lo, hi = {"pos": (1, 9), "small": (0, 6), "shift": (-2, 12), "nonzero": (1, 9)}.get(
            domain, (-9, 10))
        if dtype == U8:
            lo = max(lo, 0)
        a = rng.integers(lo, hi, n)
        if domain == "nonzero" and dtype != U8:
            a = a * rng.choice([-1, 1], n)
    else:
        if domain == "pos":
            a = rng.uniform(0.1, 4.0, n)
        elif domain == "unit":
            a = rng.uniform(-0.95, 0.95, n)
        elif domain == "nonzero":
            a = rng.uniform(0.5, 3.0, n) * rng.choice([-1, 1], n)
        elif domain == "special":
            a = rng.standard_normal(n) * 3
            a[::7] = np.nan
            a[1::11] = np.inf
            a[2::13] = -np.inf
        else:
            a = rng.standard_normal(n) * 2
    return np.asarray(a).reshape(shape)


def make(arr, dtype, device="cpu"):
    if dtype == BF16:
        return ember.from_numpy(np.array(arr, dtype=np.float32)).to(device=device, dtype=BF16)
    np_dtype = {F32: np.float32, F64: np.float64, F16: np.float16, I8: np.int8, U8: np.uint8,
                I16: np.int16, I32: np.int32, I64: np.int64, BOOL: np.bool_}[dtype]
    return ember.from_numpy(np.array(arr, dtype=np_dtype)).to(device)


SHAPE = (3, 5, 7)


def layout_pair(shape, dtype, domain, layout, rng):
    """The same values as a CPU tensor and a CUDA tensor, both in `layout` (views made on each
    device, so the GPU sees the strides too)."""
    if layout == "contiguous":
        base_shape, view = shape, lambda t: t
    elif layout == "transposed":
        base_shape = shape[::-1]
        view = lambda t: t.permute(*reversed(range(t.dim())))  # noqa: E731
    elif layout == "strided":
        base_shape = tuple(2 * d for d in shape)
        view = lambda t: t[tuple(slice(i % 2, None, 2) for i in range(t.dim()))]  # noqa: E731
    elif layout == "offset":  # contiguous but starting one element in: unaligned vectors
        base_shape = (shape[0] + 1,) + tuple(shape[1:])
        view = lambda t: t[1:]  # noqa: E731
    else:
        raise ValueError(layout)
    arr = sample(base_shape, dtype, domain, rng)
    cpu, gpu = view(make(arr, dtype)), view(make(arr, dtype, "cuda"))
    assert tuple(cpu.shape) == tuple(shape)
    return cpu, gpu


LAYOUTS = ["contiguous", "transposed", "strided", "offset"]


def run_both(fn, cpu_args, gpu_args, kwargs=None, where="", may_fail=False):
    """fn on the CPU arguments and on the GPU ones, compared. With may_fail, a call the CPU
    refuses must be refused on the GPU with the same kind of error."""
    kwargs = kwargs or {}
    try:
        want = fn(*cpu_args, **kwargs)
    except Exception as e:
        if not may_fail:
            raise
        with pytest.raises(type(e)):
            fn(*gpu_args, **kwargs)
        return None
    got = fn(*gpu_args, **kwargs)
    assert_same(got, want, where)
    return got


# ---- unary ---------------------------------------------------------------------------------

FLOAT_UNARY = {
    "exp": None, "exp2": None, "expm1": None, "log": "pos", "log2": "pos", "log10": "pos",
    "log1p": "pos", "sqrt": "pos", "rsqrt": "pos", "sin": None, "cos": None, "tan": "unit",
    "asin": "unit", "acos": "unit", "atan": None, "sinh": None, "cosh": None, "tanh": None,
    "sigmoid": None, "erf": None, "erfc": None, "erfinv": "unit", "reciprocal": "nonzero",
    "asinh": None, "acosh": "pos", "atanh": "unit",  # acosh: NaN below 1 on both devices
}
SAME_UNARY = {
    "neg": NUMERIC, "abs": NUMERIC, "sign": ALL, "sgn": ALL, "square": NUMERIC, "relu": NUMERIC,
    "floor": NUMERIC, "ceil": NUMERIC, "trunc": NUMERIC, "frac": FLOATS, "round": NUMERIC,
    "bitwise_not": INTS + [BOOL],
}
PREDICATES = ["isnan", "isinf", "isfinite", "logical_not"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary(name, layout):
    rng = np.random.default_rng(0)
    fn = getattr(ember, name)
    for dtype in FLOATS + [I32, I64]:
        c, g = layout_pair(SHAPE, dtype, FLOAT_UNARY[name], layout, rng)
        run_both(fn, [c], [g], where=f"{name} {dtype} {layout}")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(SAME_UNARY))
def test_same_dtype_unary(name, layout):
    rng = np.random.default_rng(1)
    fn = getattr(ember, name)
    for dtype in SAME_UNARY[name]:
        signs = name in ("sign", "sgn")
        c, g = layout_pair(SHAPE, dtype, "special" if signs else None, layout, rng)
        if signs and dtype in FLOATS:
            c, g = ember.nan_to_num(c), ember.nan_to_num(g)
        run_both(fn, [c], [g], where=f"{name} {dtype} {layout}")


@pytest.mark.parametrize("name", PREDICATES + ["nan_to_num"])
def test_predicates_and_nan_to_num(name):
    rng = np.random.default_rng(2)
    fn = getattr(ember, name)
    for dtype in ALL:
        for layout in LAYOUTS:
            c, g = layout_pair(SHAPE, dtype, "special", layout, rng)
            run_both(fn, [c], [g], where=f"{name} {dtype} {layout}")
    c, g = layout_pair(SHAPE, F32, "special", "contiguous", rng)
    for kw in ({"nan": 1.5}, {"posinf": 7.0, "neginf": -3.0}, {"nan": -1.0, "posinf": 2.0}):
        run_both(ember.nan_to_num, [c], [g], kw)
    for dtype in (F16, BF16):  # the default infinities are the dtype's largest finite values
        c, g = layout_pair(SHAPE, dtype, "special", "strided", rng)
        run_both(ember.nan_to_num, [c], [g])


def test_round_half_to_even_and_decimals():
    x = ember.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 1.25, 1.35, -7.125])
    for dtype in FLOATS:
        c = x.to(dtype)
        run_both(ember.round, [c], [c.cuda()], where=f"round {dtype}")
        run_both(ember.round, [c], [c.cuda()], {"decimals": 1}, where=f"round {dtype} d=1")
        run_both(ember.round, [c], [c.cuda()], {"decimals": -1}, where=f"round {dtype} d=-1")
    assert values(ember.round(x.cuda())).tolist()[:6] == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]
    with pytest.raises(RuntimeError, match="decimals"):
        ember.round(ember.tensor([1, 2]).cuda(), decimals=1)


# ---- binary --------------------------------------------------------------------------------

# name -> (dtypes, domain of self, domain of other, extra kwargs)
BINARY = {
    "add": (ALL, None, None, {}),
    "sub": (NUMERIC, None, None, {}),
    "mul": (ALL, None, None, {}),
    "div": (NUMERIC, None, "nonzero", {}),
    "true_divide": (NUMERIC, None, "nonzero", {}),
    "floor_divide": (NUMERIC, None, "nonzero", {}),
    "remainder": (NUMERIC, None, "nonzero", {}),
    "fmod": (NUMERIC, None, "nonzero", {}),
    "pow": (NUMERIC, "pos", "small", {}),
    "atan2": (FLOATS + [I32], None, None, {}),
    "minimum": (ALL, "special", "special", {}),
    "maximum": (ALL, "special", "special", {}),
    "eq": (ALL, "small", "small", {}),
    "ne": (ALL, "small", "small", {}),
    "lt": (ALL, None, None, {}),
    "le": (ALL, "small", "small", {}),
    "gt": (ALL, None, None, {}),
    "ge": (ALL, "small", "small", {}),
    "logical_and": (ALL, "small", "small", {}),
    "logical_or": (ALL, "small", "small", {}),
    "logical_xor": (ALL, "small", "small", {}),
    "bitwise_and": (INTS + [BOOL], None, None, {}),
    "bitwise_or": (INTS + [BOOL], None, None, {}),
    "bitwise_xor": (INTS + [BOOL], None, None, {}),
    "bitwise_left_shift": (INTS + [BOOL], None, "shift", {}),
    "bitwise_right_shift": (INTS + [BOOL], None, "shift", {}),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, layout):
    dtypes, da, db, kw = BINARY[name]
    rng = np.random.default_rng(3)
    fn = getattr(ember, name)
    for dtype in dtypes:
        a, ga = layout_pair(SHAPE, dtype, da, layout, rng)
        b, gb = layout_pair(SHAPE, dtype, db, layout, rng)
        run_both(fn, [a, b], [ga, gb], kw, where=f"{name} {dtype} {layout}")
        # mixed layouts: a contiguous other
        b2, gb2 = layout_pair(SHAPE, dtype, db, "contiguous", rng)
        run_both(fn, [a, b2], [ga, gb2], kw, where=f"{name} {dtype} {layout}+contiguous")


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_scalars_and_promotion(name):
    dtypes, da, db, kw = BINARY[name]
    rng = np.random.default_rng(4)
    fn = getattr(ember, name)
    for dtype in dtypes:
        a, ga = layout_pair((3, 1, 7), dtype, da, "contiguous", rng)
        b, gb = layout_pair((5, 1), dtype, db, "strided", rng)
        run_both(fn, [a, b], [ga, gb], kw, where=f"{name} {dtype} broadcast")
        a2, ga2 = layout_pair((3, 1, 7), dtype, db, "contiguous", rng)
        run_both(fn, [b, a2], [gb, ga2], kw, where=f"{name} {dtype} broadcast swapped")
        # 0-d operands: a CUDA one (read once per thread) and a CPU one (passed by value)
        z = make(sample((), dtype, db, rng), dtype)
        run_both(fn, [a, z], [ga, z.cuda()], kw, where=f"{name} {dtype} 0-d cuda")
        run_both(fn, [a, z], [ga, z], kw, where=f"{name} {dtype} 0-d cpu")
        run_both(fn, [z, z], [z.cuda(), z.cuda()], kw, where=f"{name} {dtype} both 0-d")
        # empty
        e, ge = layout_pair((0, 4), dtype, da, "contiguous", rng)
        e2, ge2 = layout_pair((4,), dtype, db, "contiguous", rng)
        run_both(fn, [e, e2], [ge, ge2], kw, where=f"{name} {dtype} empty")
    # Python numbers (held by the iterator, passed by value) and promotion with them
    if name.startswith(("bitwise", "logical")):
        numbers = [3, True]
    elif name in ("div", "true_divide", "floor_divide", "remainder", "fmod"):
        numbers = [3, -2, 2.5, -0.75]
    elif name == "pow":
        numbers = [2, 3, 0.5, 2.0, 0]
    else:
        numbers = [3, -2, 2.5, True]
    for dtype in [d for d in (F32, F16, BF16, I32, I64, U8, BOOL) if d in dtypes]:
        a, ga = layout_pair(SHAPE, dtype, da, "transposed", rng)
        for s in numbers:
            run_both(fn, [a, s], [ga, s], kw, where=f"{name} {dtype} number {s!r}",
                     may_fail=True)
    # mixed tensor dtypes: the iterator casts on the device (_copy_from) first
    if all(d in dtypes for d in (I32, F32)):
        a, ga = layout_pair(SHAPE, I32, da, "strided", rng)
        b, gb = layout_pair(SHAPE, F16 if F16 in dtypes else F32, db, "contiguous", rng)
        run_both(fn, [a, b], [ga, gb], kw, where=f"{name} int32 with float16")


def test_out_and_inplace():
    rng = np.random.default_rng(5)
    a, ga = layout_pair(SHAPE, F32, None, "contiguous", rng)
    b, gb = layout_pair(SHAPE, F32, None, "strided", rng)
    out_c, out_g = ember.empty(SHAPE, dtype=F64), ember.empty(SHAPE, dtype=F64, device="cuda")
    ember.add(a, b, alpha=2, out=out_c)
    r = ember.add(ga, gb, alpha=2, out=out_g)
    assert r is out_g
    assert_same(out_g, out_c)
    # an out= whose layout is transposed
    oc = ember.empty(SHAPE[::-1]).permute(2, 1, 0)
    og = ember.empty(SHAPE[::-1], device="cuda").permute(2, 1, 0)
    ember.mul(a, b, out=oc)
    ember.mul(ga, gb, out=og)
    assert_same(og, oc)
    # in place on a strided view, with a 0-d CPU tensor operand
    c, gc = layout_pair(SHAPE, F32, None, "strided", rng)
    c.sub_(b, alpha=0.5)
    gc.sub_(gb, alpha=0.5)
    assert_same(gc, c)
    c.mul_(ember.tensor(3.0))
    gc.mul_(ember.tensor(3.0))
    assert_same(gc, c)
    c.clamp_(-1.0, 1.0)
    gc.clamp_(-1.0, 1.0)
    assert_same(gc, c)
    # int tensor, float result type can't go into int out=
    with pytest.raises(RuntimeError):
        ember.div(ga, gb, out=ember.empty(SHAPE, dtype=I32, device="cuda"))


def test_integer_division_rules():
    a = ember.tensor([7, -7, 7, -7, 0, -128, 5, -1], dtype=I64)
    b = ember.tensor([2, 2, -2, -2, 3, -1, -1, 3], dtype=I64)
    for dtype in (I8, I16, I32, I64):
        ca, cb = a.to(dtype), b.to(dtype)
        for name in ("floor_divide", "remainder", "fmod"):
            run_both(getattr(ember, name), [ca, cb], [ca.cuda(), cb.cuda()], where=f"{name} {dtype}")
        for mode in ("trunc", "floor"):
            run_both(ember.div, [ca, cb], [ca.cuda(), cb.cuda()], {"rounding_mode": mode},
                     where=f"div {mode} {dtype}")
    # a divisor of zero given as a number raises on the GPU too
    for name, kw in (("floor_divide", {}), ("remainder", {}), ("fmod", {}),
                     ("div", {"rounding_mode": "trunc"})):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(ember, name)(a.cuda(), 0, **kw)
    # floats: Python's sign rules and -1 // inf
    x = ember.tensor([5.5, -5.5, 5.5, -5.5, -1.0, 1.0, 0.0, -0.0, 3.0])
    y = ember.tensor([2.0, 2.0, -2.0, -2.0, float("inf"), float("-inf"), 3.0, 3.0, 0.0])
    for name in ("floor_divide", "remainder", "fmod"):
        for dtype in (F32, F64, F16):
            cx, cy = x.to(dtype), y.to(dtype)
            run_both(getattr(ember, name), [cx, cy], [cx.cuda(), cy.cuda()],
                     where=f"{name} {dtype}")


def test_pow_rules():
    base = ember.tensor([2, -2, 3, 1, -1, 0, 5], dtype=I64)
    exp = ember.tensor([3, 3, 0, -2, -3, 2, -1], dtype=I64)
    for dtype in (I32, I64, I16):
        run_both(ember.pow, [base.to(dtype), exp.to(dtype)],
                 [base.to(dtype).cuda(), exp.to(dtype).cuda()], where=f"pow {dtype}")
    with pytest.raises(RuntimeError, match="negative integer powers"):
        ember.pow(base.cuda(), -1)
    x = ember.tensor([1.5, -2.0, 0.0, 4.0, -0.5])
    for e in (2, 3, 0.5, -1, 2.0, ember.tensor(2.0)):
        run_both(ember.pow, [x, e], [x.cuda(), e], where=f"pow float {e!r}")
    # rpow: a number to the power of a tensor
    run_both(lambda t: 2 ** t, [x], [x.cuda()])
    run_both(lambda t: 3 ** t, [base.abs()], [base.abs().cuda()])


def test_shift_edge_cases():
    x = ember.tensor([1, -8, 5, -1, 100, 7], dtype=I64)
    s = ember.tensor([0, 1, 63, 64, -1, 70], dtype=I64)
    for dtype in (I8, I16, I32, I64, U8):
        cx = x.abs().to(dtype) if dtype == U8 else x.to(dtype)
        cs = s.clamp(min=0).to(dtype) if dtype == U8 else s.to(dtype)
        for name in ("bitwise_left_shift", "bitwise_right_shift"):
            run_both(getattr(ember, name), [cx, cs], [cx.cuda(), cs.cuda()],
                     where=f"{name} {dtype}")


def test_alpha_checks_match_cpu():
    a = ember.tensor([1, 2, 3])
    for fn, kw in ((ember.add, {"alpha": 1.5}), (ember.sub, {"alpha": 0.5}),
                   (ember.add, {"alpha": 300})):
        run_both(fn, [a.to(I8), a.to(I8)], [a.to(I8).cuda(), a.to(I8).cuda()], kw, may_fail=True)
    with pytest.raises(RuntimeError, match="bool"):
        ember.sub(ember.tensor([True]).cuda(), ember.tensor([False]).cuda())
    run_both(ember.rsub, [a.float(), 2.5], [a.float().cuda(), 2.5], {"alpha": 2})


# ---- ternary and others --------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_clamp(layout):
    rng = np.random.default_rng(6)
    for dtype in NUMERIC:
        x, gx = layout_pair(SHAPE, dtype, "special" if dtype in FLOATS else None, layout, rng)
        lo, glo = layout_pair((5, 1), dtype, None, "contiguous", rng)
        hi, ghi = lo + 2, glo + 2
        w = f"clamp {dtype} {layout}"
        run_both(ember.clamp, [x], [gx], {"min": -1, "max": 2}, where=w)
        run_both(ember.clamp, [x], [gx], {"min": 1}, where=w + " min only")
        run_both(ember.clamp, [x], [gx], {"max": 0}, where=w + " max only")
        run_both(ember.clamp, [x, lo, hi], [gx, glo, ghi], where=w + " tensors")
        run_both(ember.clamp, [x, lo], [gx, glo], where=w + " tensor min")
        run_both(ember.clamp, [x, None, hi], [gx, None, ghi], where=w + " tensor max")
        run_both(ember.clip, [x], [gx], {"min": -1, "max": 2}, where=w + " clip")
    with pytest.raises(RuntimeError, match="overflow"):
        ember.clamp(ember.tensor([1, 2], dtype=I8).cuda(), 0, 1000)
    f = ember.tensor([1.0, float("nan"), -3.0])
    lo = ember.tensor([0.0, 0.0, float("nan")])
    run_both(ember.clamp, [f, lo], [f.cuda(), lo.cuda()])


def test_where():
    rng = np.random.default_rng(7)
    for dtype in ALL:
        for layout in LAYOUTS:
            a, ga = layout_pair(SHAPE, dtype, None, layout, rng)
            b, gb = layout_pair(SHAPE, dtype, None, "contiguous", rng)
            c, gc = layout_pair(SHAPE, BOOL, None, layout, rng)
            run_both(ember.where, [c, a, b], [gc, ga, gb], where=f"where {dtype} {layout}")
            cu8 = c.to(U8)
            run_both(ember.where, [cu8, a, b], [cu8.cuda(), ga, gb], where=f"where u8 {dtype}")
        c, gc = layout_pair((5, 1), BOOL, None, "contiguous", rng)
        a, ga = layout_pair((3, 1, 7), dtype, None, "strided", rng)
        run_both(ember.where, [c, a, 0], [gc, ga, 0], where=f"where {dtype} broadcast number")
        run_both(ember.where, [c, 1.5, a], [gc, 1.5, ga], where=f"where {dtype} number first")
    with pytest.raises(TypeError):
        ember.where(ember.tensor([1.0]).cuda(), ember.tensor([1.0]).cuda(), 0.0)


def test_lerp_addcmul_addcdiv():
    rng = np.random.default_rng(8)
    for dtype in FLOATS:
        for layout in LAYOUTS:
            a, ga = layout_pair(SHAPE, dtype, None, layout, rng)
            b, gb = layout_pair(SHAPE, dtype, None, "contiguous", rng)
            w, gw = layout_pair((7,), dtype, "unit", "contiguous", rng)
            d, gd = layout_pair(SHAPE, dtype, "nonzero", "strided", rng)
            where = f"{dtype} {layout}"
            run_both(ember.lerp, [a, b, 0.3], [ga, gb, 0.3], where="lerp " + where)
            run_both(ember.lerp, [a, b, 0.7], [ga, gb, 0.7], where="lerp " + where)
            run_both(ember.lerp, [a, b, w], [ga, gb, gw], where="lerp tensor w " + where)
            run_both(ember.addcmul, [a, b, d], [ga, gb, gd], {"value": 0.5}, where="addcmul " + where)
            run_both(ember.addcdiv, [a, b, d], [ga, gb, gd], {"value": -2}, where="addcdiv " + where)
    for dtype in (I32, I64, I16):
        a, ga = layout_pair(SHAPE, dtype, None, "strided", rng)
        run_both(ember.addcmul, [a, a, a], [ga, ga, ga], {"value": 3}, where=f"addcmul {dtype}")
    with pytest.raises(RuntimeError):
        ember.addcdiv(ember.tensor([1]).cuda(), ember.tensor([1]).cuda(), ember.tensor([1]).cuda())


def test_isclose_allclose_equal():
    rng = np.random.default_rng(9)
    for dtype in ALL:
        a, ga = layout_pair(SHAPE, dtype, "special" if dtype in FLOATS else "small", "strided",
                            rng)
        b = a.clone()
        if dtype in FLOATS:
            b = b + 1e-3 * ember.ones(SHAPE, dtype=dtype)
        gb = b.cuda()
        for kw in ({}, {"equal_nan": True}, {"rtol": 1e-2, "atol": 1e-2}):
            run_both(ember.isclose, [a, b], [ga, gb], kw, where=f"isclose {dtype} {kw}")
            run_both(ember.allclose, [a, b], [ga, gb], kw, where=f"allclose {dtype} {kw}")
        run_both(ember.equal, [a, a.clone()], [ga, ga.clone()], where=f"equal {dtype}")
        run_both(ember.equal, [a, b], [ga, gb], where=f"equal {dtype} differs")
    x = ember.ones(1000, device="cuda")
    assert ember.allclose(x, x.clone())
    y = x.clone()
    y[999:].fill_(2.0)
    assert not ember.allclose(x, y)
    assert not ember.equal(x, y)
    assert not ember.equal(x, x[:10])
    assert ember.equal(ember.empty(0, device="cuda"), ember.empty(0, device="cuda"))


# ---- copies and fills ----------------------------------------------------------------------

@pytest.mark.parametrize("src_dtype", ALL)
def test_copy_between_dtypes_and_layouts(src_dtype):
    rng = np.random.default_rng(10)
    for dst_dtype in ALL:
        for layout in LAYOUTS:
            s, gs = layout_pair(SHAPE, src_dtype, "pos", layout, rng)
            want = ember.empty(SHAPE, dtype=dst_dtype).copy_(s)
            got = ember.empty(SHAPE, dtype=dst_dtype, device="cuda").copy_(gs)
            assert_same(got, want, f"copy {src_dtype} -> {dst_dtype} {layout}")
            # into a transposed destination, and via .to(dtype)
            dt = ember.empty(SHAPE[::-1], dtype=dst_dtype, device="cuda").permute(2, 1, 0)
            dt.copy_(gs)
            assert_same(dt, want, f"copy {src_dtype} -> {dst_dtype} {layout} to transposed")
            assert_same(gs.to(dst_dtype), s.to(dst_dtype), f"to {src_dtype} -> {dst_dtype}")


def test_copy_broadcast_fill_and_factories():
    rng = np.random.default_rng(11)
    s, gs = layout_pair((5, 1), F32, None, "strided", rng)
    want = ember.empty(SHAPE).copy_(s)
    got = ember.empty(SHAPE, device="cuda").copy_(gs)
    assert_same(got, want)
    with pytest.raises(RuntimeError):
        ember.empty(SHAPE, device="cuda").copy_(ember.empty(4, device="cuda"))
    for dtype in ALL:
        v = True if dtype == BOOL else 3
        assert_same(ember.full(SHAPE, v, dtype=dtype, device="cuda"), ember.full(SHAPE, v, dtype=dtype))
        assert_same(ember.zeros(1001, dtype=dtype, device="cuda"), ember.zeros(1001, dtype=dtype))
        assert_same(ember.ones((0, 3), dtype=dtype, device="cuda"), ember.ones((0, 3), dtype=dtype))
        g = ember.zeros(SHAPE[::-1], dtype=dtype, device="cuda").permute(2, 1, 0)[:, 1::2]
        c = ember.zeros(SHAPE[::-1], dtype=dtype).permute(2, 1, 0)[:, 1::2]
        g.fill_(v)
        c.fill_(v)
        assert_same(g, c)
        g.fill_(ember.tensor(1))  # a 0-d CPU value
        c.fill_(ember.tensor(1))
        assert_same(g, c)
        g.zero_()
        c.zero_()
        assert_same(g, c)
    x = ember.tensor(2.5).cuda()  # 0-d on the device
    assert_same(ember.empty(SHAPE, device="cuda").copy_(x), ember.empty(SHAPE).copy_(ember.tensor(2.5)))
    with pytest.raises(RuntimeError, match="overflow"):
        ember.zeros(3, dtype=I8, device="cuda").fill_(1000)


def test_bool_copy_normalizes():
    u = ember.tensor([0, 1, 2, 255], dtype=U8)
    c, g = u.to(BOOL), u.cuda().to(BOOL)
    assert_same(g, c)
    assert values(g.to(U8)).tolist() == [0, 1, 1, 1]


# ---- sizes that exercise the vector path, its tail and the index limits ----------------------

@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64, I8, BOOL])
def test_large_odd_sizes_and_misaligned(dtype):
    rng = np.random.default_rng(12)
    n = 3_000_001
    arr = sample((n + 3,), dtype, "pos", rng)
    c, g = make(arr, dtype), make(arr, dtype, "cuda")
    for sl in (slice(0, n), slice(1, n + 1), slice(3, None), slice(1, None, 3)):
        a, ga = c[sl], g[sl]
        m = a.shape[0]
        b, gb = c[2:2 + m], g[2:2 + m]  # another alignment
        if dtype == BOOL:
            run_both(ember.logical_xor, [a, b], [ga, gb], where=f"xor {sl}")
            run_both(ember.bitwise_not, [a], [ga], where=f"not {sl}")
        else:
            run_both(ember.mul, [a, 2], [ga, 2], where=f"mul {dtype} {sl}")
            run_both(ember.add, [a, b], [ga, gb], where=f"add {dtype} {sl}")
            run_both(ember.gt, [a, 1], [ga, 1], where=f"gt {dtype} {sl}")
            if dtype in FLOATS:
                run_both(ember.exp, [a], [ga], where=f"exp {dtype} {sl}")
        for dst in (F32, I32, F16):
            assert_same(ga.to(dst), a.to(dst), f"to {dtype} -> {dst} {sl}")
    m = c[: 3_000_000].view(1000, 3000)
    gm = g[: 3_000_000].view(1000, 3000)
    assert_same(gm.t().contiguous(), m.t().contiguous())
    if dtype != BOOL:
        run_both(ember.add, [m, m[:1]], [gm, gm[:1]])


def test_many_dims():
    # dims that coalescing cannot merge: a step in each of 8 dims
    rng = np.random.default_rng(13)
    shape = (2, 3, 2, 3, 2, 3, 2, 3)
    a, ga = layout_pair(shape, F32, None, "strided", rng)
    b, gb = layout_pair(shape, F32, None, "transposed", rng)
    run_both(ember.add, [a, b], [ga, gb])
    assert_same(ga.contiguous(), a.contiguous())
    # 26 of them (more than a kernel's offset calculator holds: launched in pieces): every
    # other dim broadcast, so no two neighbours merge
    arr = sample((2,) * 13, F32, None, rng)
    views = []
    for t in (make(arr, F32), make(arr, F32, "cuda")):
        for d in range(13):
            t = t.unsqueeze(2 * d)
        views.append(t.expand(*(2,) * 26))
    c, g = views
    assert_same(g.contiguous(), c.contiguous())
    run_both(ember.add, [c, 1.0], [g, 1.0])


def test_past_2gib_is_split_into_32bit_pieces():
    n = 2 ** 29 + 128  # int32: 2 GiB + 512 bytes
    try:
        host = np.arange(n, dtype=np.int32)
        x = ember.from_numpy(host).cuda()
    except (RuntimeError, MemoryError) as e:  # a smaller GPU
        pytest.skip(f"no room for a 2 GiB tensor: {e}")
    y = x + 1  # contiguous, cut in two
    for i in (0, 2 ** 28 - 3, 2 ** 28 + 5, n - 7):
        np.testing.assert_array_equal(values(y[i:i + 5]), host[i:i + 5] + 1)
    del y
    t = x.view(-1, 128).t().contiguous()  # strided, spans > 2 GiB
    cols = n // 128
    for r in (0, 77, 127):
        for j in (0, cols // 2 + 1, cols - 3):
            np.testing.assert_array_equal(values(t[r, j:j + 3]), host.reshape(-1, 128)[j:j + 3, r])
    del t
    h = ember.full((n,), 1.5, dtype=F32, device="cuda").to(F16)  # fill and cast, split
    assert values(h[n - 4:]).tolist() == [1.5] * 4


# ---- activations (ops/nn.yaml) ---------------------------------------------------------------

ACTIVATIONS = [
    ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}),
    ("elu", {"alpha": 1.3, "scale": 1.1, "input_scale": 0.9}), ("leaky_relu", {"negative_slope": 0.2}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}), ("hardtanh", {"min_val": -0.5, "max_val": 1.5}),
    ("hardsigmoid", {}), ("hardswish", {}), ("mish", {}), ("softsign", {}), ("logsigmoid", {}),
]
KINDS = ["gelu", "gelu_tanh", "silu", "elu", "elu_result", "leaky_relu", "softplus", "hardtanh_result",
         "hardsigmoid", "hardsigmoid_result", "hardswish", "mish", "softsign", "logsigmoid"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_activations(layout):
    rng = np.random.default_rng(14)
    for dtype in FLOATS:
        x, gx = layout_pair(SHAPE, dtype, None, layout, rng)
        x = x * 3  # reach the branches past +-3 and the thresholds
        gx = gx * 3
        for name, kw in ACTIVATIONS:
            run_both(getattr(ember, name), [x], [gx], kw, where=f"{name} {kw} {dtype} {layout}")
        g, gg = layout_pair(SHAPE, dtype, None, "contiguous", rng)
        run_both(ember.threshold_backward, [g, x, 0.5], [gg, gx, 0.5],
                 where=f"threshold_backward {dtype} {layout}")
        for name in ("sigmoid_backward", "tanh_backward"):
            run_both(getattr(ember, name), [g, x], [gg, gx], where=f"{name} {dtype} {layout}")
        for kind in KINDS:
            for order in (1, 2):
                run_both(ember._C._activation_derivative, [x, kind, order, 0.3, 1.2, 0.8],
                         [gx, kind, order, 0.3, 1.2, 0.8], where=f"d{order} {kind} {dtype}")
    with pytest.raises(TypeError):
        ember.gelu(ember.tensor([1, 2]).cuda())


def test_activation_gradients_on_the_gpu():
    rng = np.random.default_rng(15)
    x, gx = layout_pair(SHAPE, F32, None, "transposed", rng)
    for name, kw in ACTIVATIONS:
        c = x.detach().requires_grad_(True)
        g = gx.detach().requires_grad_(True)
        (getattr(ember, name)(c, **kw) * 1.0).backward(ember.ones(SHAPE))
        (getattr(ember, name)(g, **kw) * 1.0).backward(ember.ones(SHAPE, device="cuda"))
        assert_same(g.grad, c.grad, f"grad {name}")


# ---- bool square, a scalar lerp weight kept in float, amax(dim=None) (test_open_items_s15) -------


def test_square_of_bool_is_int64():
    r = ember.square(ember.tensor([True, False], device="cuda"))
    assert r.dtype == I64 and r.device.type == "cuda" and r.cpu().tolist() == [1, 0]


@pytest.mark.parametrize("dt", [F16, BF16, F32])
def test_lerp_scalar_weight_as_the_cpu(dt):
    s = ember.tensor([2.0, 1.0, -3.0], dtype=dt)
    e = ember.tensor([2.0, 1.0078125, 5.0], dtype=dt)
    for w in (7e4, 1e10, -2.5, 0.25, 0.75):
        got = ember.lerp(s.cuda(), e.cuda(), w).cpu()
        np.testing.assert_array_equal(got.float().numpy(), ember.lerp(s, e, w).float().numpy())
    with pytest.raises(RuntimeError):
        ember.lerp(s.cuda(), e.cuda(), 1e300)  # must fit float32 arithmetic, as on the CPU


def test_amax_amin_dim_none():
    x = ember.tensor([[0.5, -2.0, 3.0], [4.0, 1.0, -6.0]], device="cuda")
    assert ember.amax(x, dim=None).item() == 4.0 and ember.amin(x).item() == -6.0
    assert ember.amax(x, dim=None, keepdim=True).shape == (1, 1)
