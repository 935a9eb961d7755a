"""Findings of the differential fuzzer (fuzz_api.py --torch, seeds 1204-1215), each fixed and
pinned here with explicit values, and against PyTorch where it is installed: wrong dtypes,
spurious overflow or NaN, integer wrap-around, and a number-over-0-d-tensor promotion."""

from __future__ import annotations

import math

import ember
import pytest

NAN, INF = float("nan"), float("inf")


def _same(a: list, b: list) -> bool:
    """Elementwise equal lists, NaN equal to NaN."""
    return len(a) == len(b) and all((x != x and y != y) or x == y for x, y in zip(a, b))


def test_hypot_neither_overflows_nor_squares_in_half_precision():
    # x*x overflowed float32 (and bfloat16) for 1e30 although the hypotenuse is 1e30
    assert ember.hypot(ember.tensor([1e30]), ember.tensor([1.0])).item() == pytest.approx(1e30)
    big = ember.tensor([1e300], dtype=ember.float64)
    assert ember.hypot(big, big).item() == pytest.approx(math.sqrt(2) * 1e300)
    b = ember.hypot(ember.tensor([1e30], dtype=ember.bfloat16), ember.tensor([1.0], dtype=ember.bfloat16))
    assert b.dtype == ember.bfloat16 and math.isfinite(b.item())
    # a float16 operand is squared in the result's float64, not in float16
    r = ember.hypot(ember.tensor([-2.227], dtype=ember.float64), ember.tensor([-0.783], dtype=ember.float16))
    h = float(ember.tensor(-0.783, dtype=ember.float16).item())
    assert r.dtype == ember.float64 and r.item() == pytest.approx(math.hypot(2.227, h), rel=1e-15)
    # C's hypot: an infinite leg wins over a NaN one; zeros give zero
    r = ember.hypot(ember.tensor([INF, 0.0, NAN, 3.0]), ember.tensor([NAN, 0.0, 1.0, -4.0]))
    assert _same(r.tolist(), [INF, 0.0, NAN, 5.0])
    x = ember.tensor([3.0], requires_grad=True)
    ember.hypot(x, ember.tensor([4.0])).sum().backward()
    assert x.grad.tolist() == pytest.approx([0.6])


def test_hypot_matches_torch():
    torch = pytest.importorskip("torch")
    vals = [NAN, INF, -INF, 0.0, -0.0, 1e30, -1.0, 0.5, 3e38]
    other = [1.0, NAN, 2.0, 0.0, 5.0, 1.0, 1e30, -0.25, 3e38]
    for dt in ("float32", "float64", "bfloat16", "float16"):
        e = ember.hypot(ember.tensor(vals).to(getattr(ember, dt)), ember.tensor(other).to(getattr(ember, dt)))
        t = torch.hypot(torch.tensor(vals).to(getattr(torch, dt)), torch.tensor(other).to(getattr(torch, dt)))
        assert str(e.dtype).split(".")[-1] == dt
        assert _same(e.float().tolist(), t.float().tolist()), dt


def test_logit_of_integer_and_bool_tensors_promotes_first():
    # 1 - p used to wrap in uint8 (logit(6) came out as log(6 / 251))
    r = ember.logit(ember.tensor([0, 1, 2, 6], dtype=ember.uint8))
    assert r.dtype == ember.float32 and _same(r.tolist(), [-INF, INF, NAN, NAN])
    assert ember.logit(ember.tensor([True, False])).tolist() == [INF, -INF]
    r = ember.logit(ember.tensor([0, 1]), eps=0.25)
    assert r.tolist() == pytest.approx([math.log(1 / 3), math.log(3)])
    assert ember.special.logit(ember.tensor([0, 1], dtype=ember.int8)).tolist() == [-INF, INF]


def test_ndtr_keeps_a_half_dtype():
    for dt in (ember.float16, ember.bfloat16, ember.float32):
        x = ember.tensor(-0.15, dtype=dt)  # a 0-d tensor took float64 from the tail branch
        assert ember.special.ndtr(x).dtype == dt
        assert ember.special.ndtr(ember.tensor([-6.0, 0.0], dtype=dt)).dtype == dt
    assert ember.special.ndtr(ember.tensor([0.0], dtype=ember.float16)).item() == 0.5


def test_lgamma_of_infinities_is_inf():
    x = ember.tensor([INF, -INF, 0.0, -1.0, NAN], dtype=ember.float64)
    for fn in (ember.lgamma, ember.special.gammaln):
        assert _same(fn(x).tolist(), [INF, INF, INF, INF, NAN])
    assert ember.lgamma(ember.tensor([INF])).item() == INF


def test_vector_norm_negative_ord_lets_nan_win_over_zero():
    x = ember.tensor([[NAN, 0.0, 1.0], [0.0, 2.0, 3.0], [1.0, 2.0, 4.0]])
    assert math.isnan(ember.linalg.vector_norm(x, -1).item())
    r = ember.linalg.vector_norm(x, -1, dim=1)
    assert math.isnan(r[0].item()) and r[1].item() == 0.0
    assert r[2].item() == pytest.approx(1 / (1 + 1 / 2 + 1 / 4))
    assert ember.linalg.vector_norm(ember.tensor([0.0, 2.0]), -2).item() == 0.0


def test_block_diag_promotes_a_0d_input_like_a_number():
    r = ember.block_diag(ember.tensor([-0.15]), ember.tensor([-0.3]),
                         ember.tensor(-0.15 - 0.075j, dtype=ember.complex128))
    assert r.dtype == ember.complex64 and r.shape == (3, 3)
    assert ember.block_diag(ember.tensor(1, dtype=ember.int64), ember.tensor([1.0], dtype=ember.float16)).dtype == ember.float16
    assert ember.block_diag(ember.tensor([1]), ember.tensor([2.0], dtype=ember.float64)).dtype == ember.float64
    assert ember.block_diag(ember.tensor(1.0), ember.tensor(2, dtype=ember.int64)).dtype == ember.float32


def test_trapezoid_dtypes_follow_the_sample_points():
    y = ember.tensor([1, 2, 4])
    r = ember.cumulative_trapezoid(y, x=ember.tensor([0.0, 1.0, 3.0], dtype=ember.float16))
    assert r.dtype == ember.float16 and r.tolist() == [1.5, 7.5]
    r = ember.trapezoid(y, x=ember.tensor([0.0, 1.0, 3.0], dtype=ember.float16))
    assert r.dtype == ember.float16 and r.item() == 7.5
    assert ember.trapezoid(y).dtype == ember.float32
    assert ember.trapezoid(y, x=ember.tensor([0, 1, 3])).item() == 7.5
    # an empty integer integral is an integer zero of y's dtype, as torch's
    r = ember.trapezoid(ember.tensor([], dtype=ember.uint8), dx=0.5)
    assert r.dtype == ember.uint8 and r.item() == 0
    assert ember.trapezoid(ember.ones(2, 0, 3, dtype=ember.int64), dim=1).tolist() == [[0] * 3] * 2
    assert ember.trapezoid(ember.ones(0)).dtype == ember.float32


def test_float_power_of_two_numbers_is_a_type_error():
    with pytest.raises(TypeError, match="float_power"):
        ember.float_power(2 ** 70, NAN)
    assert ember.float_power(2, ember.tensor([3])).tolist() == [8.0]


def test_core_findings_match_torch():
    torch = pytest.importorskip("torch")
    u8 = [0, 1, 2, 6]
    assert _same(ember.logit(ember.tensor(u8, dtype=ember.uint8)).tolist(),
                 torch.logit(torch.tensor(u8, dtype=torch.uint8)).tolist())
    assert str(torch.special.ndtr(torch.tensor(-0.15, dtype=torch.float16)).dtype) == "torch.float16"
    assert torch.lgamma(torch.tensor([INF])).item() == ember.lgamma(ember.tensor([INF])).item()
    x = [[NAN, 0.0, 1.0], [0.0, 2.0, 3.0]]
    assert _same(ember.linalg.vector_norm(ember.tensor(x), -1, dim=1).tolist(),
                 torch.linalg.vector_norm(torch.tensor(x), -1, dim=1).tolist())
    y, xs = [1, 2, 4], [0.0, 1.0, 3.0]
    t = torch.cumulative_trapezoid(torch.tensor(y), x=torch.tensor(xs, dtype=torch.float16))
    e = ember.cumulative_trapezoid(ember.tensor(y), x=ember.tensor(xs, dtype=ember.float16))
    assert str(t.dtype).split(".")[-1] == str(e.dtype).split(".")[-1] and t.tolist() == e.tolist()
    t = torch.block_diag(torch.tensor([1.0]), torch.tensor(2 + 1j, dtype=torch.complex128))
    assert str(t.dtype).split(".")[-1] == "complex64"


def test_unique_consecutive_along_a_dim_of_one_slice():
    # a single slice along dim compared 0 pairs and reshaped 0 elements to (0, -1)
    out, inv, cnt = ember.unique_consecutive(ember.tensor([[True]]), dim=1, return_inverse=True,
                                              return_counts=True)
    assert out.tolist() == [[True]] and inv.tolist() == [0] and cnt.tolist() == [1]
    out, inv, cnt = ember.unique_consecutive(ember.tensor([[1.0, 2.0]]), dim=0, return_inverse=True,
                                              return_counts=True)
    assert out.tolist() == [[1.0, 2.0]] and inv.tolist() == [0] and cnt.tolist() == [1]
    out, cnt = ember.unique_consecutive(ember.tensor([[1, 1, 2], [1, 1, 2]]), dim=1, return_counts=True)
    assert out.tolist() == [[1, 2], [1, 2]] and cnt.tolist() == [2, 1]


def test_cumulative_trapezoid_of_an_empty_dim():
    y = ember.zeros(2, 0, 3, dtype=ember.float16, requires_grad=True)
    r = ember.cumulative_trapezoid(y, dx=-1.0, dim=1)
    assert r.shape == (2, 0, 3) and r.dtype == ember.float16 and r.requires_grad
    assert ember.cumulative_trapezoid(ember.ones(2, 1, 3), dim=1).shape == (2, 0, 3)
    assert ember.cumulative_trapezoid(ember.tensor([1.0, 2.0, 3.0])).tolist() == [1.5, 4.0]


def test_logit_with_a_negative_or_nan_eps_clamps_nothing():
    x = ember.tensor([1.788, -0.34, 0.086, 0.5], dtype=ember.float64)
    expected = [NAN, NAN, math.log(0.086 / 0.914), 0.0]
    for eps in (NAN, -1e-308, -0.5):
        r = ember.special.logit(x, eps)
        assert _same([round(v, 12) for v in r.tolist()], [round(v, 12) for v in expected]), eps
    assert ember.logit(x, 0.1).tolist()[0] == pytest.approx(math.log(0.9 / 0.1))


def test_lu_and_matrix_norm_of_empty_matrices():
    # the permutation of no pivots went through a NumPy reshape of 0 elements
    for shape, p_shape in (((2, 0, 0), (2, 0, 0)), ((0, 2, 3), (0, 2, 2)), ((3, 0), (3, 3))):
        P, L, U = ember.linalg.lu(ember.zeros(*shape, dtype=ember.float64))
        assert tuple(P.shape) == p_shape
    P, _, _ = ember.linalg.lu(ember.zeros(3, 0))
    assert P.tolist() == ember.eye(3).tolist()
    # the inf- and 1-norms of matrices without rows or columns are 0, as torch's
    assert ember.linalg.matrix_norm(ember.ones(2, 0, 0), ord=INF).tolist() == [0.0, 0.0]
    assert ember.linalg.matrix_norm(ember.ones(0, 3), ord=1).item() == 0.0
    assert ember.linalg.matrix_norm(ember.ones(3, 0), ord=-INF).item() == 0.0
    assert ember.linalg.matrix_norm(ember.ones(2, 2), ord=INF).item() == 2.0


def test_a_number_over_a_0d_tensor_keeps_the_tensors_dtype():
    # the number became a 0-d float64 (int64) tensor that tied with the 0-d operand and widened
    # the result: 1.0 / x.sum() was float64
    for dt in (ember.float16, ember.bfloat16, ember.float32):
        x = ember.tensor(4.0, dtype=dt)
        for r in (1.0 / x, 2 / x, 9.0 // x, 9.0 % x, 2.0 ** x, 1.0 - x):
            assert r.dtype == dt
        assert (1.0 / x).item() == 0.25 and (9.0 // x).item() == 2.0 and (9.0 % x).item() == 1.0
    for dt in (ember.int8, ember.int32, ember.uint8):
        x = ember.tensor(4, dtype=dt)
        assert (9 // x).dtype == dt and (9 % x).dtype == dt and (1 << x).dtype == dt
        assert (64 >> x).dtype == dt and (64 >> x).item() == 4
        assert (1.0 / x).dtype == ember.float32 and (2 / x).dtype == ember.float32
    z = ember.tensor(2 + 0j, dtype=ember.complex64)
    assert (1.0 / z).dtype == ember.complex64 and (1j / z).dtype == ember.complex64
    # a tensor with dims was right already, and the number's precision is kept
    assert (1.0 / ember.ones(2, dtype=ember.float16)).dtype == ember.float16
    x = ember.tensor(3.0, dtype=ember.float64)
    assert (0.1 / x).item() == 0.1 / 3.0
    w = ember.tensor(2.0, requires_grad=True)
    (1.0 / w).backward()
    assert w.grad.item() == -0.25


def test_integer_logspace_steps_after_promotion():
    # the end minus the start wrapped in uint8 (0 - 2 = 254: exponents 2, 65.5, ...)
    assert ember.logspace(2, 0, 5, dtype=ember.uint8).tolist() == [100, 31, 10, 3, 1]
    assert ember.logspace(2.5, 0.5, 5, dtype=ember.int8).tolist() == [100, 31, 10, 3, 1]
    assert ember.logspace(3, 0, 5, dtype=ember.int32).tolist() == [1000, 177, 31, 5, 1]
    assert ember.logspace(-2, 2, 3, base=2.0, dtype=ember.int8).tolist() == [0, 1, 4]
    assert ember.logspace(0, 2, 3, dtype=ember.int64).tolist() == [1, 10, 100]


def test_reflected_ops_and_logspace_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("float16", "bfloat16", "float32", "int32", "int8"):
        e, t = ember.tensor(3, dtype=getattr(ember, name)), torch.tensor(3, dtype=getattr(torch, name))
        for f in (lambda v: 1.0 / v, lambda v: 7 // v, lambda v: 7.0 % v, lambda v: 2 ** v):
            assert str(f(e).dtype).split(".")[-1] == str(f(t).dtype).split(".")[-1], name
    # (only results that fit the dtype: a float out of an integer's range converts undefined)
    cases = {"uint8": ((2.5, 0.5), (2, 0)), "int8": ((2.5, 0.5), (-1, 2))}
    for dt in ("uint8", "int8", "int16", "int32", "int64"):
        for a, b in cases.get(dt, ((3, 1e-300), (-1, 2), (2.5, 0.5))):
            e = ember.logspace(a, b, 5, base=10.0, dtype=getattr(ember, dt)).tolist()
            t = torch.logspace(a, b, 5, base=10.0, dtype=getattr(torch, dt)).tolist()
            assert e == t, (dt, a, b)


def test_logit_compares_eps_in_the_input_dtype():
    # -1e-308 underflows to -0.0 in float32: a clamp to [-0, 1] there, none in float64
    x = [9.0, -5.0, 0.3]
    r = ember.special.logit(ember.tensor(x), -1e-308).tolist()
    assert r[:2] == [INF, -INF] and r[2] == pytest.approx(math.log(0.3 / 0.7))
    r = ember.special.logit(ember.tensor(x, dtype=ember.float64), -1e-308).tolist()
    assert math.isnan(r[0]) and math.isnan(r[1])
    assert ember.special.logit(ember.tensor([9, -5]), -1e-308).tolist() == [INF, -INF]
    with pytest.raises(TypeError, match="'eps' must be float, not Tensor"):
        ember.logit(ember.tensor(x), ember.ones(3))
