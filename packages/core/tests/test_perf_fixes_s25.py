"""CPU kernel paths added for speed in session 25: the channels-last (NHWC) convolution on BLAS
(forward, input and weight gradients), the AVX2 group norm rows, the row-by-row short-row sums
(global average pooling, sum over a short last dim), the AVX2 8x8 float transpose of
x.t().contiguous() and the factories' direct fill. Values against explicit numbers, NumPy and
(when installed) torch; gradients by gradcheck in float64. Tiny shapes, no timing."""

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from core_helpers import needs_torch, torch

CL = ember.channels_last


def _rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _t(a, requires_grad=False):
    t = ember.tensor(a)
    return t.requires_grad_(True) if requires_grad else t


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _conv_ref(x, w, b, stride, padding, dilation, groups):
    """NumPy float64 reference of conv2d (NCHW)."""
    N, C, H, W = x.shape
    Co, Cg, KH, KW = w.shape
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw))
    xp[:, :, ph:ph + H, pw:pw + W] = x
    OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, Co, OH, OW))
    Cog = Co // groups
    for o in range(Co):
        g = o // Cog
        for kh in range(KH):
            for kw in range(KW):
                win = xp[:, g * Cg:(g + 1) * Cg, kh * dh:kh * dh + sh * (OH - 1) + 1:sh,
                         kw * dw:kw * dw + sw * (OW - 1) + 1:sw]
                out[:, o] += np.einsum("nchw,c->nhw", win, w[o, :, kh, kw])
        if b is not None:
            out[:, o] += b[o]
    return out


# (input shape, weight shape, stride, padding, dilation, groups, bias)
CONV_CASES = [
    ((2, 4, 5, 6), (3, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),     # 3x3 "same"
    ((2, 6, 7, 5), (4, 6, 1, 1), (1, 1), (0, 0), (1, 1), 1, True),     # 1x1: one product
    ((1, 4, 6, 6), (6, 2, 1, 1), (1, 1), (0, 0), (1, 1), 2, False),    # 1x1 groups
    ((2, 3, 7, 8), (5, 3, 1, 1), (2, 2), (0, 0), (1, 1), 1, True),     # 1x1 strided: columns
    ((2, 4, 8, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 1), 2, True),     # strides, groups
    ((1, 3, 9, 8), (4, 3, 3, 2), (1, 2), (2, 1), (2, 3), 1, False),    # dilation, padding
    ((3, 5, 4, 4), (2, 5, 2, 2), (1, 1), (0, 0), (1, 1), 1, True),     # 3 samples
    # 32+ channels per group: grouped convolutions on the channels-last kernels (fewer per
    # group take the planar ones)
    ((2, 64, 4, 3), (64, 32, 3, 3), (1, 1), (1, 1), (1, 1), 2, True),
    ((1, 64, 5, 4), (96, 32, 1, 1), (1, 1), (0, 0), (1, 1), 2, False),
    ((2, 64, 5, 5), (64, 32, 2, 3), (2, 1), (0, 1), (2, 1), 2, True),
    ((1, 32, 4, 4), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 2, True),  # 16 per group: planar
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}g{c[5]}")
def test_conv2d_channels_last_matches_reference(case, dtype):
    xs, ws, st, pd, dl, g, has_b = case
    x, w = _rand(xs, 1, dtype), _rand(ws, 2, dtype)
    b = _rand((ws[0],), 3, dtype) if has_b else None
    xe = _t(x).contiguous(memory_format=CL)
    out = F.conv2d(xe, _t(w), _t(b) if has_b else None, st, pd, dl, g)
    assert out.is_contiguous(memory_format=CL)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(_np(out), _conv_ref(x.astype(np.float64), w, b, st, pd, dl, g),
                               rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}g{c[5]}")
def test_conv2d_channels_last_backward_matches_torch(case, dtype):
    xs, ws, st, pd, dl, g, has_b = case
    x, w = _rand(xs, 4, dtype), _rand(ws, 5, dtype)
    b = _rand((ws[0],), 6, dtype) if has_b else None
    tx = torch.tensor(x).contiguous(memory_format=torch.channels_last).requires_grad_(True)
    tw = torch.tensor(w).requires_grad_(True)
    tb = torch.tensor(b).requires_grad_(True) if has_b else None
    ex = _t(x).contiguous(memory_format=CL).requires_grad_(True)
    ew = _t(w, True)
    eb = _t(b, True) if has_b else None
    to = torch.nn.functional.conv2d(tx, tw, tb, st, pd, dl, g)
    eo = F.conv2d(ex, ew, eb, st, pd, dl, g)
    go = _rand(tuple(to.shape), 7, dtype)
    to.backward(torch.tensor(go).contiguous(memory_format=torch.channels_last))
    eo.backward(_t(go).contiguous(memory_format=CL))
    tol = 1e-4 if dtype == "float32" else 1e-11
    np.testing.assert_allclose(_np(eo), to.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(ew.grad), tw.grad.numpy(), rtol=tol, atol=tol)
    if has_b:
        np.testing.assert_allclose(_np(eb.grad), tb.grad.numpy(), rtol=tol, atol=tol)
    assert ex.grad.is_contiguous(memory_format=CL)


@pytest.mark.parametrize("case", [CONV_CASES[0], CONV_CASES[2], CONV_CASES[4], CONV_CASES[5]],
                         ids=["3x3", "1x1_groups", "strided_groups", "dilation"])
def test_conv2d_channels_last_gradcheck(case):
    xs, ws, st, pd, dl, g, has_b = case
    x = _t(_rand(xs, 8)).contiguous(memory_format=CL).requires_grad_(True)
    w = _t(_rand(ws, 9), True)
    b = _t(_rand((ws[0],), 10), True) if has_b else None
    args = (x, w, b) if has_b else (x, w)

    def f(*a):
        return F.conv2d(a[0], a[1], a[2] if has_b else None, st, pd, dl, g)

    assert ember.autograd.gradcheck(f, args, eps=1e-6, atol=1e-5)


def test_conv2d_channels_last_explicit_values():
    # 1 sample, 2 channels, 2x2 image, a 1x1 kernel and a 2x2 one (no padding: one position)
    x = ember.tensor([[[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]])
    x = x.contiguous(memory_format=CL)
    w1 = ember.tensor([[[[2.0]], [[-1.0]]]])
    assert F.conv2d(x, w1).tolist() == [[[[-3.0, -2.0], [-1.0, 0.0]]]]
    w2 = ember.ones(1, 2, 2, 2)
    out = F.conv2d(x, w2, ember.tensor([0.5]))
    assert out.tolist() == [[[[36.5]]]]
    xg = x.detach().requires_grad_(True)
    F.conv2d(xg, w2).sum().backward()
    assert xg.grad.tolist() == [[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]]


@needs_torch
def test_conv3d_channels_last_matches_torch():
    x, w, b = _rand((2, 4, 3, 5, 4), 11, np.float32), _rand((3, 4, 2, 3, 2), 12, np.float32), \
        _rand((3,), 13, np.float32)
    tx = torch.tensor(x).contiguous(memory_format=torch.channels_last_3d).requires_grad_(True)
    tw = torch.tensor(w).requires_grad_(True)
    ex = _t(x).contiguous(memory_format=ember.channels_last_3d).requires_grad_(True)
    ew = _t(w, True)
    to = torch.nn.functional.conv3d(tx, tw, torch.tensor(b), 1, (1, 0, 1))
    eo = F.conv3d(ex, ew, _t(b), 1, (1, 0, 1))
    np.testing.assert_allclose(_np(eo), to.detach().numpy(), rtol=1e-4, atol=1e-4)
    to.sum().backward()
    eo.sum().backward()
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_np(ew.grad), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


# ---- group norm (AVX2 rows) -------------------------------------------------------------------

def _group_norm_ref(x, G, w, b, eps):
    N, C = x.shape[:2]
    xr = x.reshape(N, G, -1).astype(np.float64)
    mu = xr.mean(-1, keepdims=True)
    var = xr.var(-1, keepdims=True)
    y = ((xr - mu) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,G", [((2, 6, 5, 3), 3), ((3, 4, 17), 2), ((1, 8, 33), 8)])
def test_group_norm_forward_matches_numpy(shape, G, dtype):
    x = _rand(shape, 14, dtype) * 3 + 1
    w, b = _rand((shape[1],), 15, dtype), _rand((shape[1],), 16, dtype)
    out = F.group_norm(_t(x), G, _t(w), _t(b), 1e-5)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(_np(out), _group_norm_ref(x, G, w, b, 1e-5), rtol=tol, atol=tol)


def test_group_norm_explicit_values():
    x = ember.tensor([[[1.0, 3.0], [5.0, 7.0]]])  # one group of 4: mean 4, variance 5
    out = F.group_norm(x, 1, eps=0.0)
    s = 5 ** -0.5
    np.testing.assert_allclose(_np(out), [[[-3 * s, -s], [s, 3 * s]]], rtol=1e-6)


@needs_torch
def test_group_norm_matches_torch_and_grad():
    x = _rand((2, 8, 4, 5), 17)
    w, b = _rand((8,), 18), _rand((8,), 19)
    ex, ew, eb = _t(x, True), _t(w, True), _t(b, True)
    tx, tw, tb = (torch.tensor(a).requires_grad_(True) for a in (x, w, b))
    eo = F.group_norm(ex, 4, ew, eb)
    to = torch.nn.functional.group_norm(tx, 4, tw, tb)
    np.testing.assert_allclose(_np(eo), to.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = _rand((2, 8, 4, 5), 20)
    eo.backward(_t(g))
    to.backward(torch.tensor(g))
    np.testing.assert_allclose(_np(ex.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    assert ember.autograd.gradcheck(lambda a, c, d: F.group_norm(a, 2, c, d),
                                    (_t(_rand((1, 4, 3), 21), True), _t(_rand((4,), 22), True),
                                     _t(_rand((4,), 23), True)))


# ---- short-row sums: global average pooling, sum over a short last dim --------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adaptive_avg_pool_global_matches_numpy(dtype):
    # 19 planes (two groups of 8 and a remainder) of 7x7 = 49 elements (a vector tail)
    x = _rand((1, 19, 7, 7), 24, dtype)
    out = F.adaptive_avg_pool2d(_t(x), 1)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(_np(out), x.astype(np.float64).mean((2, 3), keepdims=True),
                               rtol=tol, atol=tol)
    rows = _rand((17, 13), 25, dtype)
    np.testing.assert_allclose(_np(_t(rows).sum(1)), rows.astype(np.float64).sum(1), rtol=tol,
                               atol=tol)


def test_adaptive_avg_pool_global_explicit_values():
    x = ember.arange(9 * 16, dtype=ember.float32).reshape(1, 9, 4, 4)
    # plane p holds 16p .. 16p + 15: mean 16p + 7.5 (exact in float)
    assert F.adaptive_avg_pool2d(x, 1).flatten().tolist() == [16.0 * p + 7.5 for p in range(9)]


# ---- transpose copy (AVX2 8x8 tiles) ----------------------------------------------------------

@pytest.mark.parametrize("shape", [(8, 8), (16, 24), (67, 45), (3, 70), (130, 9)])
def test_transpose_contiguous_float32(shape):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    out = _t(a).t().contiguous()
    assert out.is_contiguous()
    np.testing.assert_array_equal(_np(out), a.T)


def test_transpose_contiguous_batched_int32_and_channels_last():
    a = np.arange(2 * 20 * 11, dtype=np.int32).reshape(2, 20, 11)
    np.testing.assert_array_equal(_np(_t(a).transpose(1, 2).contiguous()), a.transpose(0, 2, 1))
    x = _rand((2, 12, 5, 3), 26, np.float32)
    xc = _t(x).contiguous(memory_format=CL)
    np.testing.assert_array_equal(_np(xc.contiguous()), x)


# ---- factories' direct fill -------------------------------------------------------------------

def test_small_factories_fill_values():
    assert ember.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert ember.ones(3, dtype=ember.int64).tolist() == [1, 1, 1]
    assert ember.full((2, 2), -2.5).tolist() == [[-2.5, -2.5], [-2.5, -2.5]]
    assert ember.full((5,), True).tolist() == [True] * 5
    z = ember.full((3,), 1 + 2j, dtype=ember.complex64)
    assert z.tolist() == [1 + 2j] * 3
    assert ember.full((2,), -0.0).tolist() == [-0.0, -0.0]
    assert str(ember.full((2,), -0.0)[0].item()) == "-0.0"
    assert ember.zeros_like(ember.ones(2, 2, dtype=ember.float16)).tolist() == [[0.0, 0.0]] * 2
    assert ember.ones(2).new_full((3,), 7).tolist() == [7.0] * 3
    assert ember.zeros(0).tolist() == []
    assert ember.zeros(3)._version == 0
    with pytest.raises(RuntimeError, match="fill_"):
        ember.full((2,), 300, dtype=ember.uint8)
    big = ember.full((100, 100), 3.0)  # past the direct fill's size: fill_ itself
    assert float(big.sum()) == 30000.0


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_conv_channels_last_equals_contiguous_to_rounding(dtype):
    # the channels-last product sums in another order than the contiguous kernels: equal to
    # rounding (test_memory_format_propagation no longer asks for the same bits)
    x = _t(_rand((2, 6, 7, 6), 27)).to(dtype)
    w = _t(_rand((4, 3, 3, 3), 28)).to(dtype)
    a = F.conv2d(x.contiguous(memory_format=CL), w, None, 1, 1, 1, 2)
    b = F.conv2d(x, w, None, 1, 1, 1, 2)
    assert a.is_contiguous(memory_format=CL) and b.is_contiguous()
    tol = 1e-5 if dtype == ember.float32 else 1e-13
    np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)
