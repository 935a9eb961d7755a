"""Fast paths added for the op sweep (benchmarks/cases_op_sweep.py): channels-last pooling
computed in its layout (max / avg / adaptive, forward and max-pool backward), topk by a bounded
heap, the tiled copy of a transposed tensor, stack as one cat and clip_grad_norm_'s overheads.
Each is checked against explicit values, the contiguous (general) path, and torch when present.
"""

from __future__ import annotations

import math

import ember
import ember.nn.functional as F
import numpy as np
import pytest
from ember.autograd import gradcheck

CL = ember.channels_last


def _np(t):
    return np.asarray(t.detach().tolist())


def _cl(x):
    return x.contiguous(memory_format=CL)


def _rand(*shape, seed=0, dtype=ember.float32):
    rng = np.random.default_rng(seed)
    return ember.tensor(rng.standard_normal(shape)).to(dtype)


# ---- channels-last pooling ------------------------------------------------------------------


def test_max_pool2d_channels_last_explicit_values_and_layout():
    # one sample, 2 channels of 4x4: channel 1 is channel 0 negated
    a = ember.arange(16.0).reshape(1, 1, 4, 4)
    x = _cl(ember.cat([a, -a], 1))
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    assert out.is_contiguous(memory_format=CL) and idx.is_contiguous(memory_format=CL)
    assert out.tolist() == [[[[5.0, 7.0], [13.0, 15.0]], [[-0.0, -2.0], [-8.0, -10.0]]]]
    assert idx.tolist() == [[[[5, 7], [13, 15]], [[0, 2], [8, 10]]]]


def test_max_pool2d_channels_last_ties_and_nan_as_contiguous():
    x = ember.zeros(2, 3, 5, 5)  # all ties: the first element of each window wins
    x[0, 1, 2, 2] = float("nan")
    x[1, 2, 0, 0] = float("nan")
    x[1, 2, 0, 1] = float("nan")  # two NaNs in one window: the last one's index
    for args in [(2,), (3, 2, 1), (3, 1, 1), (2, 2, 0, 2), (3, 2, 1, 1, True)]:
        ref, ridx = F.max_pool2d(x, *args, return_indices=True)
        out, idx = F.max_pool2d(_cl(x), *args, return_indices=True)
        np.testing.assert_array_equal(_np(out), _np(ref))
        assert idx.tolist() == ridx.tolist(), args
        assert out.is_contiguous(memory_format=CL)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_pools_channels_last_match_contiguous(dtype):
    x = _rand(3, 7, 9, 11, seed=1, dtype=dtype)
    xc = _cl(x)
    calls = [
        lambda t: F.max_pool2d(t, 3, 2, 1),
        lambda t: F.max_pool2d(t, (2, 3), (1, 2), (1, 0), (2, 1), ceil_mode=True),
        lambda t: F.avg_pool2d(t, 2),
        lambda t: F.avg_pool2d(t, 3, 2, 1),
        lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False, ceil_mode=True),
        lambda t: F.avg_pool2d(t, 3, 2, 1, divisor_override=5),
        lambda t: F.adaptive_avg_pool2d(t, 1),
        lambda t: F.adaptive_avg_pool2d(t, (4, 5)),
        lambda t: F.adaptive_max_pool2d(t, (4, 5)),
    ]
    for i, f in enumerate(calls):
        ref, out = f(x), f(xc)
        np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-6, atol=1e-6, err_msg=str(i))
        assert out.is_contiguous(memory_format=CL), i


def test_avg_pool2d_channels_last_explicit_values():
    a = ember.arange(16.0).reshape(1, 1, 4, 4)
    x = _cl(ember.cat([a, 2 * a], 1))
    assert F.avg_pool2d(x, 2).tolist() == [[[[2.5, 4.5], [10.5, 12.5]], [[5.0, 9.0], [21.0, 25.0]]]]
    # padded corner window: 4 real elements of 9 (count_include_pad divides by 9)
    out = F.avg_pool2d(x, 3, 2, 1)
    assert out[0, 0, 0, 0].item() == pytest.approx((0 + 1 + 4 + 5) / 9)
    out = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    assert out[0, 0, 0, 0].item() == pytest.approx(2.5)
    assert F.adaptive_avg_pool2d(x, 1).flatten().tolist() == [7.5, 15.0]


def test_max_pool3d_channels_last_matches_contiguous():
    x = _rand(2, 4, 5, 6, 7, seed=2)
    ref, ridx = F.max_pool3d(x, 3, 2, 1, return_indices=True)
    out, idx = F.max_pool3d(x.contiguous(memory_format=ember.channels_last_3d), 3, 2, 1,
                            return_indices=True)
    np.testing.assert_array_equal(_np(out), _np(ref))
    assert idx.tolist() == ridx.tolist()


def test_channels_last_pool_gradients_float64():
    x = _cl(_rand(2, 3, 6, 5, seed=3, dtype=ember.float64)).requires_grad_(True)
    assert gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1), [x])
    assert gradcheck(lambda t: F.max_pool2d(t, 2, 1), [x])
    assert gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, count_include_pad=False), [x])
    assert gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), [x])
    assert gradcheck(lambda t: F.adaptive_max_pool2d(t, (2, 3)), [x])


def test_max_pool2d_channels_last_backward_values_and_layout():
    a = ember.arange(16.0).reshape(1, 1, 4, 4)
    x = _cl(ember.cat([a, -a], 1)).requires_grad_(True)
    F.max_pool2d(x, 3, 1, 1).sum().backward()
    assert x.grad.is_contiguous(memory_format=CL)
    # channel 0: 15 is the max of the 4 windows around it, 14 and 11 of 2, 5 of 1 ...
    assert x.grad[0, 0].tolist() == [[0, 0, 0, 0], [0, 1, 1, 2], [0, 1, 1, 2], [0, 2, 2, 4]]
    assert x.grad[0, 1].tolist() == [[4, 2, 2, 0], [2, 1, 1, 0], [2, 1, 1, 0], [0, 0, 0, 0]]


def test_channels_last_pools_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(4).standard_normal((2, 5, 9, 8))
    for name, args in [("max_pool2d", (3, 2, 1)), ("avg_pool2d", (3, 2, 1)),
                       ("adaptive_avg_pool2d", ((3, 4),)), ("adaptive_max_pool2d", ((3, 4),))]:
        xe = _cl(ember.tensor(a)).requires_grad_(True)
        xt = torch.tensor(a).contiguous(memory_format=torch.channels_last).requires_grad_(True)
        ye = getattr(F, name)(xe, *args)
        yt = getattr(torch.nn.functional, name)(xt, *args)
        np.testing.assert_allclose(_np(ye), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
        g = np.random.default_rng(5).standard_normal(tuple(yt.shape))
        ye.backward(ember.tensor(g))
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(_np(xe.grad), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
        assert xe.grad.is_contiguous(memory_format=CL) == xt.grad.is_contiguous(
            memory_format=torch.channels_last), name


# ---- topk by a bounded heap -----------------------------------------------------------------


def test_topk_heap_values_ties_and_nan():
    x = ember.tensor([1.0, 5.0, 3.0, 5.0] + [0.0] * 60 + [float("nan"), 4.0])
    v, i = ember.topk(x, 3)
    assert math.isnan(v[0].item()) and v[1:].tolist() == [5.0, 5.0]
    assert i.tolist() == [64, 1, 3]  # NaN largest; equal values by index
    v, i = ember.topk(x, 3, largest=False)
    assert v.tolist() == [0.0, 0.0, 0.0] and i.tolist() == [4, 5, 6]


@pytest.mark.parametrize("largest", [True, False])
def test_topk_heap_matches_sort(largest):
    rng = np.random.default_rng(6)
    a = rng.integers(0, 50, (7, 300, 5)).astype(np.float32)  # many ties
    x = ember.tensor(a)
    for dim, k in [(1, 1), (1, 10), (1, 18), (-1, 2)]:
        v, i = ember.topk(x, k, dim, largest)
        sv, si = ember.sort(x, dim, descending=largest, stable=True)
        n = [slice(None)] * 3
        n[dim] = slice(0, k)
        assert v.tolist() == sv[tuple(n)].tolist()
        assert i.tolist() == si[tuple(n)].tolist()


def test_topk_heap_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(7).standard_normal((4, 2000)).astype(np.float32)
    a[1, ::3] = a[1, 0]  # ties
    for k, largest in [(5, True), (100, False)]:
        v, i = ember.topk(ember.tensor(a), k, largest=largest)
        tv, ti = torch.topk(torch.tensor(a), k, largest=largest)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        # ties may pick other indices in torch; the values at ember's indices must match
        np.testing.assert_array_equal(np.take_along_axis(a, np.asarray(i.tolist()), 1), tv.numpy())


# ---- transposed copy ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.int8,
                                   ember.int64, ember.bool])
def test_transposed_contiguous_copy(dtype):
    a = np.arange(37 * 53).reshape(37, 53) % 7
    x = ember.tensor(a).to(dtype)
    y = x.t().contiguous()
    assert y.is_contiguous() and y.shape == (53, 37)
    np.testing.assert_array_equal(_np(y), (a.T % 7 if dtype != ember.bool else a.T != 0))
    b = np.arange(3 * 20 * 17).reshape(3, 20, 17) % 100  # fits every dtype
    z = ember.tensor(b).to(dtype).transpose(1, 2).contiguous()
    np.testing.assert_array_equal(_np(z), b.transpose(0, 2, 1) if dtype != ember.bool
                                  else b.transpose(0, 2, 1) != 0)


def test_transposed_copy_strided_and_sliced_sources():
    a = np.arange(4 * 40 * 30, dtype=np.float32).reshape(4, 40, 30)
    x = ember.tensor(a)
    # batch dims not dense (a slice of the batch) and a sliced matrix: the general path
    np.testing.assert_array_equal(_np(x[::2].transpose(1, 2).contiguous()),
                                  a[::2].transpose(0, 2, 1))
    np.testing.assert_array_equal(_np(x[1].t()[3:, 5:].contiguous()), a[1].T[3:, 5:])
    out = ember.empty(30, 40)
    out.copy_(x[2].t())
    np.testing.assert_array_equal(_np(out), a[2].T)
    assert x.transpose(1, 2).contiguous()[0, 0, :4].tolist() == [0.0, 30.0, 60.0, 90.0]
    assert x.permute(2, 1, 0).contiguous()[0, 0].tolist() == [0.0, 1200.0, 2400.0, 3600.0]


# ---- stack ----------------------------------------------------------------------------------


def test_stack_values_dims_and_gradients():
    xs = [ember.arange(6.0).reshape(2, 3) + 10 * i for i in range(3)]
    assert ember.stack(xs).tolist()[1] == [[10.0, 11.0, 12.0], [13.0, 14.0, 15.0]]
    assert ember.stack(xs, 1).tolist()[0] == [[0.0, 1.0, 2.0], [10.0, 11.0, 12.0],
                                              [20.0, 21.0, 22.0]]
    assert ember.stack(xs, 2).tolist()[0][0] == [0.0, 10.0, 20.0]
    assert ember.stack(xs, -1).shape == (2, 3, 3)
    assert ember.stack([ember.zeros(0, 2)] * 2).shape == (2, 0, 2)
    s = ember.stack(xs, 1)
    assert s._base is None and s.is_contiguous() and s.stride() == (9, 3, 1)  # fresh, as torch
    x64 = [_rand(3, 2, seed=i, dtype=ember.float64).requires_grad_(True) for i in range(3)]
    for d in (0, 1, 2):
        assert gradcheck(lambda *t: ember.stack(list(t), d), x64)
    w = ember.ones(3, requires_grad=True)
    (ember.stack([w, 2 * w], 0) * ember.tensor([[1.0, 2, 3], [4, 5, 6]])).sum().backward()
    assert w.grad.tolist() == [9.0, 12.0, 15.0]


def test_stack_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(8).standard_normal((5, 4, 3))
    for d in range(-3, 3):
        np.testing.assert_array_equal(_np(ember.stack([ember.tensor(r) for r in a], d)),
                                      torch.stack([torch.tensor(r) for r in a], d).numpy())


# ---- clip_grad_norm_ ------------------------------------------------------------------------


def test_clip_grad_norm_values_mixed_dtypes():
    from ember.nn.utils import clip_grad_norm_

    p1, p2 = ember.nn.Parameter(ember.zeros(2)), ember.nn.Parameter(ember.zeros(1, dtype=ember.float64))
    p1.grad, p2.grad = ember.tensor([3.0, 4.0]), ember.tensor([12.0], dtype=ember.float64)
    total = clip_grad_norm_([p1, p2], 1.0)
    assert total.item() == pytest.approx(13.0) and total.dtype == ember.float64
    assert p1.grad.tolist() == pytest.approx([3 / 13, 4 / 13], rel=1e-5)
    assert p2.grad.tolist() == pytest.approx([12 / 13], rel=1e-5)
    assert not total.requires_grad
    p1.grad = ember.tensor([3.0, 4.0])
    assert clip_grad_norm_([p1], 1.0, norm_type=math.inf).item() == 4.0
    assert p1.grad.tolist() == pytest.approx([0.75, 1.0], rel=1e-5)


# ---- group_norm statistics (vectorized lanes) -----------------------------------------------


def test_group_norm_values_and_statistics():
    x = ember.tensor([[[1.0, 2.0], [3.0, 4.0]], [[10.0, 10.0], [10.0, 14.0]]])  # (2, 2, 2)
    y = F.group_norm(x, 1, eps=0.0)
    s = math.sqrt(1.25)
    np.testing.assert_allclose(_np(y[0]), [[-1.5 / s, -0.5 / s], [0.5 / s, 1.5 / s]], rtol=1e-6)
    np.testing.assert_allclose(_np(y[1]).ravel(), [-1 / math.sqrt(3)] * 3 + [math.sqrt(3)],
                               rtol=1e-6)
    # 5000-element groups (past one 4096 chunk) far from 0: statistics stay accurate in float32
    a = 1000.0 + np.random.default_rng(9).standard_normal((3, 4, 50, 50))
    y = F.group_norm(ember.tensor(a).to(ember.float32), 2)
    g = a.reshape(3, 2, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(a.shape)
    np.testing.assert_allclose(_np(y), ref, atol=2e-3)


def test_group_norm_gradients_float64_and_torch():
    x = _rand(2, 6, 3, 4, seed=10, dtype=ember.float64).requires_grad_(True)
    w = _rand(6, seed=11, dtype=ember.float64).requires_grad_(True)
    b = _rand(6, seed=12, dtype=ember.float64).requires_grad_(True)
    assert gradcheck(lambda *t: F.group_norm(t[0], 3, t[1], t[2]), [x, w, b])
    torch = pytest.importorskip("torch")
    xt = torch.tensor(_np(x))
    np.testing.assert_allclose(_np(F.group_norm(x, 3, w, b)),
                               torch.nn.functional.group_norm(xt, 3, torch.tensor(_np(w)),
                                                              torch.tensor(_np(b))).numpy(),
                               rtol=1e-10, atol=1e-10)


# ---- batch_norm on channels-last input ------------------------------------------------------


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_channels_last_matches_contiguous(training):
    x = _rand(4, 5, 6, 7, seed=13) * 3 + 2
    w, b = _rand(5, seed=14), _rand(5, seed=15)
    rm1, rv1 = ember.zeros(5) + 0.5, ember.ones(5) * 2
    rm2, rv2 = rm1.clone(), rv1.clone()
    ref = F.batch_norm(x, rm1, rv1, w, b, training, 0.1, 1e-5)
    out = F.batch_norm(_cl(x), rm2, rv2, w, b, training, 0.1, 1e-5)
    assert out.is_contiguous(memory_format=CL)
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(rm2), _np(rm1), rtol=1e-6)
    np.testing.assert_allclose(_np(rv2), _np(rv1), rtol=1e-6)


def test_batch_norm_channels_last_explicit_values_and_gradients():
    # channel 0 holds 0..7, channel 1 holds 2 everywhere; batch 2 of 2x2
    a = np.stack([np.arange(8.0).reshape(2, 2, 2), np.full((2, 2, 2), 2.0)], 1)
    x = _cl(ember.tensor(a))
    rm, rv = ember.zeros(2, dtype=ember.float64), ember.ones(2, dtype=ember.float64)
    y = F.batch_norm(x, rm, rv, None, None, True, 1.0, 0.0)
    sd = math.sqrt(5.25)  # population std of 0..7
    np.testing.assert_allclose(_np(y[:, 0]).ravel(), (np.array([0, 1, 2, 3, 4, 5, 6, 7]) - 3.5) / sd,
                               rtol=1e-12)
    assert np.all(np.isnan(_np(y[:, 1])))  # 0 / sqrt(0 + eps 0): as torch, NaN
    assert rm.tolist() == [3.5, 2.0] and rv.tolist() == pytest.approx([6.0, 0.0])  # unbiased
    x64 = _cl(_rand(3, 4, 3, 2, seed=16, dtype=ember.float64)).requires_grad_(True)
    w64 = _rand(4, seed=17, dtype=ember.float64).requires_grad_(True)
    assert gradcheck(lambda t, w: F.batch_norm(t, None, None, w, None, True), [x64, w64])


def test_batch_norm_channels_last_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(18).standard_normal((3, 4, 5, 6)).astype(np.float32)
    xe, xt = _cl(ember.tensor(a)), torch.tensor(a).contiguous(memory_format=torch.channels_last)
    for training in (True, False):
        ye = F.batch_norm(xe, ember.zeros(4), ember.ones(4), None, None, training)
        yt = torch.nn.functional.batch_norm(xt, torch.zeros(4), torch.ones(4), None, None,
                                            training)
        np.testing.assert_allclose(_np(ye), yt.numpy(), rtol=1e-5, atol=1e-5)


def test_global_avg_pool_channels_last_values_and_accuracy():
    # 2 samples x 3 channels; channel c of sample n holds n * 10 + c + position / 100
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    a = (a // 20) * 0 + np.arange(2)[:, None, None, None] * 10 + np.arange(3)[None, :, None, None]
    a = a + np.arange(20).reshape(4, 5) / 100
    y = F.adaptive_avg_pool2d(_cl(ember.tensor(a)), 1)
    assert y.is_contiguous(memory_format=CL)
    np.testing.assert_allclose(_np(y).ravel(), [0.095, 1.095, 2.095, 10.095, 11.095, 12.095],
                               rtol=1e-12)
    # a 300x300 float32 plane far from 0: block sums keep the mean accurate
    b = (1000.0 + np.random.default_rng(19).standard_normal((1, 4, 300, 300))).astype(np.float32)
    y = F.adaptive_avg_pool2d(_cl(ember.tensor(b)), 1)
    np.testing.assert_allclose(_np(y).ravel(), b.astype(np.float64).mean((2, 3)).ravel(),
                               rtol=1e-7)
    x3 = _rand(2, 3, 4, 5, 6, seed=20)
    y3 = F.adaptive_avg_pool3d(x3.contiguous(memory_format=ember.channels_last_3d), 1)
    np.testing.assert_allclose(_np(y3), _np(F.adaptive_avg_pool3d(x3, 1)), rtol=1e-6, atol=1e-7)


def test_group_norm_non_finite_input_as_torch():
    x = ember.tensor([[[1.0, float("inf"), 2.0, 3.0]]])
    y = F.group_norm(x, 1)
    assert all(math.isnan(v) for v in y.flatten().tolist())
    torch = pytest.importorskip("torch")
    t = torch.nn.functional.group_norm(torch.tensor([[[1.0, float("inf"), 2.0, 3.0]]]), 1)
    assert torch.isnan(t).all()


# ---- linear / cubic interpolation of channels-last input ------------------------------------


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_interpolate_channels_last_equals_contiguous_bitwise(dtype):
    x = _rand(2, 5, 7, 9, seed=21, dtype=dtype)
    calls = [dict(scale_factor=2, mode="bilinear"), dict(size=(4, 5), mode="bilinear"),
             dict(size=(11, 6), mode="bilinear", align_corners=True),
             dict(scale_factor=1.7, mode="bicubic"), dict(size=(3, 13), mode="bicubic",
                                                          align_corners=True)]
    for kw in calls:
        ref, out = F.interpolate(x, **kw), F.interpolate(_cl(x), **kw)
        assert out.is_contiguous(memory_format=CL), kw
        np.testing.assert_array_equal(_np(out), _np(ref), err_msg=str(kw))
    x3 = _rand(2, 3, 4, 5, 6, seed=22, dtype=dtype)
    out3 = F.interpolate(x3.contiguous(memory_format=ember.channels_last_3d), scale_factor=2,
                         mode="trilinear")
    np.testing.assert_array_equal(_np(out3), _np(F.interpolate(x3, scale_factor=2, mode="trilinear")))


def test_interpolate_channels_last_values_and_gradients():
    x = _cl(ember.tensor([[[[0.0, 2.0], [4.0, 6.0]]], ]).repeat(1, 2, 1, 1) * ember.tensor(
        [1.0, -1.0]).reshape(1, 2, 1, 1))
    y = F.interpolate(x, size=(3, 3), mode="bilinear", align_corners=True)
    assert y[0, 0].tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert y[0, 1].tolist() == [[-0.0, -1.0, -2.0], [-2.0, -3.0, -4.0], [-4.0, -5.0, -6.0]]
    x64 = _cl(_rand(1, 3, 4, 3, seed=23, dtype=ember.float64)).requires_grad_(True)
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), [x64])
    assert gradcheck(lambda t: F.interpolate(t, size=(5, 4), mode="bicubic"), [x64])


def test_interpolate_channels_last_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(24).standard_normal((2, 6, 8, 5)).astype(np.float32)
    xt = torch.tensor(a).contiguous(memory_format=torch.channels_last)
    for kw in [dict(scale_factor=2, mode="bilinear"), dict(size=(5, 9), mode="bicubic")]:
        ye = F.interpolate(_cl(ember.tensor(a)), **kw)
        yt = torch.nn.functional.interpolate(xt, **kw)
        np.testing.assert_allclose(_np(ye), yt.numpy(), rtol=1e-5, atol=1e-5)
        assert ye.stride() == yt.stride()


def test_cat_contiguous_parts_values():
    a, b = ember.arange(6.0).reshape(2, 3), ember.arange(6.0, 9.0).reshape(1, 3)
    assert ember.cat([a, b]).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    # promoted, transposed, bool and dim-1 parts take the copy kernel
    assert ember.cat([a, ember.tensor([[1, 2, 3]])]).tolist()[2] == [1.0, 2.0, 3.0]
    assert ember.cat([a, a.t().reshape(2, 3).t().t()]).tolist()[2:] == a.t().reshape(2, 3).tolist()
    assert ember.cat([ember.tensor([True]), ember.tensor([False, True])]).tolist() == [True, False,
                                                                                      True]
    assert ember.cat([a, a], 1).tolist()[1] == [3.0, 4.0, 5.0, 3.0, 4.0, 5.0]
    w = ember.ones(2, 3, requires_grad=True)
    (ember.cat([w, 2 * w]) * ember.arange(12.0).reshape(4, 3)).sum().backward()
    assert w.grad.tolist() == [[12.0, 15.0, 18.0], [21.0, 24.0, 27.0]]
