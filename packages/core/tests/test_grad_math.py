"""Gradients of pointwise math, reductions, the sort family and linear algebra (the formulas in
ops/{pointwise,reduce,sort,linalg}.yaml and csrc/autograd/formulas_math.h).

The GradCase table goes through grad_table.run_case: finite differences (contiguous and strided
inputs), first and second derivatives against torch. The tests after it pin the conventions
finite differences can't see (ties, kinks, zero norms, zeros in products) against torch.
"""

import ember
import numpy as np
import pytest
from core_helpers import torch
from grad_table import GradCase, lib, run_case
from op_table import OPS

INF = float("inf")


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


POINTWISE = [
    GradCase("asin", lambda a: a.asin(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("acos", lambda a: a.acos(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("atan", lambda a: a.atan(), normal(3, 4)),
    GradCase("sinh", lambda a: a.sinh(), normal(3, 4)),
    GradCase("cosh", lambda a: a.cosh(), normal(3, 4)),
    GradCase("erf", lambda a: lib(a).erf(a), normal(3, 4)),
    GradCase("erfinv", lambda a: a.erfinv(), uniform(-0.9, 0.9, 3, 4)),
    GradCase("asin_inplace", lambda a: (a * 1).asin_(), uniform(-0.9, 0.9, 5)),
    GradCase("erfinv_inplace", lambda a: (a * 1).erfinv_(), uniform(-0.9, 0.9, 5)),
    GradCase("sign", lambda a: a.sign(), off_integers(3, 4)),
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


REDUCTIONS = [
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
    # torch's second derivatives of these are ZeroTensors (grad_table compares them as zeros).
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

SORTING = [
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

LINALG = [
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

CASES = POINTWISE + REDUCTIONS + SORTING + LINALG


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad_case(case):
    run_case(case)


# Every floating pointwise op of the forward op table (op_table.py) is differentiable, so a new
# op without a formula fails here. floor_divide has none in PyTorch either (tested below).
SWEEP = [op for op in OPS if "float64" in op.dtypes and op.result != "bool"
         and op.name != "floor_divide"]


def _sweep_case(op) -> GradCase:
    def inputs(rng):
        lo, hi = op.domain
        arrays = [rng.uniform(lo, hi, (3, 4)) for _ in range(op.arity)]
        if op.nonzero_rhs:
            arrays[1] = rng.uniform(0.5, 2.0, (3, 4)) * rng.choice([1, -1], (3, 4))
        return arrays

    def fn(*xs):
        name = op.name if isinstance(xs[0], ember.Tensor) else op.torch_fn
        return getattr(lib(xs[0]), name)(*xs, **op.kwargs)

    gradgrad = op.name != "pow" or MASKED_FILL_OK
    return GradCase(op.name, fn, inputs, gradgrad=gradgrad)


SWEEP_CASES = [_sweep_case(op) for op in SWEEP]


@pytest.mark.parametrize("case", SWEEP_CASES, ids=[c.name for c in SWEEP_CASES])
def test_every_floating_pointwise_op_is_differentiable(case):
    run_case(case)


# ---- conventions finite differences can't check -------------------------------------------------

needs_torch = pytest.mark.skipif(torch is None, reason="compares against torch")


def grads_vs_torch(fn, *arrays, upstream=None):
    """Gradients of fn at `arrays` (float64) in ember and torch, for a fixed upstream gradient."""
    xs = [ember.tensor(a, requires_grad=True) for a in arrays]
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, tout = fn(*xs), fn(*txs)
    up = np.ones(tuple(tout.shape)) if upstream is None else upstream
    gs = ember.autograd.grad(out, xs, ember.tensor(up), allow_unused=True)
    tgs = torch.autograd.grad(tout, txs, torch.tensor(up), allow_unused=True)
    for g, tg in zip(gs, tgs):
        if tg is None:
            assert g is None or not np.any(g.numpy())
            continue
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)


TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, -4.0], [2.0, -1.0, 2.0, 2.0]])

TIE_CASES = [
    ("max_all", lambda a: a.max()),
    ("min_all", lambda a: a.min()),
    ("max_dim", lambda a: a.max(1)[0]),
    ("min_dim", lambda a: a.min(1)[0]),
    ("amax", lambda a: a.amax(1)),
    ("amax_all", lambda a: a.amax()),
    ("amin_dims", lambda a: a.amin((0, 1))),
    ("aminmax", lambda a: sum(v.sum() * w for v, w in zip(a.aminmax(dim=1), (1.0, 3.0)))),
    ("aminmax_all", lambda a: sum(v * w for v, w in zip(a.aminmax(), (2.0, -1.0)))),
    ("median_all", lambda a: a.median()),
    ("median_dim", lambda a: a.median(1)[0]),
    ("nanmedian_all", lambda a: a.nanmedian()),
    ("mode", lambda a: a.mode(1)[0]),
    ("kthvalue", lambda a: a.kthvalue(2, 1)[0]),
    ("sort", lambda a: a.sort(1)[0] * lib(a).arange(4.0)),
    ("cummax", lambda a: a.cummax(1)[0] * lib(a).arange(4.0)),
    ("cummin", lambda a: a.cummin(0)[0] * lib(a).arange(4.0)),
    ("maximum", lambda a: lib(a).maximum(a, a[:, 1:2])),
    ("minimum", lambda a: lib(a).minimum(a[:, :1], a)),
    ("norm_inf", lambda a: a.norm(INF, 1)),
    ("norm_neg_inf", lambda a: a.norm(-INF)),
    ("abs", lambda a: (a - a[:, :1]).abs()),
    ("clamp_edges", lambda a: a.clamp(0.5, 2.0)),
]


@needs_torch
@pytest.mark.parametrize("name,fn", TIE_CASES, ids=[n for n, _ in TIE_CASES])
def test_ties_and_kinks_match_torch(name, fn):
    out_shape = tuple(fn(torch.tensor(TIES)).shape)
    up = np.random.default_rng(3).standard_normal(out_shape)
    grads_vs_torch(fn, TIES, upstream=up)


NAN_ROWS = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, 5.0], [np.nan, np.nan, 0.0]])


@needs_torch
@pytest.mark.parametrize("fn", [
    lambda a: a.max(), lambda a: a.min(), lambda a: a.amax(1), lambda a: a.max(1)[0],
    lambda a: a.median(), lambda a: a.nanmedian(), lambda a: a.nanmedian(1)[0],
    lambda a: a.nansum(0), lambda a: a.nanmean(1), lambda a: a.norm(INF, 1),
    lambda a: lib(a).maximum(a, a[1:2]), lambda a: a.nan_to_num(),
], ids=["max", "min", "amax", "max_dim", "median", "nanmedian", "nanmedian_dim", "nansum",
        "nanmean", "norm_inf", "maximum", "nan_to_num"])
def test_nan_conventions_match_torch(fn):
    grads_vs_torch(fn, NAN_ROWS)


ZERO_ROWS = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])


@needs_torch
@pytest.mark.parametrize("p", [2, 1, 3, 1.5, 0.5, -1.0, INF, -INF, 0])
def test_norm_zero_subgradients_match_torch(p):
    grads_vs_torch(lambda a: a.norm(p, 1), ZERO_ROWS)
    grads_vs_torch(lambda a: a.norm(p), np.zeros((2, 2)))


@needs_torch
def test_std_of_constant_rows_is_zero_like_torch():
    grads_vs_torch(lambda a: a.std(1), np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]))
    grads_vs_torch(lambda a: lib(a).std_mean(a, 1)[0], np.array([[2.0, 2.0], [1.0, 2.0]]))


@needs_torch
def test_logsumexp_of_minus_inf_rows_matches_torch():
    grads_vs_torch(lambda a: a.logsumexp(1), np.array([[-INF, -INF], [0.0, -INF]]))


@needs_torch
def test_atan2_at_origin_matches_torch():
    grads_vs_torch(lambda a, b: lib(a).atan2(a, b), np.array([0.0, 1.0]), np.array([0.0, 0.0]))


def test_step_functions_give_zero_gradients():
    x = ember.tensor([-1.5, -0.5, 0.0, 0.5, 2.0], dtype=ember.float64, requires_grad=True)
    for fn in (lambda t: t.sign(), lambda t: t.floor(), lambda t: t.ceil(), lambda t: t.trunc(),
               lambda t: t.round(), lambda t: t.round(decimals=2)):
        (g,) = ember.autograd.grad(fn(x).sum(), [x])
        assert g.tolist() == [0.0] * 5
    (g,) = ember.autograd.grad(x.abs().sum(), [x])
    assert g.tolist() == [-1.0, -1.0, 0.0, 1.0, 1.0]  # abs'(0) = 0
    (g,) = ember.autograd.grad(x.frac().sum(), [x])
    assert g.tolist() == [1.0] * 5


def test_floor_divide_is_not_differentiable():
    # PyTorch has no derivative for floor_divide: backward raises, naming the op.
    x = ember.tensor([1.5, 2.5], requires_grad=True)
    y = ember.floor_divide(x, 2.0)
    with pytest.raises(RuntimeError, match="floor_divide"):
        y.sum().backward()


def test_integer_and_bool_outputs_are_not_differentiable():
    x = ember.tensor([[1.0, 3.0], [2.0, 0.0]], requires_grad=True)
    for out in (x.argsort(), x.argmax(), x.max(1)[1], x.sort()[1], x < 1, x.eq(x),
                x.isnan(), x.count_nonzero()):
        assert not out.requires_grad
    assert x.max(1)[0].requires_grad and x.sort()[0].requires_grad


def test_float32_gradients_keep_the_input_dtype():
    x = ember.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    for fn in (lambda t: t.prod(dtype=ember.float64), lambda t: t.cumsum(0, dtype=ember.float64),
               lambda t: t.norm(dtype=ember.float64), lambda t: t.var(1), lambda t: t.erf()):
        (g,) = ember.autograd.grad(fn(x).sum(), [x])
        assert g.dtype == ember.float32


@needs_torch
@pytest.mark.skipif(not FLIP_OK, reason="the second derivatives go through flip's derivative")
def test_prod_and_cumprod_with_zeros_second_derivatives_match_torch():
    a = np.array([[0.0, 2.0, 0.0, 3.0], [1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 0.0, 1.0]])
    up = np.array([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 2.0, 1.0], [1.0, 1.0, 2.0, 3.0]])
    for fn in (lambda t: t.prod(), lambda t: t.prod(1, keepdim=True), lambda t: t.cumprod(1),
               lambda t: t.cumprod(0)):
        x = ember.tensor(a, requires_grad=True)
        tx = torch.tensor(a, requires_grad=True)
        y, ty = fn(x), fn(tx)
        u = up if tuple(ty.shape) == a.shape else np.ones(tuple(ty.shape))
        (g,) = ember.autograd.grad(y, [x], ember.tensor(u), create_graph=True)
        (tg,) = torch.autograd.grad(ty, [tx], torch.tensor(u), create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), atol=1e-12)
        (gg,) = ember.autograd.grad((g * ember.tensor(up)).sum(), [x])
        (tgg,) = torch.autograd.grad((tg * torch.tensor(up)).sum(), [tx])
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), atol=1e-12)


def test_reductions_reject_repeated_dims():
    x = ember.ones(2, 3, requires_grad=True)
    for fn in (lambda t: t.sum((0, 0)), lambda t: t.mean((1, -1)), lambda t: t.amax((0, -2)),
               lambda t: t.var((1, 1)), lambda t: t.norm(2, (0, 0)),
               lambda t: t.logsumexp((0, 0)), lambda t: t.nansum((1, 1))):
        with pytest.raises(RuntimeError, match="dim [01] appears multiple times in the list"):
            fn(x)
    s = ember.tensor(1.0)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        s.sum((0, 0))
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        s.amax((0, -1))
    assert s.sum((0,)).item() == 1.0 and s.sum(-1).item() == 1.0
