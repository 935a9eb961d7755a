"""Tensor.backward(inputs=...) / ember.autograd.backward(inputs=...): gradients go only to the
listed tensors, through the engine (a leaf's AccumulateGrad node, so its hooks run; a non-leaf
starts retaining its gradient), and the part of the graph that leads elsewhere does not run.
Scenarios are written against a module ``L`` and compared with PyTorch where installed."""

import ember
import numpy as np
import pytest
from core_helpers import compare, val


def leaves(L):
    a = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
    b = L.tensor([3.0, 4.0], dtype=L.float64, requires_grad=True)
    return a, b


def test_only_the_listed_leaf_gets_a_gradient_and_hooks_run():
    def scenario(L):
        a, b = leaves(L)
        calls = []
        a.register_post_accumulate_grad_hook(lambda t: calls.append("a post"))
        b.register_post_accumulate_grad_hook(lambda t: calls.append(("b post", t.grad.tolist())))
        b.register_hook(lambda g: calls.append(("b hook", g.tolist())))
        (a * b * b).sum().backward(inputs=[b])
        return val(a.grad), val(b.grad), calls

    ga, gb, calls = compare(scenario)
    assert ga is None
    np.testing.assert_allclose(gb, [6.0, 16.0])
    assert calls == [("b hook", [6.0, 16.0]), ("b post", [6.0, 16.0])]


def test_accumulates_across_calls_and_with_autograd_backward():
    def scenario(L):
        a, b = leaves(L)
        loss = (a * b).sum()
        loss.backward(inputs=b, retain_graph=True)
        L.autograd.backward(loss, inputs=[a, b])
        return val(a.grad), val(b.grad)

    ga, gb = compare(scenario)
    np.testing.assert_allclose(gb, [2.0, 4.0])
    np.testing.assert_allclose(ga, [3.0, 4.0])


def test_non_leaf_input_retains_its_gradient():
    def scenario(L):
        a, b = leaves(L)
        y = a * b
        z = (y * y).sum()
        z.backward(inputs=[y, b], retain_graph=True)
        first = (val(a.grad), val(b.grad), val(y.grad), y.retains_grad)
        z.backward(inputs=[y])
        return (*first, val(y.grad))

    ga, gb, gy, retains, gy2 = compare(scenario)
    assert ga is None and retains
    np.testing.assert_allclose(gy, [6.0, 16.0])
    np.testing.assert_allclose(gb, [6.0, 32.0])
    np.testing.assert_allclose(gy2, [12.0, 32.0])


def test_graph_beyond_the_inputs_does_not_run():
    # The node that produced y is not needed for y's own gradient: its backward (which would
    # raise) must not run.
    class Boom(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise AssertionError("backward beyond the inputs ran")

    a, _ = leaves(ember)
    y = Boom.apply(a)
    (y * 3).sum().backward(inputs=[y])
    np.testing.assert_allclose(val(y.grad), [3.0, 3.0])
    assert a.grad is None
    # autograd.grad prunes the same way.
    (g,) = ember.autograd.grad((y * 5).sum(), y)
    np.testing.assert_allclose(val(g), [5.0, 5.0])


def test_input_outside_the_graph_gets_nothing():
    def scenario(L):
        a, b = leaves(L)
        c = L.tensor([1.0], dtype=L.float64, requires_grad=True)
        (a * 2).sum().backward(inputs=[c])
        return val(a.grad), val(c.grad)

    assert compare(scenario) == (None, None)


def test_create_graph_with_inputs():
    def scenario(L):
        a, b = leaves(L)
        (a * a * b).sum().backward(inputs=[a], create_graph=True)
        ga = val(a.grad)
        (a.grad * 1.0).sum().backward(inputs=[b])
        return ga, val(b.grad)

    ga, gb = compare(scenario)
    np.testing.assert_allclose(ga, [6.0, 16.0])
    np.testing.assert_allclose(gb, [2.0, 4.0])


def test_bad_inputs():
    a, _ = leaves(ember)
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (a * 2).sum().backward(inputs=[])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (a * 2).sum().backward(inputs=[ember.ones(2)])
