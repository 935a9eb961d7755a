"""The fused GRU layer op (_gru_layer / _gru_layer_backward): values against a NumPy loop (with
and without b_hh), gradients by finite differences (both directions, strided inputs), second
derivatives through the composite backward, and its bad-input errors. nn.GRU's use of it is
tested against torch in packages/nn/tests/test_rnn.py."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import _C
from ember.autograd import gradcheck, gradgradcheck


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _reference(gx, h0, w, b=None, reverse=False):
    """The recurrence step by step in NumPy: output (T, B, H) and hn."""
    T, H = gx.shape[0], h0.shape[1]
    out = np.zeros((T, *h0.shape), dtype=np.float64)
    h = h0.astype(np.float64)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        a = h @ w.T + (0 if b is None else b)
        x_r, x_z, x_n = (gx[t][:, k * H:(k + 1) * H] for k in range(3))
        a_r, a_z, a_n = (a[:, k * H:(k + 1) * H] for k in range(3))
        r, z = _sigmoid(x_r + a_r), _sigmoid(x_z + a_z)
        n = np.tanh(x_n + r * a_n)
        h = (1 - z) * n + z * h
        out[t] = h
    return out, h


def _inputs(T, B, H, dtype=np.float64, seed=0, bias=True):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((T, B, 3 * H)).astype(dtype),
              rng.standard_normal((B, H)).astype(dtype),
              (rng.standard_normal((3 * H, H)) * 0.4).astype(dtype)]
    if bias:
        arrays.append(rng.standard_normal(3 * H).astype(dtype))
    return arrays


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("T,B,H", [(1, 1, 1), (4, 3, 5), (7, 32, 40)])
def test_values_match_numpy_loop(reverse, bias, dtype, tol, T, B, H):
    arrays = _inputs(T, B, H, dtype, bias=bias)
    out, hn, ws = _C._gru_layer([ember.from_numpy(a) for a in arrays], reverse)
    ref_out, ref_h = _reference(*arrays, reverse=reverse)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(hn.numpy(), ref_h, rtol=tol, atol=tol)
    assert out.dtype == hn.dtype == ws.dtype == ember.from_numpy(arrays[0]).dtype
    assert tuple(ws.shape) == (T, B, 4 * H)


def test_large_hidden_runs_in_parallel_and_matches():
    # B * 3H * H above the threshold where each step is split over unit blocks
    arrays = _inputs(3, 16, 96)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        leaves = [ember.tensor(a, requires_grad=True) for a in arrays]
        out, hn, _ = _C._gru_layer(leaves, False)
        (out * out).sum().backward()
    finally:
        ember.set_num_threads(before)
    ref_out, ref_h = _reference(*arrays)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, rtol=1e-12, atol=1e-12)
    composite = ember.autograd.grad((_layer(False, False)(*leaves)[0] ** 2).sum(), leaves,
                                    create_graph=True)
    for leaf, g in zip(leaves, composite):
        np.testing.assert_allclose(leaf.grad.numpy(), g.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_zero_steps_returns_initial_state():
    arrays = _inputs(0, 2, 3)
    out, hn, _ = _C._gru_layer([ember.from_numpy(a) for a in arrays], False)
    assert tuple(out.shape) == (0, 2, 3)
    np.testing.assert_array_equal(hn.numpy(), arrays[1])


def test_zero_steps_backward():
    leaves = [ember.tensor(a, requires_grad=True) for a in _inputs(0, 2, 3)]
    _, hn, _ = _C._gru_layer(leaves, False)
    (hn * 2).sum().backward()
    np.testing.assert_array_equal(leaves[1].grad.numpy(), np.full((2, 3), 2.0))
    assert not leaves[2].grad.numpy().any() and not leaves[3].grad.numpy().any()


def _leaves(T, B, H, seed=0, strided=False, bias=True):
    arrays = _inputs(T, B, H, seed=seed, bias=bias)
    if strided:  # h0 and w as transposed views of contiguous storage
        arrays[1], arrays[2] = np.ascontiguousarray(arrays[1].T), np.ascontiguousarray(arrays[2].T)
    return [ember.tensor(a, requires_grad=True) for a in arrays]


def _layer(reverse, strided):
    def f(gx, h0, w, *b):
        if strided:
            h0, w = h0.t(), w.t()
        out, hn, _ = _C._gru_layer([gx, h0, w, *b], reverse)
        return out, hn
    return f


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_gradcheck(reverse, strided, bias):
    assert gradcheck(_layer(reverse, strided), _leaves(3, 2, 3, strided=strided, bias=bias))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_gradgradcheck_through_composite_backward(reverse, bias):
    assert gradgradcheck(_layer(reverse, False), _leaves(2, 2, 2, seed=3, bias=bias))


@pytest.mark.parametrize("bias", [True, False])
def test_backward_matches_composite_exactly_enough(bias):
    """The fused backward and the differentiable composite (used under create_graph) agree."""
    leaves = _leaves(5, 3, 4, seed=5, bias=bias)
    out, hn = _layer(False, False)(*leaves)
    loss = (out * out).sum() + (hn * 3).sum()
    fused = ember.autograd.grad(loss, leaves, retain_graph=True)
    composite = ember.autograd.grad(loss, leaves, create_graph=True)
    assert len(fused) == len(leaves)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_forward_over_reverse_uses_composite():
    """A tangent on the incoming gradient flows through the (composite) backward; the gradient is
    linear in it, so its tangent is the gradient for the tangent."""
    import ember.autograd.forward_ad as fwAD

    leaves = _leaves(3, 2, 3, seed=11)
    out, _ = _layer(False, False)(*leaves)
    rng = np.random.default_rng(12)
    go, tgo = rng.standard_normal((3, 2, 3)), rng.standard_normal((3, 2, 3))
    with fwAD.dual_level():
        dual = fwAD.make_dual(ember.tensor(go), ember.tensor(tgo))
        grads = ember.autograd.grad(out, leaves, grad_outputs=dual, retain_graph=True)
        tangents = [fwAD.unpack_dual(g).tangent.numpy() for g in grads]
    expected = ember.autograd.grad(out, leaves, grad_outputs=ember.tensor(tgo))
    for a, b in zip(tangents, expected):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-12, atol=1e-13)

def test_backward_op_returns_bias_grad_as_batch_sum():
    """grad_b_hh is the hidden-side gate gradient summed over steps and batch; for r and z it
    equals grad_gates_x, for n it is grad_gates_x scaled by r."""
    arrays = _inputs(3, 2, 4, seed=9)
    out, hn, ws = _C._gru_layer([ember.from_numpy(a) for a in arrays], False)
    rng = np.random.default_rng(10)
    go, ghn = rng.standard_normal((3, 2, 4)), rng.standard_normal((2, 4))
    ggx, gh0, gw, gb = _C._gru_layer_backward(ember.from_numpy(go), ember.from_numpy(ghn),
                                              ember.from_numpy(arrays[1]),
                                              ember.from_numpy(arrays[2]), out, ws, False)
    r = ws.numpy()[..., :4]
    expected = np.concatenate([ggx.numpy()[..., :8], ggx.numpy()[..., 8:] * r], -1).sum((0, 1))
    np.testing.assert_allclose(gb.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert tuple(gh0.shape) == (2, 4) and tuple(gw.shape) == (12, 4)


def test_only_some_outputs_used():
    leaves = _leaves(4, 2, 3, seed=7)
    _, hn = _layer(True, False)(*leaves)
    hn.sum().backward()
    assert all(t.grad is not None for t in leaves)
    assert gradcheck(lambda *a: _layer(True, False)(*a)[1], _leaves(3, 2, 2, seed=8))


def test_workspace_does_not_require_grad():
    out, hn, ws = _C._gru_layer(_leaves(2, 1, 2), False)
    assert out.requires_grad and hn.requires_grad
    assert not ws.requires_grad


def test_bad_inputs():
    gx, h0, w, b = (ember.from_numpy(a) for a in _inputs(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"_gru_layer: expected inputs \[gates_x, h0, w_hh\] or"):
        _C._gru_layer([gx, h0], False)
    with pytest.raises(RuntimeError, match=r"_gru_layer: h0 must be \(3, 4\)"):
        _C._gru_layer([gx, h0[:2], w, b], False)
    with pytest.raises(RuntimeError, match=r"w_hh must be \(12, 4\)"):
        _C._gru_layer([gx, h0, w[:8], b], False)
    with pytest.raises(RuntimeError, match=r"b_hh must be \(12,\), got \(4,\)"):
        _C._gru_layer([gx, h0, w, b[:4]], False)
    with pytest.raises(RuntimeError, match=r"gates_x must be \(T, B, 3H\)"):
        _C._gru_layer([gx[..., :8], h0, w], False)
    with pytest.raises(TypeError, match="all inputs must have dtype float64, got float32"):
        _C._gru_layer([gx, h0, w, b.float()], False)
    with pytest.raises(TypeError, match="expected float32 or float64 tensors, got int64"):
        _C._gru_layer([t.long() for t in (gx, h0, w)], False)
    out, _, ws = _C._gru_layer([gx, h0, w, b], False)
    with pytest.raises(RuntimeError, match="_gru_layer_backward: gradient or workspace shapes"):
        _C._gru_layer_backward(out, h0, h0, w, out, ws[..., :4], False)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_float32_backward_matches_float64(threads, reverse):
    """float32 (on the packed AVX-512 kernel where matmul would take it too) against float64:
    a batch above the kernel's 16-row tile and a hidden size off its 16 columns."""
    arrays = _inputs(6, 19, 21, seed=9)
    rng = np.random.default_rng(10)
    go, ghn = rng.standard_normal((6, 19, 21)), rng.standard_normal((19, 21))
    grads = []
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for dt in (np.float64, np.float32):
            leaves = [ember.tensor(a.astype(dt), requires_grad=True) for a in arrays]
            out, hn, _ = _C._gru_layer(leaves, reverse)
            ((out * ember.tensor(go.astype(dt))).sum() + (hn * ember.tensor(ghn.astype(dt))).sum()
             ).backward()
            grads.append([t.grad.numpy() for t in leaves])
    finally:
        ember.set_num_threads(before)
    for g64, g32 in zip(*grads):
        np.testing.assert_allclose(g32, g64, rtol=2e-4, atol=2e-4)
