"""Forward-mode AD through custom Functions: the static ``jvp(ctx, *tangents)`` method. The same
Functions are written against a module ``L`` (ember or torch) and run under each library's
forward_ad; values and tangents are compared with PyTorch where it is installed, and with
reverse mode (a jvp must agree with the vjp of the same Function)."""

import ember
import numpy as np
import pytest
from core_helpers import compare, val


def fns(L):
    class MulScale(L.autograd.Function):  # two tensor inputs, a non-tensor one, two outputs
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.save_for_forward(x, y)
            ctx.save_for_backward(x, y)
            ctx.k = k
            return x * y * k, x.exp()

        @staticmethod
        def jvp(ctx, xt, yt, kt):
            assert kt is None
            x, y = ctx.saved_tensors
            return (xt * y + x * yt) * ctx.k, xt * x.exp()

        @staticmethod
        def backward(ctx, g1, g2):
            x, y = ctx.saved_tensors
            return g1 * y * ctx.k + g2 * x.exp(), g1 * x * ctx.k, None

    class Sin(L.autograd.Function):  # setup_context form
        @staticmethod
        def forward(x):
            return x.sin()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def jvp(ctx, xt):
            (x,) = ctx.saved_tensors
            return xt * x.cos()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    class Scale2Inplace(L.autograd.Function):  # mark_dirty: jvp updates the tangent in place
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x.mul_(2)

        @staticmethod
        def jvp(ctx, xt):
            return xt.mul_(2)

    class WithIndex(L.autograd.Function):  # a non-differentiable output gets no tangent
        @staticmethod
        def forward(ctx, x):
            i = x.argmax()
            ctx.mark_non_differentiable(i)
            return x * 3, i

        @staticmethod
        def jvp(ctx, xt):
            return xt * 3, None

    return MulScale, Sin, Scale2Inplace, WithIndex


def dual(L, vals, tangent):
    fw = L.autograd.forward_ad
    return fw.make_dual(L.tensor(vals, dtype=L.float64), L.tensor(tangent, dtype=L.float64))


def tangent(L, t):
    return val(L.autograd.forward_ad.unpack_dual(t).tangent)


def test_jvp_with_two_outputs_and_a_non_tensor_argument():
    def scenario(L):
        MulScale, *_ = fns(L)
        with L.autograd.forward_ad.dual_level():
            x = dual(L, [1.0, -2.0, 0.5], [1.0, 0.5, -1.0])
            y = L.tensor([3.0, 0.25, 2.0], dtype=L.float64)  # no tangent: jvp gets zeros
            a, b = MulScale.apply(x, y, 1.5)
            return val(a), tangent(L, a), val(b), tangent(L, b)

    _, ta, _, tb = compare(scenario)
    np.testing.assert_allclose(ta, np.array([1.0, 0.5, -1.0]) * [3.0, 0.25, 2.0] * 1.5)
    np.testing.assert_allclose(tb, np.array([1.0, 0.5, -1.0]) * np.exp([1.0, -2.0, 0.5]))


def test_jvp_both_inputs_dual_and_setup_context_form():
    def scenario(L):
        MulScale, Sin, *_ = fns(L)
        with L.autograd.forward_ad.dual_level():
            x = dual(L, [0.3, 1.1], [2.0, -1.0])
            y = dual(L, [-0.7, 0.4], [0.5, 3.0])
            a, _ = MulScale.apply(x, y, 2.0)
            s = Sin.apply(x)
            return tangent(L, a), tangent(L, s), tangent(L, Sin.apply(s))

    compare(scenario)


def test_jvp_agrees_with_reverse_mode():
    MulScale, Sin, *_ = fns(ember)
    x0 = np.array([0.2, -1.3, 0.8])
    v = np.array([1.0, -0.5, 2.0])
    with ember.autograd.forward_ad.dual_level():
        x = dual(ember, x0.tolist(), v.tolist())
        fw = tangent(ember, Sin.apply(x))
    # Reverse mode: J^T u for each basis vector u gives J; then J v.
    xr = ember.tensor(x0.tolist(), dtype=ember.float64, requires_grad=True)
    rows = [val(ember.autograd.grad(Sin.apply(xr)[i], xr)[0]) for i in range(3)]
    np.testing.assert_allclose(fw, np.stack(rows) @ v, rtol=1e-12)


def test_mark_dirty_jvp_updates_the_tangent_in_place():
    def scenario(L):
        _, _, Scale2Inplace, _ = fns(L)
        with L.autograd.forward_ad.dual_level():
            x = dual(L, [1.0, 2.0], [1.0, -1.0])
            r = Scale2Inplace.apply(x)
            return val(r), tangent(L, r), tangent(L, x)

    r, tr, tx = compare(scenario)
    np.testing.assert_allclose(tr, [2.0, -2.0])
    np.testing.assert_allclose(tx, [2.0, -2.0])


def test_non_differentiable_output_has_no_tangent():
    def scenario(L):
        *_, WithIndex = fns(L)
        with L.autograd.forward_ad.dual_level():
            x = dual(L, [1.0, 5.0, 2.0], [1.0, 1.0, 1.0])
            y, i = WithIndex.apply(x)
            return tangent(L, y), tangent(L, i)

    ty, ti = compare(scenario)
    assert ti is None
    np.testing.assert_allclose(ty, [3.0, 3.0, 3.0])


def test_forward_sees_no_tangents_and_outputs_without_dual_inputs_have_none():
    seen = []

    class Probe(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(ember.autograd.forward_ad.unpack_dual(x).tangent)
            return x * 2

        @staticmethod
        def jvp(ctx, xt):
            return xt * 2

    fw = ember.autograd.forward_ad
    with fw.dual_level():
        x = dual(ember, [1.0], [1.0])
        Probe.apply(x)
        assert seen == [None]  # forward computes primal values only
        plain = Probe.apply(ember.tensor([1.0], dtype=ember.float64))
        assert fw.unpack_dual(plain).tangent is None


def test_jvp_and_backward_on_the_same_call():
    def scenario(L):
        MulScale, *_ = fns(L)
        base = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        with L.autograd.forward_ad.dual_level():
            x = L.autograd.forward_ad.make_dual(base, L.tensor([1.0, 1.0], dtype=L.float64))
            y = L.tensor([3.0, 4.0], dtype=L.float64)
            a, b = MulScale.apply(x, y, 1.0)
            ta = tangent(L, a)
            (a.sum() + b.sum()).backward()
        return ta, val(base.grad)

    ta, g = compare(scenario)
    np.testing.assert_allclose(ta, [3.0, 4.0])
    np.testing.assert_allclose(g, np.array([3.0, 4.0]) + np.exp([1.0, 2.0]))


# ---- errors -------------------------------------------------------------------------------------


def make_fn(jvp=None, fwd=None):
    attrs = {"forward": staticmethod(fwd or (lambda ctx, x: x * 2))}
    if jvp is not None:
        attrs["jvp"] = staticmethod(jvp)
    return type("Twice", (ember.autograd.Function,), attrs)


def run_dual(fn):
    with ember.autograd.forward_ad.dual_level():
        return fn.apply(dual(ember, [1.0, 2.0], [1.0, 1.0]))


def test_missing_jvp_is_a_clear_error():
    with pytest.raises(NotImplementedError, match="Twice does not implement jvp"):
        run_dual(make_fn())
    # Without a dual input jvp is never needed.
    with ember.autograd.forward_ad.dual_level():
        make_fn().apply(ember.ones(2))


@pytest.mark.parametrize("jvp,exc,match", [
    (lambda ctx, t: (t, t), RuntimeError, r"invalid number of tangents \(expected 1.*got 2\)"),
    (lambda ctx, t: ember.ones(3), RuntimeError, r"tangent of shape \(3,\).*output of shape \(2,\)"),
    (lambda ctx, t: 3, TypeError, "returned a 'int' from jvp"),
    (lambda ctx, t: ember.ones(2, dtype=ember.int64), TypeError, "floating point"),
])
def test_bad_jvp_results(jvp, exc, match):
    with pytest.raises(exc, match=match):
        run_dual(make_fn(jvp))


def test_tangent_for_non_differentiable_output_is_an_error():
    def fwd(ctx, x):
        y = x * 2
        ctx.mark_non_differentiable(y)
        return y

    with pytest.raises(RuntimeError, match="not a differentiable Tensor"):
        run_dual(make_fn(lambda ctx, t: t * 2, fwd))


def test_dirty_input_tangent_must_be_updated_in_place():
    def fwd(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    with pytest.raises(RuntimeError, match="modify that input's tangent in place"):
        run_dual(make_fn(lambda ctx, t: t * 2, fwd))
