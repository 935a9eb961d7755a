"""Backward through in-place writes into views (CopySlices), __setitem__, view grad_fn rebuilding,
and the refusals PyTorch makes (views of leaves, views made in no_grad mode, detach_ of views).
Each scenario runs in ember and, where installed, in torch; values, gradients and errors must
agree."""

import ember
import numpy as np
import pytest
from core_helpers import torch

A = np.arange(12.0).reshape(3, 4) / 7 + 0.3
W = np.linspace(-1.0, 2.0, 12).reshape(3, 4)


def leaf(L, a=A):
    return L.tensor(a, requires_grad=True)


def grad_of(t):
    return None if t.grad is None else np.array(t.grad.tolist())


def both(fn):
    """Runs fn with ember and torch; returns (ember result, torch result or None)."""
    e = fn(ember)
    t = fn(torch) if torch is not None else None
    return e, t


def check(fn):
    e, t = both(fn)
    if t is None:
        return e
    assert len(e) == len(t)
    for x, y in zip(e, t):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                                       rtol=1e-7, atol=1e-12)
    return e


def vals(t):
    return np.array(t.detach().tolist())


# ---- gradients through in-place writes into views ---------------------------------------------


def test_chain_of_inplace_and_setitem():
    def f(L):
        x, z = leaf(L), leaf(L, np.array([2.0, -1.0, 0.5]))
        y = x * 1
        y[0].mul_(2)
        y[:, 1] = z
        (y * y * L.tensor(W)).sum().backward()
        return grad_of(x), grad_of(z), vals(y)

    gx, gz, y = check(f)
    # Row 0 was doubled (except column 1, overwritten by z): d/dx of (2x)^2 w = 8 x w there.
    assert gx[0, 0] == pytest.approx(8 * A[0, 0] * W[0, 0])
    assert (gx[:, 1] == 0).all()


def test_view_of_a_view():
    def f(L):
        x = leaf(L)
        y = x * 1
        w = y[1:][:, 2:]
        w.mul_(3)
        (y * L.tensor(W)).sum().backward()
        return grad_of(x), vals(y)

    check(f)


def test_inplace_on_view_after_the_base_was_used_elsewhere():
    def f(L):
        x = leaf(L)
        y = x * 1
        early = (y * L.tensor(W)).sum()  # uses y before the write: must see the old values
        v = y[:, ::2]
        v.exp_()
        (early + (y * y).sum()).backward()
        return grad_of(x), vals(y)

    check(f)


def test_view_used_before_base_modified():
    def f(L):
        x = leaf(L)
        y = x * 1
        v = y[0]
        z = v * 3  # history through the view as it was
        y.mul_(2)  # v now reads the doubled values: its grad_fn is rebuilt from y
        (z.sum() + (v * v).sum()).backward()
        return grad_of(x), v.requires_grad

    check(f)


def test_inplace_with_another_view_of_the_same_base():
    def f(L):
        x = leaf(L)
        y = x * 1
        a, b = y[0], y[1]
        a.add_(b)
        (a * b * 2).sum().backward()
        return (grad_of(x),)

    check(f)


def test_setitem_from_a_view_of_itself():
    def f(L):
        x = leaf(L)
        y = x * 1
        y[0] = y[1]
        y[:, 3] = y[:, 0] * 2
        (y * L.tensor(W)).sum().backward()
        return (grad_of(x),)

    check(f)


def test_augmented_assignment_into_views():
    def f(L):
        x = leaf(L)
        y = x * 1
        y[:, :2] += 1
        y[1:, ::2] *= 3
        y[0] -= y[2] * 2
        (y * y).sum().backward()
        return grad_of(x), vals(y)

    check(f)


def test_advanced_and_mask_setitem():
    def f(L):
        x, v = leaf(L), leaf(L, np.array([1.0, 2.0, 3.0, 4.0]))
        y = x * 1
        y[[0, 2]] = v * 5
        y[y > 5] = 0.0
        y[L.tensor([1, 1]), L.tensor([0, 3])] = v[:2]
        (y * L.tensor(W)).sum().backward()
        return grad_of(x), grad_of(v), vals(y)

    check(f)


def test_setitem_into_a_tensor_without_grad():
    """zeros() filled from tensors that require grad: the base gains a history."""

    def f(L):
        z = leaf(L, np.arange(4.0))
        b = L.zeros(3, 4, dtype=L.float64)
        b[1] = z
        b[2, 1:3] = z[:2] * 2
        b[0, 0] = 7.0
        (b * b).sum().backward()
        return grad_of(z), b.requires_grad, vals(b)

    check(f)


def test_view_sees_writes_into_its_base():
    def f(L):
        z = leaf(L, np.arange(3.0))
        b = L.zeros(3, dtype=L.float64)
        v = b[:2]  # made while nothing required grad
        b.copy_(z)
        (v * v).sum().backward()
        return grad_of(z), v.requires_grad

    check(f)


def test_multi_output_views_written_in_place():
    """unbind/split outputs: refused under autograd as PyTorch; unsafe_split's outputs and a
    write under no_grad are recorded / allowed."""
    x = leaf(ember)
    y = x * 1
    with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view"):
        y.unbind(0)[0].mul_(2)
    u = ember.unsafe_split(y, 1)
    u[0].mul_(2)
    (y * y).sum().backward()
    # as PyTorch: unsafe_split's outputs are not views, so the write changes y's values but
    # not its recorded history (d/dx sum(y^2) = 2 y, with row 0 of y doubled)
    expected = 2 * A
    expected[0] *= 2
    np.testing.assert_allclose(grad_of(x), expected)

    def f(L):
        y = leaf(L) * 1
        L.unsafe_split(y, 1)[0].mul_(2)
        x = y.grad_fn.next_functions[0][0].variable
        (y * y).sum().backward()
        return (grad_of(x),)

    check(f)


def test_inplace_view_ops():
    def f(L):
        x = leaf(L)
        y = x * 1
        y.unsqueeze_(0)
        y.squeeze_(0)
        y.transpose_(0, 1)
        y.t_()
        y.swapaxes_(0, 1)
        (y * L.tensor(W.T)).sum().backward()
        return grad_of(x), tuple(y.shape)

    check(f)


def test_inplace_view_op_on_a_view():
    def f(L):
        x = leaf(L)
        y = x * 1
        v = y[:2]
        v.t_()
        v.mul_(L.tensor(np.arange(8.0).reshape(4, 2)))
        (y * 1).sum().backward()
        return grad_of(x), vals(y)

    check(f)


def test_as_strided_views_and_writes():
    def f(L):
        x = leaf(L)
        y = x * 1
        s = y.as_strided((2, 2), (4, 1), 1)
        s.mul_(5)
        o = x.as_strided((3, 3), (1, 1))  # overlapping elements: gradients add up
        ((y * y).sum() + (o * L.tensor(W[:, :3])).sum()).backward()
        return grad_of(x), vals(y)

    check(f)


def test_exp_on_view_saves_its_result():
    """exp_ saves its output; the saved value must keep the exp node as history."""

    def f(L):
        x = leaf(L)
        y = x * 1
        y.view(12).exp_()
        (gx,) = L.autograd.grad((y * L.tensor(W)).sum(), x, create_graph=True)
        (gg,) = L.autograd.grad((gx * gx).sum(), x)
        return vals(gx), vals(gg)

    check(f)


def test_double_backward_through_setitem():
    def f(L):
        x = leaf(L)
        y = (x * x)[:2]
        b = L.zeros(3, 4, dtype=L.float64)
        b[1:] = y
        (gx,) = L.autograd.grad((b * L.tensor(W)).sum(), x, create_graph=True)
        (gg,) = L.autograd.grad((gx ** 3).sum(), x)
        return vals(gx), vals(gg)

    check(f)


def test_getitem_of_expanded_and_repeated_indices():
    def f(L):
        x = leaf(L)
        e = x[0].expand(3, 4)
        w = x[[0, 0, 2]]
        ((e[1:] * 2).sum() + (w * L.tensor(W)).sum()).backward()
        return (grad_of(x),)

    check(f)


def test_view_grad_fn_is_rebuilt_after_base_write():
    def f(L):
        x = leaf(L)
        y = x * 1
        v = y[1]
        y.mul_(2)
        return v.grad_fn is not None, v.requires_grad, v.is_leaf

    check(f)


def test_view_of_zeros_written_with_grad_then_used():
    def f(L):
        z = leaf(L, np.array([1.0, -2.0]))
        b = L.zeros(2, 2, dtype=L.float64)
        b[0].copy_(z)
        c = b.t()
        (c * c * 3).sum().backward()
        return grad_of(z), b.is_leaf

    check(f)


# ---- no_grad, detach, leaves -------------------------------------------------------------------


def test_views_made_in_no_grad_mode():
    def f(L):
        x = leaf(L)
        y = x * 1
        with L.no_grad():
            v = y[0]
        w = v * 2  # v is a leaf here: nothing flows back into x
        w.sum().backward()
        return v.requires_grad, v.grad_fn is None, v.is_leaf, grad_of(x)

    check(f)


def test_inplace_in_no_grad_mode_on_views_of_leaves():
    def f(L):
        x = leaf(L)
        before = x._version
        with L.no_grad():
            x[0] = 1.0
            x[1].mul_(2)
        (x * x).sum().backward()
        return grad_of(x), vals(x), x.is_leaf, x._version - before

    check(f)


def test_detached_views_are_independent():
    def f(L):
        x = leaf(L)
        d = x.detach()
        v = d[0]
        v.mul_(2)  # writes x's data, not its history
        (x * 1).sum().backward()
        return v.requires_grad, grad_of(x)

    check(f)


def _raises_like_torch(fn, match):
    with pytest.raises(RuntimeError, match=match):
        fn(ember)
    if torch is not None:
        with pytest.raises(RuntimeError):
            fn(torch)


def test_setitem_on_a_leaf_is_refused():
    _raises_like_torch(lambda L: leaf(L).__setitem__(0, 1.0), "view of a leaf Variable")


def test_inplace_on_a_view_of_a_leaf_is_refused():
    _raises_like_torch(lambda L: leaf(L)[0].mul_(2), "view of a leaf Variable")
    _raises_like_torch(lambda L: leaf(L).t().add_(1), "view of a leaf Variable")


def test_inplace_on_a_no_grad_view_is_refused():
    def f(L):
        y = leaf(L) * 1
        with L.no_grad():
            v = y[0]
        v.mul_(2)

    _raises_like_torch(f, "no_grad mode")


def test_detach_inplace_of_a_view_is_refused():
    def f(L):
        y = leaf(L) * 1
        y[0].detach_()

    _raises_like_torch(f, "detach views in-place")


def test_version_counter_errors_across_views():
    def saved_then_base_written(L):
        y = leaf(L) * 1
        v = y[0]
        z = v.sin()  # saves v
        y.mul_(2)  # bumps the version v shares
        z.sum().backward()

    def saved_then_other_view_written(L):
        y = leaf(L) * 1
        z = y[1:].sin()
        y[2].add_(1)
        z.sum().backward()

    def inplace_view_op_bumps_version(L):
        x = leaf(L)
        y = x * 1
        z = y * x  # saves y (for x's gradient)
        y.t_()
        z.sum().backward()

    def augmented_assignment_reading_a_sibling_view(L):
        y = leaf(L) * 1
        y[1:, ::2] *= y[1:, 1::2]  # mul_ saves the sibling view; the setitem then writes y
        y.sum().backward()

    for fn in (saved_then_base_written, saved_then_other_view_written,
               inplace_view_op_bumps_version, augmented_assignment_reading_a_sibling_view):
        _raises_like_torch(fn, "modified by an inplace operation")


def test_ops_returning_self_are_no_new_node():
    x = leaf(ember)
    y = x * 1
    fn = y.grad_fn
    assert y.contiguous() is y and y.grad_fn is fn
    assert y._to_dtype(ember.float64) is y and y.grad_fn is fn


def test_no_grad_fast_path_unchanged():
    """Without autograd, views and writes keep working and record nothing."""
    b = ember.zeros(3, 4)
    v = b[1]
    v.fill_(2.0)
    b[:, 0] = ember.ones(3)
    assert not b.requires_grad and b.grad_fn is None and v.grad_fn is None
    assert b.sum().item() == 3 + 2 * 3


def test_as_strided_of_a_view_reaching_outside_it():
    """as_strided addresses storage: elements outside the viewed tensor get no gradient."""

    def f(L):
        x = leaf(L, np.arange(6.0))
        v = (x * 1)[2:]
        s = v.as_strided((4,), (1,), 0)  # reads two elements before v
        e = x.expand(2, 6).as_strided((3,), (2,), 1)
        ((s * L.tensor([1.0, 2.0, 3.0, 4.0])).sum() + e.sum()).backward()
        return (grad_of(x),)

    check(f)
