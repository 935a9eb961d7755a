"""op_db: the one table of ember's ops for the core tests, keyed by the op's name in
packages/core/ops/*.yaml (every YAML op has an entry; test_op_devices.py fails when one has none).

An ``OpInfo`` holds
- how to make inputs: ``sample_inputs(dtype, rng)`` (contiguous, non-contiguous, zero-stride,
  broadcast, empty and 0-d samples in each supported dtype, for the ops with a NumPy reference)
  and ``device_calls()`` (a sample call for every op: hand-written, or built from the schema);
- the reference: ``ref`` (NumPy, on float64/int64 arrays) and ``torch_fn`` (the torch function of
  the same meaning, compared where PyTorch is installed);
- flags: ``differentiable`` (gradcheck in float64; ``grad_cases`` are the cases run through
  ``run_case``), ``forward_ad`` (the op has a tangent formula), ``inplace`` (an ``op_`` variant)
  and ``out`` (an ``out=`` variant). The flags default to what the YAML declares.

Readers: test_pointwise.py (values, dtypes, layouts, in-place and out= of the ops with a
reference), test_grad_math.py / test_grad_shape.py / test_nn_*.py (gradient cases through
``run_case``) and test_op_devices.py (every op on meta, the PrivateUse1 test backend and cuda,
against the CPU).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import ember
import numpy as np
from core_helpers import make, torch
from ember.autograd import gradcheck

ROOT = Path(__file__).resolve().parents[3]
INF = float("inf")


FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("uint8", "int8", "int16", "int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
INTEGRAL = INTS + ("bool",)


# ---- the entry ------------------------------------------------------------------------------


@dataclass
class SampleInput:
    """One call of an op: tensors and other arguments, and what the sample covers."""

    args: list
    kwargs: dict = field(default_factory=dict)
    desc: str = ""


@dataclass
class OpInfo:
    """One YAML op: its samples, references and flags (see the module docstring)."""

    name: str
    arity: int = 0  # tensor inputs of the reference-checked form (pointwise ops)
    ref: Callable | None = None  # NumPy reference on float64/int64 arrays
    dtypes: tuple = ()
    domain: tuple = (-4.0, 4.0)
    result: str = "same"  # "same" | "float" (ints promote) | "bool"
    inplace: bool | None = None  # an op_ variant; None: as the YAML declares
    out: bool | None = None  # an out= variant; None: as the YAML declares
    differentiable: bool | None = None  # gradcheck in float64; None: as the YAML declares
    forward_ad: bool | None = None  # a tangent formula; None: as the YAML declares
    nonzero_rhs: bool = False  # second operand must avoid 0 (integer division)
    scalar_rhs: bool = True  # accepts a Python number as the second operand
    kwargs: dict = field(default_factory=dict)
    torch_name: str | None = None
    samples: list = field(default_factory=list)  # hand-written calls: () -> (args, kwargs)
    grad_cases: list = field(default_factory=list)  # GradCase, run through run_case

    @property
    def torch_fn(self) -> str:
        return self.torch_name or self.name

    def sample_array(self, dtype: str, shape: tuple, rng: np.random.Generator,
                     rhs: bool = False) -> np.ndarray:
        """Values in the op's domain, exact in `dtype` (integers are rounded; a divisor avoids 0)."""
        lo, hi = self.domain
        if dtype == "bool":
            return rng.random(shape) > 0.5
        if dtype in ("uint8",):
            lo = max(lo, 0)
        x = np.asarray(rng.uniform(lo, hi, size=shape))
        if dtype not in FLOATS:
            x = np.asarray(np.round(x))
            if rhs and self.nonzero_rhs:
                x[x == 0] = 1
        elif rhs and self.nonzero_rhs:
            x[np.abs(x) < 0.25] = 0.5
        return x

    def sample_inputs(self, dtype: str, rng: np.random.Generator,
                      device: str = "cpu") -> Iterator[SampleInput]:
        """Samples of the reference-checked form in `dtype` on `device`: contiguous, transposed,
        strided, zero-stride (expanded), broadcast (binary ops), empty and 0-d inputs. The same
        rng state gives the same values and layouts on every device."""
        if self.ref is None or dtype not in self.dtypes:
            return

        def t(shape, rhs=False):
            return make(self.sample_array(dtype, shape, rng, rhs), dtype).to(device)

        n = self.arity
        yield SampleInput([t((3, 5), i > 0) for i in range(n)], desc="contiguous")
        base = t((6, 8), True)
        yield SampleInput([base.transpose(0, 1)] * n, desc="transposed")
        yield SampleInput([base[::2, ::3]] * n, desc="strided")
        yield SampleInput([base[0:1].expand(4, 8)] * n, desc="zero-stride")
        if n == 2:
            for a, b in (((3, 1, 4), (5, 4)), ((1,), (2, 3)), ((), (2, 2)), ((2, 0), (1, 0))):
                yield SampleInput([t(a), t(b, True)], desc=f"broadcast {a} {b}")
        yield SampleInput([make(np.zeros((0, 3)), dtype).to(device)] * n, desc="empty")
        yield SampleInput([t((), True)] * n, desc="0-d")

    def device_calls(self) -> Iterator[tuple[Callable, list, dict]]:
        """(function, args, kwargs) calls with CPU tensors: the hand-written samples, else calls
        built from the schema."""
        fn = getattr(ember._C, self.name, None)
        if self.samples:
            for sample in self.samples:
                args, kwargs = sample()
                yield (fn or getattr(type(args[0]), self.name)), args, kwargs
            return
        for op in SCHEMAS.get(self.name, []):
            yield from schema_calls(op)


def _pointwise(name: str, arity: int, ref: Callable, **kw: Any) -> OpInfo:
    """A reference-checked pointwise entry (its in-place and out= flags come from the YAML)."""
    return OpInfo(name, arity, ref, **kw)


# ---- NumPy references of the pointwise ops -------------------------------------------------


def _sign(x):
    return np.sign(x)


def _remainder(a, b):
    return np.mod(a, b)


def _fmod(a, b):
    return np.fmod(a, b)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


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
    "asinh": (np.arcsinh, (-4, 4)), "acosh": (np.arccosh, (1.1, 8)),
    "atanh": (np.arctanh, (-0.9, 0.9)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-6, 6)), "erf": (_erf, (-3, 3)),
    "erfc": (_erfc, (-3, 5)),
    "erfinv": (_erfinv, (-0.95, 0.95)), "reciprocal": (lambda x: 1 / x, (0.5, 4)),
}


# ---- the pointwise entries (values against NumPy and torch) ----------------------------------

POINTWISE_OPS: list[OpInfo] = []
for _n, (_f, _d) in unary_float.items():
    POINTWISE_OPS.append(_pointwise(_n, 1, _f, dtypes=NUMERIC, domain=_d, result="float"))
POINTWISE_OPS += [
    _pointwise("neg", 1, np.negative, dtypes=tuple(d for d in NUMERIC if d != "uint8") ),
    _pointwise("abs", 1, np.abs, dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    _pointwise("sign", 1, _sign, dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    _pointwise("sgn", 1, _sign, dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    _pointwise("square", 1, np.square, dtypes=FLOATS + ("int32", "int64")),
    _pointwise("relu", 1, lambda x: np.maximum(x, 0), dtypes=tuple(d for d in NUMERIC if d != "uint8")),
    _pointwise("floor", 1, np.floor, dtypes=FLOATS),
    _pointwise("ceil", 1, np.ceil, dtypes=FLOATS),
    _pointwise("trunc", 1, np.trunc, dtypes=FLOATS),
    _pointwise("frac", 1, lambda x: x - np.trunc(x), dtypes=FLOATS),
    _pointwise("round", 1, _round, dtypes=FLOATS),
    _pointwise("isnan", 1, np.isnan, dtypes=ALL, result="bool"),
    _pointwise("isinf", 1, np.isinf, dtypes=ALL, result="bool"),
    _pointwise("isfinite", 1, np.isfinite, dtypes=ALL, result="bool"),
    _pointwise("logical_not", 1, np.logical_not, dtypes=ALL, result="bool"),
    _pointwise("bitwise_not", 1, np.invert, dtypes=INTEGRAL, domain=(-50, 50)),
    _pointwise("nan_to_num", 1, np.nan_to_num, dtypes=FLOATS),
    _pointwise("add", 2, np.add, dtypes=NUMERIC),
    _pointwise("sub", 2, np.subtract, dtypes=NUMERIC),
    _pointwise("mul", 2, np.multiply, dtypes=ALL),
    _pointwise("div", 2, np.true_divide, dtypes=NUMERIC, result="float", nonzero_rhs=True),
    _pointwise("true_divide", 2, np.true_divide, dtypes=NUMERIC, result="float", nonzero_rhs=True),
    _pointwise("floor_divide", 2, _floor_divide, dtypes=NUMERIC, nonzero_rhs=True),
    _pointwise("remainder", 2, _remainder, dtypes=NUMERIC, nonzero_rhs=True),
    _pointwise("fmod", 2, _fmod, dtypes=NUMERIC, nonzero_rhs=True),
    _pointwise("pow", 2, _pow, dtypes=FLOATS, domain=(0.5, 3)),
    _pointwise("atan2", 2, np.arctan2, dtypes=FLOATS, result="float"),
    _pointwise("minimum", 2, np.minimum, dtypes=ALL, scalar_rhs=False),
    _pointwise("maximum", 2, np.maximum, dtypes=ALL, scalar_rhs=False),
    _pointwise("eq", 2, np.equal, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("ne", 2, np.not_equal, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("lt", 2, np.less, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("le", 2, np.less_equal, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("gt", 2, np.greater, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("ge", 2, np.greater_equal, dtypes=ALL, result="bool", domain=(-2, 2)),
    _pointwise("logical_and", 2, np.logical_and, dtypes=ALL, result="bool",
           scalar_rhs=False, domain=(-1, 1)),
    _pointwise("logical_or", 2, np.logical_or, dtypes=ALL, result="bool",
           scalar_rhs=False, domain=(-1, 1)),
    _pointwise("logical_xor", 2, np.logical_xor, dtypes=ALL, result="bool",
           scalar_rhs=False, domain=(-1, 1)),
    _pointwise("bitwise_and", 2, np.bitwise_and, dtypes=INTEGRAL, domain=(0, 100)),
    _pointwise("bitwise_or", 2, np.bitwise_or, dtypes=INTEGRAL, domain=(0, 100)),
    _pointwise("bitwise_xor", 2, np.bitwise_xor, dtypes=INTEGRAL, domain=(0, 100)),
    _pointwise("bitwise_left_shift", 2, _shift_left, dtypes=("int32", "int64"), domain=(0, 5)),
    _pointwise("bitwise_right_shift", 2, _shift_right, dtypes=("int32", "int64"), domain=(0, 5)),
    _pointwise("isclose", 2, _isclose, dtypes=FLOATS, result="bool",
           scalar_rhs=False),
]

# Ops with their own tests in test_pointwise.py (ternary or special signatures), and torch.special's
# Bessel / Airy / polynomial ops, tested against torch and series references in
# test_special_bessel.py (torch has no top-level names for them, nor float16 kernels); their
# device samples are in SAMPLES. frexp (two outputs) is tested in test_linalg_extra.py.
SPECIAL = {"rsub", "rpow", "clamp", "clip", "where", "lerp", "addcmul", "addcdiv", "allclose",
           "equal", "frexp"} | {"special_" + n for n in (
               "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
               "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
               "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai",
               "spherical_bessel_j0", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
               "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p")}


# ---- the gradient runner ------------------------------------------------------------------


def lib(x):
    """The module (ember or torch) a tensor belongs to, for cases like lib(a).cat([a, b])."""
    return torch if torch is not None and isinstance(x, torch.Tensor) else ember


@dataclass
class GradCase:
    name: str
    fn: Callable  # ember tensors -> tensor (or tuple of tensors)
    inputs: Callable[[np.random.Generator], list]  # NumPy arrays (differentiable) or other args
    torch_fn: Callable | None = None  # defaults to fn (method calls work on both libraries)
    gradgrad: bool = True  # check second derivatives against torch
    noncontig: bool = True
    rtol: float = 1e-6
    atol: float = 1e-9
    marks: list = field(default_factory=list)
    op: str | None = None  # the YAML op (by default found from the name, see _op_of)


def _ember_inputs(arrays, noncontig: bool = False):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype == np.float64:
            if noncontig and a.ndim > 0 and a.size > 1:
                big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
                big[..., ::2] = a
                t = ember.tensor(big)[..., ::2]
                assert not t.is_contiguous()
                t.requires_grad_(True)
            else:
                t = ember.tensor(a, requires_grad=True)
            out.append(t)
        elif isinstance(a, np.ndarray):
            out.append(ember.tensor(a))
        else:
            out.append(a)
    return out


def _torch_inputs(arrays):
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype == np.float64:
            out.append(torch.tensor(a, requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(torch.tensor(a))
        else:
            out.append(a)
    return out


def _outputs(r) -> list:
    rs = list(r) if isinstance(r, (tuple, list)) else [r]
    return [x for x in rs if x.dtype in (ember.float64, ember.float32) or
            (torch is not None and isinstance(x, torch.Tensor) and x.is_floating_point())]


def _diff(xs) -> list:
    return [x for x in xs if hasattr(x, "requires_grad") and x.requires_grad]


def run_case(case: GradCase, seed: int = 0) -> None:
    """Checks a gradient case four ways: 1. gradcheck (autograd against central finite
    differences); 2. the same with non-contiguous inputs (every-other-element views of larger
    buffers); 3. gradients equal to torch's for a random upstream gradient (where torch is
    installed); 4. unless case.gradgrad is False, second derivatives (create_graph=True) equal
    to torch's double backward."""
    rng = np.random.default_rng(seed)
    arrays = case.inputs(rng)
    # 1 and 2: finite differences, contiguous and strided inputs.
    variants = [False, True] if case.noncontig else [False]
    for nc in variants:
        xs = _ember_inputs(arrays, nc)
        diff_idx = [i for i, x in enumerate(xs) if hasattr(x, "requires_grad") and x.requires_grad]

        def f(*d, xs=xs, diff_idx=diff_idx):
            full = list(xs)
            for i, t in zip(diff_idx, d):
                full[i] = t
            return tuple(_outputs(case.fn(*full)))

        assert gradcheck(f, [xs[i] for i in diff_idx]), f"{case.name}: gradcheck (noncontig={nc})"
    if torch is None:
        return
    # 3: first derivatives against torch, with the same random upstream gradients.
    xs = _ember_inputs(arrays)
    txs = _torch_inputs(arrays)
    outs = _outputs(case.fn(*xs))
    touts = _outputs((case.torch_fn or case.fn)(*txs))
    assert len(outs) == len(touts), f"{case.name}: {len(outs)} outputs vs torch's {len(touts)}"
    ups = [rng.standard_normal(tuple(o.shape)) for o in outs]
    grads = ember.autograd.grad(outs, _diff(xs), [ember.tensor(u) for u in ups],
                                create_graph=case.gradgrad, allow_unused=True)
    tgrads = torch.autograd.grad(touts, _diff(txs), [torch.tensor(u) for u in ups],
                                 create_graph=case.gradgrad, allow_unused=True)
    for k, (g, tg) in enumerate(zip(grads, tgrads)):
        if tg is None:
            assert g is None or not np.any(g.detach().numpy()), f"{case.name}: grad {k}"
            continue
        assert g is not None, f"{case.name}: no gradient for input {k} (torch has one)"
        np.testing.assert_allclose(g.detach().numpy(), _torch_np(tg), rtol=case.rtol,
                                   atol=case.atol, err_msg=f"{case.name}: gradient {k}")
    if not case.gradgrad:
        return
    # 4: second derivatives, through a random projection of the first ones. A first derivative
    # that does not require grad (on either side) is constant: its second derivative is zero.
    pairs = [(g, tg) for g, tg in zip(grads, tgrads) if g is not None and tg is not None]
    if not pairs:
        return
    vs = [rng.standard_normal(tuple(g.shape)) for g, _ in pairs]
    terms = [(g * ember.tensor(v)).sum() for (g, _), v in zip(pairs, vs) if g.requires_grad]
    tterms = [(tg * torch.tensor(v)).sum() for (_, tg), v in zip(pairs, vs) if tg.requires_grad]
    n = len(_diff(xs))
    gg = ember.autograd.grad(sum(terms), _diff(xs), allow_unused=True) if terms else [None] * n
    tgg = torch.autograd.grad(sum(tterms), _diff(txs), allow_unused=True) if tterms else [None] * n
    for k, (g, tg, x) in enumerate(zip(gg, tgg, _diff(xs))):
        want = np.zeros(tuple(x.shape)) if tg is None else _torch_np(tg)
        got = np.zeros(tuple(x.shape)) if g is None else g.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: second derivative {k}")


def _torch_np(t) -> np.ndarray:
    """A torch tensor's values, including torch's ZeroTensor (an all-zero gradient without
    memory, which .numpy() refuses)."""
    t = t.detach()
    if t._is_zerotensor():
        return np.zeros(tuple(t.shape))
    return t.numpy(force=True)


# ---- sample calls of every op, for the device axis ----------------------------------------


def load_ops() -> list[Any]:
    sys.path.insert(0, str(ROOT / "tools" / "codegen"))
    try:
        from schema import load_ops as load
    finally:
        sys.path.pop(0)
    return [op for ops in load(ROOT / "packages/core/ops").values() for op in ops]


def randn(*shape, dtype=None):
    t = ember.randn(shape)
    return t if dtype is None else t.to(dtype)


def idx(*shape, high=2):
    return ember.randint(0, high, shape)


# A world: the shape of "self" and of other tensor arguments, and small ints for dims.
WORLDS = [
    {"self": (2, 3), "other": (2, 3), "dim": 1, "int": 1},
    {"self": (2, 3), "other": (3,), "dim": 0, "int": 2},
    {"self": (3,), "other": (3,), "dim": 0, "int": 1},
    {"self": (2, 3, 4), "other": (2, 3, 4), "dim": 1, "int": 1},
    {"self": (2, 3, 4, 5), "other": (2, 3, 4, 5), "dim": 1, "int": 1},
    {"self": (2, 3), "other": (3, 2), "dim": 1, "int": 1},
    {"self": (2, 2, 3), "other": (2, 3, 2), "dim": 1, "int": 1},
    {"self": (), "other": (), "dim": 0, "int": 1},
]

INDEX_NAMES = {"index", "indices", "target_indices", "offsets", "repeats", "lengths"}
BOOL_NAMES = {"mask", "condition"}


def _tensor(name: str, world: dict, first: bool) -> Any:
    shape = world["self"] if first else world["other"]
    if name in BOOL_NAMES:
        return ember.randn(world["self"]) > 0
    if name in INDEX_NAMES:
        return idx(*shape)
    if name == "boundaries" or name == "sorted_sequence":
        return ember.arange(4.0)
    return randn(*shape)


def _value(arg: Any, world: dict, first_tensor: bool) -> Any:
    t, name = arg.type, arg.name
    if t in ("Tensor", "Tensor|Scalar"):
        return _tensor(name, world, first_tensor)
    if t in ("Tensor[]",):
        return [randn(*world["self"]), randn(*world["self"])]
    if t == "Tensor?[]":
        return [idx(2)]
    if t == "Scalar":
        return 0.5 if name not in ("min", "max") else (0.0 if name == "min" else 1.0)
    if t == "int":
        if "dim" in name or name in ("axis", "axis0", "axis1", "source", "destination"):
            return world["dim"]
        return world["int"]
    if t == "int[]" or t == "int[]...":
        if "dim" in name or name in ("dims", "axis", "source", "destination"):
            return [world["dim"]]
        if name in ("size", "shape", "sizes"):
            return list(world["self"]) or [1]
        return [world["int"]]
    if t == "float":
        return 0.5
    if t == "bool":
        return False
    if t == "ScalarType":
        return ember.float64
    if t == "str":
        return "mean"
    raise KeyError(t)


def schema_calls(op: Any) -> Iterator[tuple[Callable, list, dict]]:
    """Calls built from the schema: required arguments only, in each world."""
    fn = getattr(ember._C, op.name, None)
    method = fn is None
    for world in WORLDS:
        args, kwargs = [], {}
        first = True
        ok = True
        for a in op.args:
            if a.default is not None or a.type.endswith("?"):
                continue
            try:
                v = _value(a, world, first)
            except KeyError:
                ok = False
                break
            if a.type.startswith("Tensor"):
                first = False
            if a.type == "int[]...":
                args.extend(v)
            elif a.kwonly:
                kwargs[a.name] = v
            else:
                args.append(v)
        if not ok:
            continue
        if method:
            if not args or not isinstance(args[0], ember.Tensor):
                continue
            self_, rest = args[0], args[1:]
            m = getattr(type(self_), op.name, None)
            if m is None:
                continue
            yield (lambda s, *r, _m=m, **k: _m(s, *r, **k)), [self_, *rest], kwargs
        else:
            yield fn, args, kwargs


def _spd(*shape):
    """Symmetric positive-definite matrices (*shape[:-1], n, n) for the factorizations."""
    a = randn(*shape, shape[-1])
    return a @ a.mT + shape[-1] * ember.eye(shape[-1])


def _sym(*shape):
    """Symmetric indefinite matrices (*shape[:-1], n, n) for the LDL^T factorization."""
    a = randn(*shape, shape[-1])
    return a + a.mT


def _eig_backward_args():
    """The arguments of _linalg_eig_backward: gradients for the eigenvalues and (phase-
    invariant, hence purely real diag(V^H gV)) eigenvectors of a random matrix."""
    L, V, _ = ember._C._linalg_eig(randn(2, 3, 3), True)
    gV = V * randn(2, 1, 3).to(V.dtype)
    return [randn(2, 3).to(L.dtype), gV, L, V, True], {}


def _conv(nd):
    return lambda: [randn(2, 3, *([6] * nd)), randn(4, 3, *([3] * nd))]


# Hand-written samples: op name -> callables returning (args, kwargs) for ember._C.<op> or the
# Tensor method of that name.
SAMPLES: dict[str, list[Callable[[], tuple[list, dict]]]] = {
    "conv1d": [lambda: (_conv(1)(), {})],
    "conv2d": [lambda: (_conv(2)(), {"padding": [1, 1]})],
    "conv3d": [lambda: (_conv(3)(), {})],
    "conv_transpose1d": [lambda: ([randn(2, 3, 5), randn(3, 4, 3)], {})],
    "conv_transpose2d": [lambda: ([randn(2, 3, 5, 5), randn(3, 4, 3, 3)], {})],
    "conv_transpose3d": [lambda: ([randn(2, 3, 3, 4, 4), randn(3, 4, 2, 3, 2)],
                                  {"stride": [2, 1, 2], "padding": [1, 0, 0]})],
    "embedding": [lambda: ([randn(5, 4), idx(2, 3, high=5)], {})],
    "embedding_bag": [lambda: ([randn(5, 4), idx(2, 3, high=5)], {})],
    "nll_loss": [lambda: ([randn(4, 3).log_softmax(1), idx(4, high=3)], {})],
    "cross_entropy": [lambda: ([randn(4, 3), idx(4, high=3)], {})],
    "_cross_entropy_loss": [lambda: ([randn(4, 3), idx(4, high=3)], {})],
    "binary_cross_entropy": [lambda: ([ember.rand(4, 3), ember.rand(4, 3)], {})],
    "gather": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4)], {})],
    "scatter": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2)], {})],
    "scatter_add": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2)], {})],
    "scatter_reduce": [lambda: ([randn(3, 4), 1, idx(3, 2, high=4), randn(3, 2), "sum"], {})],
    "index_select": [lambda: ([randn(3, 4), 1, idx(2, high=4)], {})],
    "index_add": [lambda: ([randn(3, 4), 1, idx(2, high=4), randn(3, 2)], {})],
    "index_copy": [lambda: ([randn(3, 4), 1, ember.tensor([0, 2]), randn(3, 2)], {})],
    "index_fill": [lambda: ([randn(3, 4), 1, idx(2, high=4), 1.5], {})],
    "index_put": [lambda: ([randn(3, 4), [idx(2, high=3)], randn(2, 4)], {})],
    "masked_fill": [lambda: ([randn(3, 4), ember.randn(3, 4) > 0, 1.5], {})],
    "masked_scatter": [lambda: ([randn(3, 4), ember.randn(3, 4) > 0, randn(3, 4)], {})],
    "take": [lambda: ([randn(3, 4), idx(5, high=12)], {})],
    "take_along_dim": [lambda: ([randn(3, 4), idx(3, 2, high=4)], {"dim": 1})],
    "mm": [lambda: ([randn(2, 3), randn(3, 4)], {})],
    "bmm": [lambda: ([randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addmm": [lambda: ([randn(2, 4), randn(2, 3), randn(3, 4)], {})],
    "baddbmm": [lambda: ([randn(2, 2, 4), randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addbmm": [lambda: ([randn(2, 4), randn(2, 2, 3), randn(2, 3, 4)], {})],
    "addmv": [lambda: ([randn(2), randn(2, 3), randn(3)], {})],
    "addr": [lambda: ([randn(2, 3), randn(2), randn(3)], {})],
    "mv": [lambda: ([randn(2, 3), randn(3)], {})],
    # factorizations (LAPACK): well-conditioned square inputs where the op needs them
    "_linalg_lu_factor_ex": [lambda: ([randn(2, 4, 3)], {})],
    "_linalg_solve_ex": [lambda: ([_spd(2, 3), randn(3, 2)], {})],
    "_lu_solve": [lambda: ([*ember._C._linalg_lu_factor_ex(_spd(2, 3))[:2], randn(2, 3, 2)], {})],
    "_linalg_det": [lambda: ([randn(2, 3, 3)], {})],
    "_linalg_slogdet": [lambda: ([randn(2, 3, 3)], {})],
    "_linalg_svd": [lambda: ([randn(2, 4, 3)], {}), lambda: ([randn(3, 5), True], {})],
    "_linalg_eigh": [lambda: ([_spd(2, 3)], {})],
    "_linalg_qr": [lambda: ([randn(2, 4, 3)], {}), lambda: ([randn(3, 5), "complete"], {})],
    "_linalg_lstsq": [lambda: ([randn(2, 5, 3), randn(5, 2)], {"driver": "gelsd"})],
    "_linalg_cholesky_ex": [lambda: ([_spd(2, 3)], {}), lambda: ([_spd(3), True], {})],
    "_linalg_solve_triangular": [lambda: ([_spd(2, 3), randn(3, 2), True], {})],
    "_linalg_eig": [lambda: ([randn(2, 3, 3)], {}), lambda: ([randn(3, 3), False], {})],
    "_linalg_eig_backward": [lambda: _eig_backward_args()],
    "geqrf": [lambda: ([randn(2, 4, 3)], {})],
    "linalg_householder_product": [lambda: (list(ember.geqrf(randn(2, 4, 3))), {})],
    "ormqr": [lambda: ([*ember.geqrf(randn(4, 3)), randn(4, 2)], {}),
              lambda: ([*ember.geqrf(randn(4, 3)), randn(2, 4)], {"left": False,
                                                                   "transpose": True})],
    "_linalg_ldl_factor_ex": [lambda: ([_sym(2, 3)], {})],
    "_linalg_ldl_solve": [lambda: ([*ember._C._linalg_ldl_factor_ex(_sym(2, 3))[:2],
                                    randn(3, 2)], {})],
    "layer_norm": [lambda: ([randn(2, 3, 4), [4]], {})],
    "group_norm": [lambda: ([randn(2, 4, 3), 2], {})],
    "batch_norm": [lambda: ([randn(4, 3, 5), randn(3), ember.rand(3) + 0.5, None, None, True,
                             0.1, 1e-5], {})],
    "rms_norm": [lambda: ([randn(2, 3, 4), [4]], {})],
    "max_pool1d": [lambda: ([randn(2, 3, 8), [2]], {})],
    "max_pool2d": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "max_pool1d_with_indices": [lambda: ([randn(2, 3, 8), [2]], {})],
    "max_pool2d_with_indices": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "avg_pool1d": [lambda: ([randn(2, 3, 8), [2]], {})],
    "avg_pool2d": [lambda: ([randn(2, 3, 8, 8), [2, 2]], {})],
    "adaptive_avg_pool1d": [lambda: ([randn(2, 3, 8), [3]], {})],
    "adaptive_avg_pool2d": [lambda: ([randn(2, 3, 8, 8), [3, 3]], {})],
    "adaptive_max_pool1d": [lambda: ([randn(2, 3, 8), [3]], {})],
    "adaptive_max_pool2d": [lambda: ([randn(2, 3, 8, 8), [3, 3]], {})],
    "max_pool3d": [lambda: ([randn(2, 3, 5, 6, 6), [3, 3, 3]],
                            {"stride": [2, 2, 2], "padding": [1, 1, 1]})],
    "max_pool3d_with_indices": [lambda: ([randn(2, 3, 5, 6, 6), [2, 3, 2]],
                                         {"ceil_mode": True})],
    "avg_pool3d": [lambda: ([randn(2, 3, 5, 6, 6), [3, 3, 3]],
                            {"stride": [2, 2, 2], "padding": [1, 1, 1], "ceil_mode": True})],
    "adaptive_avg_pool3d": [lambda: ([randn(2, 3, 5, 6, 6), [2, 3, 4]], {})],
    "adaptive_max_pool3d": [lambda: ([randn(2, 3, 5, 6, 6), [2, 3, 4]], {})],
    "pad": [lambda: ([randn(2, 3, 4), [1, 2]], {})],
    "scaled_dot_product_attention": [lambda: ([randn(2, 4, 5, 8), randn(2, 4, 6, 8),
                                               randn(2, 4, 6, 8)], {})],
    "multinomial": [lambda: ([ember.rand(3, 4) + 0.1, 2], {})],
    "cumsum": [lambda: ([randn(3, 4), 1], {})],
    "_logcumsumexp": [lambda: ([ember.complex(randn(3, 4), randn(3, 4)), 1], {})],
    "einsum": [lambda: (["ij,jk->ik", [randn(2, 3), randn(3, 4)]], {})],
    "tensordot": [lambda: ([randn(2, 3), randn(3, 4), 1], {})],
    "kron": [lambda: ([randn(2, 3), randn(2, 2)], {})],
    "repeat_interleave": [lambda: ([randn(3), 2], {})],
    "unflatten": [lambda: ([randn(2, 6), 1, [2, 3]], {})],
    "view": [lambda: ([randn(2, 6), [3, 4]], {})],
    "reshape": [lambda: ([randn(2, 6), [3, 4]], {})],
    "expand": [lambda: ([randn(3, 1), [3, 4]], {})],
    "broadcast_to": [lambda: ([randn(3, 1), [3, 4]], {})],
    "as_strided": [lambda: ([randn(3, 4), [2, 2], [1, 2]], {})],
    "narrow": [lambda: ([randn(3, 4), 1, 1, 2], {})],
    "unfold": [lambda: ([randn(3, 8), 1, 3, 2], {})],
    "diagonal": [lambda: ([randn(3, 4)], {})],
    "tril": [lambda: ([randn(3, 4)], {})],
    "triu": [lambda: ([randn(3, 4)], {})],
    "topk": [lambda: ([randn(3, 5), 2], {})],
    "kthvalue": [lambda: ([randn(3, 5), 2], {})],
    "searchsorted": [lambda: ([ember.arange(5.0), randn(3)], {})],
    "bucketize": [lambda: ([randn(3), ember.arange(5.0)], {})],
    "histc": [lambda: ([randn(10)], {"bins": 4, "min": -1, "max": 1})],
    "_histogramdd": [lambda: ([randn(10, 2), [3, 2], []], {}),
                     lambda: ([randn(10, 2), [], [ember.arange(4.0) - 2, ember.arange(3.0)]],
                              {"weight": ember.rand(10), "density": True})],
    "frexp": [lambda: ([randn(3, 4)], {}), lambda: ([randn(4, 3).t()], {})],
    "lerp": [lambda: ([randn(3), randn(3), 0.5], {})],
    "clamp": [lambda: ([randn(3, 4), -0.5, 0.5], {})],
    "clip": [lambda: ([randn(3, 4), -0.5, 0.5], {})],
    "constant_pad_nd": [lambda: ([randn(3, 4), [1, 2]], {})],
    "convolution": [lambda: ([*_conv(2)(), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1], {})],
    "index_fill_": [lambda: ([randn(3, 4), 1, idx(2, high=4), 1.5], {})],
    "instance_norm": [lambda: ([randn(2, 3, 5), None, None, None, None, True, 0.1, 1e-5], {})],
    "native_batch_norm": [lambda: ([randn(4, 3, 5), randn(3), randn(3), None, None, True, 0.1,
                                    1e-5], {})],
    "native_batch_norm_backward": [lambda: ([randn(4, 3, 5), randn(4, 3, 5), randn(3), randn(3),
                                             ember.rand(3), True, True, True, True], {})],
    "native_group_norm": [lambda: ([randn(2, 4, 3), 2, randn(4), randn(4), 1e-5], {})],
    "native_group_norm_backward": [lambda: ([randn(2, 4, 3), randn(2, 4, 3), 2, randn(2, 2),
                                             ember.rand(2, 2), randn(4), True, True, True], {})],
    "native_layer_norm": [lambda: ([randn(2, 3, 4), [4], randn(4), randn(4), 1e-5], {})],
    "native_layer_norm_backward": [lambda: ([randn(2, 3, 4), randn(2, 3, 4), [4], randn(2, 3, 1),
                                             ember.rand(2, 3, 1), randn(4), True, True, True], {})],
    "_fused_rms_norm": [lambda: ([randn(2, 3, 4), [4], randn(4), 1e-5], {})],
    "_fused_rms_norm_backward": [lambda: ([randn(2, 3, 4), randn(2, 3, 4), [4], ember.rand(2, 3, 1),
                                           randn(4), True, True], {})],
    "nll_loss_backward": [lambda: ([ember.tensor(1.0), randn(4, 3), idx(4, high=3), None, "mean",
                                    -100], {})],
    "_cross_entropy_loss_backward": [lambda: ([ember.tensor(1.0), randn(4, 3), idx(4, high=3), None,
                                               randn(4), "mean", -100, 0.0], {})],
    "embedding_dense_backward": [lambda: ([randn(2, 3, 4), idx(2, 3, high=5), 5, -1, False], {})],
    "_activation_derivative": [lambda: ([randn(3, 4), "gelu", 1], {})],
    # the fused activation backwards and the activations' own in-place forms
    "gelu_backward": [lambda: ([randn(3, 4), randn(3, 4)], {}),
                      lambda: ([randn(3, 4), randn(3, 4)], {"approximate": "tanh"})],
    "elu_backward": [lambda: ([randn(3, 4), 1.0, 1.0, 1.0, False, randn(3, 4)], {}),
                     lambda: ([randn(3, 4), 0.5, 2.0, 1.5, True, randn(3, 4)], {})],
    "leaky_relu_backward": [lambda: ([randn(3, 4), randn(3, 4), 0.1, False], {})],
    "hardtanh_backward": [lambda: ([randn(3, 4), randn(3, 4) * 2, -1.0, 1.0], {})],
    "hardsigmoid_backward": [lambda: ([randn(3, 4), randn(3, 4) * 4], {})],
    "hardswish_backward": [lambda: ([randn(3, 4), randn(3, 4) * 4], {})],
    "softplus_backward": [lambda: ([randn(3, 4), randn(3, 4), 2.0, 1.0], {})],
    "threshold": [lambda: ([randn(3, 4), 0.1, -2.0], {}),
                  lambda: ([idx(3, 4, high=8), 3, 100], {})],
    "elu_": [lambda: ([randn(3, 4), 0.5], {})],
    "leaky_relu_": [lambda: ([randn(3, 4), 0.2], {})],
    "relu6_": [lambda: ([randn(3, 4) * 8], {})],
    "selu_": [lambda: ([randn(3, 4)], {})],
    "celu_": [lambda: ([randn(3, 4), 2.0], {})],
    "_avg_pool": [lambda: ([randn(2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None], {})],
    "_avg_pool_backward": [lambda: ([randn(2, 3, 4, 4), [2, 3, 8, 8], [2, 2], [2, 2], [0, 0], False,
                                     True, None], {})],
    "_max_pool": [lambda: ([randn(2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False], {})],
    "_max_pool_backward": [lambda: ([randn(2, 3, 4, 4), idx(2, 3, 4, 4, high=64), [2, 3, 8, 8], 2],
                                    {})],
    "_fractional_max_pool": [lambda: ([randn(2, 3, 8, 8), [2, 2], [4, 5], ember.rand(2, 3, 2)],
                                      {}),
                             lambda: ([randn(3, 6, 7, 5), [2, 3, 2], [3, 4, 2],
                                       ember.rand(1, 3, 3)], {})],
    "_adaptive_avg_pool_backward": [lambda: ([randn(2, 3, 3, 3), [2, 3, 8, 8], [3, 3]], {})],
    "_pad_backward": [lambda: ([randn(2, 3, 7), [2, 3, 4], [1, 2], "reflect"], {})],
    "upsample_bicubic2d": [lambda: ([randn(1, 2, 4, 4), [8, 6], False], {})],
    "upsample_bilinear2d": [lambda: ([randn(1, 2, 4, 4), [8, 6], False], {})],
    "upsample_nearest2d": [lambda: ([randn(1, 2, 4, 4), [8, 6]], {})],
    "_upsample_nearest_exact2d": [lambda: ([randn(1, 2, 4, 4), [8, 6]], {})],
    "upsample_nearest3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6]], {})],
    "_upsample_nearest_exact3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6]], {})],
    "upsample_trilinear3d": [lambda: ([randn(1, 2, 2, 4, 4), [4, 8, 6], False], {})],
    "upsample_bicubic2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4], False], {})],
    "upsample_bilinear2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4], False],
                                              {})],
    "upsample_nearest2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4]], {})],
    "_upsample_nearest_exact2d_backward": [lambda: ([randn(1, 2, 8, 6), [8, 6], [1, 2, 4, 4]], {})],
    "upsample_nearest3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6], [1, 2, 2, 4, 4]],
                                             {})],
    "_upsample_nearest_exact3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6],
                                                     [1, 2, 2, 4, 4]], {})],
    "upsample_trilinear3d_backward": [lambda: ([randn(1, 2, 4, 8, 6), [4, 8, 6], [1, 2, 2, 4, 4],
                                                False], {})],
    "upsample_linear1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4], False], {})],
    "upsample_nearest1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4]], {})],
    "_upsample_nearest_exact1d_backward": [lambda: ([randn(1, 2, 8), [8], [1, 2, 4]], {})],
    "_lstm_layer": [lambda: ([[randn(3, 2, 20), randn(2, 5), randn(2, 5), randn(20, 5)]], {}),
                    lambda: ([[randn(3, 2, 4), randn(2, 5), randn(2, 5), randn(20, 5), randn(20, 4),
                               randn(20)]], {})],
    "_gru_layer": [lambda: ([[randn(3, 2, 15), randn(2, 5), randn(15, 5), randn(15)]], {})],
    "_lstm_layer_backward": [lambda: _rnn_backward("lstm")],
    "_scaled_dot_product_fused_attention": [
        lambda: ([[randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 3)], None, True, 0.5], {})],
    "_scaled_dot_product_fused_attention_backward": [lambda: _sdpa_backward()],
    "_gru_layer_backward": [lambda: _rnn_backward("gru")],
    "_rnn_input_backward": [lambda: ([randn(6, 20), randn(6, 4), randn(20, 4)], {})],
    "bincount": [lambda: ([idx(6, high=4)], {})],
    "_amp_foreach_non_finite_check_and_unscale_": [
        lambda: ([[randn(3), randn(2, 2)], ember.zeros(()), ember.full((), 0.5)], {})],
    "_amp_update_scale_": [lambda: ([ember.full((), 1024.0), ember.zeros((), dtype=ember.int32),
                                     ember.zeros(()), 2.0, 0.5, 1], {})],
    # sparse products (ops/sparse.yaml) on a 3 x 4 CSR pattern with an empty row
    "_sparse_csr_mm": [lambda: ([ember.tensor([0, 2, 2, 4]), ember.tensor([1, 3, 0, 2]), randn(4),
                                 randn(4, 5)], {})],
    "_sparse_csr_mm_t": [lambda: ([ember.tensor([0, 2, 2, 4]), ember.tensor([1, 3, 0, 2]),
                                   randn(4), randn(3, 5), 4], {})],
    "_sparse_csr_sddmm": [lambda: ([ember.tensor([0, 2, 2, 4]), ember.tensor([1, 3, 0, 2]),
                                    randn(3, 5), randn(4, 5)], {})],
}
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
              "bitwise_right_shift"):
    SAMPLES[_name] = [lambda: ([idx(2, 3, high=8), idx(2, 3, high=3)], {})]
SAMPLES["bitwise_not"] = [lambda: ([idx(2, 3, high=8)], {})]
# complex ops (ops/complex.yaml): complex inputs made from real samples
SAMPLES.update({
    "view_as_real": [lambda: ([randn(2, 3).to(ember.complex64)], {})],
    "view_as_complex": [lambda: ([randn(2, 3, 2)], {})],
    "imag": [lambda: ([ember.complex(randn(2, 3), randn(2, 3))], {})],
    "_fft_c2c": [lambda: ([ember.complex(randn(2, 6), randn(2, 6)), [1], 0, True], {})],
    "_fft_c2r": [lambda: ([ember.complex(randn(2, 4), randn(2, 4)), [1], 2, 6], {})],
})
# torch.special's Bessel / Airy functions (positive arguments, where every one is real and
# finite, and a few negative ones) and polynomials (orders 0..12, a number order, a number x)
for _name in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
              "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
              "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai",
              "spherical_bessel_j0"):
    SAMPLES["special_" + _name] = [lambda: ([ember.rand(2, 3) * 30 + 0.01], {}),
                                   lambda: ([randn(4) * 3], {})]
for _name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
              "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
              "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
              "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
              "laguerre_polynomial_l", "legendre_polynomial_p"):
    SAMPLES["special_" + _name] = [
        lambda: ([ember.rand(2, 3) * 2.2 - 1.1, idx(2, 3, high=13)], {}),
        lambda: ([ember.rand(4), 9], {}),
        lambda: ([0.3, idx(4, high=13).to(ember.float64)], {})]


def _sdpa_backward() -> tuple[list, dict]:
    q, k, v = randn(2, 3, 5, 4), randn(2, 3, 6, 4), randn(2, 3, 6, 3)
    out, lse = ember._C._scaled_dot_product_fused_attention([q, k, v], None, True, 0.5)
    return [randn(2, 3, 5, 3), q, k, v, None, out, lse, True, 0.5], {}


def _rnn_backward(kind: str) -> tuple[list, dict]:
    if kind == "lstm":
        h0, c0, w = randn(2, 5), randn(2, 5), randn(20, 5)
        out, hn, cn, ws = ember._C._lstm_layer([randn(3, 2, 20), h0, c0, w])
        return [randn(3, 2, 5), randn(2, 5), randn(2, 5), h0, c0, w, out, ws, False], {}
    h0, w = randn(2, 5), randn(15, 5)
    out, hn, ws = ember._C._gru_layer([randn(3, 2, 15), h0, w, randn(15)])
    return [randn(3, 2, 5), randn(2, 5), h0, w, out, ws, False], {}


# ---- gradient cases: pointwise math, reductions, sorting, linear algebra -------------------


def _differentiable(fn) -> bool:
    """Whether backward through fn works (some second derivatives here go through flip and
    masked_fill, whose formulas come with the shape/indexing derivatives)."""
    x = ember.ones(3, requires_grad=True)
    try:
        fn(x).sum().backward()
    except NotImplementedError:
        return False
    return True


# Second derivatives of prod/cumprod (reversed cumsums) need flip's; pow's need masked_fill's.
FLIP_OK = _differentiable(lambda x: x.flip(0))
MASKED_FILL_OK = _differentiable(lambda x: x.masked_fill(x > 2, 0.0))


def normal(*shape):
    return lambda rng: [rng.standard_normal(shape)]


def normals(*shapes):
    return lambda rng: [rng.standard_normal(s) for s in shapes]


def uniform(lo, hi, *shape):
    return lambda rng: [rng.uniform(lo, hi, shape)]


def off_integers(*shape):
    """Values at least 0.1 away from integers and half-integers (kinks of floor/round ...)."""
    return lambda rng: [rng.integers(-4, 4, shape) + rng.uniform(0.1, 0.4, shape)
                        * rng.choice([1, -1], shape)]


def distinct(*shape):
    """Values with distinct, well separated elements (no ties for max/sort/median ...)."""
    def make(rng):
        n = int(np.prod(shape))
        return [(rng.permutation(n) + rng.uniform(0.1, 0.4, n)).reshape(shape) - n / 2]
    return make


def mod_inputs(other_shape, sign=1.0):
    """self = other * (k + u) with u in (0.2, 0.8): away from remainder's jumps."""
    def make(rng):
        other = sign * rng.uniform(1.5, 2.5, other_shape)
        k = rng.integers(-3, 3, (3, 4))
        return [other * (k + rng.uniform(0.2, 0.8, (3, 4))), other]
    return make


def with_nans(rng):
    a = rng.standard_normal((3, 4))
    a[0, 1] = a[2, 2] = a[2, 3] = np.nan
    return [a]


def with_zeros(*positions, shape=(3, 4)):
    def make(rng):
        a = rng.uniform(0.5, 1.5, shape) * rng.choice([1, -1], shape)
        for p in positions:
            a[p] = 0.0
        return [a]
    return make


def nonfinite(rng):
    a = rng.standard_normal((2, 4))
    a[0, 0], a[1, 1], a[1, 3] = np.nan, INF, -INF
    return [a]


GRAD_POINTWISE = [
    GradCase("asin", lambda a: a.asin(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("acos", lambda a: a.acos(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("atan", lambda a: a.atan(), normal(3, 4)),
    GradCase("sinh", lambda a: a.sinh(), normal(3, 4)),
    GradCase("cosh", lambda a: a.cosh(), normal(3, 4)),
    GradCase("erf", lambda a: lib(a).erf(a), normal(3, 4)),
    GradCase("erfc", lambda a: lib(a).erfc(a), normal(3, 4)),
    GradCase("erfinv", lambda a: a.erfinv(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("frexp", lambda a: a.frexp()[0], normal(3, 4)),
    GradCase("asin_inplace", lambda a: (a * 1).asin_(), uniform(-0.9, 0.9, 5)),
    GradCase("erfinv_inplace", lambda a: (a * 1).erfinv_(), uniform(-0.9, 0.9, 5)),
    GradCase("sign", lambda a: a.sign(), off_integers(3, 4)),
    GradCase("sgn", lambda a: a.sgn(), off_integers(3, 4)),
    GradCase("asinh", lambda a: a.asinh(), normal(3, 4)),
    GradCase("acosh", lambda a: a.acosh(), uniform(1.2, 4.0, 3, 4)),
    GradCase("atanh", lambda a: a.atanh(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("floor", lambda a: a.floor(), off_integers(3, 4)),
    GradCase("ceil", lambda a: a.ceil(), off_integers(3, 4)),
    GradCase("trunc", lambda a: a.trunc(), off_integers(3, 4)),
    GradCase("frac", lambda a: a.frac(), off_integers(3, 4)),
    GradCase("round", lambda a: a.round(), off_integers(3, 4)),
    GradCase("round_decimals", lambda a: a.round(decimals=1), lambda rng: [
        rng.integers(-40, 40, (3, 4)) / 10 + rng.uniform(0.01, 0.04, (3, 4))]),
    GradCase("floor_0d", lambda a: a.floor() * a, lambda rng: [np.array(2.3)]),
    GradCase("nan_to_num", lambda a: a.nan_to_num(), nonfinite),
    GradCase("nan_to_num_args", lambda a: lib(a).nan_to_num(a, nan=1.0, posinf=2.0, neginf=-2.0),
             nonfinite),
    GradCase("remainder", lambda a, b: a.remainder(b), mod_inputs((3, 4))),
    GradCase("remainder_neg_divisor", lambda a, b: lib(a).remainder(a, b), mod_inputs((4,), -1.0)),
    GradCase("remainder_scalar", lambda a: a.remainder(1.5), lambda rng: [
        1.5 * (rng.integers(-3, 3, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4)))]),
    GradCase("fmod", lambda a, b: a.fmod(b), mod_inputs((3, 4))),
    GradCase("fmod_broadcast", lambda a, b: lib(a).fmod(a, b), mod_inputs((4,), -1.0)),
    GradCase("fmod_scalar", lambda a: a.fmod(-2.0), lambda rng: [
        2.0 * (rng.integers(-3, 3, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4)))]),
    GradCase("atan2", lambda a, b: a.atan2(b), normals((3, 4), (3, 4))),
    GradCase("atan2_broadcast", lambda a, b: lib(a).atan2(a, b), normals((2, 3, 4), (4,))),
    GradCase("atan2_inplace", lambda a, b: (a * 1).atan2_(b), normals((3, 4), (4,))),
    GradCase("maximum", lambda a, b: lib(a).maximum(a, b), normals((3, 4), (3, 4))),
    GradCase("maximum_broadcast", lambda a, b: a.maximum(b), normals((3, 1), (4,))),
    GradCase("minimum", lambda a, b: lib(a).minimum(a, b), normals((3, 4), (3, 4))),
    GradCase("minimum_broadcast", lambda a, b: a.minimum(b), normals((2, 3, 4), (3, 1))),
    GradCase("max_binary", lambda a, b: lib(a).max(a, b), normals((3, 4), (4,))),
    GradCase("min_binary", lambda a, b: a.min(b), normals((3, 4), (3, 4))),
    GradCase("lerp_tensor_weight", lambda a, b, w: a.lerp(b, w), normals((3, 4), (3, 4), (3, 4))),
    GradCase("lerp_broadcast", lambda a, b, w: lib(a).lerp(a, b, w), normals((3, 4), (4,), (3, 1))),
    GradCase("lerp_scalar_weight", lambda a, b: a.lerp(b, 0.3), normals((3, 4), (3, 4))),
    GradCase("lerp_inplace", lambda a, b: (a * 1).lerp_(b, 0.7), normals((3, 4), (4,))),
]


GRAD_REDUCTIONS = [
    GradCase("nansum_all", lambda a: a.nansum(), with_nans),
    GradCase("nansum_dim", lambda a: a.nansum(1), with_nans),
    GradCase("nansum_dims_keepdim", lambda a: lib(a).nansum(a, (0, -1), keepdim=True), with_nans),
    GradCase("nanmean_all", lambda a: a.nanmean(), with_nans),
    GradCase("nanmean_dim", lambda a: a.nanmean(-1), with_nans),
    GradCase("nanmean_keepdim", lambda a: lib(a).nanmean(a, 0, keepdim=True), with_nans),
    GradCase("prod_all", lambda a: a.prod(), uniform(0.5, 1.5, 3, 4)),
    GradCase("prod_dim", lambda a: a.prod(1), normal(3, 4)),
    GradCase("prod_dim_keepdim", lambda a: a.prod(-2, keepdim=True), normal(3, 4)),
    GradCase("prod_0d", lambda a: a.prod(0), lambda rng: [np.array(1.7)]),
    GradCase("prod_all_one_zero", lambda a: a.prod(), with_zeros((1, 2)),
             gradgrad=FLIP_OK),
    GradCase("prod_all_two_zeros", lambda a: a.prod(), with_zeros((1, 2), (2, 0)),
             gradgrad=FLIP_OK),
    GradCase("prod_all_three_zeros", lambda a: a.prod(), with_zeros((0, 0), (1, 2), (2, 0)),
             gradgrad=FLIP_OK),
    GradCase("prod_dim_zeros", lambda a: a.prod(1), with_zeros((0, 1), (1, 0), (1, 3), (2, 3)),
             gradgrad=FLIP_OK),
    GradCase("prod_dim0_zeros", lambda a: a.prod(0, keepdim=True), with_zeros((0, 1), (1, 1)),
             gradgrad=FLIP_OK),
    GradCase("prod_size1_dim_zero", lambda a: a.prod(1), with_zeros((1, 0), shape=(3, 1)),
             gradgrad=FLIP_OK),
    GradCase("max_all", lambda a: a.max(), distinct(3, 4)),
    GradCase("min_all", lambda a: a.min(), distinct(3, 4)),
    GradCase("max_dim", lambda a: a.max(1), distinct(3, 4)),
    GradCase("max_dim_keepdim", lambda a: a.max(0, keepdim=True), distinct(3, 4)),
    GradCase("min_dim", lambda a: lib(a).min(a, -1), distinct(2, 3, 4)),
    GradCase("min_dim_keepdim", lambda a: a.min(-2, True), distinct(2, 3, 4)),
    GradCase("max_dim_0d", lambda a: a.max(0), lambda rng: [np.array(0.5)]),
    GradCase("amax_all", lambda a: a.amax(), distinct(3, 4)),
    GradCase("amax_dims", lambda a: a.amax((0, 2)), distinct(2, 3, 4)),
    GradCase("amax_keepdim", lambda a: lib(a).amax(a, -1, keepdim=True), distinct(3, 4)),
    GradCase("amin_dim", lambda a: a.amin(1), distinct(3, 4)),
    GradCase("amin_dims_keepdim", lambda a: a.amin((-1, 0), True), distinct(2, 3, 4)),
    GradCase("aminmax_all", lambda a: lib(a).aminmax(a), distinct(3, 4)),
    GradCase("aminmax_dim", lambda a: a.aminmax(dim=1), distinct(3, 4)),
    GradCase("aminmax_keepdim", lambda a: a.aminmax(dim=-2, keepdim=True), distinct(3, 4)),
    GradCase("var_all", lambda a: a.var(), normal(3, 4)),
    GradCase("var_dim", lambda a: a.var(1), normal(3, 4)),
    GradCase("var_dims_keepdim", lambda a: a.var((0, -1), keepdim=True), normal(2, 3, 4)),
    GradCase("var_correction0", lambda a: lib(a).var(a, 0, correction=0), normal(3, 4)),
    GradCase("var_correction2", lambda a: a.var(1, correction=2), normal(3, 5)),
    GradCase("var_unbiased_false", lambda a: a.var(1, unbiased=False), normal(3, 4)),
    GradCase("var_legacy", lambda a: a.var(False), normal(3, 4)),
    GradCase("std_all", lambda a: a.std(), normal(3, 4)),
    GradCase("std_dim", lambda a: lib(a).std(a, -1), normal(3, 4)),
    GradCase("std_dims_keepdim", lambda a: a.std((0, 1), keepdim=True, correction=0),
             normal(2, 3, 4)),
    GradCase("std_legacy", lambda a: a.std(True), normal(3, 4)),
    GradCase("var_mean", lambda a: lib(a).var_mean(a, 1), normal(3, 4)),
    GradCase("var_mean_all", lambda a: lib(a).var_mean(a, correction=0), normal(3, 4)),
    GradCase("var_mean_var_only", lambda a: lib(a).var_mean(a, 0, keepdim=True)[0], normal(3, 4)),
    GradCase("std_mean", lambda a: lib(a).std_mean(a, (0, 1)), normal(2, 3, 4)),
    GradCase("std_mean_mean_only", lambda a: lib(a).std_mean(a, -1)[1], normal(3, 4)),
    GradCase("norm_2", lambda a: a.norm(), normal(3, 4)),
    GradCase("norm_2_dim", lambda a: a.norm(2, 1), normal(3, 4)),
    # torch's second derivatives of these are ZeroTensors (run_case compares them as zeros).
    GradCase("norm_1", lambda a: a.norm(1), normal(3, 4)),
    GradCase("norm_1_dims_keepdim", lambda a: lib(a).norm(a, 1, (0, 2), True), normal(2, 3, 4)),
    GradCase("norm_3", lambda a: a.norm(3, -1), normal(3, 4)),
    GradCase("norm_1_5", lambda a: a.norm(1.5, 0), normal(3, 4)),
    GradCase("norm_0_5", lambda a: a.norm(0.5), normal(3, 4)),
    GradCase("norm_neg", lambda a: a.norm(-1.5, 1), normal(3, 4)),
    GradCase("norm_inf", lambda a: a.norm(INF, 1), distinct(3, 4)),
    GradCase("norm_neg_inf", lambda a: a.norm(-INF), distinct(3, 4)),
    GradCase("norm_0", lambda a: a.norm(0, 1) + a.sum(), normal(3, 4)),
    GradCase("norm_fro", lambda a: a.norm("fro"), normal(3, 4)),
    GradCase("logsumexp", lambda a: a.logsumexp(1), normal(3, 4)),
    GradCase("logsumexp_dims_keepdim", lambda a: lib(a).logsumexp(a, (0, -1), keepdim=True),
             normal(2, 3, 4)),
    GradCase("logsumexp_large", lambda a: a.logsumexp(0),
             lambda rng: [rng.standard_normal((3, 2)) + 500.0]),
    GradCase("cumsum", lambda a: a.cumsum(0), normal(3, 4)),
    GradCase("cumsum_neg_dim", lambda a: lib(a).cumsum(a, -1), normal(2, 3, 4)),
    GradCase("cumsum_0d", lambda a: a.cumsum(0), lambda rng: [np.array(1.5)]),
    GradCase("cumsum_inplace", lambda a: (a * 1).cumsum_(1), normal(3, 4)),
    GradCase("cumprod", lambda a: a.cumprod(1), normal(3, 4),
             gradgrad=FLIP_OK),
    GradCase("cumprod_dim0", lambda a: lib(a).cumprod(a, 0), normal(4, 3),
             gradgrad=FLIP_OK),
    GradCase("cumprod_one_zero", lambda a: a.cumprod(1), with_zeros((0, 1), (2, 3)),
             gradgrad=FLIP_OK),
    GradCase("cumprod_zeros", lambda a: a.cumprod(-1), with_zeros((0, 1), (0, 2), (1, 0), (1, 3)),
             gradgrad=FLIP_OK),
    GradCase("cumprod_0d", lambda a: a.cumprod(0), lambda rng: [np.array(1.5)]),
    GradCase("cummax", lambda a: a.cummax(1), distinct(3, 4)),
    GradCase("cummax_dim0", lambda a: lib(a).cummax(a, 0), distinct(4, 3)),
    GradCase("cummin", lambda a: a.cummin(-1), distinct(3, 4)),
]

GRAD_SORTING = [
    GradCase("sort", lambda a: a.sort(), distinct(3, 4)),
    GradCase("sort_dim0_desc", lambda a: a.sort(0, descending=True), distinct(3, 4)),
    GradCase("sort_stable", lambda a: lib(a).sort(a, dim=1, stable=True), distinct(2, 3, 4)),
    GradCase("msort", lambda a: a.msort(), distinct(3, 4)),
    GradCase("topk", lambda a: a.topk(2), distinct(3, 4)),
    GradCase("topk_smallest_dim0", lambda a: lib(a).topk(a, 2, 0, largest=False), distinct(3, 4)),
    GradCase("kthvalue", lambda a: a.kthvalue(2), distinct(3, 4)),
    GradCase("kthvalue_keepdim", lambda a: a.kthvalue(3, 0, True), distinct(4, 3)),
    GradCase("median_all", lambda a: a.median(), distinct(3, 4)),
    GradCase("median_dim", lambda a: a.median(1), distinct(3, 4)),
    GradCase("median_dim_keepdim", lambda a: lib(a).median(a, -2, keepdim=True), distinct(3, 4)),
    GradCase("nanmedian_all", lambda a: a.nanmedian(), with_nans),
    GradCase("nanmedian_dim", lambda a: a.nanmedian(1), with_nans),
    GradCase("nanmedian_dim_keepdim", lambda a: a.nanmedian(0, True), distinct(3, 4)),
    GradCase("mode", lambda a: a.mode(), distinct(3, 4)),
    GradCase("mode_dim0_keepdim", lambda a: lib(a).mode(a, 0, keepdim=True), distinct(3, 4)),
]

GRAD_LINALG = [
    GradCase("mv", lambda m, v: m.mv(v), normals((3, 4), (4,))),
    GradCase("dot", lambda a, b: lib(a).dot(a, b), normals((5,), (5,))),
    GradCase("vdot", lambda a, b: a.vdot(b), normals((5,), (5,))),
    GradCase("addmm", lambda s, a, b: s.addmm(a, b), normals((2, 4), (2, 3), (3, 4))),
    GradCase("addmm_broadcast_scaled", lambda s, a, b: lib(s).addmm(s, a, b, beta=0.5, alpha=-2),
             normals((4,), (2, 3), (3, 4))),
    GradCase("addmm_beta0", lambda s, a, b: s.addmm(a, b, beta=0), normals((2, 4), (2, 3), (3, 4))),
    GradCase("addmm_inplace", lambda s, a, b: (s * 1).addmm_(a, b, alpha=3),
             normals((2, 4), (2, 3), (3, 4))),
    GradCase("addmv", lambda s, m, v: s.addmv(m, v), normals((3,), (3, 4), (4,))),
    GradCase("addmv_scaled", lambda s, m, v: lib(s).addmv(s, m, v, beta=2, alpha=0.5),
             normals((1,), (3, 4), (4,))),
    GradCase("baddbmm", lambda s, a, b: s.baddbmm(a, b), normals((2, 3, 4), (2, 3, 5), (2, 5, 4))),
    GradCase("baddbmm_scaled", lambda s, a, b: lib(s).baddbmm(s, a, b, beta=-1, alpha=0.25),
             normals((3, 4), (2, 3, 5), (2, 5, 4))),
    GradCase("addbmm", lambda s, a, b: s.addbmm(a, b), normals((3, 4), (2, 3, 5), (2, 5, 4))),
    GradCase("addbmm_scaled", lambda s, a, b: lib(s).addbmm(s, a, b, beta=0.5, alpha=2),
             normals((4,), (3, 3, 2), (3, 2, 4))),
    GradCase("outer", lambda a, b: lib(a).outer(a, b), normals((3,), (4,))),
    GradCase("ger", lambda a, b: a.ger(b), normals((3,), (4,))),
    GradCase("addr", lambda s, a, b: s.addr(a, b), normals((3, 4), (3,), (4,))),
    GradCase("addr_scaled", lambda s, a, b: lib(s).addr(s, a, b, beta=3, alpha=-0.5),
             normals((4,), (3,), (4,))),
    GradCase("inner_1d", lambda a, b: a.inner(b), normals((4,), (4,))),
    GradCase("inner_nd", lambda a, b: lib(a).inner(a, b), normals((2, 3, 4), (5, 4))),
    GradCase("inner_0d", lambda a, b: a.inner(b), normals((), (2, 3))),
    GradCase("tensordot_2", lambda a, b: lib(a).tensordot(a, b), normals((2, 3, 4), (3, 4, 5))),
    GradCase("tensordot_1", lambda a, b: lib(a).tensordot(a, b, 1), normals((2, 3), (3, 4))),
    GradCase("tensordot_0", lambda a, b: lib(a).tensordot(a, b, 0), normals((2, 3), (4,))),
    GradCase("tensordot_lists", lambda a, b: lib(a).tensordot(a, b, ([0, 2], [2, 1])),
             normals((2, 3, 4), (5, 4, 2))),
    GradCase("tensordot_lists_neg", lambda a, b: lib(a).tensordot(a, b, ([-1, 0], [0, 1])),
             normals((3, 2, 4), (4, 3))),
    GradCase("einsum_matmul", lambda a, b: lib(a).einsum("ij,jk->ik", a, b),
             normals((2, 3), (3, 4))),
    GradCase("einsum_implicit", lambda a, b: lib(a).einsum("jk,ij", a, b), normals((3, 4), (2, 3))),
    GradCase("einsum_batched", lambda a, b: lib(a).einsum("bij,bjk->bik", a, b),
             normals((2, 2, 3), (2, 3, 4))),
    GradCase("einsum_trace", lambda a: lib(a).einsum("ii->", a), normal(3, 3)),
    GradCase("einsum_diagonal", lambda a: lib(a).einsum("ii->i", a), normal(3, 3)),
    GradCase("einsum_repeated_3", lambda a, b: lib(a).einsum("iij,j->ij", a, b),
             normals((3, 3, 2), (2,))),
    GradCase("einsum_sum_private", lambda a, b: lib(a).einsum("ij,k->k", a, b),
             normals((2, 3), (4,))),
    GradCase("einsum_outer", lambda a, b: lib(a).einsum("i,j->ij", a, b), normals((3,), (4,))),
    GradCase("einsum_transpose", lambda a: lib(a).einsum("ij->ji", a), normal(2, 3)),
    GradCase("einsum_ellipsis", lambda a, b: lib(a).einsum("...ij,...jk->...ik", a, b),
             normals((2, 2, 3), (3, 4))),
    GradCase("einsum_ellipsis_broadcast", lambda a, b: lib(a).einsum("...ij,...jk", a, b),
             normals((2, 1, 2, 3), (3, 3, 4))),
    GradCase("einsum_three", lambda a, b, c: lib(a).einsum("ij,jk,kl->il", a, b, c),
             normals((2, 3), (3, 4), (4, 2))),
    GradCase("einsum_bilinear", lambda a, b, c: lib(a).einsum("bn,anm,bm->ba", a, b, c),
             normals((2, 3), (4, 3, 2), (2, 2))),
    GradCase("kron_2d", lambda a, b: lib(a).kron(a, b), normals((2, 3), (3, 2))),
    GradCase("kron_mixed_dims", lambda a, b: a.kron(b), normals((3,), (2, 2))),
    GradCase("kron_3d", lambda a, b: lib(a).kron(a, b), normals((2, 1, 2), (2, 3))),
    GradCase("kron_0d", lambda a, b: lib(a).kron(a, b), normals((), (3,))),
]

GRAD_MATH = GRAD_POINTWISE + GRAD_REDUCTIONS + GRAD_SORTING + GRAD_LINALG


# ---- gradient cases: views, shape and indexing ops --------------------------------------------


def r(*shape):
    return lambda rng: [rng.standard_normal(shape)]


def ix(*values):
    return np.array(values, dtype=np.int64)


GRAD_VIEWS = [
    GradCase("view", lambda a: a.view(4, 3), r(3, 4), noncontig=False),
    GradCase("view_neg", lambda a: a.view(-1), r(3, 4), noncontig=False),
    GradCase("view_as", lambda a, b: a.view_as(b), lambda rng: [rng.standard_normal((2, 6)),
                                                                 rng.standard_normal((3, 4))],
             noncontig=False),
    GradCase("reshape", lambda a: a.reshape(2, 6), r(3, 4)),
    GradCase("reshape_0d", lambda a: a.reshape(1, 1), r()),
    GradCase("reshape_as", lambda a: a.reshape_as(lib(a).zeros(6, 2)), r(3, 4)),
    GradCase("transpose", lambda a: a.transpose(0, -1), r(2, 3, 4)),
    GradCase("swapaxes", lambda a: a.swapaxes(1, 2), r(2, 3, 4)),
    GradCase("swapdims", lambda a: lib(a).swapdims(a, 0, 1), r(2, 3)),
    GradCase("t", lambda a: a.t(), r(3, 4)),
    GradCase("t_1d", lambda a: a.t(), r(4)),
    GradCase("adjoint", lambda a: a.adjoint(), r(2, 3, 4)),
    GradCase("permute", lambda a: a.permute(2, 0, 1), r(2, 3, 4)),
    GradCase("squeeze", lambda a: a.squeeze(), r(3, 1, 4, 1)),
    GradCase("squeeze_dim", lambda a: a.squeeze(1), r(3, 1, 4)),
    GradCase("unsqueeze", lambda a: a.unsqueeze(-1), r(3, 4)),
    GradCase("expand", lambda a: a.expand(2, 3, 4), r(3, 1)),
    GradCase("expand_as", lambda a: a.expand_as(lib(a).zeros(3, 4)), r(4)),
    GradCase("broadcast_to", lambda a: lib(a).broadcast_to(a, (2, 3)), r(1, 3)),
    GradCase("broadcast_tensors", lambda a, b: lib(a).broadcast_tensors(a, b),
             lambda rng: [rng.standard_normal((3, 1)), rng.standard_normal(4)]),
    GradCase("narrow", lambda a: a.narrow(1, 1, 2), r(3, 4)),
    GradCase("narrow_negstart", lambda a: lib(a).narrow(a, 0, -2, 2), r(3, 4)),
    GradCase("select", lambda a: a.select(1, -1), r(3, 4)),
    GradCase("select_1d", lambda a: a.select(0, 2), r(4)),
    GradCase("unfold", lambda a: a.unfold(1, 3, 1), r(2, 5)),
    GradCase("unfold_step", lambda a: a.unfold(0, 2, 3), r(7, 2)),
    GradCase("as_strided", lambda a: a.as_strided((2, 2), (1, 2), 1), r(6), noncontig=False),
    GradCase("as_strided_overlap", lambda a: a.as_strided((3, 3), (1, 1)), r(6),
             noncontig=False),
    GradCase("flatten", lambda a: a.flatten(1), r(2, 3, 4)),
    GradCase("flatten_same", lambda a: a.flatten(1, 1) * 2, r(2, 3)),
    GradCase("ravel", lambda a: a.ravel(), r(3, 4)),
    GradCase("unflatten", lambda a: a.unflatten(1, (2, -1)), r(3, 4)),
    GradCase("split", lambda a: a.split(2, -1), r(3, 5)),
    GradCase("split_sizes", lambda a: a.split([1, 3], 1), r(2, 4)),
    GradCase("split_with_sizes", lambda a: a.split_with_sizes([2, 1], 0), r(3, 2)),
    GradCase("tensor_split", lambda a: a.tensor_split(3, 1), r(2, 7)),
    GradCase("tensor_split_idx", lambda a: a.tensor_split([1, 3], 0), r(5, 2)),
    GradCase("tensor_split_idx_back", lambda a: a.tensor_split([3, 1], 0), r(5, 2)),
    GradCase("hsplit", lambda a: a.hsplit(2), r(3, 4)),
    GradCase("hsplit_idx", lambda a: a.hsplit([1]), r(5)),
    GradCase("vsplit", lambda a: a.vsplit([1, 2]), r(4, 2)),
    GradCase("chunk", lambda a: a.chunk(3, 1), r(2, 7)),
    GradCase("unbind", lambda a: a.unbind(-1), r(2, 3)),
    GradCase("diagonal", lambda a: a.diagonal(), r(3, 4)),
    GradCase("diagonal_offset", lambda a: a.diagonal(-1, 0, 2), r(3, 2, 4)),
    GradCase("diagonal_offset_pos", lambda a: a.diagonal(2), r(3, 4)),
    GradCase("movedim", lambda a: a.movedim(0, -1), r(2, 3, 4)),
    GradCase("moveaxis", lambda a: lib(a).moveaxis(a, [0, 1], [2, 0]), r(2, 3, 4)),
]

GRAD_RESHAPES = [
    GradCase("cat", lambda a, b: lib(a).cat([a, b], -1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 1))]),
    GradCase("concat", lambda a, b: lib(a).concat([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((1, 3))]),
    GradCase("concatenate", lambda a, b: lib(a).concatenate([a, b], axis=1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))]),
    GradCase("stack", lambda a, b: lib(a).stack([a, b], 1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))]),
    GradCase("stack_neg", lambda a, b: lib(a).stack([a, b], -1),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(3)]),
    GradCase("hstack", lambda a, b: lib(a).hstack([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 1))]),
    GradCase("hstack_1d", lambda a, b: lib(a).hstack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2)]),
    GradCase("vstack", lambda a, b: lib(a).vstack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal((2, 3))]),
    GradCase("row_stack", lambda a, b: lib(a).row_stack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(3)]),
    GradCase("dstack", lambda a, b: lib(a).dstack([a, b]),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))]),
    GradCase("column_stack", lambda a, b: lib(a).column_stack([a, b]),
             lambda rng: [rng.standard_normal(3), rng.standard_normal((3, 2))]),
    GradCase("atleast_1d", lambda a: lib(a).atleast_1d(a), r()),
    GradCase("atleast_2d", lambda a: lib(a).atleast_2d(a), r(3)),
    GradCase("atleast_3d", lambda a: lib(a).atleast_3d(a), r(2, 3)),
    GradCase("atleast_2d_list", lambda a, b: lib(a).atleast_2d([a, b]),
             lambda rng: [rng.standard_normal(()), rng.standard_normal((2, 3))]),
    GradCase("flip", lambda a: a.flip(0, -1), r(2, 3, 4)),
    GradCase("fliplr", lambda a: a.fliplr(), r(3, 4)),
    GradCase("flipud", lambda a: a.flipud(), r(3, 4)),
    GradCase("roll", lambda a: a.roll(1, 0), r(3, 4)),
    GradCase("roll_multi", lambda a: a.roll((-1, 2), (1, 0)), r(3, 4)),
    GradCase("roll_flat", lambda a: a.roll(5), r(3, 4)),
    GradCase("rot90", lambda a: a.rot90(1, [0, 1]), r(3, 4)),
    GradCase("rot90_k3", lambda a: a.rot90(3, [1, 2]), r(2, 3, 4)),
    GradCase("rot90_k2", lambda a: a.rot90(-2, [0, 1]), r(3, 4)),
    GradCase("repeat", lambda a: a.repeat(2, 1, 3), r(3, 2)),
    GradCase("repeat_0d", lambda a: a.repeat(3), r()),
    GradCase("tile", lambda a: a.tile((2,)), r(3, 2)),
    GradCase("tile_more", lambda a: lib(a).tile(a, (2, 1, 2)), r(2)),
    GradCase("repeat_interleave", lambda a: a.repeat_interleave(2), r(2, 3)),
    GradCase("repeat_interleave_dim", lambda a: a.repeat_interleave(3, dim=1), r(2, 3)),
    GradCase("repeat_interleave_tensor",
             lambda a, n: lib(a).repeat_interleave(a, n, dim=0),
             lambda rng: [rng.standard_normal((3, 2)), ix(1, 0, 2)]),
    GradCase("tril", lambda a: a.tril(), r(3, 4)),
    GradCase("tril_batched", lambda a: lib(a).tril(a, -1), r(2, 3, 3)),
    GradCase("triu", lambda a: a.triu(1), r(3, 4)),
    GradCase("meshgrid", lambda a, b: lib(a).meshgrid(a, b, indexing="ij"),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2)]),
    GradCase("meshgrid_xy", lambda a, b, c: lib(a).meshgrid(a, b, c, indexing="xy"),
             lambda rng: [rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(())]),
    GradCase("clone", lambda a: a.clone(), r(3, 4)),
    GradCase("contiguous", lambda a: a.contiguous(), r(3, 4)),
]

GRAD_IDX = [
    GradCase("index_select", lambda a, i: a.index_select(1, i),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 3, 0)]),
    GradCase("gather", lambda a, i: a.gather(1, i),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 1, 1, 3, 2, 2).reshape(3, 2)]),
    GradCase("scatter", lambda a, s, i: a.scatter(0, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 4)),
                          ix(0, 1, 2, 0, 2, 0, 1, 1).reshape(2, 4)]),
    GradCase("scatter_value", lambda a, i: a.scatter(1, i, 2.5),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 2, 1).reshape(3, 1)]),
    # torch has no derivative for reduce='add'; ember's equals scatter_add's.
    GradCase("scatter_reduce_add", lambda a, s, i: a.scatter(1, i, s, reduce="add"),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal((2, 3)),
                          ix(0, 0, 3, 1, 2, 1).reshape(2, 3)],
             torch_fn=lambda a, s, i: a.scatter_add(1, i, s)),
    GradCase("scatter_add", lambda a, s, i: a.scatter_add(0, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 4)),
                          ix(0, 0, 2, 0, 2, 0, 1, 1).reshape(2, 4)]),
    GradCase("index_add", lambda a, s, i: a.index_add(0, i, s, alpha=2.0),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)),
                          ix(0, 2, 0)]),
    GradCase("index_copy", lambda a, s, i: a.index_copy(1, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 2)), ix(3, 0)]),
    GradCase("index_fill", lambda a, i: a.index_fill(1, i, -1.0),
             lambda rng: [rng.standard_normal((3, 4)), ix(1, 3)]),
    GradCase("index_fill_tensor", lambda a, v, i: a.index_fill(0, i, v),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(()), ix(0, 2)]),
    GradCase("index_put", lambda a, v, i: a.index_put((i,), v),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), ix(3, 1)]),
    GradCase("index_put_bcast", lambda a, v, i, j: a.index_put((i, j), v),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal(()), ix(3, 1),
                          ix(0, 2)]),
    GradCase("index_put_acc", lambda a, v, i: a.index_put((i,), v, accumulate=True),
             lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal(3), ix(1, 1, 2)]),
    GradCase("adv_index", lambda a, i: a[i], lambda rng: [rng.standard_normal((4, 3)),
                                                          ix(3, 0, 3)], op="_index"),
    GradCase("adv_index_2", lambda a, i, j: a[i, :, j],
             lambda rng: [rng.standard_normal((3, 2, 4)), ix(0, 2, 2), ix(1, 3, 1)],
             op="_index"),
    GradCase("adv_index_mask", lambda a, m: a[m],
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0], op="_index"),
    GradCase("basic_index", lambda a: a[1:, None, ::2, 1], r(3, 4, 2), op="as_strided"),
    GradCase("basic_index_int", lambda a: a[-1], r(3, 4), op="select"),
    GradCase("masked_fill", lambda a, m: a.masked_fill(m, 3.0),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(4) > 0]),
    GradCase("masked_fill_bcast_self", lambda a, m: a.masked_fill(m, 3.0),
             lambda rng: [rng.standard_normal(4), rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_fill_tensor", lambda a, v, m: a.masked_fill(m, v),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(()),
                          rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_scatter", lambda a, s, m: a.masked_scatter(m, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((4, 4)),
                          rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_select", lambda a, m: a.masked_select(m),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) > 0]),
    GradCase("masked_select_bcast", lambda a, m: lib(a).masked_select(a, m),
             lambda rng: [rng.standard_normal(4), rng.standard_normal((3, 4)) > 0]),
    GradCase("take", lambda a, i: a.take(i),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 11, -1, 5).reshape(2, 2)]),
    GradCase("take_along_dim", lambda a, i: lib(a).take_along_dim(a, i, 1),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 3, 3, 1, 2, 2).reshape(3, 2)]),
    GradCase("take_along_dim_bcast", lambda a, i: lib(a).take_along_dim(a, i, 0),
             lambda rng: [rng.standard_normal((3, 1)), ix(0, 2, 1, 1).reshape(2, 2)]),
    GradCase("take_along_dim_flat", lambda a, i: lib(a).take_along_dim(a, i),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 7, 7)]),
]


def _sr(reduce, include_self):
    return GradCase(
        f"scatter_reduce_{reduce}_{include_self}",
        lambda a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
        lambda rng: [rng.standard_normal((3, 2)), rng.standard_normal((4, 2)),
                     ix(0, 0, 2, 1, 0, 2, 0, 1).reshape(4, 2)],
        # amax/amin are piecewise: their double derivative is zero (torch has none).
        gradgrad=reduce in ("sum", "mean"))


GRAD_SCATTER_REDUCE = [_sr(red, inc) for red in ("sum", "prod", "mean", "amax", "amin")
                  for inc in (True, False)]

def _pad(pad, mode="constant", **kw):
    """F.pad for either library (non-constant modes: torch's backward has a spurious dependence
    on the input, ember's does not, so only first derivatives are compared)."""
    def f(a):
        if isinstance(a, ember.Tensor):
            return ember.pad(a, list(pad), mode=mode, **kw)
        return torch.nn.functional.pad(a, pad, mode=mode, **kw)
    return f


GRAD_PAD = [
    GradCase("constant_pad_nd", lambda a: lib(a).constant_pad_nd(a, [1, 2, 0, 1], 0.5), r(2, 3)),
    GradCase("constant_pad_nd_crop", lambda a: lib(a).constant_pad_nd(a, [-1, 2, 1, -1]),
             r(3, 4)),
    GradCase("pad_constant", _pad((2, 0, 1, 1, 1, 0), value=-1.0), r(2, 3, 2)),
    GradCase("pad_reflect_1", _pad((2, 1), "reflect"), r(2, 4), gradgrad=False),
    GradCase("pad_reflect_2", _pad((1, 2, 2, 0), "reflect"), r(2, 3, 4), gradgrad=False),
    GradCase("pad_reflect_3", _pad((1, 1, 0, 1, 1, 0), "reflect"), r(1, 2, 3, 3), gradgrad=False),
    GradCase("pad_replicate", _pad((3, 1, 0, 2), "replicate"), r(1, 2, 3), gradgrad=False),
    GradCase("pad_replicate_crop", _pad((-1, 2), "replicate"), r(2, 4), gradgrad=False),
    GradCase("pad_circular", _pad((2, 1, 1, 3), "circular"), r(1, 3, 4), gradgrad=False),
    GradCase("pad_circular_crop", _pad((-1, 3), "circular"), r(1, 2, 4), gradgrad=False),
]

# In-place forms on tensors with history, and on views of them (CopySlices).
GRAD_INPLACE = [
    GradCase("index_fill_", lambda a, i: (a * 1).index_fill_(1, i, 2.0),
             lambda rng: [rng.standard_normal((3, 4)), ix(0, 2)]),
    GradCase("index_add_view", lambda a, s, i: (a * 1)[1:].index_add_(1, i, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((2, 2)), ix(3, 3)]),
    GradCase("index_copy_", lambda a, s, i: (a * 1).index_copy_(0, i, s),
             lambda rng: [rng.standard_normal((3, 2)), rng.standard_normal((1, 2)), ix(1)]),
    GradCase("masked_scatter_view", lambda a, s, m: (a * 1)[:, 1:].masked_scatter_(m, s),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(9),
                          rng.standard_normal((3, 3)) > 0]),
    GradCase("masked_fill_view", lambda a, m: (a * 1).t().masked_fill_(m, 1.5),
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((4, 3)) > 0]),
    GradCase("scatter_", lambda a, s, i: (a * 1).scatter_(1, i, s),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal((2, 2)),
                          ix(3, 0, 1, 2).reshape(2, 2)]),
    GradCase("scatter_add_view", lambda a, s, i: (a * 1)[0].scatter_add_(0, i, s),
             lambda rng: [rng.standard_normal((2, 4)), rng.standard_normal(3), ix(3, 3, 0)]),
    GradCase("index_put_", lambda a, v, i: (a * 1).index_put_((i,), v, accumulate=True),
             lambda rng: [rng.standard_normal(5), rng.standard_normal(3), ix(4, 0, 4)]),
    GradCase("tril_view", lambda a: (a * 1)[1:].tril_(), r(4, 3)),
    GradCase("copy_view", lambda a, b: (a * 1).diagonal().copy_(b),
             lambda rng: [rng.standard_normal((3, 3)), rng.standard_normal(3)]),
]

# Empty tensors and empty index lists.
GRAD_EMPTY = [
    GradCase("narrow_empty", lambda a: a.narrow(1, 2, 0) + 1, r(3, 4), noncontig=False),
    GradCase("cat_empty", lambda a, b: lib(a).cat([a, b]),
             lambda rng: [rng.standard_normal((0, 3)), rng.standard_normal((2, 3))]),
    GradCase("index_select_empty", lambda a, i: a.index_select(0, i),
             lambda rng: [rng.standard_normal((3, 2)), np.zeros(0, dtype=np.int64)]),
    GradCase("split_empty_piece", lambda a: a.split([0, 3], 0), r(3, 2)),
]

GRAD_SHAPE = (GRAD_VIEWS + GRAD_RESHAPES + GRAD_IDX + GRAD_SCATTER_REDUCE + GRAD_PAD + GRAD_INPLACE
              + GRAD_EMPTY)


# ---- the table -------------------------------------------------------------------------------

YAML_OPS = load_ops()
SCHEMAS: dict[str, list[Any]] = {}
for _op in YAML_OPS:
    SCHEMAS.setdefault(_op.name, []).append(_op)


def _op_of(case_name: str) -> str | None:
    """The YAML op a gradient case is about: the longest op name that is the case's name or
    starts it ("kron_2d" -> kron, "index_fill_" -> index_fill_)."""
    best = None
    for n in SCHEMAS:
        if case_name == n or case_name.startswith(n if n.endswith("_") else n + "_"):
            if best is None or len(n) > len(best):
                best = n
    return best


def _build() -> dict[str, OpInfo]:
    db = {op.name: op for op in POINTWISE_OPS}
    for name in SCHEMAS:
        db.setdefault(name, OpInfo(name))
    for name, samples in SAMPLES.items():
        if name in db:
            db[name].samples = list(samples)
    for case in GRAD_MATH + GRAD_SHAPE:
        case.op = case.op or _op_of(case.name)
        if case.op is not None:
            db[case.op].grad_cases.append(case)
    for name, info in db.items():
        schemas = SCHEMAS.get(name, [])
        if info.inplace is None:
            info.inplace = any(o.inplace for o in schemas)
        if info.out is None:
            info.out = any(o.out or o.native_out for o in schemas)
        if info.differentiable is None:
            info.differentiable = any(o.derivatives or o.autograd in ("composite", "manual")
                                      for o in schemas)
        if info.forward_ad is None:
            info.forward_ad = any(o.tangent for o in schemas)
    return db


DB: dict[str, OpInfo] = _build()
# The reference-checked (pointwise) entries, in table order.
POINTWISE = [op for op in DB.values() if op.ref is not None]
