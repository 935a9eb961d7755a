"""gradcheck's options and input handling, and gradgradcheck: second derivatives of the ops whose
backward formulas are differentiable, failure reports, and agreement with PyTorch's verdicts."""

import ember
import numpy as np
import pytest
from core_helpers import torch
from ember.autograd import GradcheckError, gradcheck, gradgradcheck

D = ember.float64


def rnd(*shape, lo=-1.5, hi=1.5, seed=0):
    rng = np.random.default_rng(seed + 11 * len(shape) + sum(shape))
    return ember.tensor(rng.uniform(lo, hi, size=shape)).to(D).requires_grad_()


def pos(*shape, seed=0):
    return rnd(*shape, lo=0.5, hi=2.0, seed=seed)


# Ops whose backward formulas are built from differentiable ops.
SECOND_ORDER = [
    ("mul", lambda a, b: a * b, lambda: (rnd(2, 3), rnd(3, seed=1))),
    ("div", lambda a, b: a / b, lambda: (rnd(2, 3), pos(2, 3, seed=1))),
    ("exp_log", lambda a: ember.exp(a) + ember.log(a), lambda: (pos(4),)),
    ("sin_cos", lambda a: ember.sin(a) * ember.cos(a), lambda: (rnd(4),)),
    ("tanh_sigmoid", lambda a: ember.tanh(a) + ember.sigmoid(a * 2), lambda: (rnd(4),)),
    ("pow_scalar", lambda a: a ** 3 + a ** 2.5 + 2 ** a, lambda: (pos(3),)),
    ("pow_tensor", lambda a, b: a ** b, lambda: (pos(3), rnd(3, seed=2))),
    ("sqrt_rsqrt", lambda a: ember.sqrt(a) + ember.rsqrt(a), lambda: (pos(3),)),
    ("matmul", lambda a, b: a @ b, lambda: (rnd(2, 3), rnd(3, 2, seed=1))),
    ("bmm_broadcast", lambda a, b: (a @ b).tanh(), lambda: (rnd(2, 2, 3), rnd(3, 2, seed=1))),
    ("sum_mean", lambda a: (a * a).sum(1) + (a ** 3).mean(), lambda: (rnd(2, 3),)),
    ("views", lambda a: (a.t().reshape(-1).unsqueeze(0).expand(2, 6) ** 2).permute(1, 0),
     lambda: (rnd(2, 3),)),
    ("where_clamp", lambda a: ember.where(a > 0, a * a, ember.clamp(a, -0.5, 0.5) ** 3),
     lambda: (rnd(5),)),
    ("addcmul_addcdiv", lambda a, b: ember.addcmul(a, a, b) + ember.addcdiv(a, b, b * b + 1),
     lambda: (rnd(3), rnd(3, seed=4))),
]


@pytest.mark.parametrize("name,fn,make", SECOND_ORDER)
def test_gradgradcheck_ops(name, fn, make):
    assert gradgradcheck(fn, make())


def test_gradgradcheck_non_contiguous_inputs_and_grad_outputs():
    a = ember.tensor(np.random.default_rng(1).uniform(-1, 1, (4, 3))).to(D).t().requires_grad_()
    assert not a.is_contiguous()
    assert gradgradcheck(lambda t: (t * t).sin() @ t.t(), a, gen_non_contig_grad_outputs=True)


def test_gradgradcheck_given_grad_outputs_and_several_outputs():
    a, b = rnd(2, 3), rnd(3, 2, seed=1)
    gos = (rnd(2, 2, seed=5), rnd(2, 3, seed=6))
    assert gradgradcheck(lambda x, y: (x @ y, (x * 2).exp()), (a, b), gos)
    with pytest.raises(ValueError, match="grad_outputs\\[0\\] has shape \\(3,\\) but output 0 "
                       "has shape \\(2, 2\\)"):
        gradgradcheck(lambda x, y: (x @ y, x.exp()), (a, b), (rnd(3), rnd(2, 3)))
    with pytest.raises(ValueError, match="2 differentiable output\\(s\\) but 1 grad_outputs"):
        gradgradcheck(lambda x, y: (x @ y, x.exp()), (a, b), (rnd(2, 2),))


def test_gradgradcheck_reports_wrong_second_derivative():
    # (x - detach(x))^2 is 0 everywhere, so every derivative is 0 numerically; the first
    # analytical derivative 2(x - c) is 0 as well, but the second one (2) is not.
    x = rnd(2, 2)
    assert gradcheck(lambda t: (t - t.detach()) ** 2, x)
    with pytest.raises(GradcheckError, match="gradgradcheck: Jacobian mismatch for output 0 "
                       "\\(element \\(0, 0\\)\\) with respect to input 0 \\(element \\(0, 0\\)\\): "
                       "analytical .* vs numerical 0.0"):
        gradgradcheck(lambda t: (t - t.detach()) ** 2, x)
    assert gradgradcheck(lambda t: (t - t.detach()) ** 2, x, raise_exception=False) is False


def test_gradcheck_report_names_input_and_element():
    a, b = rnd(3), rnd(2, 2, seed=3)
    # wrong derivative for b only: b * detach(b) has true derivative 2b but autograd gives b
    with pytest.raises(GradcheckError, match="output 0 \\(element 0\\) with respect to input 1 "
                       "\\(element \\(0, 0\\)\\)"):
        gradcheck(lambda x, y: x.sum() + (y * y.detach()).sum(0), (a, b))
    assert gradcheck(lambda x, y: x.sum() + (y * y.detach()).sum(0), (a, b),
                     raise_exception=False) is False


def test_gradcheck_non_contiguous_and_offset_inputs():
    base = ember.tensor(np.random.default_rng(2).uniform(-1, 1, (3, 5))).to(D)
    views = [base.t(), base[:, 1::2], base[1:, 2:]]
    for v in views:
        v = v.detach().requires_grad_()
        assert not v.is_contiguous() or v.storage_offset() > 0
        assert gradcheck(lambda t: (t * t).exp(), v)
    assert base.tolist() == ember.tensor(np.random.default_rng(2).uniform(-1, 1, (3, 5))).tolist()


def test_gradcheck_rejects_overlapping_and_non_double_inputs():
    with pytest.raises(GradcheckError, match="input 0 has stride 0 in dimension 0"):
        gradcheck(lambda t: t * 2, ember.ones(3, dtype=D).expand(2, 3).requires_grad_())
    with pytest.raises(GradcheckError, match="input 1 requires grad but has dtype ember.float32"):
        gradcheck(lambda a, b: a * b, (rnd(2), ember.ones(2, requires_grad=True)))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda t: t * 2, ember.ones(2, dtype=D))


def test_gradcheck_tolerances_and_eps():
    x = rnd(3)
    # sin'' is bounded by 1, so the central-difference error is ~eps^2: a huge eps breaks it
    assert gradcheck(ember.sin, x, eps=1e-6)
    assert not gradcheck(ember.sin, x, eps=0.5, atol=1e-8, rtol=1e-8, raise_exception=False)
    assert gradcheck(ember.sin, x, eps=0.5, atol=0.1, rtol=0.1)


def test_gradcheck_multiple_outputs_integer_outputs_and_undefined_grads():
    x = rnd(4)
    assert gradcheck(lambda t: (t * 2, t.sin(), (t > 0).long()), x)
    assert gradcheck(lambda t: (t * 2, t.sin()), x, check_undefined_grad=False, nondet_tol=1e-12)


def test_gradcheck_output_that_does_not_require_grad():
    # the output is computed outside autograd, but does depend on the input numerically
    with pytest.raises(GradcheckError, match="output 0 does not require grad, but its numerical "
                       "derivative with respect to input 0"):
        gradcheck(lambda t: t.detach() * 2, rnd(2))


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_same_verdicts_as_torch():
    cases = [
        (lambda m, t: m.tanh(t) * t, True),
        (lambda m, t: (t - t.detach()) ** 2, False),
        (lambda m, t: m.exp(t).sum() * t, True),
    ]
    arr = np.random.default_rng(5).uniform(-1, 1, (3,))
    for fn, ok in cases:
        e = gradgradcheck(lambda t: fn(ember, t), ember.tensor(arr).requires_grad_(),
                          raise_exception=False)
        t = torch.autograd.gradgradcheck(lambda t: fn(torch, t),
                                         torch.tensor(arr, requires_grad=True),
                                         raise_exception=False)
        assert e == t == ok
