"""Findings of the s21 fuzzing round (tools/fuzz_ops.py --torch, seeds 1273-), each fixed and
pinned here with explicit values, and against PyTorch where it is installed: the squared and
smooth regression losses refuse complex and integer operands (complex input gave mean(d^2)
instead of a mean of |d|^2: mse_loss([1+1j, 2j], [1j, 1j]) was 0) and take a bool input with a
floating target (it promotes, as a bool target did); F.cosine_similarity, F.kl_div and
F.hardshrink refuse complex input as PyTorch (the products were bilinear, not Hermitian; kl_div
of complex numbers means nothing); F.hardtanh of uint8 refuses negative limits (-1 wrapped to
255: every element became 1); and (built from C++, so they need the rebuilt extension)
threshold refuses a threshold or value its dtype cannot hold (value -2 into uint8 was written as
254, 1e6 into float16 as inf), linspace / logspace refuse ends their dtype cannot hold
(linspace(0, 1e6, 3, dtype=float16) was all NaN, 300 into uint8 wrapped to 44), elu / selu /
celu's derivatives take torch's sides (f' at NaN was NaN, f'' at 0 the exponential side's), and a
0-d integer tensor of any width indexes like an int (x[tensor(1, int8)])."""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _same

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- a. the regression losses' dtypes ---------------------------------------------------------

SQUARED_LOSSES = ["mse_loss", "smooth_l1_loss", "huber_loss"]


@pytest.mark.parametrize("name", SQUARED_LOSSES)
def test_squared_losses_refuse_complex_operands(name):
    x = ember.tensor([1 + 1j, 2j])
    t = ember.tensor([1j, 1j])
    # mse_loss was (0+0j): mean((1, 1j)^2) = mean(1, -1), not a mean squared error
    with pytest.raises(NotImplementedError, match=f"{name}: not implemented for dtype"):
        getattr(F, name)(x, t)


@pytest.mark.parametrize("name", ["mse_loss", "smooth_l1_loss"])
def test_squared_losses_refuse_integer_and_bool_pairs(name):
    with pytest.raises(NotImplementedError, match="int64"):
        getattr(F, name)(ember.tensor([1, 2]), ember.tensor([3, 1]))
    with pytest.raises(NotImplementedError, match="bool"):  # was a subtraction error
        getattr(F, name)(ember.tensor([True, False]), ember.tensor([True, True]))


def test_huber_loss_keeps_the_input_dtype():
    # huber_loss's result has the input's dtype: integer inputs were computed in float32
    with pytest.raises(NotImplementedError, match="int64"):
        F.huber_loss(ember.tensor([1, 2]), ember.tensor([3, 1]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.huber_loss(ember.tensor([1, 2]), ember.tensor([1.0, 1.0]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.huber_loss(ember.tensor([True, False]), ember.tensor([1.0, 1.0]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        F.huber_loss(ember.tensor([1.0, 2.0]), ember.tensor([1j, 1j]))
    r = F.huber_loss(ember.tensor([1.0, 2.0]), ember.tensor([1, 4]))
    assert r.dtype == ember.float32 and r.item() == 0.75


@pytest.mark.parametrize("name, want", [("mse_loss", 0.5), ("smooth_l1_loss", 0.25)])
def test_a_bool_input_promotes_with_a_floating_target(name, want):
    # was "subtraction with a bool tensor is not supported": only a bool target promoted
    r = getattr(F, name)(ember.tensor([True, False]), ember.tensor([1.0, 1.0]))
    assert r.dtype == ember.float32 and r.item() == want
    r = getattr(F, name)(ember.tensor([True, False]), ember.tensor([1.0, 1.0], dtype=ember.float64),
                         reduction="none")
    assert r.dtype == ember.float64 and r.tolist() == [0.0, 2 * want]


def test_floating_losses_still_work():
    x = ember.tensor([1.0, 3.0], requires_grad=True)
    F.mse_loss(x, ember.tensor([True, False])).backward()  # a bool target, as before
    assert x.grad.tolist() == [0.0, 3.0]
    assert F.l1_loss(ember.tensor([1 + 1j, 2j]), ember.tensor([1j, 1j])).item() == 1.0  # |d|


LOSS_CASES = [
    ((1 + 1j, 2j), (1j, 1j)), ((1, 2), (1.0, 1.0)), ((1, 2), (1, 3)), ((1.0, 2.0), (1, 3)),
    ((True, False), (1.0, 1.0)), ((True, False), (True, True)), ((1.0, 0.0), (True, False)),
    ((1.0, 2.0), (1 + 0j, 3j)),
]


@needs_torch
@pytest.mark.parametrize("name", SQUARED_LOSSES)
@pytest.mark.parametrize("a, b", LOSS_CASES)
def test_loss_dtypes_match_torch(name, a, b):
    _same(lambda M: getattr(M.nn.functional, name)(M.tensor(a), M.tensor(b), reduction="none"))


# ---- a2. other functionals that took complex input PyTorch refuses -----------------------------

def test_complex_inputs_torch_refuses_are_refused():
    x, t = ember.tensor([[1 + 1j, 2j]]), ember.tensor([[1j, 1.0]])
    # cosine_similarity was the bilinear sum(x1 * x2) / norms (-0.29+0.87j), not <conj(x1), x2>
    with pytest.raises(RuntimeError, match="expected common dtype to be floating point"):
        F.cosine_similarity(x, t)
    with pytest.raises(RuntimeError, match="Complex inputs not supported"):  # was -1-1j
        F.kl_div(ember.tensor([1 + 1j]), ember.tensor([1.0]), reduction="sum")
    with pytest.raises(RuntimeError, match="Complex inputs not supported"):
        F.kl_div(ember.tensor([0.5]), ember.tensor([1 + 1j]))
    for v in (ember.tensor([1 + 1j, 0.1j]), ember.tensor([1, 0, -3]), ember.tensor([True])):
        with pytest.raises(NotImplementedError, match="hardshrink: not implemented for dtype"):
            F.hardshrink(v)
        with pytest.raises(NotImplementedError, match="hardshrink: not implemented for dtype"):
            v.hardshrink()


def test_real_inputs_of_those_functionals_still_work():
    got = F.cosine_similarity(ember.tensor([[1.0, 0.0]]), ember.tensor([[1.0, 1.0]])).item()
    assert got == pytest.approx(0.5**0.5)
    got = F.kl_div(ember.tensor([-0.5]), ember.tensor([0.5]), reduction="sum").item()
    assert got == pytest.approx(0.5 * (math.log(0.5) + 0.5))
    assert F.hardshrink(ember.tensor([0.3, -0.7, float("nan")])).tolist()[:2] == [0.0,
                                                                                  pytest.approx(-0.7)]


COMPLEX_CASES = {
    "cosine_similarity": lambda M: M.nn.functional.cosine_similarity(
        M.tensor([[1 + 1j, 2j]]), M.tensor([[1j, 1.0]])),
    "cosine_similarity_real": lambda M: M.nn.functional.cosine_similarity(
        M.tensor([[1.0, 2.0]]), M.tensor([[3.0, -1.0]], dtype=M.float64)),
    "kl_div_input": lambda M: M.nn.functional.kl_div(M.tensor([1 + 1j]), M.tensor([1.0])),
    "kl_div_target": lambda M: M.nn.functional.kl_div(M.tensor([1.0]), M.tensor([1 + 1j])),
    "hardshrink_complex": lambda M: M.nn.functional.hardshrink(M.tensor([1 + 1j])),
    "hardshrink_int": lambda M: M.nn.functional.hardshrink(M.tensor([1, -3])),
    "hardshrink_half": lambda M: M.nn.functional.hardshrink(M.tensor([0.25, -2.0],
                                                                     dtype=M.float16)),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_refusals_match_torch(name):
    _same(COMPLEX_CASES[name])


# ---- a3. hardtanh of uint8 with a negative limit ---------------------------------------------

def test_hardtanh_of_uint8_with_a_negative_limit_is_refused():
    x = ember.tensor([0, 1, 5, 200], dtype=ember.uint8)
    # clamp(x, -1, 1) wraps -1 to 255 (as torch's clamp), so hardtanh gave [1, 1, 1, 1]
    for call in (lambda: F.hardtanh(x), lambda: F.hardtanh_(x.clone(), -1.0, 1.0),
                 lambda: F.hardtanh(x, -2.0, 3.0)):
        with pytest.raises(RuntimeError, match="unsigned type with negative limits"):
            call()
    assert F.hardtanh(x, 0.0, 6.0).tolist() == [0, 1, 5, 6]
    assert F.hardtanh(x, -0.5, 3.0).tolist() == [0, 1, 3, 3]  # -0.5 truncates to 0, as torch
    assert F.relu6(x).tolist() == [0, 1, 5, 6]
    assert F.hardtanh(ember.tensor([-3, 0, 5], dtype=ember.int8)).tolist() == [-1, 0, 1]


@needs_torch
@pytest.mark.parametrize("lim", [(-1.0, 1.0), (0.0, 6.0), (-0.5, 3.0), (-3.0, -1.0)])
def test_integer_hardtanh_matches_torch(lim):
    _same(lambda M: M.nn.functional.hardtanh(M.tensor([0, 1, 5, 200], dtype=M.uint8), *lim))
    _same(lambda M: M.nn.functional.hardtanh(M.tensor([-9, 0, 5], dtype=M.int8), *lim))


# ---- a4. threshold's numbers must fit the input's dtype (rebuilt extension) -------------------

@pytest.mark.parametrize("dt, threshold, value", [
    ("uint8", 0.1, -2.0),  # was written as 254
    ("uint8", 0, 300),  # was 44
    ("int8", 0.5, 300),
    ("uint8", 300, 0),  # the threshold too
    ("uint8", math.nan, 0),
    ("uint8", 0, math.inf),
    ("float16", 0.1, 1e6),  # was inf
    ("bfloat16", 0.1, 1e300),
    ("float32", 0.1, 1e300),
])
def test_threshold_refuses_a_number_its_dtype_cannot_hold(dt, threshold, value):
    x = ember.tensor([0, 1, 5], dtype=getattr(ember, dt))
    for call in (lambda: ember.threshold(x, threshold, value),
                 lambda: F.threshold(x, threshold, value),
                 lambda: x.clone().threshold_(threshold, value)):
        with pytest.raises(RuntimeError, match="cannot be converted to type .* without overflow"):
            call()


def test_threshold_takes_what_its_dtype_can_hold():
    u8 = ember.tensor([0, 1, 5], dtype=ember.uint8)
    # a negative int is taken (and wraps: -3 is 253 in uint8), as torch's
    assert ember.threshold(u8, -3, 0).tolist() == [0, 0, 0]
    assert ember.threshold(u8, 0.1, 2.5).tolist() == [2, 1, 5]
    assert ember.threshold(ember.tensor([0, 1, 5], dtype=ember.int8), 0.5, -128).tolist() == \
        [-128, 1, 5]
    h = ember.tensor([0.0, 1.0, 5.0], dtype=ember.float16)
    assert ember.threshold(h, 1e6, 0.0).tolist() == [0.0, 0.0, 0.0]  # compared in float32
    got = ember.threshold(ember.tensor([0.0, 1.0, 5.0]), 0.5, math.inf).tolist()
    assert got == [math.inf, 1.0, 5.0]


THRESHOLD_CASES = [("uint8", 0.1, -2.0), ("uint8", -3, 0), ("int8", 0.5, 300), ("uint8", 300, 0),
                   ("float16", 0.1, 1e6), ("float16", 1e6, 0.0), ("float32", 0.5, math.inf),
                   ("int64", 0.5, 2**62)]


@needs_torch
@pytest.mark.parametrize("dt, threshold, value", THRESHOLD_CASES)
def test_threshold_numbers_match_torch(dt, threshold, value):
    _same(lambda M: M.threshold(M.tensor([0, 1, 5], dtype=getattr(M, dt)), threshold, value))


# ---- a5. linspace / logspace ends must fit the dtype (rebuilt extension) -------------------------

@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("start, end, dt", [
    (0, 1e6, "float16"),  # linspace gave [nan, nan, nan]
    (0, 1e300, "float32"),  # [nan, nan]
    (-1e39, 0, "bfloat16"),
    (0, 300, "uint8"),  # linspace wrapped 300 to 44
    (250, 260, "int8"),
    (math.nan, 1, "int64"),  # was INT64_MIN
    (0, math.inf, "uint8"),
    (-5.0, 5, "uint8"),  # a negative float does not fit (a negative int wraps, below)
])
def test_spaces_refuse_ends_their_dtype_cannot_hold(fn, start, end, dt):
    with pytest.raises(RuntimeError, match=f"{fn}: value .* cannot be converted to type"):
        getattr(ember, fn)(start, end, 3, dtype=getattr(ember, dt))


def test_spaces_take_ends_their_dtype_can_hold():
    assert ember.linspace(-128, 127, 3, dtype=ember.int8).tolist() == [-128, 0, 127]
    assert ember.linspace(0, 255, 4, dtype=ember.uint8).tolist() == [0, 85, 170, 255]
    # a negative int end wraps into uint8 first (-5 is 251), as torch: was [251, 0, 5]
    assert ember.linspace(-5, 5, 3, dtype=ember.uint8).tolist() == [251, 128, 5]
    assert ember.linspace(0, 65504, 3, dtype=ember.float16).tolist() == [0.0, 32752.0, 65504.0]
    assert ember.logspace(0, 2, 3, dtype=ember.uint8).tolist() == [1, 10, 100]


SPACE_CASES = [(0, 1e6, 3, "float16"), (0, 300, 2, "uint8"), (-5, 5, 3, "uint8"),
               (-1, 2, 4, "uint8"), (2.5, -3.7, 4, "int8"), (0, math.inf, 2, "float32"),
               (0, math.inf, 2, "int64"), (-128, 127, 5, "int8")]


@needs_torch
@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("start, end, steps, dt", SPACE_CASES)
def test_spaces_match_torch(fn, start, end, steps, dt):
    _same(lambda M: getattr(M, fn)(start, end, steps, dtype=getattr(M, dt)), rtol=0)


# ---- a6. elu's derivatives pick torch's sides at 0 and NaN (rebuilt extension) ------------------

ELU_X = [0.0, -0.0, math.nan, -1.0, 1.0] * 4  # 20 elements: the vectorized float32 path too


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name, left, right", [
    ("elu", 1.0, 1.0), ("selu", 1.7580993408473766, 1.0507009873554805), ("celu", 1.0, 1.0)])
def test_elu_derivatives_at_zero_and_nan(dt, name, left, right):
    x = ember.tensor(ELU_X, dtype=getattr(ember, dt), requires_grad=True)
    y = getattr(F, name)(x)
    (g,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    g, gg = g.tolist()[:5], gg.tolist()[:5]
    # f' at 0 is the exponential side's; at NaN the linear side's (was NaN)
    assert g[0] == pytest.approx(left) and g[1] == pytest.approx(left)
    assert g[2] == pytest.approx(right)
    # f'' is 0 at 0 (the linear side's; was the exponential side's) and at NaN (was NaN)
    assert gg[:3] == [0.0, 0.0, 0.0]
    assert gg[3] == pytest.approx(left * math.exp(-1.0), rel=1e-6) and gg[4] == 0.0


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_inplace_elu_derivatives_from_the_result_at_zero_and_nan(dt):
    x = ember.tensor(ELU_X, dtype=getattr(ember, dt), requires_grad=True)
    y = F.elu(x * 1.0, 0.5, inplace=True)  # its backward reads the result
    (g,) = ember.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    assert g.tolist()[:5] == pytest.approx([0.5, 0.5, 1.0, 0.5 * math.exp(-1.0), 1.0])
    assert gg.tolist()[:5] == pytest.approx([0.0, 0.0, 0.0, 0.5 * math.exp(-1.0), 0.0])


@needs_torch
@pytest.mark.parametrize("name", ["elu", "selu", "celu", "elu_inplace"])
def test_elu_derivatives_match_torch(name):
    def fn(M):
        x = M.tensor(ELU_X, requires_grad=True)
        if name == "elu_inplace":
            y = M.nn.functional.elu(x * 1.0, 0.7, inplace=True)
        else:
            y = getattr(M.nn.functional, name)(x)
        (g,) = M.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = M.autograd.grad(g.sum(), x)
        return M.cat([g, gg])

    _same(fn)


# ---- b. a 0-d integer tensor of any width is an int index (rebuilt extension) -----------------

@pytest.mark.parametrize("dt", ["int8", "int16", "uint16", "uint32", "uint64", "int32", "int64"])
def test_a_0d_integer_tensor_of_any_width_indexes_like_an_int(dt):
    a = ember.arange(20.0).reshape(4, 5)
    i = ember.tensor(2, dtype=getattr(ember, dt))
    assert a[i].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]  # int8: was an IndexError
    assert a[ember.tensor(1, dtype=getattr(ember, dt)), ember.tensor([0, 1])].tolist() == [5.0, 6.0]
    assert a[[], ember.tensor(0, dtype=getattr(ember, dt))].shape == (0,)
    b = a.clone()
    b[ember.tensor(1, dtype=getattr(ember, dt))] = 7.0
    assert b[1].tolist() == [7.0] * 5 and b[0].tolist() == a[0].tolist()


def test_index_tensors_with_elements_still_need_long_int_byte_or_bool():
    a = ember.arange(20.0).reshape(4, 5)
    with pytest.raises(IndexError, match="must be long, int, byte or bool tensors"):
        a[ember.tensor([1, 2], dtype=ember.int8)]
    with pytest.raises(IndexError, match="must be long, int, byte or bool tensors"):
        a[ember.tensor(1.0)]  # a 0-d float tensor is no index either
    assert a[ember.tensor(True)].shape == (1, 4, 5)  # a 0-d bool (or uint8) is still a mask
    assert a[ember.tensor(0, dtype=ember.uint8)].shape == (0, 4, 5)


@needs_torch
@pytest.mark.parametrize("dt", ["int8", "int16", "uint16", "uint64"])
def test_0d_integer_index_matches_torch(dt):
    _same(lambda M: M.arange(20.0).reshape(4, 5)[M.tensor(3, dtype=getattr(M, dt))])
    _same(lambda M: M.arange(20.0).reshape(4, 5)[M.tensor(-1, dtype=M.int8), 1:])
    _same(lambda M: M.arange(20.0).reshape(4, 5)[M.tensor([1, 2], dtype=getattr(M, dt))])
