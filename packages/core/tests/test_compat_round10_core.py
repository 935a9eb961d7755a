"""Fixes from the tenth drop-in compatibility round (core): einsum's sublist form and the
ember.backends.opt_einsum switches."""

from __future__ import annotations

import ember
import pytest


# ---- einsum(op1, sublist1, op2, sublist2, ..., [sublist_out]) ----------------------------------
def test_einsum_sublist_form_matches_the_equation_form():
    a = ember.arange(6.0).reshape(2, 3)
    b = ember.arange(12.0).reshape(3, 4)
    assert ember.equal(ember.einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b)
    # no output sublist: the implicit output (letters seen once, sorted)
    assert ember.equal(ember.einsum(a, [0, 1], b, [1, 2]), a @ b)
    # 26-51 stand for a-z; an Ellipsis for "..."
    assert ember.equal(ember.einsum(a, [Ellipsis, 30], b, [30, 27], [Ellipsis, 27]), a @ b)
    assert ember.einsum(a, [0, 1], [1]).tolist() == [3.0, 5.0, 7.0]


def test_einsum_sublist_form_differentiates():
    x = ember.ones(2, 3, 3, requires_grad=True)
    y = ember.einsum(x, [51, 0, 0], [51])  # a batched trace
    assert y.tolist() == [3.0, 3.0]
    y.sum().backward()
    assert ember.equal(x.grad, ember.eye(3).expand(2, 3, 3))


@pytest.mark.parametrize("bad", [[52], [-1, 0], ["i", "j"]])
def test_einsum_sublist_out_of_range(bad):
    with pytest.raises(ValueError, match=r"not within the valid range \[0, 52\)"):
        ember.einsum(ember.ones(2, 3), bad)


def test_einsum_needs_an_operand():
    with pytest.raises(ValueError, match="must specify the equation string and at least one"):
        ember.einsum(ember.ones(2))
    # the equation form and the one-list form still work
    assert ember.einsum("ii->", [ember.eye(3)]).item() == 3.0


# ---- ember.backends.opt_einsum -----------------------------------------------------------------
def test_opt_einsum_switches():
    import ember.backends.opt_einsum as oe

    assert ember.backends.opt_einsum is oe
    available = oe.is_available()
    assert oe.enabled == available
    assert oe.strategy == ("auto" if available else None)
    assert (oe.get_opt_einsum() is None) == (not available)
    with oe.flags(enabled=False):
        assert oe.enabled is False
        with pytest.raises(ValueError, match="opt_einsum is not"):
            oe.set_flags(_strategy="greedy")  # not enabled (or not installed)
    assert oe.enabled == available
    if not available:
        with pytest.raises(ValueError, match="opt_einsum is not available"):
            oe.set_flags(True)
    else:
        with pytest.raises(ValueError, match=r"must be one of the following: \[auto, greedy"):
            oe.set_flags(_strategy="fastest")


# ---- torch.autograd.graph.register_multi_grad_hook ---------------------------------------------
def _multi(mode="all"):
    a = ember.ones(2, requires_grad=True)
    b = ember.full((2,), 2.0, requires_grad=True)
    c, d = a * b, a * b
    seen = []
    fn = (lambda grads: seen.append([None if g is None else g.tolist() for g in grads])) \
        if mode == "all" else (lambda g: seen.append(g.tolist()))
    h = ember.autograd.graph.register_multi_grad_hook((a, b, c, d), fn, mode=mode)
    return a, b, c, d, seen, h


def test_multi_grad_hook_all_waits_for_the_gradients_this_call_computes():
    a, b, c, d, seen, h = _multi()
    c.sum().backward(retain_graph=True)
    assert seen == [[[2.0, 2.0], [1.0, 1.0], [1.0, 1.0], None]]  # d is not in this graph
    seen.clear()
    c.sum().backward(inputs=(a,), retain_graph=True)
    assert seen == [[[2.0, 2.0], None, [1.0, 1.0], None]]  # b's gradient is not computed
    seen.clear()
    (c + d).sum().backward(retain_graph=True)
    assert len(seen) == 1 and seen[0][3] == [1.0, 1.0]  # once per backward call
    seen.clear()
    ember.autograd.grad(d.sum(), [a])
    assert seen == [[[2.0, 2.0], None, None, [1.0, 1.0]]]
    h.remove()
    seen.clear()
    c.sum().backward()
    assert seen == []


def test_multi_grad_hook_any_fires_once_per_backward():
    a, b, c, d, seen, h = _multi("any")
    (c + d).sum().backward(retain_graph=True)
    assert len(seen) == 1
    d.sum().backward()
    assert len(seen) == 2
    h.remove()


def test_multi_grad_hook_checks_the_mode():
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        ember.autograd.graph.register_multi_grad_hook([ember.ones(1, requires_grad=True)],
                                                      lambda g: None, mode="some")


# ---- int() / float() / complex() of a tensor that is not one element: ValueError, as torch -----
@pytest.mark.parametrize("conv", [int, float, complex])
@pytest.mark.parametrize("shape", [(2,), (0,), (2, 3)])
def test_scalar_conversions_of_many_elements_raise_value_error(conv, shape):
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python"):
        conv(ember.zeros(shape))


def test_scalar_conversions_of_one_element():
    assert int(ember.tensor([[-2.9]])) == -2 and float(ember.tensor([3])) == 3.0
    assert complex(ember.tensor([1 + 2j])) == 1 + 2j
    assert float(ember.nn.Parameter(ember.ones(1))) == 1.0
    with pytest.raises(RuntimeError, match="elements"):  # item() keeps torch's RuntimeError
        ember.zeros(2).item()
