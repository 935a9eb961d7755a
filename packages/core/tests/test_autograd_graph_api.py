"""``ember.autograd.graph``'s remaining public names, against ``torch.autograd.graph``:
``disable_saved_tensors_hooks``, ``increment_version``, ``GradientEdge``/``get_gradient_edge``
(also as ``inputs=`` of ``grad`` and ``backward``) and ``allow_mutation_on_saved_tensors``."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember.autograd import graph as eg

try:
    import torch
    from torch.autograd import graph as tg
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def _both():
    return [(ember, eg)] + ([(torch, tg)] if torch is not None else [])


def _identity_hooks(G):
    return G.saved_tensors_hooks(lambda t: t, lambda t: t)


# ---- disable_saved_tensors_hooks ----------------------------------------------------------------

@pytest.mark.parametrize("lib", ["ember", "torch"])
def test_disable_saved_tensors_hooks(lib):
    if lib == "torch" and torch is None:
        pytest.skip("torch not installed")
    M, G = (ember, eg) if lib == "ember" else (torch, tg)
    x = M.ones(2, requires_grad=True)
    with G.disable_saved_tensors_hooks("outer message"):
        with pytest.raises(RuntimeError, match="^outer message$"):
            with _identity_hooks(G):
                pass
        with pytest.raises(RuntimeError, match="^outer message$"):
            with G.save_on_cpu():
                pass
        with G.disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="^inner$"):
                with _identity_hooks(G):
                    pass
        with pytest.raises(RuntimeError, match="^outer message$"):  # restored after the inner
            with _identity_hooks(G):
                pass
        y = (x * x).sum()  # autograd itself still works
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with _identity_hooks(G):  # enabled again after the block
        pass
    # entering it while hooks are active raises its message
    with _identity_hooks(G):
        with pytest.raises(RuntimeError, match="^busy$"):
            with G.disable_saved_tensors_hooks("busy"):
                pass


def test_disable_saved_tensors_hooks_blocks_non_reentrant_checkpoint():
    from ember.utils.checkpoint import checkpoint

    x = ember.ones(2, requires_grad=True)
    with eg.disable_saved_tensors_hooks("no checkpoint here"):
        with pytest.raises(RuntimeError, match="no checkpoint here"):
            checkpoint(lambda t: t.sin(), x, use_reentrant=False)
    if torch is not None:
        from torch.utils.checkpoint import checkpoint as tcheckpoint

        with tg.disable_saved_tensors_hooks("no checkpoint here"):
            with pytest.raises(RuntimeError, match="no checkpoint here"):
                tcheckpoint(lambda t: t.sin(), torch.ones(2, requires_grad=True),
                            use_reentrant=False)


# ---- increment_version --------------------------------------------------------------------------

def test_increment_version():
    for M, G in _both():
        x = M.tensor([1.0, -0.0, float("nan")])
        v = x[1:]
        G.increment_version(x)
        assert x._version == 1 and v._version == 1
        G.increment_version([x, v])
        assert x._version == 3
        np.testing.assert_array_equal(x.numpy(), np.array([1.0, -0.0, np.nan], np.float32))
        assert np.signbit(x.numpy()[1])  # data untouched (-0.0 kept)
        leaf = M.ones(2, requires_grad=True)
        G.increment_version(leaf)
        assert leaf._version == 1
        # backward notices a "hidden" change of a saved tensor
        a = M.ones(2, requires_grad=True)
        b = a * 1
        c = (b * b).sum()
        G.increment_version(b)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            c.backward()
        for dtype in (M.int64, M.bool):
            t = M.zeros(3, dtype=dtype)
            G.increment_version(t)
            assert t._version == 1 and t.tolist() == M.zeros(3, dtype=dtype).tolist()


# ---- gradient edges -------------------------------------------------------------------------------

def test_get_gradient_edge():
    for M, G in _both():
        x = M.ones(2, requires_grad=True)
        y = x * 2
        e = G.get_gradient_edge(y)
        assert isinstance(e, G.GradientEdge) and isinstance(e, tuple)
        assert e.node is y.grad_fn and e.output_nr == 0 and e.ownership_token is None
        ex = G.get_gradient_edge(x)
        assert ex.node.name() == "torch::autograd::AccumulateGrad" if M is torch else \
            ex.node.name() == "AccumulateGrad"
        assert ex.output_nr == 0
        assert (x * 3).grad_fn.next_functions[0][0] is ex.node
        a, b = M.ones(3, requires_grad=True).unbind(0)[:2]
        assert G.get_gradient_edge(b).output_nr == 1 and G.get_gradient_edge(a).output_nr == 0
        with pytest.raises(RuntimeError, match="does not require gradients"):
            G.get_gradient_edge(M.ones(1))
        assert G.GradientEdge._fields == ("node", "output_nr", "ownership_token")


def _edge_grads(M, G):
    x = M.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = (y * y).sum()
    g_nonleaf = M.autograd.grad(z, inputs=[G.get_gradient_edge(y)], retain_graph=True)[0]
    g_single = M.autograd.grad(z, inputs=G.get_gradient_edge(y), retain_graph=True)[0]
    g_leaf, g_t = M.autograd.grad(z, inputs=[G.get_gradient_edge(x), x], retain_graph=True)
    z.backward(inputs=[G.get_gradient_edge(x)])
    return [g.tolist() for g in (g_nonleaf, g_single, g_leaf, g_t, x.grad)]


def test_gradient_edges_as_inputs():
    assert _edge_grads(ember, eg) == [[4.0, 8.0], [4.0, 8.0], [8.0, 16.0], [8.0, 16.0],
                                      [8.0, 16.0]]
    if torch is not None:
        assert _edge_grads(ember, eg) == _edge_grads(torch, tg)


def _edge_outputs(M, G):
    # the weight step of a split backward: from the gradient of an activation (given with its
    # edge as the output) to the weight, then backward() from the same edge
    x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = M.tensor([2.0, -1.0, 0.5], requires_grad=True)
    h = x * w
    y = (h * h).sum()
    gh = M.autograd.grad(y, [h], retain_graph=True)[0]
    gw = M.autograd.grad([G.get_gradient_edge(h)], [w], grad_outputs=[gh],
                         retain_graph=True)[0]
    gx = M.autograd.grad(G.get_gradient_edge(h), x, grad_outputs=gh, retain_graph=True)[0]
    M.autograd.backward([G.get_gradient_edge(h)], [gh], inputs=[w])
    return gw.tolist(), gx.tolist(), w.grad.tolist(), x.grad


def test_gradient_edges_as_outputs():
    gw, gx, wgrad, xgrad = _edge_outputs(ember, eg)
    # d/dw (x w)^2 = 2 x^2 w, d/dx = 2 w^2 x
    assert gw == [4.0, -8.0, 9.0] and wgrad == gw and xgrad is None
    assert gx == [8.0, 4.0, 1.5]
    if torch is not None:
        assert _edge_outputs(torch, tg) == (gw, gx, wgrad, None)


def test_unresolvable_edge_raises():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    z = y.sum()
    bad = eg.GradientEdge(y.grad_fn, 1)  # an output the node does not have / built by hand
    with pytest.raises(RuntimeError, match="GradientEdge"):
        ember.autograd.grad(z, inputs=[bad])


# ---- allow_mutation_on_saved_tensors -----------------------------------------------------------

def _mutation_program(M, G):
    with G.allow_mutation_on_saved_tensors() as ctx:
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.clone()
        z = y * y  # saves y (twice)
        w = y.sin()  # saves y
        y.mul_(3)
        y[0] = 10.0  # a second change: the first copy stays
        v = y[1:]
        u = v.exp()  # saves the view's result
        v.add_(1)  # a change through a view of saved memory
        (z.sum() + w.sum() + u.sum()).backward()
    return x.grad.tolist(), type(ctx).__name__


def test_allow_mutation_on_saved_tensors():
    grad, name = _mutation_program(ember, eg)
    x = np.array([1.0, 2.0, 3.0])
    y_after_mul = 3 * x
    y_after_mul[0] = 10.0
    du = np.zeros(3)
    du[1:] = np.exp(y_after_mul[1:]) * 3  # u = exp(y[1:]) before v.add_, y = 3x there
    expect = 2 * x + np.cos(x) + du
    np.testing.assert_allclose(grad, expect, rtol=1e-5)
    assert name == "_AllowMutationOnSavedContext"
    if torch is not None:
        tgrad, tname = _mutation_program(torch, tg)
        np.testing.assert_allclose(grad, tgrad, rtol=1e-5)
        assert name == tname


def test_allow_mutation_backward_outside_raises_and_plain_mutation_still_raises():
    for M, G in _both():
        with G.allow_mutation_on_saved_tensors():
            a = M.ones(2, requires_grad=True).clone()
            z = a.sin()
        with pytest.raises(AssertionError, match="Trying to backward outside of the "
                                               "'allow_mutation_on_saved_tensors' context"):
            z.sum().backward()
        a = M.ones(2, requires_grad=True).clone()
        z = a.sin()
        with M.no_grad():
            a.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


@needs_torch
def test_public_names_of_torch_exist():
    missing = [n for n in tg.__all__ if not hasattr(eg, n)]
    assert set(missing) <= {"region_activation_memory_budget",
                            "set_warn_on_accumulate_grad_stream_mismatch",
                            "set_override_stale_capture_stream"}, missing
