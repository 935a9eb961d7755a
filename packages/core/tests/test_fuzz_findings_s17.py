"""Findings of the s17 fuzzing round (fuzz_api.py --torch, seeds 1233-1238), each fixed and
pinned here with explicit values, and against PyTorch where it is installed: isin with NaN among
the test values, ldexp's rounding of 2 ** other, values PyTorch gives that ember refused
(mvlgamma outside its domain, gumbel_softmax's tau, hardtanh's NaN and crossed bounds,
cosine_embedding_loss broadcasting, svd_lowrank's negative niter), a refusal PyTorch makes
(prelu's weights for 1-D input), and PyTorch's exception classes (rrelu, channel_shuffle,
smooth_l1_loss's NaN beta, quantile's interpolation, nextafter's dtypes and more), the default
reduction of the top-level losses, instance_norm of (N, C) input with running statistics, and
(built from C++) max pooling of integers, addcmul/addcdiv values past float16's range and
bincount of an empty input."""

from __future__ import annotations

import builtins
import math

import ember
import ember.nn.functional as F
import pytest
from test_fuzz_findings_s14 import _agree, _outcome

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

NAN, INF = math.nan, math.inf


def _F(M):
    return M.nn.functional


# ---- a. isin: a NaN among the test values hid inf (searchsorted stepped past it) ---------------

def test_isin_with_nan_among_the_test_values():
    a = ember.tensor([NAN, INF, -INF, 0.0, -0.0, 1e30])
    assert ember.isin(a, a).tolist() == [False, True, True, True, True, True]  # inf was False
    assert ember.isin(a, a, invert=True).tolist() == [True, False, False, False, False, False]
    assert ember.isin(ember.tensor([1.0, INF, NAN]), ember.tensor([NAN, INF])).tolist() == \
        [False, True, False]
    assert ember.isin(ember.tensor([1.0, NAN]), ember.tensor([NAN])).tolist() == [False, False]


ISIN_CASES = {
    "self": lambda M: M.isin(M.tensor([NAN, INF, -INF, 0.0, -0.0, 1e30]),
                             M.tensor([NAN, INF, -INF, 0.0, -0.0, 1e30])),
    "half_elements": lambda M: M.isin(M.tensor([1.0, INF, 2.0], dtype=M.float16),
                                      M.tensor([NAN, INF])),
    "int_elements": lambda M: M.isin(M.tensor([1, 2]), M.tensor([NAN, 2.0])),
    "only_nan": lambda M: M.isin(M.tensor([NAN, 1.0]), M.tensor([NAN, NAN])),
    "invert": lambda M: M.isin(M.tensor([INF, 3.0]), M.tensor([NAN, INF]), invert=True),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(ISIN_CASES))
def test_isin_matches_torch(name):
    _agree(ISIN_CASES[name])


# ---- b. ldexp: 2 ** other rounded in other's dtype, the product in the promoted one ------------

def test_ldexp_rounds_two_to_the_other_in_its_dtype():
    # 2 ** -0.496 in bfloat16 is 0.7109375 (0.70898... exactly): the float32 result keeps it
    r = ember.ldexp(ember.tensor([1.0], dtype=ember.float16),
                    ember.tensor([-0.496], dtype=ember.bfloat16))
    assert r.dtype == ember.float32 and r.item() == 0.7109375
    # an integer exponent: 2 ** other in float32, the result in the input's bfloat16
    r = ember.ldexp(ember.tensor([3.0], dtype=ember.bfloat16), ember.tensor([2], dtype=ember.uint8))
    assert r.dtype == ember.bfloat16 and r.item() == 12.0


LDEXP_CASES = {
    "f64_f16": lambda M: M.ldexp(M.tensor([1.0, 3.0], dtype=M.float64),
                                 M.tensor([-0.496, 0.081], dtype=M.float16)),
    "f16_bf16": lambda M: M.ldexp(M.tensor([1.0, 3.0], dtype=M.float16),
                                  M.tensor([-0.496, 0.081], dtype=M.bfloat16)),
    "bf16_u8": lambda M: M.ldexp(M.tensor([1.0, 3.0], dtype=M.bfloat16),
                                 M.tensor([3, 1], dtype=M.uint8)),
    "int_int": lambda M: M.ldexp(M.tensor([1, 3]), M.tensor([2, -3])),
    "i8_bf16": lambda M: M.ldexp(M.tensor([1, 3], dtype=M.int8),
                                 M.tensor([0.5, 2.0], dtype=M.bfloat16)),
    "zero_dim_exponent": lambda M: M.ldexp(M.tensor([1.0, 3.0], dtype=M.float16),
                                           M.tensor(3.5, dtype=M.float64)),
    "underflow": lambda M: M.ldexp(M.tensor([1.0, 3.0], dtype=M.float64), M.tensor([2, -1100])),
    "complex_exponent": lambda M: M.ldexp(M.tensor([1.0, 3.0]), M.tensor([2 + 1j, 3])),
    "method": lambda M: M.tensor([1.0, 3.0], dtype=M.float64).ldexp(
        M.tensor([-0.496, 0.081], dtype=M.float16)),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(LDEXP_CASES))
def test_ldexp_matches_torch(name):
    _agree(LDEXP_CASES[name], rtol=0)


def test_ldexp_gradients():
    x = ember.tensor([1.0, 3.0], requires_grad=True)
    y = ember.tensor([0.5, 2.0], requires_grad=True)
    ember.ldexp(x, y).sum().backward()
    assert x.grad.tolist() == pytest.approx([2 ** 0.5, 4.0])
    assert y.grad.tolist() == pytest.approx([2 ** 0.5 * math.log(2), 3 * 4 * math.log(2)])


# ---- c. results PyTorch gives where ember refused ----------------------------------------------

def test_mvlgamma_outside_its_domain():
    # PyTorch 2.13 dropped the x > (p - 1) / 2 check: the sum of lgammas, inf at the poles
    r = ember.mvlgamma(ember.tensor([0.5, -2.5, 0.284, -2.344], dtype=ember.float64), 3)
    assert r[:2].tolist() == [INF, INF]
    want = [3 / 2 * math.log(math.pi) + sum(math.lgamma(x - j / 2) for j in range(3))
            for x in (0.284, -2.344)]
    assert r[2:].tolist() == pytest.approx(want, rel=1e-12)
    assert ember.special.multigammaln(ember.tensor([0.284, -2.344]), 1).tolist() == \
        pytest.approx([math.lgamma(0.284), math.lgamma(-2.344)], rel=1e-5)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        ember.mvlgamma(ember.tensor([3.0]), 0)


def test_gumbel_softmax_takes_any_tau():
    y = F.gumbel_softmax(ember.tensor([[2.249, 1.0, -1.0]]), -5.0, hard=True)
    assert y.sum().item() == 1.0 and sorted(y.flatten().tolist()) == [0.0, 0.0, 1.0]
    assert tuple(F.gumbel_softmax(ember.zeros(2, 3), tau=-0.5).shape) == (2, 3)


def test_hardtanh_nan_and_crossed_bounds():
    x = [-2.0, 0.5, 3.0]
    r = F.hardtanh(ember.tensor(x), -1.0, NAN)
    assert all(math.isnan(v) for v in r.tolist())  # clamp's NaN, as torch (was refused)
    assert all(math.isnan(v) for v in F.hardtanh(ember.tensor(x), NAN, 0.0, inplace=True).tolist())
    assert F.hardtanh_(ember.tensor(x), max_val=-INF).tolist() == [-INF] * 3
    assert F.hardtanh_(ember.tensor(x), 1.0, 0.0).tolist() == [0.0] * 3  # max_val wins
    assert F.hardtanh_(ember.tensor([-2, 0, 3]), 1.0, 0.0).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="cannot be greater than max_val"):
        F.hardtanh(ember.tensor(x), 1.0, 0.0)  # hardtanh itself still refuses crossed bounds


HARDTANH_CASES = {
    "nan_max": lambda M: _F(M).hardtanh(M.tensor([-2.0, 0.5, 3.0]), -1.0, NAN),
    "nan_min_inplace": lambda M: _F(M).hardtanh(M.tensor([-2.0, 0.5, 3.0]), NAN, 0.0,
                                                inplace=True),
    "inplace_minus_inf": lambda M: _F(M).hardtanh_(M.tensor([-2.0, 0.5, 3.0]), max_val=-INF),
    "inplace_crossed": lambda M: _F(M).hardtanh_(M.tensor([-2.0, 0.5, 3.0]), 1.0, 0.0),
    "crossed": lambda M: _F(M).hardtanh(M.tensor([-2.0, 0.5, 3.0]), 1.0, 0.0),
    "bf16_nan_inplace": lambda M: _F(M).hardtanh(M.tensor([[0.2], [0.5]], dtype=M.bfloat16),
                                                 min_val=-1.0, max_val=NAN, inplace=True),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(HARDTANH_CASES))
def test_hardtanh_matches_torch(name):
    _agree(HARDTANH_CASES[name])


def test_cosine_embedding_loss_broadcasts_its_inputs():
    x1 = ember.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]])
    x2 = ember.tensor([[1.0, 0.0, 1.0]])  # (1, 3) against (2, 3)
    r = F.cosine_embedding_loss(x1, x2, ember.tensor([1, -1]), reduction="none")
    assert r.tolist() == pytest.approx([1 - 4 / math.sqrt(14 * 2), 0.0])
    assert F.cosine_embedding_loss(ember.ones(3, 4), ember.ones(3, 1),
                                   ember.tensor([1, -1, 1])).item() == pytest.approx(0.0)
    with pytest.raises(RuntimeError, match="both 1-D or both 2-D"):
        F.cosine_embedding_loss(ember.ones(3, 4), ember.ones(4), ember.tensor([1]))


COSINE_CASES = {
    "column": lambda M: _F(M).cosine_embedding_loss(M.arange(12.0).reshape(3, 4),
                                                    M.tensor([[1.0], [2.0], [-1.0]]),
                                                    M.tensor([1, -1, 1]), 0.1, reduction="none"),
    "row": lambda M: _F(M).cosine_embedding_loss(M.arange(12.0).reshape(3, 4),
                                                 M.tensor([[1.0, -1.0, 2.0, 0.5]]),
                                                 M.tensor([-1]), reduction="sum"),
    "dims_differ": lambda M: _F(M).cosine_embedding_loss(M.ones(3, 4), M.ones(4), M.tensor([1])),
    "no_broadcast": lambda M: _F(M).cosine_embedding_loss(M.ones(3, 4), M.ones(2, 4),
                                                          M.tensor([1])),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(COSINE_CASES))
def test_cosine_embedding_loss_matches_torch(name):
    _agree(COSINE_CASES[name])


def test_svd_lowrank_with_a_negative_niter_is_no_power_iteration():
    A = ember.arange(12.0, dtype=ember.float64).reshape(4, 3)
    _, S, _ = ember.svd_lowrank(A, niter=-4)  # rank 2: exact whatever the iterations
    assert S[:2].tolist() == pytest.approx(ember.linalg.svdvals(A)[:2].tolist(), rel=1e-9)
    with pytest.raises(RuntimeError, match="q .=-1. must be a non-negative integer"):
        ember.svd_lowrank(A, q=-1)


# ---- d. a refusal PyTorch makes: prelu's weights for input of fewer than 2 dims -----------------

def test_prelu_one_dim_input_is_one_channel():
    with pytest.raises(RuntimeError, match="has 1 channels"):
        F.prelu(ember.tensor([-1.0, 1.0, -2.0, 3.0]), ember.tensor([0.1, 0.2, 0.3, 0.4]))
    assert F.prelu(ember.tensor([-1.0, 1.0, -2.0, 3.0]), ember.tensor([0.1])).tolist() == \
        pytest.approx([-0.1, 1.0, -0.2, 3.0])
    assert F.prelu(ember.tensor([[-1.0, 2.0]]), ember.tensor([0.5, 0.25])).tolist() == \
        [[-0.5, 2.0]]


# ---- e. PyTorch's exception classes -------------------------------------------------------------

ERROR_CASES = {
    "rrelu_crossed": lambda M: _F(M).rrelu(M.ones(3), 0.5, 0.1),
    "rrelu_inplace_crossed": lambda M: _F(M).rrelu_(M.ones(3), 10.0, False, training=True),
    "rrelu_nan": lambda M: _F(M).rrelu(M.ones(3), 0.5, NAN),
    "channel_shuffle_negative": lambda M: _F(M).channel_shuffle(M.ones(1, 4, 2), -2),
    "channel_shuffle_zero": lambda M: _F(M).channel_shuffle(M.ones(1, 4, 2), 0),
    "channel_shuffle_indivisible": lambda M: _F(M).channel_shuffle(M.ones(1, 4, 2), 3),
    "smooth_l1_nan_beta": lambda M: _F(M).smooth_l1_loss(M.ones(3), M.ones(3), beta=NAN),
    "smooth_l1_negative_beta": lambda M: _F(M).smooth_l1_loss(M.ones(3), M.ones(3), beta=-1.0),
    "quantile_interpolation": lambda M: M.quantile(M.ones(3), 0.5, interpolation="cubic"),
    "nanquantile_interpolation": lambda M: M.nanquantile(M.ones(3), 0.5, interpolation="x"),
    "nextafter_ints": lambda M: M.nextafter(M.tensor([1, 2], dtype=M.int32), M.tensor([2, 1])),
    "nextafter_complex": lambda M: M.nextafter(M.tensor([1j]), M.tensor([2j])),
    "positive_bool": lambda M: M.positive(M.tensor([True])),
    "trapezoid_x_and_dx": lambda M: M.trapezoid(M.ones(3), M.ones(3), dx=2.0),
    "cumulative_trapezoid_x_and_dx": lambda M: M.cumulative_trapezoid(M.ones(3), x=M.ones(3),
                                                                      dx=2.0),
    "poisson_ints": lambda M: M.poisson(M.tensor([1, 2])),
    "affine_grid_2d_size": lambda M: _F(M).affine_grid(M.ones(1, 2, 3), [3, 4], True),
    "instance_norm_2d_batch_stats": lambda M: _F(M).instance_norm(M.ones(2, 5)),
    "mvlgamma_p_none": lambda M: M.mvlgamma(M.ones(2) * 3, None),
    "mvlgamma_p_bool": lambda M: M.mvlgamma(M.ones(2) * 3, True),
    "multigammaln_p_str": lambda M: M.special.multigammaln(M.ones(2) * 3, "nuc"),
    "mvlgamma_p_zero": lambda M: M.mvlgamma(M.ones(2) * 3, 0),
    # refusals PyTorch makes that ember lacked
    "kl_div_int_input": lambda M: _F(M).kl_div(M.tensor([1, 2]), M.tensor([1, 2])),
    "kl_div_int_target": lambda M: _F(M).kl_div(M.tensor([1.0, 2.0]), M.tensor([1, 2])),
    "cov_bool": lambda M: M.cov(M.tensor([[True, False, True]])),
    "corrcoef_bool": lambda M: M.corrcoef(M.tensor([[True, False], [False, True]])),
    "mvlgamma_bool": lambda M: M.mvlgamma(M.tensor([True]), 1),
    "interpolate_short_size": lambda M: _F(M).interpolate(M.ones(1, 3, 5, 5), size=[12],
                                                          mode="bilinear"),
    "upsample_bilinear_short_size": lambda M: _F(M).upsample_bilinear(M.ones(1, 3, 5, 5),
                                                                      size=[12]),
    "dropout2d_int_training": lambda M: _F(M).dropout2d(M.ones(2, 3, 4, dtype=M.int32)),
    "dropout3d_int_training": lambda M: _F(M).dropout3d(M.ones(2, 2, 2, 2, dtype=M.int32)),
    "dropout1d_int_training": lambda M: _F(M).dropout1d(M.ones(2, 2, dtype=M.int64)),
    "softshrink_huge_lambd": lambda M: _F(M).softshrink(M.ones(3), lambd=1e308),
    "softshrink_negative_lambd": lambda M: _F(M).softshrink(M.ones(3), lambd=-1.0),
    "softshrink_nan_lambd": lambda M: _F(M).softshrink(M.ones(3), lambd=NAN),
    "softshrink_half_lambd": lambda M: _F(M).softshrink(M.ones(3, dtype=M.float16),
                                                        lambd=70000.0),
    "softshrink_int": lambda M: _F(M).softshrink(M.arange(6, dtype=M.int8) - 3, lambd=1.0),
    # (C++) what max pooling still refuses, as torch
    "max_pool2d_bool": lambda M: _F(M).max_pool2d(M.ones(1, 1, 2, 2, dtype=M.bool), 2),
    "adaptive_max_pool2d_int": lambda M: _F(M).adaptive_max_pool2d(
        M.ones(1, 1, 2, 2, dtype=M.int32), 1),
}


@pytest.mark.parametrize("name, cls", [
    ("rrelu_crossed", RuntimeError), ("rrelu_nan", RuntimeError),
    ("channel_shuffle_negative", RuntimeError), ("smooth_l1_nan_beta", RuntimeError),
    ("quantile_interpolation", RuntimeError), ("nextafter_ints", NotImplementedError),
])
def test_exception_classes(name, cls):
    with pytest.raises(cls):
        ERROR_CASES[name](ember)


def test_exception_messages_name_the_op_and_values():
    with pytest.raises(RuntimeError, match=r"rrelu: lower \(0.5\) and upper \(nan\) must be finite"):
        F.rrelu(ember.ones(3), 0.5, NAN)
    with pytest.raises(RuntimeError, match="channel_shuffle: groups must be positive, got -2"):
        F.channel_shuffle(ember.ones(1, 4, 2), -2)
    with pytest.raises(TypeError, match="channel_shuffle: groups must be an int, got float"):
        F.channel_shuffle(ember.ones(1, 4, 2), 2.0)
    with pytest.raises(ember.DtypeNotImplementedError, match="nextafter: expected floating-point"):
        ember.nextafter(ember.tensor([1]), ember.tensor([2]))


def test_refusals_torch_makes():
    with pytest.raises(RuntimeError, match="kl_div: integral inputs are not supported"):
        F.kl_div(ember.tensor([1.0, 2.0]), ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="cov.*bool"):
        ember.corrcoef(ember.tensor([[True, False], [False, True]]))
    with pytest.raises(ValueError, match="size must have 2 values"):
        F.interpolate(ember.ones(1, 3, 5, 5), size=[12])
    with pytest.raises(ember.DtypeNotImplementedError, match="dropout2d: expected a floating"):
        F.dropout2d(ember.ones(2, 3, 4, dtype=ember.int32))
    with pytest.raises(RuntimeError, match=r"softshrink: lambd must be in \[0, 65504.0\]"):
        F.softshrink(ember.ones(3, dtype=ember.float16), lambd=70000.0)
    # what still passes: eval mode, p = 0 and p = 1 for integers; a float64 input's huge lambd
    x = ember.ones(1, 2, 2, 2, dtype=ember.int32)
    assert F.dropout2d(x, training=False) is x
    assert F.dropout2d(x, p=1.0).tolist() == [[[[0, 0], [0, 0]]] * 2]
    assert F.dropout1d(ember.ones(2, 3, dtype=ember.int32), p=0.0).dtype == ember.int32
    assert F.softshrink(ember.ones(3, dtype=ember.float64), lambd=1e308).tolist() == [0.0] * 3
    assert tuple(F.interpolate(ember.ones(1, 3, 5, 5), size=12).shape) == (1, 3, 12, 12)


@needs_torch
@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_exception_classes_match_torch(name):
    t = _outcome(ERROR_CASES[name], torch)
    assert t[0] == "err", t
    # ember's exception is an instance of torch's class (DtypeNotImplementedError is both a
    # NotImplementedError and a RuntimeError, as torch's dtype refusals are one or the other)
    with pytest.raises(getattr(builtins, t[1])):
        ERROR_CASES[name](ember)


# ---- f. PyTorch's top-level losses (int reduction) reduce nothing by default --------------------

def test_top_level_losses_default_to_no_reduction():
    a, b = ember.tensor([[1.0, 0.0], [0.0, 1.0]]), ember.tensor([[1.0, 1.0], [1.0, 0.0]])
    y = ember.tensor([1.0, -1.0])
    assert tuple(ember.cosine_embedding_loss(a, b, y).shape) == (2,)  # (was the mean)
    assert ember.cosine_embedding_loss(a, b, y, 0.0, 1).shape == ()
    assert tuple(ember.hinge_embedding_loss(a, ember.ones(2, 2)).shape) == (2, 2)
    assert tuple(ember.margin_ranking_loss(a[:, 0], b[:, 0], y).shape) == (2,)
    assert tuple(ember.triplet_margin_loss(a, b, a).shape) == (2,)
    lp = ember.zeros(3, 2, 4).log_softmax(2)
    assert tuple(ember.ctc_loss(lp, ember.tensor([[1], [2]]), [3, 3], [1, 1]).shape) == (2,)


TOP_LOSS_CASES = {
    "cosine_embedding_loss": lambda M: M.cosine_embedding_loss(
        M.arange(6.0).reshape(2, 3), M.ones(2, 3), M.tensor([1.0, -1.0])),
    "hinge_embedding_loss": lambda M: M.hinge_embedding_loss(
        M.arange(6.0).reshape(2, 3) - 2, M.tensor([[1.0, -1.0, 1.0]] * 2)),
    "margin_ranking_loss": lambda M: M.margin_ranking_loss(
        M.tensor([1.0, 2.0]), M.tensor([2.0, 0.5]), M.tensor([1.0, -1.0])),
    "triplet_margin_loss": lambda M: M.triplet_margin_loss(
        M.arange(6.0).reshape(2, 3), M.ones(2, 3), M.zeros(2, 3)),
    "ctc_loss": lambda M: M.ctc_loss(M.arange(24.0).reshape(3, 2, 4).log_softmax(2),
                                     M.tensor([[1], [2]]), [3, 3], [1, 1]),
    "cosine_embedding_loss_mean": lambda M: M.cosine_embedding_loss(
        M.arange(6.0).reshape(2, 3), M.ones(2, 3), M.tensor([1.0, -1.0]), 0.0, 1),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(TOP_LOSS_CASES))
def test_top_level_losses_match_torch(name):
    _agree(TOP_LOSS_CASES[name], rtol=1e-5)


def test_instance_norm_of_two_dim_input_with_running_stats():
    # (N, C) with running statistics normalizes each entry by its channel's (as PyTorch)
    x = ember.arange(10.0).reshape(2, 5)
    r = F.instance_norm(x, ember.arange(5.0), ember.arange(1.0, 6.0), ember.full((5,), 2.0),
                        ember.ones(5), use_input_stats=False)
    want = [[2 * (v - c) / math.sqrt(c + 1 + 1e-5) + 1 for c, v in enumerate(row)]
            for row in x.tolist()]
    assert r.tolist() == [pytest.approx(w) for w in want]
    with pytest.raises(ValueError, match="instance_norm"):  # batch statistics need spatial dims
        F.instance_norm(x)


@needs_torch
def test_instance_norm_of_two_dim_input_matches_torch():
    _agree(lambda M: _F(M).instance_norm(M.arange(10.0).reshape(2, 5), M.arange(5.0),
                                         M.arange(1.0, 6.0), M.full((5,), 2.0), M.ones(5),
                                         use_input_stats=False), rtol=1e-5)


# ---- g. (C++) max pooling of integers, as PyTorch's max_pool2d/3d -----------------------------

def test_max_pool_of_integers():
    x = ember.arange(16, dtype=ember.int32).reshape(1, 1, 4, 4)
    r, i = F.max_pool2d(x, 2, return_indices=True)
    assert r.dtype == ember.int32 and r.tolist() == [[[[5, 7], [13, 15]]]]
    assert i.tolist() == [[[[5, 7], [13, 15]]]]
    # int8's lowest value, padding and the first maximum of a window
    x = ember.tensor([[[[-128, -5], [-7, -128]]]], dtype=ember.int8)
    assert F.max_pool2d(x, 2, padding=1).tolist() == [[[[-128, -5], [-7, -128]]]]
    assert F.max_pool2d(ember.tensor([[[[3, 3], [3, 3]]]], dtype=ember.uint8), 2,
                        return_indices=True)[1].tolist() == [[[[0]]]]
    r = F.max_pool3d(ember.arange(16, dtype=ember.int16).reshape(1, 2, 2, 4), 2)
    assert r.dtype == ember.int16 and r.tolist() == [[[[13, 15]]]]
    assert ember.nn.MaxPool2d(2)(ember.arange(16).reshape(1, 1, 4, 4)).tolist() == \
        [[[[5, 7], [13, 15]]]]
    # still refused: bool and complex input, and adaptive max pooling of integers (as torch)
    for bad in (ember.ones(1, 1, 2, 2, dtype=ember.bool), ember.ones(1, 1, 2, 2) * 1j):
        with pytest.raises(ember.DtypeNotImplementedError, match="max_pool"):
            F.max_pool2d(bad, 2)
    with pytest.raises(ember.DtypeNotImplementedError, match="adaptive_max_pool"):
        F.adaptive_max_pool2d(ember.ones(1, 1, 2, 2, dtype=ember.int32), 1)


MAXPOOL_CASES = {
    "2d_int32": lambda M: _F(M).max_pool2d(M.arange(16, dtype=M.int32).reshape(1, 1, 4, 4), 2),
    "2d_indices_int64": lambda M: _F(M).max_pool2d(
        (M.arange(36).reshape(1, 1, 6, 6) * 7) % 11, 3, stride=2, padding=1,
        return_indices=True)[1],
    "2d_int8_padding": lambda M: _F(M).max_pool2d(
        M.tensor([[[[-128, -5], [-7, -128]]]], dtype=M.int8), 2, padding=1),
    "2d_uint8_dilation_ceil": lambda M: _F(M).max_pool2d(
        ((M.arange(49) * 37) % 256).to(M.uint8).reshape(1, 7, 7), 2, dilation=2,
        ceil_mode=True),
    "3d_int16": lambda M: _F(M).max_pool3d(
        ((M.arange(64) * 13) % 50 - 25).to(M.int16).reshape(1, 4, 4, 4), 2, stride=1),
    "3d_int64_indices": lambda M: _F(M).max_pool3d(
        M.arange(64).reshape(1, 1, 4, 4, 4) % 9, 2, return_indices=True)[1],
    "1d_int32_indices": lambda M: _F(M).max_pool1d(
        (M.arange(10, dtype=M.int32) * 3) % 7, 3, return_indices=True)[0],
}


@needs_torch
@pytest.mark.parametrize("name", sorted(MAXPOOL_CASES))
def test_max_pool_of_integers_matches_torch(name):
    _agree(MAXPOOL_CASES[name], rtol=0)


# ---- h. (C++) addcmul / addcdiv values for float16 / bfloat16 go through float --------------

def test_addc_values_past_the_half_range_round_to_inf():
    one = ember.ones(2, dtype=ember.float16)
    assert ember.addcdiv(one, one, one, value=-2 ** 62).tolist() == [-INF, -INF]  # (refused)
    assert ember.addcmul(one, one, one, value=1e10).tolist() == [INF, INF]
    b = ember.ones(2, dtype=ember.bfloat16)
    assert ember.addcmul(b, b, b, value=1e30).tolist() == pytest.approx([1e30] * 2, rel=1e-2)
    # past float32's range still refused, as torch; fills keep float16's own range (as torch's
    # for more than one element)
    with pytest.raises(RuntimeError, match="addcmul: value 1e\\+39 cannot be converted"):
        ember.addcmul(one, one, one, value=1e39)
    with pytest.raises(RuntimeError, match="float16 without overflow"):
        ember.full((2,), 1e10, dtype=ember.float16)


ADDC_CASES = {
    "addcdiv_half": lambda M: M.addcdiv(M.ones(3, dtype=M.float16), M.ones(3, dtype=M.float16),
                                        M.ones(3, dtype=M.float16), value=-2 ** 62),
    "addcmul_half": lambda M: M.addcmul(M.ones(3, dtype=M.float16), M.ones(3, dtype=M.float16),
                                        M.ones(3, dtype=M.float16), value=1e10),
    "addcdiv_bf16": lambda M: M.addcdiv(M.ones(3, dtype=M.bfloat16),
                                        M.ones(3, dtype=M.bfloat16),
                                        M.ones(3, dtype=M.bfloat16), value=1e30),
    "addcmul_half_too_big": lambda M: M.addcmul(M.ones(3, dtype=M.float16),
                                                M.ones(3, dtype=M.float16),
                                                M.ones(3, dtype=M.float16), value=1e39),
    "full_half": lambda M: M.full((3,), 1e10, dtype=M.float16),
    "masked_fill_half": lambda M: M.ones(2, dtype=M.float16).masked_fill(M.tensor([True, False]),
                                                                         1e10),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(ADDC_CASES))
def test_addc_values_match_torch(name):
    _agree(ADDC_CASES[name], rtol=1e-2)


# ---- i. (C++) bincount of an empty input: int64 zeros whatever the weights ---------------------

def test_bincount_of_empty_input_is_int64():
    e = ember.tensor([], dtype=ember.int64)
    for w in (ember.tensor([], dtype=ember.int64), ember.tensor([], dtype=ember.float16)):
        r = ember.bincount(e, weights=w, minlength=2)
        assert r.dtype == ember.int64 and r.tolist() == [0, 0]
    r = ember.bincount(ember.tensor([0, 1, 1]), weights=ember.tensor([1, 2, 3]))
    assert r.dtype == ember.float64 and r.tolist() == [1.0, 5.0]  # (non-empty: as before)


BINCOUNT_CASES = {
    "empty_int_weights": lambda M: M.bincount(M.tensor([], dtype=M.int64),
                                              weights=M.tensor([], dtype=M.int64)),
    "empty_float_weights": lambda M: M.bincount(M.tensor([], dtype=M.int64),
                                                weights=M.tensor([], dtype=M.float32),
                                                minlength=3),
    "float_weights": lambda M: M.bincount(M.tensor([0, 2, 2]), weights=M.tensor([0.5, 1.0, 2.0])),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(BINCOUNT_CASES))
def test_bincount_matches_torch(name):
    _agree(BINCOUNT_CASES[name], rtol=0)


# ---- j. (C++) adaptive pooling to a 0 output size: an empty result, as PyTorch's ----------------

def test_adaptive_pool_to_a_zero_size():
    r = ember.adaptive_avg_pool1d(ember.ones(2, 3), 0)
    assert tuple(r.shape) == (2, 0) and r.dtype == ember.float32
    v, i = ember.adaptive_max_pool1d(ember.ones(2, 3), 0)
    assert tuple(v.shape) == tuple(i.shape) == (2, 0) and i.dtype == ember.int64
    x = ember.ones(1, 2, 3, requires_grad=True)
    ember.adaptive_avg_pool1d(x, 0).sum().backward()
    assert x.grad.tolist() == [[[0.0] * 3] * 2]
    with pytest.raises(RuntimeError, match="output_size must be non-negative"):
        ember.adaptive_avg_pool1d(ember.ones(2, 3), -1)


ADAPTIVE_ZERO_CASES = {
    "avg1d": lambda M: M.adaptive_avg_pool1d(M.ones(2, 3), 0),
    "max1d": lambda M: M.adaptive_max_pool1d(M.ones(2, 3), 0)[1],
    "avg1d_negative": lambda M: M.adaptive_avg_pool1d(M.ones(2, 3), -1),
    "avg3d": lambda M: _F(M).adaptive_avg_pool3d(M.ones(1, 2, 3, 3, 3), (2, 0, 1)),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(ADAPTIVE_ZERO_CASES))
def test_adaptive_pool_to_a_zero_size_matches_torch(name):
    _agree(ADAPTIVE_ZERO_CASES[name])
