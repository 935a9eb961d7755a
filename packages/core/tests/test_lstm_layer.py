"""The fused LSTM layer op (_lstm_layer / _lstm_layer_backward): values against a NumPy loop,
gradients by finite differences (both directions, strided inputs), second derivatives through
the composite backward, and its bad-input errors. nn.LSTM's use of it is tested against torch
in packages/nn/tests/test_rnn.py."""

from __future__ import annotations

import ember
import numpy as np
import pytest
from ember import _C
from ember.autograd import gradcheck, gradgradcheck


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _reference(gx, h0, c0, w, reverse):
    """The recurrence step by step in NumPy: output (T, B, H), hn, cn."""
    T, H = gx.shape[0], h0.shape[1]
    out = np.zeros((T, *h0.shape), dtype=np.float64)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        a = gx[t] + h @ w.T
        i, f, g, o = (a[:, k * H:(k + 1) * H] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out[t] = h
    return out, h, c


def _inputs(T, B, H, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((T, B, 4 * H)).astype(dtype),
            rng.standard_normal((B, H)).astype(dtype),
            rng.standard_normal((B, H)).astype(dtype),
            (rng.standard_normal((4 * H, H)) * 0.4).astype(dtype))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("T,B,H", [(1, 1, 1), (4, 3, 5), (7, 32, 40)])
def test_values_match_numpy_loop(reverse, dtype, tol, T, B, H):
    arrays = _inputs(T, B, H, dtype)
    out, hn, cn, ws = _C._lstm_layer([ember.from_numpy(a) for a in arrays], reverse)
    ref_out, ref_h, ref_c = _reference(*arrays, reverse)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(hn.numpy(), ref_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(cn.numpy(), ref_c, rtol=tol, atol=tol)
    assert out.dtype == hn.dtype == ws.dtype == ember.from_numpy(arrays[0]).dtype
    assert tuple(ws.shape) == (T, B, 6 * H)


def test_large_hidden_runs_in_parallel_and_matches():
    # B * 4H * H above the threshold where each step is split over unit blocks
    arrays = _inputs(3, 16, 96)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        out, hn, cn, _ = _C._lstm_layer([ember.from_numpy(a) for a in arrays], False)
    finally:
        ember.set_num_threads(before)
    ref_out, ref_h, ref_c = _reference(*arrays, False)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_zero_steps_returns_initial_state(reverse):
    gx, h0, c0, w = _inputs(0, 2, 3)
    leaves = [ember.tensor(a, requires_grad=True) for a in (gx, h0, c0, w)]
    out, hn, cn, _ = _C._lstm_layer(leaves, reverse)
    assert tuple(out.shape) == (0, 2, 3)
    np.testing.assert_array_equal(hn.detach().numpy(), h0)
    np.testing.assert_array_equal(cn.detach().numpy(), c0)
    (hn.sum() + 2 * cn.sum()).backward()
    np.testing.assert_array_equal(leaves[1].grad.numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(leaves[2].grad.numpy(), np.full((2, 3), 2.0))
    np.testing.assert_array_equal(leaves[3].grad.numpy(), np.zeros((12, 3)))
    assert tuple(leaves[0].grad.shape) == (0, 2, 12)


def _leaves(T, B, H, seed=0, strided=False):
    gx, h0, c0, w = _inputs(T, B, H, seed=seed)
    if strided:  # h0 and w as transposed views of contiguous storage
        return [ember.tensor(gx, requires_grad=True),
                ember.tensor(np.ascontiguousarray(h0.T), requires_grad=True),
                ember.tensor(c0, requires_grad=True),
                ember.tensor(np.ascontiguousarray(w.T), requires_grad=True)]
    return [ember.tensor(a, requires_grad=True) for a in (gx, h0, c0, w)]


def _layer(reverse, strided):
    def f(gx, h0, c0, w):
        if strided:
            h0, w = h0.t(), w.t()
        out, hn, cn, _ = _C._lstm_layer([gx, h0, c0, w], reverse)
        return out, hn, cn
    return f


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("strided", [False, True])
def test_gradcheck(reverse, strided):
    assert gradcheck(_layer(reverse, strided), _leaves(3, 2, 3, strided=strided))


@pytest.mark.parametrize("reverse", [False, True])
def test_gradgradcheck_through_composite_backward(reverse):
    assert gradgradcheck(_layer(reverse, False), _leaves(2, 2, 2, seed=3))


def test_backward_matches_composite_exactly_enough():
    """The fused backward and the differentiable composite (used under create_graph) agree."""
    leaves = _leaves(5, 3, 4, seed=5)
    out, hn, cn = _layer(False, False)(*leaves)
    loss = (out * out).sum() + hn.sum() + (cn * 3).sum()
    fused = ember.autograd.grad(loss, leaves, retain_graph=True)
    composite = ember.autograd.grad(loss, leaves, create_graph=True)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_only_some_outputs_used():
    leaves = _leaves(4, 2, 3, seed=7)
    _, hn, _ = _layer(True, False)(*leaves)
    hn.sum().backward()
    assert all(t.grad is not None for t in leaves)
    assert gradcheck(lambda *a: _layer(True, False)(*a)[2], _leaves(3, 2, 2, seed=8))


def test_workspace_does_not_require_grad():
    out, hn, cn, ws = _C._lstm_layer(_leaves(2, 1, 2), False)
    assert out.requires_grad and hn.requires_grad and cn.requires_grad
    assert not ws.requires_grad


def test_bad_inputs():
    gx, h0, c0, w = (ember.from_numpy(a) for a in _inputs(2, 3, 4))
    with pytest.raises(RuntimeError, match=r"_lstm_layer: expected inputs \[gates_x, h0, c0, w_hh\]"):
        _C._lstm_layer([gx, h0, c0], False)
    with pytest.raises(RuntimeError, match=r"h0 and c0 must be \(3, 4\)"):
        _C._lstm_layer([gx, h0[:2], c0, w], False)
    with pytest.raises(RuntimeError, match=r"w_hh must be \(16, 4\)"):
        _C._lstm_layer([gx, h0, c0, w[:8]], False)
    with pytest.raises(RuntimeError, match=r"gates_x must be \(T, B, 4H\)"):
        _C._lstm_layer([gx[..., :6], h0, c0, w], False)
    with pytest.raises(TypeError, match="all inputs must have dtype float64, got float32"):
        _C._lstm_layer([gx, h0.float(), c0, w], False)
    with pytest.raises(TypeError, match="expected float32 or float64 tensors, got int64"):
        _C._lstm_layer([t.long() for t in (gx, h0, c0, w)], False)


# ---- the projecting form: inputs [x, h0, c0, w_hh, w_ih(, bias)] ------------------------------


def _proj_inputs(T, B, H, F, dtype=np.float64, seed=0, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, F)).astype(dtype)
    h0, c0 = (rng.standard_normal((B, H)).astype(dtype) for _ in range(2))
    w_hh = (rng.standard_normal((4 * H, H)) * 0.4).astype(dtype)
    w_ih = (rng.standard_normal((4 * H, F)) * 0.4).astype(dtype)
    b = rng.standard_normal(4 * H).astype(dtype)
    return (x, h0, c0, w_hh, w_ih, b) if bias else (x, h0, c0, w_hh, w_ih)


def _proj_reference(x, h0, c0, w_hh, w_ih, b=None, reverse=False):
    gx = x.astype(np.float64) @ w_ih.T.astype(np.float64)
    if b is not None:
        gx = gx + b
    return _reference(gx, h0, c0, w_hh, reverse)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 5e-5)])
# batch above and below the 16 rows of the AVX-512 kernel's tile, H off its 16 columns
@pytest.mark.parametrize("T,B,H,F", [(1, 1, 1, 1), (4, 3, 5, 7), (5, 19, 21, 13), (3, 16, 32, 48)])
def test_projecting_values_match_numpy(reverse, bias, dtype, tol, T, B, H, F):
    arrays = _proj_inputs(T, B, H, F, dtype, bias=bias)
    out, hn, cn, ws = _C._lstm_layer([ember.from_numpy(a) for a in arrays], reverse)
    ref_out, ref_h, ref_c = _proj_reference(*arrays, reverse=reverse)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(hn.numpy(), ref_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(cn.numpy(), ref_c, rtol=tol, atol=tol)
    assert tuple(ws.shape) == (T, B, 6 * H)


def _proj_layer(reverse):
    def f(*inputs):
        out, hn, cn, _ = _C._lstm_layer(list(inputs), reverse)
        return out, hn, cn
    return f


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_projecting_gradcheck(reverse, bias):
    leaves = [ember.tensor(a, requires_grad=True)
              for a in _proj_inputs(3, 2, 3, 4, seed=11, bias=bias)]
    assert gradcheck(_proj_layer(reverse), leaves)


def test_projecting_gradgradcheck_through_composite_backward():
    leaves = [ember.tensor(a, requires_grad=True) for a in _proj_inputs(2, 2, 2, 3, seed=12)]
    assert gradgradcheck(_proj_layer(True), leaves)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-4)])
@pytest.mark.parametrize("threads", [1, 2])
def test_projecting_fused_backward_matches_composite(dtype, tol, threads):
    """The fused backward (with _rnn_input_backward, and for float32 the AVX-512 products where
    the CPU has them) against the composite of ops that create_graph uses."""
    leaves = [ember.tensor(a, requires_grad=True)
              for a in _proj_inputs(6, 18, 20, 24, dtype, seed=13)]
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        out, hn, cn = _proj_layer(False)(*leaves)
        loss = (out * out).sum() + hn.sum() + (cn * 3).sum()
        fused = ember.autograd.grad(loss, leaves, retain_graph=True)
        composite = ember.autograd.grad(loss, leaves, create_graph=True)
    finally:
        ember.set_num_threads(before)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def test_projecting_zero_steps():
    leaves = [ember.tensor(a, requires_grad=True) for a in _proj_inputs(0, 2, 3, 4)]
    out, hn, cn, _ = _C._lstm_layer(leaves, False)
    assert tuple(out.shape) == (0, 2, 3)
    (hn.sum() + cn.sum()).backward()
    assert tuple(leaves[0].grad.shape) == (0, 2, 4)
    np.testing.assert_array_equal(leaves[4].grad.numpy(), np.zeros((12, 4)))
    np.testing.assert_array_equal(leaves[5].grad.numpy(), np.zeros(12))


def test_projecting_bad_inputs():
    x, h0, c0, w_hh, w_ih, b = (ember.from_numpy(a) for a in _proj_inputs(2, 3, 4, 5))
    with pytest.raises(RuntimeError, match=r"w_ih must be \(16, 5\) for x of shape \(2, 3, 5\)"):
        _C._lstm_layer([x, h0, c0, w_hh, w_ih[:, :4]], False)
    with pytest.raises(RuntimeError, match=r"bias must be \(16,\), got \(15,\)"):
        _C._lstm_layer([x, h0, c0, w_hh, w_ih, b[:15]], False)
    with pytest.raises(RuntimeError, match=r"x must be \(T, B, input_size\)"):
        _C._lstm_layer([x[0], h0, c0, w_hh, w_ih], False)
    with pytest.raises(RuntimeError, match=r"w_hh must be \(4H, H\)"):
        _C._lstm_layer([x, h0, c0, w_hh[:15], w_ih], False)
    with pytest.raises(TypeError, match="all inputs must have dtype float64, got float32"):
        _C._lstm_layer([x, h0, c0, w_hh, w_ih.float()], False)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-4)])
@pytest.mark.parametrize("N,G,F", [(0, 8, 3), (5, 8, 0), (37, 40, 19), (256, 64, 48)])
def test_rnn_input_backward_matches_numpy(dtype, tol, N, G, F):
    rng = np.random.default_rng(1)
    g, x, w = (rng.standard_normal(s).astype(dtype) for s in ((N, G), (N, F), (G, F)))
    gi, gw, gb = _C._rnn_input_backward(*(ember.from_numpy(a) for a in (g, x, w)))
    np.testing.assert_allclose(gi.numpy(), g @ w, rtol=tol, atol=tol)
    np.testing.assert_allclose(gw.numpy(), g.T @ x, rtol=tol, atol=tol)
    np.testing.assert_allclose(gb.numpy(), g.sum(0), rtol=tol, atol=tol)


def test_rnn_input_backward_bad_inputs():
    g, x, w = ember.randn(4, 6), ember.randn(4, 3), ember.randn(6, 3)
    with pytest.raises(RuntimeError, match=r"_rnn_input_backward: expected grad \(N, G\)"):
        _C._rnn_input_backward(g, x[:3], w)
    with pytest.raises(TypeError, match="all inputs must have dtype float32"):
        _C._rnn_input_backward(g, x.double(), w)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_float32_backward_matches_float64(threads, reverse):
    """Both forms in float32 (on the packed AVX-512 kernel where the CPU and OpenBLAS core call
    for it) against float64: a batch above the kernel's 16-row tile, a hidden size off its 16."""
    arrays = _proj_inputs(6, 19, 21, 13, seed=14)
    rng = np.random.default_rng(15)
    go, ghn, gcn = (rng.standard_normal(s) for s in ((6, 19, 21), (19, 21), (19, 21)))
    grads = []
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for dt in (np.float64, np.float32):
            leaves = [ember.tensor(a.astype(dt), requires_grad=True) for a in arrays]
            out, hn, cn, _ = _C._lstm_layer(leaves, reverse)
            loss = sum((y * ember.tensor(g.astype(dt))).sum()
                       for y, g in ((out, go), (hn, ghn), (cn, gcn)))
            loss.backward()
            grads.append([t.grad.numpy() for t in leaves])
    finally:
        ember.set_num_threads(before)
    for g64, g32 in zip(*grads):
        np.testing.assert_allclose(g32, g64, rtol=3e-4, atol=3e-4)


def test_unused_outputs_get_zeros_on_the_layers_device():
    """Backward through the output alone: the unused hn / cn get zero gradients on the layer's
    own device (meta here; CUDA alike), not on the default device."""
    leaves = [ember.randn(*s).to("meta").requires_grad_() for s in ((3, 2, 20), (2, 5), (2, 5),
                                                                     (20, 5))]
    out, _, _, _ = _C._lstm_layer(leaves, False)
    out.sum().backward()
    for t in leaves:
        assert t.grad.device.type == "meta" and tuple(t.grad.shape) == tuple(t.shape)
