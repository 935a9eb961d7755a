"""Findings of the s16 fuzzing round (fuzz_api.py --torch, seeds 1227-1231, and hostile input by
hand on nn.functional), each fixed and pinned here with explicit values, and against PyTorch
where it is installed: convolutions without input channels, ceil_mode pooling windows larger
than the padded input, pow with a tensor of +-0.5 exponents, gcd/lcm where abs() wraps, dim
checks (unique_consecutive, roll, trapezoid, cross), refusals PyTorch makes (cov's zero weights,
renorm's NaN bounds, linalg.norm's dim, pad's float padding, the margin losses' targets) and
results it gives (linalg.cond of empty matrices, dropout2d of < 2-D input in eval mode)."""

from __future__ import annotations

import math
import warnings

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from test_fuzz_findings_s14 import _agree, _outcome

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _F(M):
    return M.nn.functional


# ---- a. convolutions without input channels: the bias alone, not unwritten memory --------------

def test_conv_without_input_channels_is_the_bias_alone():
    for _ in range(3):  # (the output used to be whatever the allocator handed back)
        r = F.conv1d(ember.ones(1, 0, 5), ember.ones(3, 0, 2))
        assert tuple(r.shape) == (1, 3, 4) and r.tolist() == [[[0.0] * 4] * 3]
    r = F.conv1d(ember.ones(2, 0, 5), ember.ones(3, 0, 2), ember.tensor([1.0, -2.0, 0.5]))
    assert r.tolist() == [[[1.0] * 4, [-2.0] * 4, [0.5] * 4]] * 2
    r = F.conv2d(ember.ones(2, 0, 5, 5, dtype=ember.float64), ember.ones(3, 0, 2, 2,
                                                                          dtype=ember.float64))
    assert tuple(r.shape) == (2, 3, 4, 4) and r.abs().sum().item() == 0.0
    r = F.conv_transpose1d(ember.ones(1, 0, 5), ember.ones(0, 3, 2), ember.tensor([1.0, 2.0, 3.0]))
    assert r.tolist() == [[[1.0] * 6, [2.0] * 6, [3.0] * 6]]
    r = F.conv_transpose2d(ember.ones(1, 0, 3, 3), ember.ones(0, 2, 2, 2))
    assert tuple(r.shape) == (1, 2, 4, 4) and r.abs().sum().item() == 0.0
    # gradients: nothing flows to the empty input or weight, the bias gets the output's
    x = ember.ones(1, 0, 5, requires_grad=True)
    w = ember.ones(3, 0, 2, requires_grad=True)
    b = ember.zeros(3, requires_grad=True)
    F.conv1d(x, w, b).sum().backward()
    assert tuple(x.grad.shape) == (1, 0, 5) and tuple(w.grad.shape) == (3, 0, 2)
    assert b.grad.tolist() == [4.0, 4.0, 4.0]


# ---- b. ceil_mode pooling: one window where the kernel outgrows the padded input --------------

def test_ceil_mode_pooling_of_a_window_larger_than_the_padded_input():
    x = ember.ones(1, 1, 1)
    r, i = F.max_pool2d(x, 100, padding=12, ceil_mode=True, return_indices=True)
    assert r.tolist() == [[[1.0]]] and i.tolist() == [[[0]]]
    # count_include_pad: the window clipped to the padded input (1 + 2 * 12 = 25 positions)
    r = F.avg_pool1d(ember.ones(1, 1), 100, padding=12, ceil_mode=True)
    assert r.tolist() == [[pytest.approx(1 / 25)]]
    assert F.avg_pool1d(ember.ones(1, 1), 100, padding=12, ceil_mode=True,
                        count_include_pad=False).tolist() == [[1.0]]
    with pytest.raises(RuntimeError, match="output size is too small"):
        F.max_pool1d(ember.ones(1, 1), 100, padding=12)  # without ceil_mode: no window
    with pytest.raises(RuntimeError, match="output size is too small"):
        F.max_pool1d(ember.ones(1, 1), 100, stride=10, padding=12, ceil_mode=True)


POOL_CASES = {
    "max2d": lambda M: _F(M).max_pool2d(M.ones(1, 1, 1), 100, padding=12, ceil_mode=True),
    "max1d_indices": lambda M: _F(M).max_pool1d(M.arange(3.0).reshape(1, 3), 20, padding=9,
                                                ceil_mode=True, return_indices=True)[1],
    "avg1d": lambda M: _F(M).avg_pool1d(M.arange(3.0).reshape(1, 3), 20, padding=9,
                                        ceil_mode=True),
    "avg2d_no_pad_count": lambda M: _F(M).avg_pool2d(M.arange(4.0).reshape(1, 2, 2), 10,
                                                     padding=4, ceil_mode=True,
                                                     count_include_pad=False),
    "max1d_stride": lambda M: _F(M).max_pool1d(M.arange(5.0).reshape(1, 5), 4, stride=3,
                                               padding=2, ceil_mode=True),
    "max1d_too_small_stride": lambda M: _F(M).max_pool1d(M.ones(1, 1), 100, stride=10, padding=12,
                                                         ceil_mode=True),
    "max1d_no_ceil": lambda M: _F(M).max_pool1d(M.ones(1, 1), 100, padding=12),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(POOL_CASES))
def test_ceil_mode_pooling_matches_torch(name):
    _agree(POOL_CASES[name])


# ---- c. pow with a tensor of exponents: std::pow's values at +-0.5 ----------------------------

def test_pow_with_a_tensor_exponent_of_one_half():
    x = ember.tensor([-math.inf, -0.0, 4.0, -math.inf], dtype=ember.float64)
    y = ember.tensor([0.5, 0.5, 0.5, -0.5], dtype=ember.float64)
    r = ember.pow(x, y).tolist()
    assert r[:3] == [math.inf, 0.0, 2.0] and math.copysign(1.0, r[1]) == 1.0 and r[3] == 0.0
    assert ember.float_power(x.float(), y.float()).tolist()[:3] == [math.inf, 0.0, 2.0]
    # a scalar exponent of 0.5 still goes through sqrt, as torch: NaN at -inf, -0 at -0
    s = ember.pow(x, 0.5).tolist()
    assert math.isnan(s[0]) and math.copysign(1.0, s[1]) == -1.0


POW_CASES = {
    f"{dt}_{e}": (lambda dt, e: lambda M: M.pow(
        M.tensor([-math.inf, -0.0, 0.0, 4.0, math.inf, -2.0], dtype=getattr(M, dt)),
        M.full((6,), e, dtype=getattr(M, dt))))(dt, e)
    for dt in ("float32", "float64", "float16", "bfloat16") for e in (0.5, -0.5)
}
POW_CASES["scalar_half"] = lambda M: M.pow(M.tensor([-math.inf, -0.0, 4.0]), 0.5)
POW_CASES["zero_dim_exponent"] = lambda M: M.pow(M.tensor([-math.inf, -0.0, 4.0]),
                                                 M.tensor(0.5))
POW_CASES["float_power"] = lambda M: M.float_power(M.tensor([-math.inf, -0.0]),
                                                   M.tensor([0.5, -0.5]))


@needs_torch
@pytest.mark.parametrize("name", sorted(POW_CASES))
def test_pow_with_tensor_exponents_matches_torch(name):
    e, t = _outcome(POW_CASES[name], ember), _outcome(POW_CASES[name], torch)
    assert e[:3] == t[:3]
    # the signs of the zeros too
    assert [math.copysign(1.0, v) if v == 0 else v for v in e[3]] == \
        pytest.approx([math.copysign(1.0, v) if v == 0 else v for v in t[3]], nan_ok=True)


# ---- d. gcd / lcm where abs() wraps (int8 -128): C's truncating remainder, as torch -----------

def test_gcd_lcm_at_the_most_negative_value():
    a = ember.tensor([3, -128, -128, 0, 6], dtype=ember.int8)
    b = ember.tensor([-128, 3, -128, -128, -128], dtype=ember.int8)
    assert ember.gcd(a, b).tolist() == [1, 1, -128, -128, -2]  # torch's values, sign and all
    # lcm wraps as torch's abs(a / g * b): in int32 for the narrow types, then cast back
    assert ember.lcm(ember.tensor([2], dtype=ember.int8),
                     ember.tensor([127], dtype=ember.int8)).tolist() == [-2]
    assert ember.lcm(ember.tensor([4, 6]), ember.tensor([6, 4])).tolist() == [12, 12]


def _gcd_grid(M, dt, fn):
    info = np.iinfo(dt)
    vals = [v for v in (0, 1, -1, 2, 3, -3, 6, 12, -18, 100, 127, -127, 255)
            if info.min <= v <= info.max] + [int(info.min), int(info.max)]
    a = [x for x in vals for _ in vals]
    b = [y for _ in vals for y in vals]
    if fn == "lcm" and dt in ("int32", "int64"):  # torch's lcm traps (SIGFPE) at INT_MIN
        keep = [k for k in range(len(a)) if a[k] != info.min and b[k] != info.min]
        a, b = [a[k] for k in keep], [b[k] for k in keep]
    return getattr(M, fn)(M.tensor(a, dtype=getattr(M, dt)), M.tensor(b, dtype=getattr(M, dt)))


@needs_torch
@pytest.mark.parametrize("fn", ["gcd", "lcm"])
@pytest.mark.parametrize("dt", ["uint8", "int8", "int16", "int32", "int64"])
def test_gcd_lcm_grid_matches_torch(fn, dt):
    assert _gcd_grid(ember, dt, fn).tolist() == _gcd_grid(torch, dt, fn).tolist()


# ---- e. dims out of range: refused, not taken modulo ndim ---------------------------------------

def test_dims_out_of_range_are_refused():
    x = ember.tensor([[1.0, 2.0], [1.0, 2.0]])
    with pytest.raises(IndexError, match="dimension out of range"):
        ember.unique_consecutive(x, dim=-4)  # (was dim 0: one row)
    with pytest.raises(IndexError, match="dimension out of range"):
        ember.unique_consecutive(x, dim=5)
    with pytest.raises(IndexError, match="no dimensions"):
        ember.unique_consecutive(ember.tensor(1.0), dim=0)
    assert ember.unique_consecutive(x, dim=-2).tolist() == [[1.0, 2.0]]
    with pytest.raises(IndexError, match="no dimensions"):
        ember.tensor(2.0).roll(1, 0)
    assert ember.tensor(2.0).roll(1).tolist() == 2.0  # without dims a 0-dim tensor rolls
    with pytest.raises(IndexError, match="dimension out of range"):
        ember.trapezoid(ember.ones(3), dim=4)
    with pytest.raises(IndexError, match="0-dim"):
        ember.cumulative_trapezoid(ember.tensor(2.0))


# ---- f. trapezoid with sample points of other dims: sliced along y's dim, as torch -------------

def test_trapezoid_sample_points_of_more_dims_than_y():
    y = ember.tensor([2.0, 6.0, 4.0, 5.0, -3.0])
    x = ember.tensor([[0.0], [1.0], [3.0], [6.0]])  # (4, 1): its own dim 0 is y's dim
    r = ember.trapezoid(y, x)
    # widths 1, 2, 3 along x's dim 0, each times every pair mean of y: (3, 1) * (4,) -> (4,)
    pairs = [4.0, 5.0, 4.5, 1.0]
    assert r.tolist() == pytest.approx([6 * p for p in pairs])
    c = ember.cumulative_trapezoid(y, x)
    assert tuple(c.shape) == (3, 4)
    assert c[-1].tolist() == pytest.approx(r.tolist())
    with pytest.raises(RuntimeError, match="bool"):
        ember.trapezoid(ember.ones(2, 3, dtype=ember.bool))
    with pytest.raises(RuntimeError, match="one `x` value for each sample"):
        ember.cumulative_trapezoid(ember.ones(3), ember.ones(2))


TRAPEZOID_CASES = {
    "x_more_dims": lambda M: M.trapezoid(M.tensor([2.0, 6, 4, 5, -3]),
                                         M.tensor([[-2.25], [2.87], [-1.42], [-0.46]])),
    "cumulative_x_more_dims": lambda M: M.cumulative_trapezoid(
        M.tensor([2.0, 6, 4, 5, -3]), M.tensor([[-2.25], [2.87], [-1.42], [-0.46]])),
    "x_fewer_dims": lambda M: M.trapezoid(M.arange(6.0).reshape(2, 3),
                                          M.tensor([[0.0, 1.0, 3.0]])),
    "x_broadcast_fails": lambda M: M.trapezoid(M.ones(3), M.ones(2, 3), dim=-1),
    "x_3d": lambda M: M.trapezoid(M.ones(2, 3), M.arange(3.0).reshape(1, 1, 3), dim=-1),
    "int_y": lambda M: M.trapezoid(M.tensor([2, 6, 4]), M.tensor([0.0, 0.5, 2.0])),
    "bool_y": lambda M: M.trapezoid(M.ones(2, 3, dtype=M.bool)),
    "dim_out_of_range": lambda M: M.cumulative_trapezoid(M.ones(2, 3), dim=3),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(TRAPEZOID_CASES))
def test_trapezoid_matches_torch(name):
    _agree(TRAPEZOID_CASES[name], rtol=1e-5)


# ---- g. cross: a dim of size 3 in both inputs, before broadcasting ------------------------------

def test_cross_checks_its_inputs_before_broadcasting():
    with pytest.raises(RuntimeError, match="must have length 3. Got 3 and 1"):
        ember.cross(ember.ones(3, 2), ember.ones(1, 2), dim=0)  # (was broadcast to 3)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        ember.linalg.cross(ember.ones(3), ember.ones(2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="no dimension of size 3"):
            ember.cross(ember.ones(2, 1), ember.ones(2, 3))  # (input's sizes, not broadcast)
    a = ember.tensor([[1.0, 0.0, 0.0]])
    b = ember.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert ember.linalg.cross(a, b).tolist() == [[0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]


# ---- h. refusals PyTorch makes -------------------------------------------------------------------

def test_refusals_with_clear_messages():
    with pytest.raises(RuntimeError, match="weights sum to zero"):
        ember.cov(ember.tensor([1.0, 2.0, 4.0]), fweights=ember.tensor([0, 0, 0]))
    with pytest.raises(RuntimeError, match="weights sum to zero"):
        ember.cov(ember.tensor([1.0, 2.0, 4.0]), aweights=ember.tensor([0.0, 0.0, 0.0]))
    with pytest.raises(RuntimeError, match="maxnorm"):
        ember.renorm(ember.ones(2, 3), 2, 0, float("nan"))
    with pytest.raises(RuntimeError, match="non-positive-norm"):
        ember.renorm(ember.ones(2, 3), float("nan"), 0, 1.0)
    with pytest.raises(RuntimeError, match="length 1 or 2"):
        ember.linalg.norm(ember.ones(2, 3), dim=[])
    with pytest.raises(RuntimeError, match="2-tuple"):  # (was "not enough values to unpack")
        ember.linalg.matrix_norm(ember.ones(2, 3), dim=(1,))
    with pytest.raises(TypeError, match="found element of type float at pos 0"):
        F.pad(ember.ones(1, 3), (1.5, 1))  # (was truncated to 1)
    with pytest.raises(TypeError, match="tuple of ints, not NoneType"):
        F.pad(ember.ones(1, 3), None)
    with pytest.raises(ValueError, match="weight of shape"):
        F.huber_loss(ember.zeros(2), ember.ones(2), weight=ember.ones(1))
    with pytest.raises(RuntimeError, match="eps must be non-negative"):
        F.cosine_similarity(ember.ones(2, 3), ember.ones(2, 3), eps=-1e-308)
    with pytest.raises(TypeError, match="real number"):
        ember.dist(ember.ones(2), ember.zeros(2), "fro")
    # an int p beyond int64 is a float, as torch's Scalar p (was an overflow error); ember's
    # scaled norm gives the max-norm limit where torch's overflows to inf
    assert ember.dist(ember.tensor([1.0, -3.0]), ember.zeros(2), 2**63).item() == 3.0
    # multi_margin_loss names itself and the classes (was scatter()'s IndexError)
    with pytest.raises(RuntimeError, match=r"multi_margin_loss: target 3 is out of range"):
        F.multi_margin_loss(ember.tensor([[1.0, 2.0, 0.5]]), ember.tensor([3]))
    with pytest.raises(RuntimeError, match=r"multi_margin_loss: target -1 is out of range"):
        F.multi_margin_loss(ember.tensor([[1.0, 2.0, 0.5]]), ember.tensor([-1]))
    # multilabel_margin_loss: 1-D / 2-D input, int64 targets of its shape, entries in [-1, C)
    mlm = F.multilabel_margin_loss
    with pytest.raises(RuntimeError, match="non-empty vector or matrix"):
        mlm(ember.ones(2, 3, 4), ember.ones(2, 3, 4, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="int64"):
        mlm(ember.ones(2, 3), ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="out of range"):
        mlm(ember.tensor([[1.0, 2.0, 0.5]]), ember.tensor([[-2, -1, 0]]))
    with pytest.raises(RuntimeError, match="out of range"):  # after the -1 too, as torch
        mlm(ember.tensor([[1.0, 2.0, 0.5]]), ember.tensor([[0, -1, 5]]))
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        mlm(ember.tensor([[1.0, 2.0, 0.5]]), ember.tensor([0, -1, 1]))
    r = mlm(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([[3, 0, -1, 1]]))
    assert r.item() == pytest.approx(0.85)


REFUSAL_CASES = {
    "cov_zero_fweights": lambda M: M.cov(M.tensor([1.0, 2, 4]), fweights=M.tensor([0, 0, 0])),
    "cov_zero_aweights": lambda M: M.cov(M.tensor([1.0, 2, 4]), aweights=M.tensor([0.0, 0, 0])),
    "cov_some_weights": lambda M: M.cov(M.tensor([1.0, 2, 4]), fweights=M.tensor([0, 2, 1]),
                                        aweights=M.tensor([1.0, 0.5, 2.0])),
    "renorm_nan_maxnorm": lambda M: M.renorm(M.ones(2, 3), 2, 0, float("nan")),
    "renorm_nan_p": lambda M: M.renorm(M.ones(2, 3), float("nan"), 0, 1.0),
    "renorm": lambda M: M.renorm(M.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0),
    "unique_consecutive_dim": lambda M: M.unique_consecutive(M.ones(2, 2), dim=-4),
    "roll_0d_dims": lambda M: M.tensor(2.0).roll(1, 0),
    "norm_empty_dim": lambda M: M.linalg.norm(M.ones(2, 3), dim=[]),
    "norm_three_dims": lambda M: M.linalg.norm(M.ones(2, 3, 2), dim=(0, 1, 2)),
    "matrix_norm_one_dim": lambda M: M.linalg.matrix_norm(M.ones(2, 3), dim=(1,)),
    "cross_unbroadcast": lambda M: M.cross(M.ones(3, 2), M.ones(1, 2), dim=0),
    "cross_ndim": lambda M: M.linalg.cross(M.ones(3), M.ones(2, 3)),
    "pad_float": lambda M: _F(M).pad(M.ones(1, 3), (1.5, 1)),
    "pad_bool": lambda M: _F(M).pad(M.ones(1, 3), (True, 1)),
    "pad_tensor": lambda M: _F(M).pad(M.ones(1, 3), M.tensor([1, 1])),
    "huber_weight_shape": lambda M: _F(M).huber_loss(M.zeros(2), M.ones(2), weight=M.ones(1)),
    "huber_weight": lambda M: _F(M).huber_loss(M.zeros(2), M.tensor([1.0, 3.0]),
                                               weight=M.tensor([1.0, 3.0])),
    "cosine_negative_eps": lambda M: _F(M).cosine_similarity(M.ones(2, 3), M.ones(2, 3),
                                                             eps=-1e-308),
    "cosine_nan_eps": lambda M: _F(M).cosine_similarity(M.ones(2, 3), M.ones(2, 3),
                                                        eps=float("nan")),
    "multi_margin_target": lambda M: _F(M).multi_margin_loss(M.tensor([[1.0, 2.0, 0.5]]),
                                                             M.tensor([3])),
    "multilabel_3d": lambda M: _F(M).multilabel_margin_loss(M.ones(2, 3, 4),
                                                            M.ones(2, 3, 4, dtype=M.int64)),
    "multilabel_float_target": lambda M: _F(M).multilabel_margin_loss(M.ones(2, 3), M.ones(2, 3)),
    "multilabel_below_minus_one": lambda M: _F(M).multilabel_margin_loss(
        M.tensor([[1.0, 2.0, 0.5]]), M.tensor([[-2, -1, 0]])),
    "multilabel_after_terminator": lambda M: _F(M).multilabel_margin_loss(
        M.tensor([[1.0, 2.0, 0.5]]), M.tensor([[0, -1, 5]])),
    "multilabel_target_shape": lambda M: _F(M).multilabel_margin_loss(
        M.tensor([[1.0, 2.0, 0.5]]), M.tensor([0, -1, 1])),
    "multilabel_1d": lambda M: _F(M).multilabel_margin_loss(M.tensor([1.0, 2.0, 0.5]),
                                                            M.tensor([0, -1, 1])),
    "multilabel_empty_batch": lambda M: _F(M).multilabel_margin_loss(
        M.zeros(0, 3), M.zeros(0, 3, dtype=M.int64), reduction="none"),
    "dist_string_p": lambda M: M.dist(M.ones(2), M.zeros(2), "fro"),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(REFUSAL_CASES))
def test_refusals_match_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _agree(REFUSAL_CASES[name], rtol=1e-6)


# ---- i. results PyTorch gives ---------------------------------------------------------------------

def test_results_torch_gives():
    # linalg.cond of empty matrices: zeros of the batch shape (was amin()'s IndexError)
    for p in (None, 2, -2, 1, -math.inf, "fro", "nuc"):
        r = ember.linalg.cond(ember.ones(2, 0, 0), p=p)
        assert tuple(r.shape) == (2,) and r.tolist() == [0.0, 0.0]
    assert ember.linalg.cond(ember.ones(2, 0, 0, dtype=ember.complex64)).dtype == ember.float32
    with pytest.raises(RuntimeError, match="invalid norm type"):
        ember.linalg.cond(ember.ones(2, 0, 0), p=3)
    with pytest.raises(RuntimeError, match="square"):  # a string norm checks squareness first
        ember.linalg.cond(ember.ones(2, 0, 3), p="fro")
    # dropout2d of < 2-D input: the input itself in eval mode or with p = 0, zeros for p = 1
    with pytest.warns(UserWarning, match="dropout2d"):
        x = ember.tensor(2.0)
        assert F.dropout2d(x, training=False) is x
    with pytest.warns(UserWarning, match="dropout2d"):
        assert F.dropout2d(ember.ones(3), p=1.0).tolist() == [0.0, 0.0, 0.0]
    with pytest.warns(UserWarning, match="dropout2d"), \
            pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.dropout2d(ember.ones(3), p=0.5, training=True)
    # hinge_embedding_loss with a bool margin: the number 1 (was a bool tensor's rsub)
    r = F.hinge_embedding_loss(ember.tensor([[1.0, -2.0]]), ember.tensor([[1.0, -1.0]]),
                               margin=True)
    assert r.item() == pytest.approx(2.0)
    # kl_div: a 'batchmean' next to the legacy flags still divides by the batch size
    inp = ember.tensor([[-1.0, -2.0], [-0.5, -3.0]])
    tgt = ember.tensor([[0.2, 0.8], [0.5, 0.5]])
    total = F.kl_div(inp, tgt, reduction="sum").item()
    assert F.kl_div(inp, tgt, False, reduction="batchmean").item() == pytest.approx(total / 2)
    assert math.isnan(F.kl_div(ember.zeros(0, 3), ember.zeros(0, 3), False,
                               reduction="batchmean").item())
    # special.zeta: a 0-dim float64 operand does not lift a float32 tensor
    z = ember.special.zeta(ember.tensor([[2.0]]), ember.tensor(1.0, dtype=ember.float64))
    assert z.dtype == ember.float32 and z.item() == pytest.approx(math.pi ** 2 / 6)


RESULT_CASES = {
    "cond_empty": lambda M: M.linalg.cond(M.ones(2, 0, 0)),
    "cond_empty_inf": lambda M: M.linalg.cond(M.ones(2, 0, 0), p=-math.inf),
    "cond_empty_fro": lambda M: M.linalg.cond(M.ones(2, 0, 0), p="fro"),
    "cond_empty_nonsquare_fro": lambda M: M.linalg.cond(M.ones(2, 0, 3), p="fro"),
    "cond_empty_nonsquare_2": lambda M: M.linalg.cond(M.ones(2, 0, 3)),
    "cond_invalid": lambda M: M.linalg.cond(M.ones(2, 2, 3), p="bad"),
    "cond": lambda M: M.linalg.cond(M.tensor([[4.0, 1.0], [0.0, 2.0]]), p=1),
    "dropout2d_0d_eval": lambda M: _F(M).dropout2d(M.tensor(1.0), training=False),
    "dropout2d_1d_eval": lambda M: _F(M).dropout2d(M.ones(3), training=False),
    "dropout2d_1d_p0": lambda M: _F(M).dropout2d(M.ones(3), p=0.0),
    "dropout2d_1d_p1": lambda M: _F(M).dropout2d(M.ones(3), p=1.0),
    "dropout2d_1d_train": lambda M: _F(M).dropout2d(M.ones(3), p=0.5),
    "hinge_bool_margin": lambda M: _F(M).hinge_embedding_loss(
        M.tensor([[1.0, -2.0]]), M.tensor([[1.0, -1.0]]), margin=True),
    "kl_div_legacy_batchmean": lambda M: _F(M).kl_div(
        M.tensor([[-1.0, -2.0], [-0.5, -3.0]]), M.tensor([[0.2, 0.8], [0.5, 0.5]]), False,
        reduction="batchmean"),
    "kl_div_legacy_batchmean_empty": lambda M: _F(M).kl_div(M.zeros(0, 3), M.zeros(0, 3), False,
                                                            reduction="batchmean"),
    "kl_div_reduce_false_batchmean": lambda M: _F(M).kl_div(
        M.tensor([[-1.0, -2.0], [-0.5, -3.0]]), M.tensor([[0.2, 0.8], [0.5, 0.5]]),
        reduce=False, reduction="batchmean"),
    "zeta_0d_float64": lambda M: M.special.zeta(M.tensor([[2.0]]), M.tensor(1.0,
                                                                           dtype=M.float64)),
    "zeta_0d_first": lambda M: M.special.zeta(M.tensor(2.0, dtype=M.float64), M.tensor([[2.0]])),
    "zeta_int_tensor": lambda M: M.special.zeta(M.tensor([2], dtype=M.int64), M.tensor([[2.0]])),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(RESULT_CASES))
def test_results_match_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _agree(RESULT_CASES[name], rtol=1e-6)


# ---- j. grid_sample at NaN / infinite locations: no gather of INT64_MIN --------------------------

def test_grid_sample_of_nan_and_infinite_locations():
    x = ember.arange(4.0).reshape(1, 1, 2, 2)
    g = ember.tensor([[[[math.nan, 0.0], [2.0, 2.0]]]])
    r = F.grid_sample(x, g, align_corners=False).tolist()[0][0][0]  # (was gather()'s IndexError)
    assert math.isnan(r[0]) and r[1] == 0.0
    # border / reflection: a NaN location is PyTorch's CPU kernel's (the first pixel in 2-D)
    g = ember.tensor([[[[math.nan, 0.0], [-math.inf, 0.5]]]])
    assert F.grid_sample(x, g, padding_mode="border", align_corners=False).tolist() == \
        [[[[1.0, 2.0]]]]
    with pytest.raises(RuntimeError, match="non-empty spatial dimensions"):
        F.grid_sample(ember.ones(1, 1, 0, 2), ember.zeros(1, 1, 1, 2), align_corners=False)


def _grid(M, *rows, dims=2):
    return M.tensor([[[list(r) for r in rows]]] if dims == 2 else [[[[list(r) for r in rows]]]])


GRID_CASES = {
    f"{mode}_{pad}_{ac}": (lambda mode, pad, ac: lambda M: _F(M).grid_sample(
        M.arange(16.0).reshape(1, 1, 4, 4),
        _grid(M, (math.nan, 0.3), (math.inf, -0.5), (-math.inf, 1e30), (0.2, -1e30)),
        mode=mode, padding_mode=pad, align_corners=ac))(mode, pad, ac)
    for mode in ("bilinear", "nearest", "bicubic") for pad in ("zeros", "border", "reflection")
    for ac in (False, True)
}
GRID_CASES.update({
    f"3d_{mode}_{pad}": (lambda mode, pad: lambda M: _F(M).grid_sample(
        M.arange(8.0).reshape(1, 1, 2, 2, 2),
        _grid(M, (math.nan, 0.0, 0.0), (-math.inf, 0.5, 0.1), dims=3),
        mode=mode, padding_mode=pad, align_corners=False))(mode, pad)
    for mode in ("bilinear", "nearest") for pad in ("zeros", "border", "reflection")
})
GRID_CASES.update({  # the torch-level op (its own 3-D path)
    f"grid_sampler_3d_{mode}_{pad}": (lambda mode, pad: lambda M: M.grid_sampler(
        M.arange(8.0).reshape(1, 1, 2, 2, 2),
        _grid(M, (math.nan, 0.0, 0.0), (-math.inf, 0.5, 0.1), (0.2, 0.3, -0.4), dims=3),
        mode, pad, False))(mode, pad)
    for mode in (0, 1) for pad in (0, 1, 2)
})
GRID_CASES["empty_height"] = lambda M: _F(M).grid_sample(M.ones(1, 1, 0, 2), M.zeros(1, 1, 1, 2),
                                                         align_corners=False)


@needs_torch
@pytest.mark.parametrize("name", sorted(GRID_CASES))
def test_grid_sample_of_nan_locations_matches_torch(name):
    e, t = _outcome(GRID_CASES[name], ember), _outcome(GRID_CASES[name], torch)
    assert e[:3] == t[:3]
    if e[0] == "ok":
        np.testing.assert_allclose(e[3], t[3], rtol=1e-5, atol=1e-5)



# ---- k. adaptive pooling to an output past std::vector's max_size: a clear OutOfMemoryError -----

def test_adaptive_pool_of_a_huge_output_is_a_clear_error():
    # an int8 output of 2**62 elements passes the byte-size check; planning its windows used to
    # leak std::length_error ("vector::reserve") as a ValueError
    with pytest.raises(ember.OutOfMemoryError, match="adaptive_max_pool.*out of memory"):
        ember.adaptive_max_pool1d(ember.zeros(1, 1, dtype=ember.int8), 2**62)


@pytest.mark.parametrize("name", ["logical_and_", "logical_or_", "logical_xor_", "logical_not_"])
def test_logical_ops_in_place_on_a_leaf_record_nothing(name):
    # never differentiable: torch writes into a leaf that requires grad and keeps it a leaf
    # (comparisons such as le_ still refuse, as torch's)
    a = ember.tensor([1.0, 0.0, 2.0]).requires_grad_()
    args = () if name == "logical_not_" else (ember.tensor([0.0, 0.0, 1.0]),)
    getattr(a, name)(*args)
    assert a.requires_grad and a.grad_fn is None and a.is_leaf
    want = {"logical_and_": [0.0, 0.0, 1.0], "logical_or_": [1.0, 0.0, 1.0],
            "logical_xor_": [1.0, 0.0, 0.0], "logical_not_": [0.0, 1.0, 0.0]}[name]
    assert a.tolist() == want
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ember.ones(3).requires_grad_().le_(ember.ones(3))
