"""Gradients of pointwise math, reductions, the sort family and linear algebra (the formulas in
ops/{pointwise,reduce,sort,linalg}.yaml and csrc/autograd/formulas_math.h).

The gradient cases (op_db.GRAD_MATH, each filed under its op in op_db.DB) go through
op_db.run_case: finite differences (contiguous and strided
inputs), first and second derivatives against torch. The tests after it pin the conventions
finite differences can't see (ties, kinks, zero norms, zeros in products) against torch.
"""

import ember
import numpy as np
import pytest
from core_helpers import needs_torch, torch
from op_db import FLIP_OK, GRAD_MATH, INF, MASKED_FILL_OK, POINTWISE, GradCase, lib, run_case

CASES = GRAD_MATH


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad_case(case):
    run_case(case)


# Every floating pointwise op of the op table (op_db.POINTWISE) is differentiable, so a new
# op without a formula fails here. floor_divide has none in PyTorch either (tested below).
SWEEP = [op for op in POINTWISE if "float64" in op.dtypes and op.result != "bool"
         and op.name != "floor_divide"]


def test_differentiable_flags_of_the_table():
    """op_db's `differentiable` flag (from the YAML) is set for exactly the swept ops."""
    assert {op.name for op in POINTWISE if op.differentiable} == {op.name for op in SWEEP}


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
