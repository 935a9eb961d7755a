"""Findings of the s15 fuzzing round (fuzz_api.py --torch, seeds 1221-1225; fuzz_ops.py --torch,
seed 1521), each fixed and pinned here with explicit values, and against PyTorch where it is
installed: a Python number as the first operand of the arithmetic functions (torch.pow(2, t)),
result_type of complex numbers, gcd/lcm of a bool operand, special.exp2's exactness, the
"floating-point only" refusals as DtypeNotImplementedError, and constant padding of long rows."""

from __future__ import annotations

import math

import ember
import numpy as np
import pytest
from test_fuzz_findings_s14 import _agree

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- a. a Python number as the first operand ------------------------------------------------------

def _f(M):
    return M.tensor([1.0, 2.0, 4.0])


NUMBER_FIRST_CASES = {
    "pow_int_base": lambda M: M.pow(2, _f(M)),
    "pow_float_base": lambda M: M.pow(0.5, _f(M)),
    "pow_int_exponent_tensor": lambda M: M.pow(2, M.arange(5)),
    "pow_half": lambda M: M.pow(3, _f(M).half()),
    "pow_out": lambda M: M.pow(2, _f(M), out=M.empty(3)),
    "add": lambda M: M.add(1, _f(M)),
    "add_alpha": lambda M: M.add(1, _f(M), alpha=3),
    "add_float_to_int": lambda M: M.add(0.5, M.tensor([1, 2], dtype=M.int8)),
    "add_int_wraps_in_int8": lambda M: M.add(300, M.tensor([1, 2], dtype=M.int8)),
    "add_to_0d_int8": lambda M: M.add(2, M.tensor(3, dtype=M.int8)),
    "add_complex": lambda M: M.add(1j, M.tensor([1.0, 2.0], dtype=M.float64)),
    "add_bool": lambda M: M.add(True, M.tensor([1, 2])),
    "add_two_numbers": lambda M: M.add(3, 2),
    "add_two_numbers_float": lambda M: M.add(3, 2.5),
    "sub": lambda M: M.sub(3, _f(M)),
    "sub_alpha": lambda M: M.sub(3, _f(M), alpha=2),
    "subtract": lambda M: M.subtract(3.5, _f(M)),
    "mul": lambda M: M.mul(3, _f(M)),
    "multiply_int": lambda M: M.multiply(3, M.tensor([1, 2])),
    "div": lambda M: M.div(3, _f(M)),
    "div_ints": lambda M: M.div(3, M.tensor([2, 4])),
    "div_floor": lambda M: M.div(7, M.tensor([2, -4]), rounding_mode="floor"),
    "div_trunc": lambda M: M.div(-7, M.tensor([2, 4]), rounding_mode="trunc"),
    "divide": lambda M: M.divide(1, _f(M)),
    "true_divide": lambda M: M.true_divide(1.5, _f(M)),
    "true_divide_empty_int": lambda M: M.true_divide(1.5, M.zeros(0, 3, dtype=M.int64)),
    "div_two_numbers": lambda M: M.div(3, 2),
    "floor_divide": lambda M: M.floor_divide(7, M.tensor([2, -4])),
    "floor_divide_float": lambda M: M.floor_divide(7.5, _f(M)),
    "remainder": lambda M: M.remainder(7, M.tensor([2, -4, 5])),
    "remainder_float": lambda M: M.remainder(-7.5, _f(M)),
    "div_negative_by_0d_uint8": lambda M: M.div(-2, M.tensor(2, dtype=M.uint8)),
    "div_by_0d_int8": lambda M: M.div(3, M.tensor(2, dtype=M.int8)),
    "div_bool": lambda M: M.div(True, M.tensor([True, True])),
    "add_float_to_0d_half": lambda M: M.add(0.1, M.tensor(2.0, dtype=M.float16)),
    "pow_to_0d_int8": lambda M: M.pow(2, M.tensor(6, dtype=M.int8)),
    "mul_complex_by_0d_float64": lambda M: M.mul(1 + 1j, M.tensor(2.0, dtype=M.float64)),
    "sub_bool_from_0d": lambda M: M.sub(True, M.tensor(2)),
    # refused as torch: two numbers where PyTorch has no such overload, a non-number operand
    "pow_two_numbers": lambda M: M.pow(2, 3),
    "remainder_two_numbers": lambda M: M.remainder(7, 2),
    "add_string": lambda M: M.add(1, "x"),
}


def test_number_first_operand_values():
    t = ember.tensor([1.0, 2.0, 4.0])
    assert ember.pow(2, t).tolist() == [2.0, 4.0, 16.0]
    assert ember.pow(2, ember.arange(4)).tolist() == [1, 2, 4, 8]
    assert ember.pow(2, ember.arange(4)).dtype == ember.int64
    assert ember.add(1, t, alpha=3).tolist() == [4.0, 7.0, 13.0]
    assert ember.sub(3, t, alpha=2).tolist() == [1.0, -1.0, -5.0]
    assert ember.div(1, t).tolist() == [1.0, 0.5, 0.25]
    assert ember.div(7, ember.tensor([2, -4]), rounding_mode="floor").tolist() == [3, -2]
    assert ember.remainder(7, ember.tensor([2, -4, 5])).tolist() == [1, -1, 2]
    assert ember.floor_divide(7, ember.tensor([2, -4])).tolist() == [3, -2]
    # the number promotes as a Python number: a category above the tensor's gives the default
    # dtype, one at or below it keeps the tensor's dtype (a 0-d one's too)
    assert ember.add(0.5, ember.tensor([1, 2], dtype=ember.int8)).dtype == ember.float32
    assert ember.add(2, ember.tensor(3, dtype=ember.int8)).dtype == ember.int8
    assert ember.mul(3, t.half()).dtype == ember.float16
    # 0.1 keeps its double value next to a float64 tensor
    assert ember.add(0.1, ember.zeros(1, dtype=ember.float64)).item() == 0.1
    assert ember.add(3, 2).item() == 5 and ember.add(3, 2).dtype == ember.int64
    assert ember.div(3, 2).item() == 1.5
    out = ember.empty(3)
    assert ember.pow(2, t, out=out) is out and out.tolist() == [2.0, 4.0, 16.0]
    # gradients flow to the tensor operand
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    ember.pow(2, x).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), [2 * math.log(2), 4 * math.log(2)], rtol=1e-6)
    with pytest.raises(TypeError):
        ember.pow(2, 3)
    with pytest.raises(TypeError):
        ember.add(1, "x")


@needs_torch
@pytest.mark.parametrize("name", sorted(NUMBER_FIRST_CASES))
def test_number_first_operand_matches_torch(name):
    _agree(NUMBER_FIRST_CASES[name])


def test_result_type_of_complex_numbers():
    assert ember.result_type(1j, 2) == ember.complex64
    assert ember.result_type(1j, ember.tensor([1.0], dtype=ember.float64)) == ember.complex128
    assert ember.result_type(ember.tensor([1], dtype=ember.int8), 2j) == ember.complex64
    if torch is not None:
        assert str(torch.result_type(1j, 2)).split(".")[-1] == "complex64"


# ---- b. gcd / lcm promote a bool operand ----------------------------------------------------------

GCD_CASES = {
    "gcd_bool_other": lambda M: M.gcd(M.tensor([4, 6]), M.tensor([True, False])),
    "lcm_bool_other": lambda M: M.lcm(M.tensor([4, 6], dtype=M.int16), M.tensor([True, True])),
    "gcd_bool_self": lambda M: M.gcd(M.tensor([True, False]), M.tensor([4, 6], dtype=M.int8)),
    "gcd_both_bool": lambda M: M.gcd(M.tensor([True]), M.tensor([True])),
    "gcd_float": lambda M: M.gcd(M.tensor([4.0]), M.tensor([2])),
    "gcd_int8_int64": lambda M: M.gcd(M.tensor([12, -18], dtype=M.int8), M.tensor([8, 12])),
}


def test_gcd_lcm_of_bool_operand():
    r = ember.gcd(ember.tensor([4, 6]), ember.tensor([True, False]))
    assert r.tolist() == [1, 6] and r.dtype == ember.int64
    r = ember.lcm(ember.tensor([4, 6], dtype=ember.int16), ember.tensor([True, True]))
    assert r.tolist() == [4, 6] and r.dtype == ember.int16
    with pytest.raises(NotImplementedError, match="Bool"):
        ember.gcd(ember.tensor([True]), ember.tensor([False]))


@needs_torch
@pytest.mark.parametrize("name", sorted(GCD_CASES))
def test_gcd_lcm_match_torch(name):
    _agree(GCD_CASES[name])


# ---- c. special.exp2 ------------------------------------------------------------------------------

def test_special_exp2_is_exact_and_handles_complex_infinities():
    x = ember.arange(0, 60, 7, dtype=ember.float64)
    assert ember.special.exp2(x).tolist() == [2.0**k for k in range(0, 60, 7)]
    assert ember.special.exp2(ember.tensor([3], dtype=ember.int8)).tolist() == [8.0]
    inf = math.inf
    z = ember.tensor([complex(-inf, -inf), complex(0.0, 0.0), complex(1.0, 0.5)],
                     dtype=ember.complex128)
    r = ember.special.exp2(z).tolist()
    assert r[0] == 0 and r[1] == 1
    np.testing.assert_allclose(r[2], 2 ** complex(1.0, 0.5), rtol=1e-12)
    if torch is not None:
        tz = torch.tensor([complex(inf, inf), complex(-inf, -inf), complex(inf, 0.0)],
                          dtype=torch.complex128)
        ez = ember.tensor(tz.tolist(), dtype=ember.complex128)
        np.testing.assert_array_equal(np.asarray(ember.special.exp2(ez).tolist()),
                                      torch.special.exp2(tz).numpy())


# ---- d. floating-only kernels refuse other dtypes as torch's NotImplementedError -----------------

def _i(M):
    return M.tensor([[1, 2], [3, 4]])


FLOAT_ONLY_CASES = {
    "elu": lambda M: M.nn.functional.elu(_i(M)),
    "silu": lambda M: M.nn.functional.silu(_i(M)),
    "hardsigmoid_complex": lambda M: M.nn.functional.hardsigmoid(_i(M).to(M.complex64)),
    "softmax_int": lambda M: M.softmax(_i(M), 0),
    "log_softmax_int": lambda M: M.log_softmax(_i(M), 0),
    "softmax_int_dtype": lambda M: M.softmax(_i(M).float(), 0, dtype=M.int16),
    "rand_int": lambda M: M.rand(2, dtype=M.int64),
    "randn_int": lambda M: M.randn(2, dtype=M.int32),
    "bernoulli_int": lambda M: M.bernoulli(_i(M)),
    "adaptive_max_pool1d": lambda M: M.nn.functional.adaptive_max_pool1d(_i(M).unsqueeze(0), 1),
    "max_pool1d_int": lambda M: M.nn.functional.max_pool1d(_i(M).to(M.complex64), 2),
}


@pytest.mark.parametrize("name", sorted(FLOAT_ONLY_CASES))
def test_floating_only_refusals_are_dtype_not_implemented(name):
    # caught by torch-style (NotImplementedError / RuntimeError) and older ember-style
    # (TypeError) except clauses alike
    with pytest.raises(ember.DtypeNotImplementedError) as info:
        FLOAT_ONLY_CASES[name](ember)
    assert isinstance(info.value, (NotImplementedError, RuntimeError, TypeError))
    if torch is not None:
        with pytest.raises((NotImplementedError, RuntimeError, TypeError)):
            FLOAT_ONLY_CASES[name](torch)


# ---- e. constant padding of long rows (no index map larger than the result) ------------------------

@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "int16"])
@pytest.mark.parametrize("pad", [(3, 2), (0, 4), (-1, 2), (2, -2), (-2, -1)])
def test_constant_pad_of_rows(dtype, pad):
    src = np.arange(1, 7).astype(dtype)
    x = ember.tensor(src.tolist(), dtype=getattr(ember, dtype))
    r = ember.constant_pad_nd(x, list(pad), value=7)
    lo, hi = pad
    ref = src[max(-lo, 0):len(src) - max(-hi, 0)]
    ref = np.concatenate([np.full(max(lo, 0), 7, dtype), ref, np.full(max(hi, 0), 7, dtype)])
    assert r.tolist() == ref.tolist()
    assert str(r.dtype).split(".")[-1] == dtype
    # the same in a batch of rows (the index-map path) and through F.pad
    xb = x.reshape(1, 6).expand(3, 6).contiguous()
    rb = ember.nn.functional.pad(xb, pad, value=7)
    assert rb.tolist() == [ref.tolist()] * 3


# ---- f. multi_dot of three matrices: torch's order on a tie ------------------------------------

def test_multi_dot_of_three_takes_torchs_order_on_a_tie():
    a = ember.tensor([[-2.753, -2.877, -0.015, 2.811], [-0.13, -2.873, 2.595, 2.735],
                      [-2.744, 1.433, 1.723, -2.122], [2.689, -0.449, -1.79, 2.917]],
                     dtype=ember.bfloat16)
    b = (ember.arange(16, dtype=ember.float64) * 0.37 - 2.4).reshape(4, 4).to(ember.bfloat16)
    r = ember.linalg.multi_dot([a, b, b])
    assert r.tolist() == ((a @ b) @ b).tolist()  # equal costs: (A B) C, rounded as torch
    assert r[0].tolist() == [-17.5, 2.40625, 22.375, 42.25]
    # unequal costs still take the cheaper order: (2x3)(3x100)(100x1) is A (B C)
    x, y, z = ember.randn(2, 3, dtype=ember.float64), ember.randn(3, 100, dtype=ember.float64), \
        ember.randn(100, 1, dtype=ember.float64)
    np.testing.assert_allclose(ember.linalg.multi_dot([x, y, z]).tolist(),
                               (x @ (y @ z)).tolist(), rtol=1e-12)
    if torch is not None:
        ta, tb = torch.tensor(a.float().tolist()).bfloat16(), torch.tensor(b.float().tolist()).bfloat16()
        assert torch.linalg.multi_dot([ta, tb, tb]).float().tolist() == r.float().tolist()


# ---- g. Tensor.to(None), Generator.manual_seed of a negative seed -----------------------------

def test_to_none_is_no_device():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.to(None) is x
    r = x.to(None, ember.float64)
    assert r.dtype == ember.float64 and r.tolist() == x.tolist()
    if torch is not None:
        tx = torch.arange(6.0)
        assert tx.to(None) is tx and tx.to(None, torch.float64).dtype == torch.float64


def test_generator_manual_seed_wraps_negative_seeds():
    g = ember.Generator()
    assert g.manual_seed(-1).initial_seed() == 2**64 - 1
    assert g.manual_seed(-(2**63)).initial_seed() == 2**63
    a = ember.rand(3, generator=ember.Generator().manual_seed(-5))
    b = ember.rand(3, generator=ember.Generator().manual_seed(2**64 - 5))
    assert a.tolist() == b.tolist()
    if torch is not None:
        assert torch.Generator().manual_seed(-1).initial_seed() == 2**64 - 1


# ---- h. S^T @ D of a CSR matrix with a huge column count: ember's own errors ------------------

def test_sparse_csr_mm_t_values_and_a_huge_column_count():
    crow, col = ember.tensor([0, 2, 2, 4]), ember.tensor([1, 3, 0, 2])
    vals, dense = ember.tensor([1.0, 2.0, 3.0, 4.0]), ember.arange(6.0).reshape(3, 2)
    s = np.zeros((3, 4))
    s[0, 1], s[0, 3], s[2, 0], s[2, 2] = 1.0, 2.0, 3.0, 4.0
    r = ember._C._sparse_csr_mm_t(crow, col, vals, dense, 4)
    np.testing.assert_allclose(r.tolist(), s.T @ np.arange(6.0).reshape(3, 2))
    # was std::vector's length_error ("cannot create std::vector larger than max_size()")
    for n in (2**62, 2**40):
        with pytest.raises((RuntimeError, ember.OutOfMemoryError)) as info:  # "too many elements"
            ember._C._sparse_csr_mm_t(crow, col, vals, dense, n)
        assert "std::" not in str(info.value) and "vector" not in str(info.value)
