"""Fixes from the fourteenth drop-in compatibility round: ``torch.autograd.gradcheck`` /
``gradgradcheck`` take PyTorch's keyword options (check_forward_ad, check_backward_ad,
check_batched_grad, check_batched_forward_grad, check_grad_dtypes, fast_mode, masked;
check_fwd_over_rev, check_rev_over_rev), which scripts that test custom autograd.Functions pass
(``gradcheck(fn, x, check_forward_ad=True)`` raised TypeError). Each behaviour is pinned
explicitly and, where torch is installed, against it."""

from __future__ import annotations

import ember
import pytest

try:
    import torch
except ImportError:  # the explicit expectations below still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _wrong_jvp(lib):
    """Backward says d(2x)/dx = 2, jvp says 3: only a forward-mode check can see it."""

    class Double(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    return Double.apply


def _x(lib):
    return lib.tensor([0.3, 0.7], dtype=lib.float64, requires_grad=True)


def _f(t):
    return (t * t).sin()


def _two_outputs(a, b):
    return a @ b, (a * 2).sum(0)


def _ab(lib):
    a = lib.linspace(-1, 1, 6, dtype=lib.float64).view(2, 3).requires_grad_()
    b = lib.linspace(0, 1, 3, dtype=lib.float64).view(3, 1).requires_grad_()
    return a, b


def test_forward_mode_check_catches_a_wrong_jvp_that_backward_cannot():
    fn = _wrong_jvp(ember)
    assert ember.autograd.gradcheck(fn, _x(ember))  # backward is right
    with pytest.raises(ember.autograd.GradcheckError,
                       match="Jacobian computed with forward mode mismatch for output 0"):
        ember.autograd.gradcheck(fn, _x(ember), check_forward_ad=True)
    assert ember.autograd.gradcheck(fn, _x(ember), check_forward_ad=True,
                                    raise_exception=False) is False
    # forward mode alone, and batched forward mode under vmap, on a correct function
    assert ember.autograd.gradcheck(_f, _x(ember), check_forward_ad=True, check_backward_ad=False)
    assert ember.autograd.gradcheck(_f, _x(ember), check_forward_ad=True,
                                    check_batched_forward_grad=True)


def test_batched_and_dtype_checks_pass_on_correct_functions():
    a, b = _ab(ember)
    assert ember.autograd.gradcheck(_two_outputs, (a, b), check_forward_ad=True,
                                    check_batched_grad=True, check_batched_forward_grad=True,
                                    check_grad_dtypes=True, fast_mode=True, masked=False)
    assert ember.autograd.gradgradcheck(_two_outputs, (a, b), check_fwd_over_rev=True,
                                        check_batched_grad=True, check_grad_dtypes=True)
    # forward over reverse alone (the undefined-grad check needs reverse over reverse)
    assert ember.autograd.gradgradcheck(_f, _x(ember), check_fwd_over_rev=True,
                                        check_rev_over_rev=False, check_undefined_grad=False)


def _cube(lib):
    """Right first derivatives (backward and jvp), but backward detaches one factor of x, so
    the second derivative it records is 3x, not 6x."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x.detach()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * 3 * x * x

    return Cube.apply


def test_a_wrong_second_derivative_is_caught_forward_over_reverse():
    cube = _cube(ember)
    assert ember.autograd.gradcheck(cube, _x(ember), check_forward_ad=True)
    with pytest.raises(ember.autograd.GradcheckError,
                       match="Jacobian computed with forward mode mismatch for output 0"):
        ember.autograd.gradgradcheck(cube, _x(ember), check_fwd_over_rev=True,
                                     check_rev_over_rev=False, check_undefined_grad=False)
    with pytest.raises(ember.autograd.GradcheckError, match="Jacobian mismatch for output 0"):
        ember.autograd.gradgradcheck(cube, _x(ember))


@pytest.mark.parametrize("kwargs, message", [
    ({"check_backward_ad": False},
     "Expected at least one of check_forward_ad or check_backward_ad to be True"),
    ({"check_batched_forward_grad": True},
     "Setting check_batched_forward_grad=True requires check_forward_ad to be True"),
])
def test_gradcheck_refuses_contradictory_options(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        ember.autograd.gradcheck(_f, _x(ember), **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"check_rev_over_rev": False, "check_undefined_grad": False},
     "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True"),
    ({"check_rev_over_rev": False, "check_fwd_over_rev": True},
     "Setting check_undefined_grad=True requires check_rev_over_rev to be True"),
])
def test_gradgradcheck_refuses_contradictory_options(kwargs, message):
    with pytest.raises(AssertionError, match=message):
        ember.autograd.gradgradcheck(_f, _x(ember), **kwargs)


@needs_torch
@pytest.mark.parametrize("kwargs", [
    {"check_forward_ad": True},
    {"check_forward_ad": True, "check_backward_ad": False},
    {"check_batched_grad": True, "check_grad_dtypes": True, "fast_mode": True},
    {"check_forward_ad": True, "check_batched_forward_grad": True, "masked": True},
    {"check_backward_ad": False},
    {"check_batched_forward_grad": True},
])
def test_gradcheck_verdicts_match_torch(kwargs):
    def verdict(lib, fn):
        try:
            return lib.autograd.gradcheck(fn, _x(lib), raise_exception=False, **kwargs)
        except AssertionError as e:
            return str(e)

    for make in (lambda lib: _f, _wrong_jvp, _cube):
        assert verdict(ember, make(ember)) == verdict(torch, make(torch))


@needs_torch
@pytest.mark.parametrize("kwargs", [
    {"check_fwd_over_rev": True},
    {"check_fwd_over_rev": True, "check_rev_over_rev": False, "check_undefined_grad": False},
    {"check_batched_grad": True, "check_grad_dtypes": True, "fast_mode": True, "masked": False},
    {"check_rev_over_rev": False},
])
def test_gradgradcheck_verdicts_match_torch(kwargs):
    def verdict(lib, fn):
        try:
            return lib.autograd.gradgradcheck(fn, _x(lib), raise_exception=False, **kwargs)
        except AssertionError as e:
            return str(e)

    for make in (lambda lib: _f, _cube):
        assert verdict(ember, make(ember)) == verdict(torch, make(torch))


@pytest.mark.xfail(strict=True, reason="NOT FIXED (C++): an op's output saved for backward is kept "
                   "as a detached alias (SavedVariable, autograd.cpp) that does not carry the "
                   "output's forward-mode tangent, which the generated *_forward wrappers attach "
                   "only after the op has saved it; so backward formulas that use `result` (tanh, "
                   "exp, sigmoid, sqrt, softmax, relu, ...) see a constant under forward AD")
def test_forward_over_reverse_through_ops_that_save_their_result():
    import ember.autograd.forward_ad as fwAD

    w = ember.tensor([0.8, 0.3, 0.6], dtype=ember.float64)
    with fwAD.dual_level():
        wd = fwAD.make_dual(w.clone().requires_grad_(), ember.ones(3, dtype=ember.float64))
        (g,) = ember.autograd.grad(wd.tanh().sum(), wd, create_graph=True)  # 1 - tanh^2
        tangent = fwAD.unpack_dual(g).tangent
    # d/dw (1 - tanh(w)^2) = -2 tanh(w) (1 - tanh(w)^2)
    want = -2 * w.tanh() * (1 - w.tanh() ** 2)
    assert tangent is not None and ember.allclose(tangent, want)
