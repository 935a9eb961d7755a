"""The CUDA kernels of convolution (and im2col / col2im), pooling, upsampling, pad's backward and
the fused SGD / Adam steps against the CPU kernels: every op runs on CPU tensors and on their CUDA
copies, forward and backward, and the results must agree. Skipped without a CUDA device.

Tolerances (relative, and absolute relative to the largest reference magnitude): float32 1e-4
(TF32 off, as by default: only the summation order differs), float64 1e-10, float16 2e-2 and
bfloat16 5e-2 (the GPU rounds a product or an atomic sum to 16 bits at other points than the
CPU, which computes in float32 and rounds once). Max pooling's values and indices, and the nearest
modes of upsampling, are compared exactly.

EMBER_NN_CONV_SELF_CHECK=1 runs the same comparisons with the CPU standing in for the GPU: a check
of this file's own logic on a machine without a GPU (it proves nothing about the CUDA kernels)."""

from __future__ import annotations

import copy
import os

import ember
import ember.nn as nn
import numpy as np
import pytest
from core_helpers import make, to_np

DEV = "cpu" if os.environ.get("EMBER_NN_CONV_SELF_CHECK") == "1" else "cuda"
pytestmark = pytest.mark.skipif(
    DEV == "cuda" and not ember.cuda.is_available(), reason="needs a CUDA device"
)

TOL = {"float32": 1e-4, "float64": 1e-10, "float16": 2e-2, "bfloat16": 5e-2}
RNG = np.random.default_rng(20240611)


@pytest.fixture(autouse=True)
def _no_tf32():
    """float32 products in full precision, in cuBLAS (the default) and in cuDNN (whose default,
    as in PyTorch, allows TF32); restored afterwards."""
    prev = ember.backends.cuda.matmul.allow_tf32
    prev_cudnn = ember.backends.cudnn.allow_tf32
    ember.backends.cuda.matmul.allow_tf32 = False
    ember.backends.cudnn.allow_tf32 = False
    yield
    ember.backends.cuda.matmul.allow_tf32 = prev
    ember.backends.cudnn.allow_tf32 = prev_cudnn


def rand(shape, dtype="float32", scale=1.0):
    return make(RNG.standard_normal(size=shape) * scale, dtype)


def dev(t):
    return t.to(DEV) if isinstance(t, ember.Tensor) else t


def check(g, c, tol=None, what=""):
    """g (computed on DEV) equals the CPU's c: device, shape, dtype and values within tol
    (None: exactly)."""
    if c is None:
        assert g is None, what
        return
    assert g.device.type == DEV, (what, g.device)
    assert tuple(g.shape) == tuple(c.shape), (what, tuple(g.shape), tuple(c.shape))
    assert g.dtype == c.dtype, (what, g.dtype, c.dtype)
    gn, cn = to_np(g.cpu()), to_np(c)
    if tol is None:
        np.testing.assert_array_equal(gn, cn, err_msg=what)
    else:
        scale = max(1.0, float(np.nanmax(np.abs(cn)))) if cn.size else 1.0
        np.testing.assert_allclose(gn, cn, rtol=tol, atol=tol * scale, err_msg=what)


def both(fn, *args, tol=None, what=""):
    """fn on the CPU arguments and on their DEV copies; compares every result."""
    c = fn(*args)
    g = fn(*[dev(a) for a in args])
    if isinstance(c, tuple):
        for i, (gi, ci) in enumerate(zip(g, c)):
            check(gi, ci, tol, f"{what}[{i}]")
    else:
        check(g, c, tol, what)
    return g, c


# ---- convolution -------------------------------------------------------------------------------

# (name, input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
CONVS = [
    ("resnet50_stem_7x7s2", (8, 3, 224, 224), (64, 3, 7, 7), [2], [3], [1], False, [0], 1),
    ("3x3_groups4", (4, 32, 28, 28), (64, 8, 3, 3), [1], [1], [1], False, [0], 4),
    ("1x1", (4, 64, 14, 14), (128, 64, 1, 1), [1], [0], [1], False, [0], 1),
    ("1x1_stride2_downsample", (4, 64, 14, 14), (128, 64, 1, 1), [2], [0], [1], False, [0], 1),
    ("depthwise_mobilenetv2", (4, 96, 28, 28), (96, 1, 3, 3), [2], [1], [1], False, [0], 96),
    ("depthwise_x2_channels", (2, 8, 12, 12), (16, 1, 3, 3), [1], [1], [1], False, [0], 8),
    ("3x3_dilation2", (2, 8, 20, 20), (16, 8, 3, 3), [1], [2], [2], False, [0], 1),
    ("asymmetric", (3, 5, 17, 13), (7, 5, 3, 2), [2, 1], [1, 0], [1, 2], False, [0], 1),
    ("conv1d", (4, 16, 50), (32, 16, 5), [2], [2], [1], False, [0], 1),
    ("conv3d_small", (2, 4, 8, 10, 10), (8, 4, 3, 3, 3), [1, 2, 2], [1], [1], False, [0], 1),
    ("transposed2d_output_padding", (2, 16, 7, 7), (16, 8, 3, 3), [2], [1], [1], True, [1], 1),
    ("transposed2d_groups2", (2, 16, 6, 6), (16, 4, 4, 4), [2], [1], [1], True, [0], 2),
    ("transposed1d_dilation", (3, 8, 10), (8, 4, 5), [3], [2], [2], True, [1], 1),
    ("transposed3d_small", (2, 4, 3, 4, 4), (4, 3, 2, 3, 3), [2], [0, 1, 1], [1], True, [1], 1),
]
SMALL = {"3x3_groups4", "1x1", "depthwise_x2_channels", "conv1d", "transposed2d_output_padding",
         "transposed3d_small", "asymmetric"}


def conv_case(case, dtype, bias=True):
    name, xs, ws, st, pd, dl, tr, opd, g = case
    x, w = rand(xs, dtype), rand(ws, dtype, scale=0.2)
    co = ws[1] * g if tr else ws[0]
    b = rand((co,), dtype) if bias else None
    return x, w, b, (st, pd, dl, tr, opd, g)


def conv_params(dtypes):
    out = []
    for case in CONVS:
        for dt in dtypes:
            if dt != "float32" and case[0] not in SMALL:
                continue
            out.append(pytest.param(case, dt, id=f"{case[0]}-{dt}"))
    return out


@pytest.mark.parametrize("case,dtype", conv_params(["float32", "float64", "float16", "bfloat16"]))
def test_convolution_forward_backward(case, dtype):
    x, w, b, (st, pd, dl, tr, opd, g) = conv_case(case, dtype)
    tol = TOL[dtype]
    out, ref = both(lambda x, w, b: ember.convolution(x, w, b, st, pd, dl, tr, opd, g), x, w, b,
                    tol=tol, what=f"{case[0]} forward")
    go = rand(tuple(ref.shape), dtype)
    both(lambda go, x, w: ember.convolution_backward(go, x, w, st, pd, dl, tr, opd, g, True, True,
                                                     True),
         go, x, w, tol=tol, what=f"{case[0]} backward")


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False), (False, False, True),
                                  (True, False, True)])
def test_convolution_backward_output_mask(mask):
    x, w, _, (st, pd, dl, tr, opd, g) = conv_case(CONVS[1], "float32")
    go = rand((4, 64, 28, 28))
    gpu, cpu = both(lambda go, x, w: ember.convolution_backward(go, x, w, st, pd, dl, tr, opd, g,
                                                                *mask),
                    go, x, w, tol=TOL["float32"], what="masked backward")
    for want, t in zip(mask, gpu):
        assert (t is not None) == want


def test_convolution_no_bias_strided_inputs_and_batch_one():
    x = rand((5, 6, 9, 11)).transpose(2, 3)  # not contiguous
    w = rand((4, 6, 3, 3), scale=0.3)
    both(lambda x, w: ember.convolution(x, w, None, [1], [1], [1], False, [0], 1), x, w,
         tol=TOL["float32"], what="strided input")
    x1 = rand((1, 6, 9, 9))
    both(lambda x, w: ember.convolution(x, w, None, [2], [0], [1], False, [0], 2),
         x1, rand((4, 3, 3, 3)), tol=TOL["float32"], what="batch 1, groups 2")


@pytest.mark.skipif(DEV == "cpu", reason="the CPU kernel mishandles output_padding >= stride")
def test_transposed_output_padding_below_dilation():
    """output_padding 1 with stride 1 (allowed: below the dilation 2) adds a last output column
    that no input reaches: the rest equals output_padding 0, the last column is the bias."""
    x, w, b = rand((2, 4, 6)), rand((4, 3, 3)), rand((3,))
    xd, wd, bd = dev(x), dev(w), dev(b)
    a = ember.convolution(xd, wd, bd, [1], [0], [2], True, [1], 1).cpu()
    r = ember.convolution(xd, wd, bd, [1], [0], [2], True, [0], 1).cpu()
    assert tuple(a.shape) == (2, 3, 11)
    np.testing.assert_allclose(to_np(a)[:, :, :-1], to_np(r), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(a)[:, :, -1], np.broadcast_to(to_np(b), (2, 3)), rtol=1e-6)
    go = rand((2, 3, 11))
    ga = ember.convolution_backward(dev(go), xd, wd, [1], [0], [2], True, [1], 1, True, True, True)
    gr = ember.convolution_backward(dev(go[:, :, :-1].contiguous()), xd, wd, [1], [0], [2], True,
                                    [0], 1, True, True, False)
    np.testing.assert_allclose(to_np(ga[0].cpu()), to_np(gr[0].cpu()), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(ga[1].cpu()), to_np(gr[1].cpu()), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(ga[2].cpu()), to_np(go).sum(axis=(0, 2)), rtol=1e-5,
                               atol=1e-5)


def test_convolution_errors_match_cpu():
    x, w = rand((2, 3, 8, 8)), rand((4, 2, 3, 3))
    with pytest.raises(RuntimeError, match="channels"):
        ember.convolution(dev(x), dev(w), None, [1], [0], [1], False, [0], 1)
    with pytest.raises(RuntimeError, match="should be the same"):
        ember.convolution(dev(x), dev(rand((4, 3, 3, 3), "float64")), None, [1], [0], [1],
                          False, [0], 1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_im2col_col2im(dtype):
    x = rand((3, 4, 10, 9), dtype)
    args = ([3, 2], [1, 2], [1, 0], [2, 1])
    cols, ref = both(lambda x: ember.im2col(x, *args), x, what="im2col")  # a pure copy: exact
    both(lambda x: ember.im2col(x, *args), x[0], what="im2col unbatched")
    both(lambda c: ember.col2im(c, [10, 9], *args), ref, tol=TOL[dtype], what="col2im")
    both(lambda c: ember.col2im(c, [10, 9], *args), ref[1], tol=TOL[dtype],
         what="col2im unbatched")
    x3 = rand((2, 3, 5, 6, 4), dtype)
    _, r3 = both(lambda x: ember.im2col(x, [2, 3, 2], [1], [1], [1, 2, 1]), x3, what="im2col 3d")
    both(lambda c: ember.col2im(c, [5, 6, 4], [2, 3, 2], [1], [1], [1, 2, 1]), r3,
         tol=TOL[dtype], what="col2im 3d")


# ---- pooling -----------------------------------------------------------------------------------

# (input shape, kernel, stride, padding, dilation, ceil_mode)
MAX_POOLS = [
    ((2, 3, 11, 11), [3, 3], [2, 2], [1, 1], [1, 1], True),
    ((2, 3, 11, 11), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((8, 64, 112, 112), [3, 3], [2, 2], [1, 1], [1, 1], False),  # ResNet's stem pool
    ((2, 4, 13, 10), [2, 3], [], [0, 1], [2, 1], True),
    ((3, 5, 20), [4], [3], [2], [1], True),
    ((2, 3, 7, 9, 8), [2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True),
    ((3, 9, 9), [3, 3], [1, 1], [0, 0], [1, 1], False),  # unbatched (C, H, W)
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", MAX_POOLS)
def test_max_pool(shape, k, s, p, d, ceil, dtype):
    x = rand(shape, dtype)
    out, ref = both(lambda x: ember._C._max_pool(x, k, s, p, d, ceil), x, what="max_pool")
    go = rand(tuple(ref[0].shape), dtype)
    both(lambda go, i: ember._C._max_pool_backward(go, i, list(shape), len(k)), go, ref[1],
         tol=TOL[dtype], what="max_pool_backward")


def test_max_pool_nan_and_ties():
    a = np.zeros((1, 2, 6, 6), dtype=np.float32)  # ties: the first maximum wins
    a[0, 1, 1, 1] = np.nan
    a[0, 1, 4, 4] = np.nan
    a[0, 1, 4, 5] = np.nan  # the last NaN of a window wins
    both(lambda x: ember._C._max_pool(x, [3, 3], [2, 2], [1, 1], [1, 1], True), make(a),
         what="max_pool NaN")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_adaptive_max_pool(dtype):
    for shape, osz in [((2, 3, 13, 17), [5, 7]), ((2, 4, 9), [4]), ((1, 2, 5, 6, 7), [2, 3, 4]),
                       ((2, 3, 7, 7), [1, 1])]:
        x = rand(shape, dtype)
        _, ref = both(lambda x: ember._C._adaptive_max_pool(x, osz), x, what="adaptive_max_pool")
        go = rand(tuple(ref[0].shape), dtype)
        both(lambda go, i: ember._C._max_pool_backward(go, i, list(shape), len(osz)), go, ref[1],
             tol=TOL[dtype], what="adaptive_max_pool backward")


# (input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_POOLS = [
    ((2, 3, 11, 11), [3, 3], [2, 2], [1, 1], True, True, None),
    ((2, 3, 11, 11), [3, 3], [2, 2], [1, 1], True, False, None),
    ((2, 3, 11, 11), [3, 3], [2, 2], [1, 1], False, True, 5),
    ((2, 3, 12, 10), [2, 2], [], [0, 0], False, True, None),
    ((3, 5, 20), [4], [3], [2], True, False, None),
    ((2, 3, 7, 9, 8), [3, 2, 3], [2, 1, 2], [1, 0, 1], True, True, None),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape,k,s,p,ceil,cip,div", AVG_POOLS)
def test_avg_pool(shape, k, s, p, ceil, cip, div, dtype):
    x = rand(shape, dtype)
    _, ref = both(lambda x: ember._C._avg_pool(x, k, s, p, ceil, cip, div), x, tol=TOL[dtype],
                  what="avg_pool")
    go = rand(tuple(ref.shape), dtype)
    both(lambda go: ember._C._avg_pool_backward(go, list(shape), k, s, p, ceil, cip, div), go,
         tol=TOL[dtype], what="avg_pool_backward")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_adaptive_avg_pool(dtype):
    for shape, osz in [((8, 2048, 7, 7), [1, 1]), ((2, 3, 13, 17), [5, 7]), ((2, 4, 9), [4]),
                       ((1, 2, 5, 6, 7), [2, 3, 4])]:
        x = rand(shape, dtype)
        _, ref = both(lambda x: ember._C._adaptive_avg_pool(x, osz), x, tol=TOL[dtype],
                      what="adaptive_avg_pool")
        go = rand(tuple(ref.shape), dtype)
        both(lambda go: ember._C._adaptive_avg_pool_backward(go, list(shape), osz), go,
             tol=TOL[dtype], what="adaptive_avg_pool_backward")


# ---- upsampling --------------------------------------------------------------------------------

def up_ops(mode, k):
    """The forward and backward ops of a mode and spatial rank."""
    name = {
        "nearest": f"upsample_nearest{k}d",
        "nearest-exact": f"_upsample_nearest_exact{k}d",
        "linear": "upsample_linear1d",
        "bilinear": "upsample_bilinear2d",
        "trilinear": "upsample_trilinear3d",
        "bicubic": "upsample_bicubic2d",
    }[mode]
    return getattr(ember._C, name), getattr(ember._C, name + "_backward")


# (mode, input shape, output size, scales)
NEAREST = [
    ("nearest", (2, 3, 5), [11], [None]),
    ("nearest", (2, 3, 5), [10], [2.0]),
    ("nearest", (2, 3, 4, 5), [8, 10], [None, None]),  # the factor-2 shortcut
    ("nearest", (2, 3, 6, 9), [4, 5], [None, None]),  # downsampling
    ("nearest", (2, 3, 5, 7), [7, 13], [1.5, 1.9]),
    ("nearest", (1, 2, 3, 4, 5), [5, 7, 9], [None, None, None]),
    ("nearest-exact", (2, 3, 5), [11], [None]),
    ("nearest-exact", (2, 3, 5, 7), [7, 13], [1.5, 1.9]),
    ("nearest-exact", (1, 2, 3, 4, 5), [6, 3, 11], [None, None, None]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("mode,shape,osz,scales", NEAREST)
def test_upsample_nearest(mode, shape, osz, scales, dtype):
    fwd, bwd = up_ops(mode, len(osz))
    x = rand(shape, dtype)
    _, ref = both(lambda x: fwd(x, osz, *scales), x, what=f"{mode} forward")  # a gather: exact
    go = rand(tuple(ref.shape), dtype)
    both(lambda go: bwd(go, osz, list(shape), *scales), go, tol=TOL[dtype],
         what=f"{mode} backward")


def test_upsample_nearest_integer_dtype():
    fwd, _ = up_ops("nearest", 2)
    x = ember.tensor(RNG.integers(-100, 100, size=(2, 3, 4, 5)).astype(np.int64))
    both(lambda x: fwd(x, [9, 7], None, None), x, what="nearest int64")


# (mode, input shape, output size, scales)
LINEAR = [
    ("linear", (2, 3, 5), [11], [None]),
    ("linear", (2, 3, 9), [4], [None]),
    ("linear", (2, 3, 5), [10], [2.0]),
    ("bilinear", (2, 3, 5, 6), [11, 13], [None, None]),
    ("bilinear", (2, 3, 8, 8), [8, 16], [None, None]),  # one dim unchanged
    ("bilinear", (2, 3, 9, 10), [4, 7], [None, None]),
    ("bilinear", (2, 3, 5, 7), [7, 13], [1.5, 1.9]),
    ("trilinear", (1, 2, 3, 4, 5), [5, 7, 9], [None, None, None]),
    ("bicubic", (2, 3, 5, 6), [11, 13], [None, None]),
    ("bicubic", (2, 3, 9, 10), [4, 7], [None, None]),
    ("bicubic", (2, 3, 5, 7), [7, 13], [1.5, 1.9]),
]


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("mode,shape,osz,scales", LINEAR)
def test_upsample_linear_and_cubic(mode, shape, osz, scales, dtype, align_corners):
    fwd, bwd = up_ops(mode, len(osz))
    x = rand(shape, dtype)
    _, ref = both(lambda x: fwd(x, osz, align_corners, *scales), x, tol=TOL[dtype],
                  what=f"{mode} forward")
    go = rand(tuple(ref.shape), dtype)
    both(lambda go: bwd(go, osz, list(shape), align_corners, *scales), go, tol=TOL[dtype],
         what=f"{mode} backward")


# ---- pad's backward ----------------------------------------------------------------------------

PADS = [
    ("constant", (2, 3, 5, 6), [1, 2, 0, 3]),
    ("constant", (2, 3, 5, 6), [-1, 2, 1, -2]),  # negative pads crop
    ("constant", (4, 7), [2, 1, 1, 1]),
    ("reflect", (2, 3, 8), [3, 2]),
    ("reflect", (2, 3, 5, 6), [2, 3, 4, 1]),
    ("reflect", (1, 2, 4, 5, 6), [1, 2, 3, 1, 2, 2]),
    ("replicate", (2, 3, 5, 6), [4, 2, 0, 5]),
    ("replicate", (3, 4, 5), [3, 3]),
    ("circular", (2, 3, 5, 6), [2, 5, 5, 1]),
    ("circular", (1, 2, 3, 4, 5), [1, 1, 2, 2, 3, 0]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
@pytest.mark.parametrize("mode,shape,pad", PADS)
def test_pad_backward(mode, shape, pad, dtype):
    x = rand(shape, "float32")
    out = ember.pad(x, pad, mode)
    if dtype == "int64":
        go = ember.tensor(RNG.integers(-50, 50, size=tuple(out.shape)).astype(np.int64))
        tol = None
    else:
        go, tol = rand(tuple(out.shape), dtype), TOL[dtype]
    both(lambda go: ember._C._pad_backward(go, list(shape), pad, mode), go, tol=tol,
         what=f"pad_backward {mode}")


def test_pad_backward_strided_grad():
    go = rand((2, 3, 9, 10)).transpose(2, 3)  # (2, 3, 10, 9), not contiguous
    both(lambda go: ember._C._pad_backward(go, [2, 3, 6, 5], [2, 2, 1, 3], "reflect"), go,
         tol=TOL["float32"], what="pad_backward strided")


# ---- fused optimizers --------------------------------------------------------------------------

SIZES = [(70001,), (3, 5), (1,), (40, 33), (0,), (16,)]  # one spans several chunks


def param_set(dtype, n_state):
    """Params, grads and n_state state lists (CPU tensors); params[3] is a transposed view."""
    params = [rand(s, dtype) for s in SIZES]
    params[3] = rand((33, 40), dtype).t()
    grads = [rand(s, dtype) for s in SIZES]
    states = [[rand(s, dtype).abs() for s in SIZES] for _ in range(n_state)]
    return params, grads, states


def clones(ts):
    return [t.clone() if t.is_contiguous() else t.clone().t().contiguous().t() for t in ts]


def to_dev(ts):
    out = []
    for t in ts:
        d = t.to(DEV)
        if not t.is_contiguous():  # keep params[3] a transposed view on the device too
            d = t.t().contiguous().to(DEV).t()
        out.append(d)
    return out


FTOL = {"float32": 1e-6, "float64": 1e-13}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", [
    dict(weight_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False, maximize=False),
    dict(weight_decay=0.01, momentum=0.9, dampening=0.0, nesterov=False, maximize=False),
    dict(weight_decay=0.01, momentum=0.9, dampening=0.0, nesterov=True, maximize=True),
    dict(weight_decay=0.0, momentum=0.8, dampening=0.3, nesterov=False, maximize=False),
])
def test_fused_sgd(cfg, dtype):
    params, grads, (bufs,) = param_set(dtype, 1)
    use_buf = cfg["momentum"] != 0
    cp, cb = clones(params), clones(bufs) if use_buf else []
    gp, gb = to_dev(params), to_dev(bufs) if use_buf else []
    gg = to_dev(grads)
    for step in range(3):
        kw = dict(cfg, lr=0.05, is_first_step=step == 0)
        ember._C._fused_sgd_(cp, grads, cb, **kw)
        ember._C._fused_sgd_(gp, gg, gb, **kw)
    for i, (g, c) in enumerate(zip(gp, cp)):
        check(g, c, FTOL[dtype], f"sgd param {i}")
    for i, (g, c) in enumerate(zip(gb, cb)):
        check(g, c, FTOL[dtype], f"sgd momentum buffer {i}")
    assert not gp[3].is_contiguous()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("steps_on_device", [False, True])
@pytest.mark.parametrize("cfg", [
    dict(beta1=0.9, beta2=0.999, weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False),
    dict(beta1=0.9, beta2=0.99, weight_decay=0.1, amsgrad=True, maximize=False, decoupled=False),
    dict(beta1=0.3, beta2=0.999, weight_decay=0.05, amsgrad=False, maximize=True, decoupled=True),
    dict(beta1=0.8, beta2=0.95, weight_decay=0.02, amsgrad=True, maximize=False, decoupled=True),
])
def test_fused_adam(cfg, steps_on_device, dtype):
    params, grads, (ea, es, em) = param_set(dtype, 3)
    ams = cfg["amsgrad"]
    c_lists = [clones(params), clones(ea), clones(es), clones(em) if ams else []]
    g_lists = [to_dev(params), to_dev(ea), to_dev(es), to_dev(em) if ams else []]
    gg = to_dev(grads)
    c_steps = [ember.zeros((), dtype=ember.float32) for _ in params]
    g_steps = [ember.zeros((), dtype=ember.float32) for _ in params]
    if steps_on_device:
        g_steps = [s.to(DEV) for s in g_steps]
    for _ in range(3):
        kw = dict(lr=0.01, eps=1e-8, beta1=cfg["beta1"], beta2=cfg["beta2"],
                  weight_decay=cfg["weight_decay"], amsgrad=ams, maximize=cfg["maximize"])
        if cfg["decoupled"]:  # the composite _fused_adamw_ (decoupled=True)
            ember._C._fused_adamw_(c_lists[0], grads, c_lists[1], c_lists[2], c_lists[3],
                                   c_steps, **kw)
            ember._C._fused_adamw_(g_lists[0], gg, g_lists[1], g_lists[2], g_lists[3], g_steps,
                                   **kw)
        else:
            ember._C._fused_adam_(c_lists[0], grads, c_lists[1], c_lists[2], c_lists[3], c_steps,
                                  **kw)
            ember._C._fused_adam_(g_lists[0], gg, g_lists[1], g_lists[2], g_lists[3], g_steps,
                                  **kw)
    for name, gl, cl in zip(["param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"], g_lists,
                            c_lists):
        for i, (g, c) in enumerate(zip(gl, cl)):
            check(g, c, FTOL[dtype], f"adam {name} {i}")
    for g, c in zip(g_steps, c_steps):
        assert g.item() == c.item() == 3.0


def test_fused_errors():
    p = [rand((3,)).to(DEV)]
    with pytest.raises(RuntimeError, match="grads"):
        ember._C._fused_sgd_(p, [], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                             nesterov=False, maximize=False, is_first_step=False)
    with pytest.raises(TypeError, match="float32 and float64"):
        h = [rand((3,), "float16").to(DEV)]
        ember._C._fused_sgd_(h, [t.clone() for t in h], [], weight_decay=0.0, momentum=0.0,
                             lr=0.1, dampening=0.0, nesterov=False, maximize=False,
                             is_first_step=False)


# ---- autograd through the modules, and a training step ------------------------------------------

def module_grads(module, x, dtype_tol):
    """Runs module on x on the CPU and (a copy) on DEV, backward of a weighted sum of the output;
    compares outputs, input gradients and parameter gradients."""
    m_dev = copy.deepcopy(module).to(DEV)
    xc = x.clone().requires_grad_(True)
    xg = x.to(DEV).requires_grad_(True)
    oc, og = module(xc), m_dev(xg)
    check(og.detach(), oc.detach(), dtype_tol, "module output")
    w = rand(tuple(oc.shape))
    (oc * w).sum().backward()
    (og * w.to(DEV)).sum().backward()
    check(xg.grad, xc.grad, dtype_tol, "input grad")
    for (name, pc), pg in zip(module.named_parameters(), m_dev.parameters()):
        check(pg.grad, pc.grad, dtype_tol, f"grad of {name}")


@pytest.mark.parametrize("module,shape", [
    (nn.Conv2d(3, 8, 3, stride=2, padding=1), (4, 3, 16, 16)),
    (nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), (2, 8, 10, 10)),
    (nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), (2, 8, 5, 5)),
    (nn.Conv1d(4, 6, 5, padding=2), (3, 4, 20)),
    (nn.Conv3d(2, 3, 3, padding=1), (2, 2, 5, 6, 6)),
    (nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 3, 11, 11)),
    (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 11, 11)),
    (nn.AdaptiveAvgPool2d((3, 5)), (2, 3, 11, 13)),
    (nn.Upsample(scale_factor=2, mode="nearest"), (2, 3, 5, 6)),
    (nn.Upsample(size=(9, 13), mode="bilinear", align_corners=True), (2, 3, 5, 6)),
    (nn.Upsample(scale_factor=1.7, mode="bilinear", align_corners=False), (2, 3, 5, 6)),
])
def test_module_autograd(module, shape):
    module_grads(module, rand(shape), TOL["float32"])


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.p1 = nn.MaxPool2d(2)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1, groups=2)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.p2 = nn.AvgPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.p1(ember.relu(self.c1(x)))
        x = self.p2(self.up(ember.relu(self.c2(x))))
        return self.fc(self.gap(x).flatten(1))


def test_tiny_cnn_training_matches_cpu():
    ember.manual_seed(0)
    model = TinyCNN()
    model_dev = copy.deepcopy(model).to(DEV)
    x, y = rand((8, 3, 16, 16)), rand((8, 10))
    xd, yd = x.to(DEV), y.to(DEV)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_dev = ember.optim.SGD(model_dev.parameters(), lr=0.1, momentum=0.9)
    losses, losses_dev = [], []
    for _ in range(3):
        for m, o, xi, yi, out in ((model, opt, x, y, losses), (model_dev, opt_dev, xd, yd,
                                                               losses_dev)):
            o.zero_grad()
            loss = ((m(xi) - yi) ** 2).mean()
            loss.backward()
            o.step()
            out.append(loss.item())
    np.testing.assert_allclose(losses_dev, losses, rtol=1e-4)
    for (name, pc), pg in zip(model.named_parameters(), model_dev.parameters()):
        check(pg.detach(), pc.detach(), 1e-4, f"trained {name}")
